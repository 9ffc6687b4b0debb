// Issue 5 regressions: cursors bound to their caller (DESIGN 6 Cursor), the Validation and Status
// codes rows of DESIGN 6, and answers in the envelope also for what the HTTP layer refuses.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NOW = Date.now();
const ago = (ms: number) => new Date(NOW - ms).toISOString();

let h: Harness;
let allKey: string;
/** An account that may read 7 days back only. */
let weekKey: string;
let port: number;

// 60 events, one every 12 hours: 30 days back, so a 7-day account sees the newest 14.
const EVENTS = Array.from({ length: 60 }, (_, i) => build.event(i + 1, { positionId: i + 1, timeOfEvent: ago(i * 12 * HOUR + HOUR) }));

beforeAll(async () => {
  h = await createHarness();
  await h.given([
    build.source('src-1'),
    build.trader(1),
    build.asset(1),
    build.price(1, ago(40 * DAY), 100),
    ...EVENTS,
    build.message('m1', 'src-1', ago(2 * HOUR)),
    build.message('m2', 'src-1', ago(20 * DAY)),
  ]);
  allKey = await h.key({ account: { id: 'unrestricted' } });
  weekKey = await h.key({ account: { id: 'week', historyWindowDays: 7 } });
  await h.app.listen({ port: 0, host: '127.0.0.1' });
  port = (h.app.server.address() as { port: number }).port;
});
afterAll(async () => {
  await h?.close();
});

type Res = Awaited<ReturnType<Harness['get']>>;
function expectError(res: Res, status: number, code: string, param?: string): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.success).toBe(false);
  expect(res.body.error.code).toBe(code);
  expect(res.body.requestId).toBe(res.headers['x-request-id']);
  if (param !== undefined) expect(res.body.error.details.map((d: any) => d.param)).toContain(param);
}

const cursorOf = async (url: string, key: string): Promise<string> => {
  const res = await h.get(url, key);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.data.meta.nextCursor).toEqual(expect.any(String));
  return res.body.data.meta.nextCursor;
};
/** Rewrites the JSON inside a cursor and keeps its signature: what an attacker can do. */
function edit(cursor: string, change: (payload: any) => void): string {
  const [body, sig] = cursor.split('.');
  const payload = JSON.parse(Buffer.from(body!, 'base64url').toString('utf8'));
  change(payload);
  return `${Buffer.from(JSON.stringify(payload)).toString('base64url')}.${sig}`;
}

describe('issue 5: cursors cannot widen the history window', () => {
  it('a 7-day account walking every page only ever sees rows of the last 7 days', async () => {
    let cursor: string | undefined;
    const seen: string[] = [];
    do {
      const res = await h.get(`/v2/events?startTime=2000-01-01T00:00:00Z&limit=3${cursor ? `&cursor=${cursor}` : ''}`, weekKey);
      expect(res.status).toBe(200);
      const floor = Date.parse(res.body.data.meta.serverTime) - 7 * DAY;
      expect(Date.parse(res.body.data.meta.appliedTimeRange.startTime)).toBeGreaterThanOrEqual(floor);
      for (const e of res.body.data.results) {
        expect(Date.parse(e.timeOfEvent)).toBeGreaterThanOrEqual(floor);
        seen.push(e.timeOfEvent);
      }
      cursor = res.body.data.meta.nextCursor ?? undefined;
    } while (cursor);
    expect(seen).toHaveLength(14);
  });

  it('editing the window inside its own cursor gives 400 Malformed cursor', async () => {
    const cursor = await cursorOf('/v2/events?limit=3', weekKey);
    const widened = edit(cursor, (p) => {
      p.w = [0, null];
    });
    const res = await h.get(`/v2/events?limit=3&cursor=${widened}`, weekKey);
    expectError(res, 400, 'INVALID_CURSOR');
    expect(res.body.error.message).toBe('Malformed cursor');
  });

  it('replaying an unmodified cursor of the unrestricted account gives 400 INVALID_CURSOR', async () => {
    for (const path of [
      '/v2/events?startTime=2000-01-01T00:00:00Z&limit=3',
      '/v2/messages?startTime=2000-01-01T00:00:00Z&limit=1',
      '/v2/positions?startTime=2000-01-01T00:00:00Z&limit=3',
    ]) {
      const foreign = await cursorOf(path, allKey);
      expectError(await h.get(`${path}&cursor=${foreign}`, weekKey), 400, 'INVALID_CURSOR');
    }
  });

  it("a cursor of another account with the same policy is refused too, even once the owner's page is cached", async () => {
    const twin = await h.key({ account: { id: 'twin' } }); // same (unrestricted) policy as `allKey`
    const url = '/v2/events?startTime=2000-01-01T00:00:00Z&limit=3';
    const cursor = await cursorOf(url, allKey);
    expect((await h.get(`${url}&cursor=${cursor}`, allKey)).status).toBe(200); // now in the read cache
    expectError(await h.get(`${url}&cursor=${cursor}`, twin), 400, 'INVALID_CURSOR');
  });

  it("a cursor stops working when the account's policy changes", async () => {
    const key = await h.key({ account: { id: 'changing' } });
    const url = '/v2/events?startTime=2000-01-01T00:00:00Z&limit=3';
    const cursor = await cursorOf(url, key);
    await h.key({ account: { id: 'changing', historyWindowDays: 3 } });
    expectError(await h.get(`${url}&cursor=${cursor}`, key), 400, 'INVALID_CURSOR');
  });

  it('edited sort keys and windows are refused as malformed, never a 500', async () => {
    const cursor = await cursorOf('/v2/events?limit=3', allKey);
    const edits: ((p: any) => void)[] = [
      (p) => {
        p.k = [p.k[0], 'zzz'];
      },
      (p) => {
        p.k = [];
      },
      (p) => {
        p.k = [2 ** 64, 1];
      },
      (p) => {
        p.k = [-1.5, 1];
      },
      (p) => {
        p.w = ['NaN', null];
      },
      (p) => {
        p.w = [1e300, null];
      },
      (p) => {
        p.k = [p.k[0], 2 ** 53];
      },
      (p) => {
        p.f = 'x';
      },
    ];
    for (const change of edits) {
      const res = await h.get(`/v2/events?limit=3&cursor=${edit(cursor, change)}`, allKey);
      expectError(res, 400, 'INVALID_CURSOR');
      expect(res.body.error.message).toBe('Malformed cursor');
    }
    for (const junk of ['x', 'eyJrIjpbXX0', `${cursor}x`, `${cursor.split('.')[0]}.`, '.', 'a.b.c', '%00']) {
      expectError(await h.get(`/v2/events?limit=3&cursor=${junk}`, allKey), 400, 'INVALID_CURSOR');
    }
  });

  it('a cursor of another read or of other filters is refused', async () => {
    const events = await cursorOf('/v2/events?limit=3', allKey);
    expectError(await h.get(`/v2/positions?limit=3&cursor=${events}`, allKey), 400, 'INVALID_CURSOR');
    expectError(await h.get(`/v2/events?limit=3&types=close&cursor=${events}`, allKey), 400, 'INVALID_CURSOR');
  });
});

describe('issue 5: validation (DESIGN 6): every refusal is a 400 naming its parameter', () => {
  it('integers are plain decimal digits', async () => {
    for (const limit of ['0x10', '1e1', '+5', ' 5', '5 ', '-1', '1.5', 'Infinity', 'NaN', '1e309', '9'.repeat(400), '', '0', '201']) {
      expectError(await h.get(`/v2/events?limit=${encodeURIComponent(limit)}`, allKey), 400, 'VALIDATION_ERROR', 'limit');
    }
    expect((await h.get('/v2/events?limit=007', allKey)).status).toBe(200);
  });

  it('ids are 1 .. 2^53-1', async () => {
    for (const ids of ['9007199254740992', '9007199254740993', '18446744073709551616', '0', '1,-2', '1,,2', '1e3', '0x1']) {
      expectError(await h.get(`/v2/assets?assetIds=${ids}`, allKey), 400, 'VALIDATION_ERROR', 'assetIds');
    }
    const max = await h.get('/v2/assets?assetIds=9007199254740991,1', allKey);
    expect(max.status).toBe(200);
    expect(max.body.data.results.map((a: any) => a.id)).toEqual([1]);
  });

  it('date-times are RFC 3339 with a real calendar date, no leap second, within 1970..2299', async () => {
    for (const t of [
      '2016-12-31T23:59:60Z',
      '0000-01-01T00:00:00Z',
      '1969-12-31T23:59:59Z',
      '2300-01-01T00:00:00Z',
      '2026-02-30T00:00:00Z',
      '2026-01-01T24:00:00Z',
      '2026-01-01T00:00:00',
      '2026-01-01',
      'yesterday',
    ]) {
      expectError(await h.get(`/v2/events?startTime=${encodeURIComponent(t)}`, allKey), 400, 'VALIDATION_ERROR', 'startTime');
    }
    const ok = await h.get(`/v2/events?startTime=${encodeURIComponent('2024-02-29T00:00:00+02:00')}&endTime=2299-12-31T23:59:59Z`, allKey);
    expect(ok.status).toBe(200);
    expect(ok.body.data.meta.appliedTimeRange.startTime).toBe('2024-02-28T22:00:00.000Z');
  });

  it('an empty parameter name, malformed percent-encoding and repeated parameters are named', async () => {
    const empty = await h.get('/v2/events?=5', allKey);
    expectError(empty, 400, 'VALIDATION_ERROR', '');
    expect(empty.body.error.details[0].message).toMatch(/empty name/);
    expectError(await h.get('/v2/traders?search=%ff', allKey), 400, 'VALIDATION_ERROR', 'search');
    expectError(await h.get('/v2/traders?search=%C0%AF', allKey), 400, 'VALIDATION_ERROR', 'search');
    expectError(await h.get('/v2/traders?sea%zzrch=a', allKey), 400, 'VALIDATION_ERROR', 'sea%zzrch');
    expectError(await h.get('/v2/events?limit=5&limit=6', allKey), 400, 'VALIDATION_ERROR', 'limit');
    expectError(await h.get('/v2/events?__proto__=1', allKey), 400, 'VALIDATION_ERROR', '__proto__');
  });

  it('lists are capped and their members checked one by one', async () => {
    const many = Array.from({ length: 1001 }, (_, i) => i + 1).join(',');
    expectError(await h.get(`/v2/events?traderIds=${many}`, allKey), 400, 'VALIDATION_ERROR', 'traderIds');
    expectError(await h.get('/v2/events?types=open,sideways', allKey), 400, 'VALIDATION_ERROR', 'types');
    expect((await h.get('/v2/assets?assetClass=', allKey)).status).toBe(200); // empty means all classes (contract 4)
  });
});

/** One raw HTTP/1.1 exchange: the request line goes out byte for byte, as no HTTP client would send it. */
function raw(request: string): Promise<{ status: number; headers: Record<string, string>; body: any }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const [head, ...rest] = text.split('\r\n\r\n');
      const lines = head!.split('\r\n');
      const headers = Object.fromEntries(
        lines.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      let body: any = rest.join('\r\n\r\n');
      try {
        body = JSON.parse(body);
      } catch {
        /* the test then fails on the envelope */
      }
      resolve({ status: Number(lines[0]!.split(' ')[1]), headers, body });
    });
    socket.end(request);
  });
}
const get = (target: string, extra = '') =>
  raw(`GET ${target} HTTP/1.1\r\nHost: localhost\r\nx-api-key: ${allKey}\r\n${extra}Connection: close\r\n\r\n`);

function expectRawError(res: Awaited<ReturnType<typeof raw>>, status: number, code: string): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body).toEqual({
    success: false,
    error: { code, message: expect.any(String), details: res.body.error?.details ?? null },
    requestId: expect.any(String),
  });
  expect(res.body.error.message.length).toBeGreaterThan(0);
  expect(res.headers['x-request-id']).toBe(res.body.requestId);
}

describe('issue 5: status codes over a real socket, all in the error envelope', () => {
  it('a URL over 32 kB gets 414, also past the HTTP parser limit (256 kB)', async () => {
    expectRawError(await get(`/v2/events?search=${'a'.repeat(40_000)}`), 414, 'URI_TOO_LONG');
    expectRawError(await get(`/v2/events?traderIds=${'9007199254740991,'.repeat(10_000)}1`), 414, 'URI_TOO_LONG');
    expectRawError(await get(`/v2/events?traderIds=${'1,'.repeat(200_000)}1`), 414, 'URI_TOO_LONG');
    // Headers past the limit (here 3,000 lines of 100 bytes) get 431.
    expectRawError(await get('/v2/events', `x-h: ${'b'.repeat(100)}\r\n`.repeat(3000)), 431, 'HEADERS_TOO_LARGE');
  });

  it('bad percent-encoding in the path is a 400 envelope', async () => {
    expectRawError(await get('/v2/%ff'), 400, 'VALIDATION_ERROR');
    expectRawError(await get('/v2/events%'), 400, 'VALIDATION_ERROR');
  });

  it('other methods get 405 with Allow: GET; unknown paths 404', async () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD']) {
      const res = await raw(
        `${method} /v2/events HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{}`,
      );
      expect(res.status).toBe(405);
      expect(res.headers.allow).toBe('GET');
      if (method !== 'HEAD') expectRawError(res, 405, 'METHOD_NOT_ALLOWED');
    }
    expectRawError(await raw('POST /v2/nothing HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'), 404, 'NOT_FOUND');
    expectRawError(await get('/v2/nothing'), 404, 'NOT_FOUND');
  });

  it('malformed HTTP is a 400 envelope', async () => {
    expectRawError(await raw('GET /v2/events HTTP/1.1\r\nHost: localhost\r\nBad Header\r\n\r\n'), 400, 'VALIDATION_ERROR');
  });
});
