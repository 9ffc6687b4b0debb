// A small peer that speaks ClickHouse's HTTP interface and executes each statement on chdb
// (../shared/TESTING.md): the real @clickhouse/client and the store's SQL over real HTTP, where no
// ClickHouse server can run. What it takes: the statement in the body (or the `query` parameter,
// with an insert's data in the body), `param_*` bindings decoded by the type the statement declares
// for them, `default_format`, settings in the URL (for that statement alone); errors as ClickHouse
// sends them (status 500, the X-ClickHouse-Exception-Code header, `Code: N. DB::Exception: ...` in
// the body). What it refuses loudly: parameters of a type it cannot decode, data in the body of
// anything but an INSERT ... FORMAT.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Session } from 'chdb';

/** URL parameters the client sends that are not settings of the statement. */
const CLIENT_PARAMS = new Set([
  'query',
  'query_id',
  'database',
  'default_format',
  'enable_http_compression',
  'wait_end_of_query',
  'session_id',
  'session_timeout',
  'user',
  'password',
]);

export interface ClickHousePeer {
  url: string;
  requests: number;
  close(): Promise<void>;
  /** The server goes away (outage tests): the port is closed and open connections are dropped; the data stays. */
  stop(): Promise<void>;
  /** Back on the same port, with the same data. */
  restart(): Promise<void>;
}

/** Starts the peer on a free loopback port, on chdb at `path` (the process's one data directory). */
export async function startClickHousePeer(path: string): Promise<ClickHousePeer> {
  const session = new Session(path);
  let chain: Promise<unknown> = Promise.resolve();
  const peer: ClickHousePeer = { url: '', requests: 0, close: async () => {}, stop: async () => {}, restart: async () => {} };
  // URLs up to ClickHouse's own limit (http_max_uri_size, 1 MiB): a statement's bindings travel in its URL.
  const server = createServer({ maxHeaderSize: 1 << 20 }, (req, res) => {
    peer.requests++;
    const run = chain.then(() => handle(session, req, res));
    chain = run.catch(() => {});
  });
  // A keep-alive as short as older ClickHouse servers' (3 s): the client must not reuse a socket the peer closed.
  server.keepAliveTimeout = 3_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  peer.url = `http://127.0.0.1:${port}`;
  let listening = true;
  peer.stop = async () => {
    if (!listening) return;
    listening = false;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  };
  peer.restart = async () => {
    if (listening) return;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    listening = true;
  };
  peer.close = async () => {
    await peer.stop();
    await chain;
    session.close();
  };
  return peer;
}

async function handle(session: Session, req: IncomingMessage, res: ServerResponse): Promise<void> {
  // A request whose connection was dropped while it waited its turn (the peer stopped) fires no more events: skip it.
  if (req.destroyed) return;
  const body = await new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    req
      .on('data', (c: Buffer) => chunks.push(c))
      .on('end', () => resolve(Buffer.concat(chunks)))
      .on('error', reject)
      .on('close', () => reject(new Error('the connection closed before the request was read')));
  }).catch(() => undefined);
  if (body === undefined) return;
  try {
    const url = new URL(req.url ?? '/', 'http://peer');
    const settings: Record<string, string> = {};
    const params: Record<string, string> = {};
    for (const [k, v] of url.searchParams) {
      if (k.startsWith('param_')) params[k.slice('param_'.length)] = v;
      else if (!CLIENT_PARAMS.has(k)) settings[k] = v;
    }
    // Bindings too long for the URL come as multipart/form-data parts (`query`, `param_*`), as the client sends them past 4 KiB.
    const boundary = /^multipart\/form-data;\s*boundary=(.+)$/i.exec(String(req.headers['content-type'] ?? ''))?.[1];
    let form: Map<string, string> | undefined;
    if (boundary) {
      form = multipart(body.toString('utf8'), boundary.replace(/^"|"$/g, ''));
      for (const [k, v] of form) if (k.startsWith('param_')) params[k.slice('param_'.length)] = v;
    }
    const inUrl = form?.get('query') ?? url.searchParams.get('query');
    const data = form ? Buffer.alloc(0) : body;
    const insert =
      inUrl !== null && data.length > 0 ? /^\s*INSERT\s+INTO\s+([\w.]+)\s*(?:\(([^)]*)\))?\s*FORMAT\s+(\w+)\s*$/i.exec(inUrl) : null;
    if (inUrl !== null && data.length > 0 && !insert)
      throw peerError(`the peer takes data in the body only for INSERT INTO t [(columns)] FORMAT f, not: ${inUrl.slice(0, 200)}`);
    if (insert) {
      await session.insert({
        table: insert[1]!,
        values: data,
        format: insert[3]! as never,
        settings,
        ...(insert[2] ? { columns: insert[2].split(',').map((c) => c.trim().replace(/^`|`$/g, '')) } : {}),
      });
      res.writeHead(200, { 'Content-Type': 'text/plain; charset=UTF-8' }).end();
      return;
    }
    await applySettings(session, settings);
    const sql = inUrl ?? body.toString('utf8');
    const format = url.searchParams.get('default_format') ?? 'TabSeparated';
    const result = Object.keys(params).length
      ? await session.queryBindAsync(sql, decodeParams(sql, params), { format })
      : await session.queryAsync(sql, { format });
    res.writeHead(200, { 'Content-Type': 'text/plain; charset=UTF-8', 'X-ClickHouse-Format': format }).end(Buffer.from(result.bytes()));
  } catch (err) {
    const e = err as { message?: string; clickhouseCode?: number };
    const message = e.message ?? String(err);
    const code = e.clickhouseCode ?? Number(/Code: (\d+)/.exec(message)?.[1] ?? 1001);
    if (process.env.PEER_DEBUG) console.error('PEER', message.slice(0, 400), req.url?.slice(0, 300));
    res
      .writeHead(500, { 'Content-Type': 'text/plain; charset=UTF-8', 'X-ClickHouse-Exception-Code': String(code) })
      .end(/^Code: \d+/.test(message) ? message : `Code: ${code}. DB::Exception: ${message}. (PEER_ERROR)`);
  }
}

/** Settings of the session's statements (URL settings of a query apply to it alone): what a request sets, and what it no longer sets put back. */
const applied = new Map<Session, { defaults: Map<string, string>; now: Set<string> }>();
async function applySettings(session: Session, settings: Record<string, string>): Promise<void> {
  let state = applied.get(session);
  if (!state) applied.set(session, (state = { defaults: new Map(), now: new Set() }));
  for (const name of Object.keys(settings)) {
    if (!/^\w+$/.test(name)) throw peerError(`not a setting name: ${name.slice(0, 60)}`);
    if (!state.defaults.has(name)) {
      const [row] = JSON.parse(
        `[${(await session.queryBindAsync('SELECT value FROM system.settings WHERE name = {n:String}', { n: name }, { format: 'JSONEachRow' })).text().trim()}]`,
      ) as { value: string }[];
      if (!row)
        throw Object.assign(new Error(`Code: 115. DB::Exception: Unknown setting ${name}. (UNKNOWN_SETTING)`), { clickhouseCode: 115 });
      state.defaults.set(name, row.value);
    }
  }
  const wanted = new Map([
    ...[...state.now].filter((n) => !(n in settings)).map((n) => [n, state!.defaults.get(n)!] as const),
    ...Object.entries(settings),
  ]);
  for (const [name, value] of wanted)
    await session.queryAsync(`SET ${name} = ${/^-?\d+(\.\d+)?$/.test(value) ? value : `'${value.replace(/[\\']/g, (c) => `\\${c}`)}'`}`, {
      format: 'TabSeparated',
    });
  state.now = new Set(Object.keys(settings));
}

/** The named parts of a multipart/form-data body (each value ends before the CRLF that precedes the next boundary). */
function multipart(text: string, boundary: string): Map<string, string> {
  const parts = new Map<string, string>();
  for (const chunk of text.split(`--${boundary}`).slice(1)) {
    if (chunk.startsWith('--')) break;
    const split = chunk.indexOf('\r\n\r\n');
    const name = /name="([^"]+)"/.exec(chunk.slice(0, split))?.[1];
    if (split < 0 || !name) throw peerError('a multipart part without a name');
    parts.set(name, chunk.slice(split + 4).replace(/\r\n$/, ''));
  }
  return parts;
}

const peerError = (message: string) =>
  Object.assign(new Error(`Code: 1001. DB::Exception: ${message}. (PEER_ERROR)`), { clickhouseCode: 1001 });

/** Each `param_*` value (ClickHouse's escaped text) as the JS value chdb formats back to the same text, by its declared type. */
function decodeParams(sql: string, raw: Record<string, string>): Record<string, unknown> {
  const types = new Map<string, string>();
  for (const m of sql.matchAll(/\{\s*(\w+)\s*:\s*([^{}]+?)\s*\}/g)) types.set(m[1]!, m[2]!);
  const out: Record<string, unknown> = {};
  for (const [name, text] of Object.entries(raw)) {
    const type = types.get(name);
    if (type === undefined) continue; // a binding the statement does not use (ClickHouse ignores it too)
    out[name] = decodeValue(type, text);
  }
  return out;
}

function decodeValue(type: string, text: string): unknown {
  const nullable = /^Nullable\((.*)\)$/.exec(type);
  if (nullable) return text === '\\N' ? null : decodeValue(nullable[1]!, text);
  const low = /^LowCardinality\((.*)\)$/.exec(type);
  if (low) return decodeValue(low[1]!, text);
  if (/^Array\(/.test(type)) {
    const p = { s: text, i: 0 };
    const v = literal(p);
    if (p.i !== text.length || !Array.isArray(v)) throw peerError(`cannot decode ${type} parameter: ${text.slice(0, 100)}`);
    return v;
  }
  if (/^U?Int(8|16|32|64|128|256)$/.test(type)) return integer(text);
  if (/^Float(32|64)$/.test(type))
    return text === 'nan'
      ? Number.NaN
      : text === '+inf' || text === 'inf'
        ? Number.POSITIVE_INFINITY
        : text === '-inf'
          ? Number.NEGATIVE_INFINITY
          : Number(text);
  if (/^(String|FixedString\(\d+\)|Enum\d*\(.*\)|Date.*|UUID|IPv[46]|Decimal.*)$/.test(type)) return unescapeLiteral(text);
  throw peerError(`the peer cannot decode parameters of type ${type}`);
}

const integer = (text: string): number | bigint => {
  if (!/^-?\d+$/.test(text)) throw peerError(`not an integer: ${text.slice(0, 40)}`);
  const n = Number(text);
  return Number.isSafeInteger(n) ? n : BigInt(text);
};

const ESCAPES: Record<string, string> = { n: '\n', t: '\t', r: '\r', b: '\b', f: '\f', 0: '\0' };
const unescapeLiteral = (s: string) => s.replace(/\\(.)/gs, (_, c: string) => ESCAPES[c] ?? c);

/** A value of ClickHouse's literal syntax as the client writes array parameters: [..], '..', numbers, NULL. */
function literal(p: { s: string; i: number }): unknown {
  const { s } = p;
  const skip = () => {
    while (s[p.i] === ' ') p.i++;
  };
  skip();
  if (s[p.i] === '[') {
    p.i++;
    const items: unknown[] = [];
    skip();
    if (s[p.i] === ']') {
      p.i++;
      return items;
    }
    for (;;) {
      items.push(literal(p));
      skip();
      if (s[p.i] === ',') {
        p.i++;
        continue;
      }
      if (s[p.i] === ']') {
        p.i++;
        return items;
      }
      throw peerError(`bad array literal at ${p.i}: ${s.slice(0, 100)}`);
    }
  }
  if (s[p.i] === "'") {
    let out = '';
    for (p.i++; p.i < s.length; p.i++) {
      const c = s[p.i]!;
      if (c === '\\') {
        const n = s[++p.i]!;
        out += ESCAPES[n] ?? n;
        continue;
      }
      if (c === "'") {
        p.i++;
        return out;
      }
      out += c;
    }
    throw peerError(`unterminated string literal: ${s.slice(0, 100)}`);
  }
  const m = /^(NULL|-?[\d.eE+-]+|nan|[+-]?inf)/.exec(s.slice(p.i));
  if (!m) throw peerError(`bad literal at ${p.i}: ${s.slice(0, 100)}`);
  p.i += m[0].length;
  if (m[0] === 'NULL') return null;
  return /^-?\d+$/.test(m[0]) ? integer(m[0]) : Number(m[0].replace('inf', 'Infinity'));
}
