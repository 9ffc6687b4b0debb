import { get } from 'node:http';
import { parse as parseCsv } from 'csv-parse/sync';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Admission, admissionDefaults } from '../../apps/reads/cost.ts';
import { generateDemo } from '../../projectors/demo/generate.ts';
import type { ExportLimits } from '../../schemas/api/exports.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import { type Params, url, walk } from '../oracle/walk.ts';

/**
 * Issue 28, for bulk readers: /v2/exports/{events,positions,messages,feed} stream a list read's
 * whole result set in NDJSON, CSV or Parquet. What a reader relies on, checked against the list
 * read itself (whose rows the oracle suites check): an export is exactly the concatenation of the
 * pages a caller walks with the same filters and key, also under restricted policies and history
 * windows, in every format (CSV read back with csv-parse, Parquet with hyparquet); a cut
 * connection resumes exactly after the last row received; the bounds end an export cleanly
 * and say so; a resume token works only for its own filters and account.
 */
const DAY = 86_400_000;
const NOW = Math.floor(Date.now() / 1000) * 1000;
const iso = (t: number) => new Date(t).toISOString();

type Family = 'events' | 'positions' | 'messages' | 'feed';
/** Filters that keep each walk to a few thousand rows of the small demo set. */
const FILTERS: Record<Family, Params> = {
  events: { startTime: iso(NOW - 12 * DAY) },
  positions: { startTime: iso(NOW - 20 * DAY), directions: 'long' },
  messages: { startTime: iso(NOW - 10 * DAY) },
  feed: { startTime: iso(NOW - 10 * DAY) },
};
const LIST_PATH: Record<Family, string> = { events: '/v2/events', positions: '/v2/positions', messages: '/v2/messages', feed: '/v2/feed' };
const LIST_MAX: Record<Family, number> = { events: 200, positions: 200, messages: 200, feed: 100 };

// ---------------------------------------------------------------------------------------------------
// Reading an export back, in each format, as the list read's rows

interface Exported {
  status: number;
  rows: any[];
  tokens: string[];
  headers: Record<string, unknown>;
  trailers: Record<string, string>;
  meta?: Record<string, string>;
  body: Buffer;
}

/** A row's leaves by dotted name, as the docs describe CSV and Parquet columns: nested objects flattened, arrays whole. */
function leaves(row: any, prefix = '', out: Record<string, unknown> = {}): Record<string, unknown> {
  for (const [k, v] of Object.entries(row)) {
    const name = prefix ? `${prefix}.${k}` : k;
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) leaves(v, name, out);
    else out[name] = v;
  }
  return out;
}

async function exportOf(h: Harness, key: string, family: Family, params: Params, format = 'ndjson'): Promise<Exported> {
  const res = await h.app.inject({
    method: 'GET',
    url: url(`/v2/exports/${family}`, { ...params, format }),
    headers: { 'x-api-key': key },
  });
  const out: Exported = {
    status: res.statusCode,
    rows: [],
    tokens: [],
    headers: res.headers,
    trailers: res.trailers,
    body: res.rawPayload,
  };
  if (res.statusCode !== 200) return out;
  if (format === 'ndjson') {
    for (const line of res.payload.split('\n').filter(Boolean)) {
      const { resumeToken, ...row } = JSON.parse(line);
      out.rows.push(row);
      out.tokens.push(resumeToken);
    }
  } else if (format === 'csv') {
    for (const rec of parseCsv(res.rawPayload, { columns: true }) as Record<string, string>[]) {
      const { resumeToken, ...cells } = rec;
      out.rows.push(cells);
      out.tokens.push(resumeToken!);
    }
  } else {
    const file = new Uint8Array(res.rawPayload).buffer;
    out.meta = Object.fromEntries((parquetMetadata(file).key_value_metadata ?? []).map((kv) => [kv.key, kv.value ?? '']));
    for (const rec of (await parquetReadObjects({ file })) as Record<string, unknown>[]) {
      const { resumeToken, ...cells } = rec;
      out.rows.push(cells);
      out.tokens.push(resumeToken as string);
    }
  }
  return out;
}

/** A Parquet row in the list row's terms: integers come back as bigint, times as Date, JSON columns as text or parsed. */
function fromParquet(cells: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(cells)) {
    if (typeof v === 'bigint') out[k] = Number(v);
    else if (v instanceof Date) out[k] = v.toISOString();
    else if (typeof v === 'string' && (v.startsWith('[') || v.startsWith('{'))) out[k] = JSON.parse(v);
    else out[k] = v ?? null;
  }
  return out;
}

/** The value at a dotted column name in a list row; null past a null object (its columns are empty). */
function at(row: any, column: string): unknown {
  let v = row;
  for (const part of column.split('.')) {
    if (v === null || v === undefined) return null;
    v = v[part];
  }
  return v ?? null;
}

function expectSameRows(format: string, exported: Exported, pages: any[], label: string): void {
  expect(exported.rows.length, `${label}: rows`).toBe(pages.length);
  if (format === 'ndjson') return void expect(exported.rows, label).toEqual(pages);
  const columns = Object.keys(exported.rows[0] ?? {});
  // Every leaf of every row has its column (a null object's leaves are the columns of its fields).
  for (const p of pages) for (const [name, v] of Object.entries(leaves(p))) if (v !== null) expect(columns, label).toContain(name);
  const expected = pages.map((p) =>
    Object.fromEntries(
      columns.map((c) => {
        const v = at(p, c);
        if (format === 'csv') return [c, v === null ? '' : typeof v === 'object' ? v : String(v)];
        return [c, v];
      }),
    ),
  );
  // A CSV number is any text of it (1e+308 or 1e308): compared as the number it reads as; a JSON column as the JSON value it reads as.
  const cell = (page: unknown, c: string, v: string): unknown => {
    const want = at(page, c);
    return typeof want === 'number' ? String(Number(v)) : want !== null && typeof want === 'object' ? JSON.parse(v) : v;
  };
  const got =
    format === 'csv'
      ? exported.rows.map((r, i) => Object.fromEntries(Object.entries(r).map(([c, v]) => [c, cell(pages[i], c, v as string)])))
      : exported.rows.map((r) => fromParquet(r));
  expect(got, label).toEqual(expected);
}
// ---------------------------------------------------------------------------------------------------

describe('issue 28: exports', () => {
  let h: Harness;
  const keys: Record<string, string> = {};
  const POLICIES: Record<string, { days: number | null }> = { all: { days: null }, restricted: { days: 8 } };
  // (8 days: later than each family's startTime, so the window clamps every read of the restricted account.)

  beforeAll(async () => {
    // A read deadline of 3 s (fastify's handler timeout of the reads 5 s): an export outlives it.
    h = await createHarness({
      clock: () => NOW,
      admission: new Admission({ ...admissionDefaults(), perAccount: 4, maxWaitMs: 9_000, deadlineMs: 3_000 }),
    });
    await h.given([...generateDemo({ scale: 'small', now: new Date(NOW) })]);
    keys.all = await h.key();
    // Signals of one platform, messages of that platform, an 8-day history window.
    keys.restricted = await h.key({
      account: {
        id: 'restricted',
        messageVisibility: { mode: 'platforms', platforms: ['TELEGRAM'] },
        signalVisibility: { mode: 'platforms', platforms: ['TELEGRAM'] },
        historyWindowDays: 8,
      },
    });
    keys.other = await h.key({ account: { id: 'other' } });
  }, 360_000);
  afterAll(async () => {
    await h?.close();
  });

  for (const family of ['events', 'positions', 'messages', 'feed'] as Family[]) {
    it(`/v2/exports/${family}: the concatenated pages of the list read, in NDJSON, CSV and Parquet, for two policies`, async () => {
      for (const [policy, { days }] of Object.entries(POLICIES)) {
        // The clock stands still: a history window's start does not move between pages.
        const w = await walk(h, keys[policy]!, LIST_PATH[family], FILTERS[family], LIST_MAX[family]);
        if (days !== null) expect(Date.parse(w.first.appliedTimeRange.startTime)).toBe(NOW - days * DAY);
        expect(w.rows.length, `${family} ${policy}: the walk has rows`).toBeGreaterThan(50);
        for (const format of ['ndjson', 'csv', 'parquet']) {
          const label = `${family} ${policy} ${format}`;
          const ex = await exportOf(h, keys[policy]!, family, FILTERS[family], format);
          expect(ex.status, label).toBe(200);
          expectSameRows(format, ex, w.rows, label);
          expect(ex.trailers['x-export-complete'], label).toBe('true');
          expect(new Set(ex.tokens).size, `${label}: a token per row`).toBe(ex.rows.length);
          if (format === 'parquet') expect(ex.meta?.['signalbase.complete']).toBe('true');
        }
      }
      // The restricted account sees less, and never a row of the other platform or outside its window.
      const all = await exportOf(h, keys.all!, family, FILTERS[family]);
      const restricted = await exportOf(h, keys.restricted!, family, FILTERS[family]);
      expect(restricted.rows.length).toBeLessThan(all.rows.length);
    });
  }

  it("each family's filters and a policy of named traders: the export is still the walked pages (the store's statements apply them)", async () => {
    const feed = await walk(h, keys.all!, '/v2/feed', FILTERS.feed, 100);
    const traders = [...new Set(feed.rows.map((r: any) => r.trader.id as number))].slice(0, 6);
    const events = feed.rows.flatMap((r: any) => r.events as { assetId: number; positionId: number }[]);
    const assets = [...new Set(events.map((e) => e.assetId))].slice(0, 3).join(',');
    // Groups whose events are partly another trader's keep only the visible ones: signals of traders 1-4, messages of 0-3.
    const named = await h.key({
      account: {
        id: 'named',
        messageVisibility: { mode: 'traders', traderIds: traders.slice(0, 4) },
        signalVisibility: { mode: 'traders', traderIds: traders.slice(1, 5) },
      },
    });
    const cases: [Family, Params][] = [
      ['feed', { ...FILTERS.feed, traderIds: traders.slice(0, 3).join(',') }],
      ['feed', { ...FILTERS.feed, assetIds: assets }],
      ['positions', { ...FILTERS.positions, traderIds: traders.join(','), assetIds: assets }],
      ['positions', { positionIds: [...new Set(events.map((e) => e.positionId))].slice(0, 40).join(',') }],
      ['events', { ...FILTERS.events, types: 'open,close', assetIds: assets }],
      ['messages', { ...FILTERS.messages, traderIds: traders.slice(2).join(',') }],
    ];
    for (const [account, key] of [
      ['all', keys.all!],
      ['named', named],
    ]) {
      for (const [family, params] of cases) {
        const w = await walk(h, key!, LIST_PATH[family], params, LIST_MAX[family]);
        if (account === 'all') expect(w.rows.length, `${family} ${JSON.stringify(params)}: the walk has rows`).toBeGreaterThan(0);
        for (const format of ['ndjson', 'csv']) {
          const label = `${account} ${family} ${JSON.stringify(params)} ${format}`;
          const ex = await exportOf(h, key!, family, params, format);
          expect(ex.status, label).toBe(200);
          expectSameRows(format, ex, w.rows, label);
        }
      }
    }
  });

  it('a cut connection resumes exactly after the last row received (NDJSON and CSV over HTTP)', async () => {
    const origin = await h.app
      .listen({ port: 0, host: '127.0.0.1' })
      .catch(() => `http://127.0.0.1:${(h.app.server.address() as any).port}`);
    const full = await exportOf(h, keys.all!, 'events', {});
    expect(full.rows.length).toBeGreaterThan(10_000);
    for (const format of ['ndjson', 'csv']) {
      // A connection of its own (no pool), cut once about 900 KB arrived.
      const text = await new Promise<string>((resolve, reject) => {
        const req = get(
          `${origin}${url('/v2/exports/events', { format })}`,
          { headers: { 'x-api-key': keys.all! }, agent: false },
          (res) => {
            if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
            let got = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => {
              got += chunk;
              if (got.length >= 900_000) {
                req.destroy();
                resolve(got);
              }
            });
            res.on('end', () => reject(new Error('the export ended before it was cut')));
          },
        );
        req.on('error', () => {});
      });
      // Only whole lines were received; the last one may be cut short.
      const lines = text.split(format === 'csv' ? '\r\n' : '\n').slice(format === 'csv' ? 1 : 0, -1);
      // The token is the last CSV field (its characters never need quotes; a writer may quote it all the same).
      const tokenOf = (line: string) =>
        format === 'csv' ? line.slice(line.lastIndexOf(',') + 1).replace(/^"(.*)"$/, '$1') : JSON.parse(line).resumeToken;
      const got = lines.length;
      expect(got).toBeGreaterThan(100);
      expect(got).toBeLessThan(full.rows.length);
      const rest = await exportOf(h, keys.all!, 'events', { resume: tokenOf(lines.at(-1)!) });
      expect(rest.status).toBe(200);
      expect([...full.rows.slice(0, got).map((r) => r.id), ...rest.rows.map((r) => r.id)], format).toEqual(full.rows.map((r) => r.id));
      expect(rest.rows).toEqual(full.rows.slice(got));
    }
  });

  it('a paused export holds its store statement alone: other accounts export and read meanwhile, its own account waits its turn (5 s, then 503 OVERLOADED)', async () => {
    const origin = await h.app
      .listen({ port: 0, host: '127.0.0.1' })
      .catch(() => `http://127.0.0.1:${(h.app.server.address() as any).port}`);
    // Account "all" starts the events export (a statement of the store) and stops reading.
    let cut!: () => void;
    await new Promise<void>((resolve, reject) => {
      const req = get(`${origin}/v2/exports/events`, { headers: { 'x-api-key': keys.all! }, agent: false }, (res) => {
        res.once('data', () => {
          res.pause();
          resolve();
        });
        res.on('error', () => {});
      });
      req.on('error', () => {});
      cut = () => req.destroy();
    });
    try {
      const other = await exportOf(h, keys.other!, 'messages', FILTERS.messages);
      expect(other.status, 'another account exports').toBe(200);
      expect(other.trailers['x-export-complete']).toBe('true');
      expect((await h.get('/v2/events?limit=5', keys.all!)).status, 'the paused account still reads').toBe(200);
      const started = Date.now();
      const second = await exportOf(h, keys.all!, 'messages', FILTERS.messages);
      expect(second.status, 'the paused account exports one thing at a time').toBe(503);
      expect(JSON.parse(second.body.toString('utf8')).error.code).toBe('OVERLOADED');
      expect(Date.now() - started).toBeGreaterThanOrEqual(4_500);
    } finally {
      cut();
    }
    // Its paused export gone, the account exports again.
    await new Promise((r) => setTimeout(r, 200));
    expect((await exportOf(h, keys.all!, 'messages', FILTERS.messages)).status).toBe(200);
  }, 60_000);

  it("an export outlives the reads' deadline: a client that stops reading for 6 s still gets every row (regression: cut at the handler timeout)", async () => {
    const origin = await h.app
      .listen({ port: 0, host: '127.0.0.1' })
      .catch(() => `http://127.0.0.1:${(h.app.server.address() as any).port}`);
    const full = await exportOf(h, keys.all!, 'events', {});
    const got = await new Promise<{ text: string; trailers: NodeJS.Dict<string> }>((resolve, reject) => {
      const req = get(`${origin}/v2/exports/events`, { headers: { 'x-api-key': keys.all! }, agent: false }, (res) => {
        let text = '';
        let paused = false;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
          if (!paused) {
            paused = true;
            res.pause();
            setTimeout(() => res.resume(), 6_000);
          }
        });
        res.on('end', () => resolve({ text, trailers: res.trailers }));
        res.on('error', reject);
      });
      req.on('error', reject);
    });
    expect(got.trailers['x-export-complete']).toBe('true');
    expect(got.text.split('\n').filter(Boolean).length).toBe(full.rows.length);
  });

  it('maxRows ends an export early and says so (trailers; Parquet metadata); its resume token continues it, in every format', async () => {
    const full = await exportOf(h, keys.restricted!, 'positions', FILTERS.positions);
    for (const format of ['ndjson', 'csv', 'parquet']) {
      const got: any[] = [];
      let resume: string | undefined;
      for (let part = 0; ; part++) {
        const ex = await exportOf(
          h,
          keys.restricted!,
          'positions',
          { ...FILTERS.positions, maxRows: 700, ...(resume ? { resume } : {}) },
          format,
        );
        expect(ex.status).toBe(200);
        got.push(...ex.rows);
        if (!ex.rows.length) break;
        resume = ex.tokens.at(-1);
        const complete = ex.rows.length < 700;
        expect(ex.trailers['x-export-complete'], `${format} part ${part}`).toBe(String(complete));
        if (format === 'parquet') {
          expect(ex.meta?.['signalbase.complete']).toBe(String(complete));
          expect(ex.meta?.['signalbase.resumeToken']).toBe(resume);
        }
        if (complete) break;
        expect(part).toBeLessThan(50);
      }
      expectSameRows(format, { ...full, rows: got }, full.rows, `positions in parts of 700, ${format}`);
    }
  });

  it('a resume token fits only its own export: another account, other filters, an altered token are 400 INVALID_CURSOR', async () => {
    const ex = await exportOf(h, keys.all!, 'events', { ...FILTERS.events, maxRows: 10 });
    const token = ex.tokens.at(-1)!;
    const ok = await exportOf(h, keys.all!, 'events', { ...FILTERS.events, maxRows: 10, resume: token });
    expect(ok.status).toBe(200);
    const refused = async (key: string, params: Params) => {
      const res = await h.get(url('/v2/exports/events', params), key);
      expect(res.status, JSON.stringify(params)).toBe(400);
      expect(res.body.error.code).toBe('INVALID_CURSOR');
    };
    await refused(keys.other!, { ...FILTERS.events, resume: token });
    await refused(keys.all!, { ...FILTERS.events, types: 'open', resume: token });
    await refused(keys.all!, { resume: token });
    const [seal, sig, k] = token.split('.') as [string, string, string];
    await refused(keys.all!, { ...FILTERS.events, resume: `${seal.replace(/^./, (c) => (c === '0' ? '1' : '0'))}.${sig}.${k}` });
    await refused(keys.all!, { ...FILTERS.events, resume: `${seal}.${sig}.${Buffer.from('"x"').toString('base64url')}` });
    await refused(keys.all!, { ...FILTERS.events, resume: `${seal}.${sig}.${Buffer.from('[1,2,3]').toString('base64url')}` });
    await refused(keys.all!, { ...FILTERS.events, resume: 'garbage' });
    // And a list cursor is not a resume token.
    const page = await h.get(url('/v2/events', { ...FILTERS.events, limit: 5 }), keys.all!);
    await refused(keys.all!, { ...FILTERS.events, resume: page.body.data.meta.nextCursor });
  });

  it('the feed export starts with the watermark to since-poll from afterwards (x-feed-since)', async () => {
    const ex = await exportOf(h, keys.all!, 'feed', FILTERS.feed);
    const since = ex.headers['x-feed-since'] as string;
    expect(typeof since).toBe('string');
    // The watermark of a since-poll with the export's filters.
    const poll = await h.get(url('/v2/feed', { ...FILTERS.feed, since }), keys.all!);
    expect(poll.status).toBe(200);
    expect(poll.body.data.results).toEqual([]);
  });

  it('OpenAPI v2 describes each export as a streaming response in its three formats; v1 and the MCP tools have none', async () => {
    const doc = (await h.app.inject({ url: '/v2/openapi.json' })).json();
    for (const family of ['events', 'positions', 'messages', 'feed']) {
      const get = doc.paths[`/exports/${family}`]?.get;
      expect(get, family).toBeDefined();
      expect(Object.keys(get.responses[200].content).sort()).toEqual([
        'application/vnd.apache.parquet',
        'application/x-ndjson',
        'text/csv',
      ]);
      expect(get.parameters.map((p: any) => p.name)).toEqual(expect.arrayContaining(['format', 'resume', 'maxRows']));
      expect(get.parameters.map((p: any) => p.name)).not.toContain('cursor');
    }
    const v1 = (await h.app.inject({ url: '/v1/openapi.json' })).json();
    expect(Object.keys(v1.paths).filter((p) => p.startsWith('/exports'))).toEqual([]);
    expect(Object.keys(doc.paths).filter((p) => p.startsWith('/exports')).length).toBe(4);
  });

  it('bad parameters are 400 VALIDATION_ERROR in the envelope: an unknown format, the paging parameters, since', async () => {
    for (const params of [{ format: 'xml' }, { limit: 10 }, { cursor: 'x' }, { maxRows: 0 }, { maxRows: 1_000_001 }]) {
      const res = await h.get(url('/v2/exports/events', params), keys.all!);
      expect(res.status, JSON.stringify(params)).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
    }
    const feed = await h.get(url('/v2/exports/feed', { since: '0' }), keys.all!);
    expect(feed.status).toBe(400);
    const nokey = await h.get('/v2/exports/events');
    expect(nokey.status).toBe(401);
  });
});

/** A harness at NOW with these export limits, and `n` events of one trader (ids 1..n) `stepMs` apart from five days ago. */
async function oneTradersEvents(n: number, stepMs: number, exportLimits: ExportLimits): Promise<{ h: Harness; key: string }> {
  const h = await createHarness({ clock: () => NOW, exportLimits });
  const records: any[] = [build.source('src-1'), build.trader(1), build.asset(1)];
  for (let i = 1; i <= n; i++) records.push(build.event(i, { traderId: 1, assetId: 1, timeOfEvent: iso(NOW - 5 * DAY + i * stepMs) }));
  await h.given(records);
  return { h, key: await h.key() };
}

describe('issue 28: the bounds of an export', () => {
  let h: Harness;
  let key: string;
  beforeAll(async () => {
    ({ h, key } = await oneTradersEvents(250, 60_000, {
      rowsPerRequest: 1_000_000,
      bytesPerRequest: 20_000,
      rowsPerMinute: 300,
      secondsPerRequest: 600,
    }));
  });
  afterAll(async () => {
    await h?.close();
  });

  it('bytes per request: each export ends at the first row past the bound, says so, and resumes; rows per minute: then 429 with Retry-After', async () => {
    const parts = async (): Promise<{ ids: number[]; refused?: { status: number; body: any; headers: Record<string, unknown> } }> => {
      const ids: number[] = [];
      let resume: string | undefined;
      for (let part = 0; part < 20; part++) {
        const ex = await exportOf(h, key, 'events', resume ? { resume } : {});
        if (ex.status !== 200) return { ids, refused: await h.get(url('/v2/exports/events', resume ? { resume } : {}), key) };
        if (!ex.rows.length) return { ids };
        const last = Buffer.byteLength(`${JSON.stringify({ ...ex.rows.at(-1), resumeToken: ex.tokens.at(-1) })}\n`);
        if (ex.trailers['x-export-complete'] === 'false' && ex.body.length >= 20_000)
          expect(ex.body.length - last, 'the bytes before the last row').toBeLessThan(20_000);
        else expect(ex.body.length).toBeLessThan(20_000);
        ids.push(...ex.rows.map((r) => r.id));
        if (ex.trailers['x-export-complete'] === 'true') return { ids };
        resume = ex.tokens.at(-1);
      }
      throw new Error('more than 20 parts');
    };
    // 250 rows in parts of about 20 KB: every row once, in order.
    const first = await parts();
    expect(first.ids).toEqual(Array.from({ length: 250 }, (_, i) => 250 - i));
    // The minute's 300 rows: 50 more, then refused.
    const second = await parts();
    expect(second.ids).toEqual(Array.from({ length: 50 }, (_, i) => 250 - i));
    expect(second.refused?.status).toBe(429);
    expect(second.refused?.body.error.code).toBe('RATE_LIMITED');
    expect(Number(second.refused?.headers['retry-after'])).toBeGreaterThan(0);
  });
});

describe('issue 28: a Parquet export ends at its bytes bound between blocks of rows, and resumes', () => {
  let h: Harness;
  let key: string;
  const N = 70_000;
  beforeAll(async () => {
    // Enough rows for the store to write them in several blocks (chdb: a Parquet file each).
    ({ h, key } = await oneTradersEvents(N, 1000, {
      rowsPerRequest: 1_000_000,
      bytesPerRequest: 200_000,
      rowsPerMinute: 1_000_000,
      secondsPerRequest: 600,
    }));
  });
  afterAll(async () => {
    await h?.close();
  });

  it('each part but the last says it is not complete; together they are every row once, in key order', async () => {
    const ids: number[] = [];
    const complete: string[] = [];
    let resume: string | undefined;
    for (let part = 0; part < 100; part++) {
      const ex = await exportOf(h, key, 'events', resume ? { resume } : {}, 'parquet');
      expect(ex.status).toBe(200);
      ids.push(...ex.rows.map((r) => Number(r.id)));
      complete.push(ex.meta?.['signalbase.complete'] ?? '?');
      if (ex.meta?.['signalbase.complete'] === 'true') break;
      expect(ex.rows.length, 'an incomplete part has rows').toBeGreaterThan(0);
      resume = ex.meta?.['signalbase.resumeToken'];
    }
    expect(complete.length, 'the bound ended some parts').toBeGreaterThan(1);
    expect(complete).toEqual([...complete.slice(0, -1).map(() => 'false'), 'true']);
    expect(ids).toEqual(Array.from({ length: N }, (_, i) => N - i));
  });
});
