import { connect } from 'node:net';

/**
 * A raw HTTP/1.1 client over `node:net`: the request line is written verbatim (fetch and
 * `node:http` refuse or normalise hostile targets such as `/v2/%ff` or raw control bytes).
 * One request per connection, `Connection: close`.
 */
export interface RawRequest {
  method: string;
  /** The request-target exactly as it goes on the wire (latin1: each char is one byte). */
  target: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export type RawResult = { ok: true; res: RawResponse } | { ok: false; error: string };

function decodeChunked(buf: Buffer): Buffer | null {
  const parts: Buffer[] = [];
  let i = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', i);
    if (eol < 0) return null;
    const size = parseInt(buf.subarray(i, eol).toString('latin1').split(';')[0]!.trim(), 16);
    if (!Number.isFinite(size)) return null;
    if (size === 0) return Buffer.concat(parts);
    const start = eol + 2;
    if (start + size > buf.length) return null;
    parts.push(buf.subarray(start, start + size));
    i = start + size + 2;
  }
}

export function parseResponse(raw: Buffer, method: string): RawResponse | null {
  const headEnd = raw.indexOf('\r\n\r\n');
  if (headEnd < 0) return null;
  const lines = raw.subarray(0, headEnd).toString('latin1').split('\r\n');
  const m = /^HTTP\/\d\.\d (\d{3})/.exec(lines[0] ?? '');
  if (!m) return null;
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const c = line.indexOf(':');
    if (c <= 0) continue;
    const k = line.slice(0, c).trim().toLowerCase();
    const v = line.slice(c + 1).trim();
    headers[k] = k in headers ? `${headers[k]}, ${v}` : v;
  }
  const status = Number(m[1]);
  let body = raw.subarray(headEnd + 4);
  if (method === 'HEAD' || status === 204 || status === 304) body = Buffer.alloc(0);
  else if (/\bchunked\b/i.test(headers['transfer-encoding'] ?? '')) body = decodeChunked(body) ?? body;
  else if (headers['content-length'] !== undefined) body = body.subarray(0, Number(headers['content-length']));
  return { status, headers, body: body.toString('utf8') };
}

export function rawRequest(port: number, req: RawRequest, timeoutMs = 20_000): Promise<RawResult> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let done = false;
    let socketError: string | null = null;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      const parsed = parseResponse(Buffer.concat(chunks), req.method);
      if (parsed) resolve({ ok: true, res: parsed });
      else resolve({ ok: false, error: socketError ?? (chunks.length ? 'unparseable response' : 'connection closed without a response') });
    };
    const sock = connect({ port, host: '127.0.0.1' });
    const timer = setTimeout(() => {
      socketError = `no complete answer within ${timeoutMs} ms`;
      sock.destroy();
      finish();
    }, timeoutMs);
    sock.on('data', (d: Buffer) => chunks.push(d));
    sock.on('error', (e) => {
      socketError = e.message;
    });
    sock.on('close', finish);
    sock.on('connect', () => {
      const headers: Record<string, string> = { Host: `127.0.0.1:${port}`, Connection: 'close', ...req.headers };
      if (req.body !== undefined) headers['Content-Length'] = String(Buffer.byteLength(req.body));
      let head = `${req.method} ${req.target} HTTP/1.1\r\n`;
      for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
      head += '\r\n';
      sock.write(Buffer.from(head, 'latin1'));
      if (req.body !== undefined) sock.write(req.body);
    });
  });
}
