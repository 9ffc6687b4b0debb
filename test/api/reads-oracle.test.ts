// The six list reads (/events, /positions, /positions/open, /messages, /traders, /assets) against
// an independent brute-force oracle (test/oracle/oracle.ts) over the small demo data set: every
// page is walked and the concatenation must equal the oracle's full answer exactly (floats with a
// relative tolerance of 1e-9).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDemo } from '../../projectors/demo/generate.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import * as O from '../oracle/oracle.ts';
import { assetSearches, multiByteRecords, traderSearches } from '../oracle/oracle-data.ts';
import { expectSameList, type Params, page, type Walk, walk } from '../oracle/walk.ts';

const DAY = 86_400_000;
const STATUSES = ['ready', 'too_young', 'missing_forward_price', 'missing_entry_price', 'zero_entry_price', 'calculation_error'];

let h: Harness;
let key: string;
let records: O.TopicRec[];
let w: O.World;
/** Assets without an active market (ineligible everywhere). */
let inactiveAssets: Set<number>;
let genNow: number;

const ids = (s: Iterable<number | string>) => [...s].join(',');
const list = (v: string | number | undefined): any[] | undefined =>
  v === undefined || v === ''
    ? undefined
    : String(v)
        .split(',')
        .map((x) => (/^\d+$/.test(x) ? Number(x) : x));
const iso = (t: number) => new Date(t).toISOString();

beforeAll(async () => {
  h = await createHarness();
  genNow = Date.now();
  // The demo data set plus a few multi-byte traders, sources and assets (test/oracle/oracle-data.ts).
  records = [...generateDemo({ scale: 'small', now: new Date(genNow) }), ...multiByteRecords(genNow)];
  await h.given(records);
  key = await h.key();
  w = O.buildWorld(records);
  inactiveAssets = new Set([...w.assets.values()].filter((a) => O.quoteSymbol(a) === null).map((a) => a.id));
  // The distributed wiring takes the small demo set through the mock Kafka cluster: most of the
  // suite's 145 s alone on a 2-CPU machine, past 120 s beside another suite (a CI run at stop 39).
}, 300_000);
afterAll(async () => {
  await h?.close();
});

// ---------------------------------------------------------------------------------------------------
// Per-read checks: walk, then compare with the oracle

async function checkEvents(params: Params, limit: number): Promise<Walk> {
  const wk = await walk(h, key, '/v2/events', params, limit);
  const serverTime = Date.parse(wk.first.serverTime);
  const win = O.resolveWindow(params as any, serverTime);
  expect(wk.first.appliedTimeRange).toEqual(O.appliedTimeRange(win));
  const expected = O.events(w, {
    traderIds: list(params.traderIds),
    assetIds: list(params.assetIds),
    directions: list(params.directions),
    types: list(params.types),
    window: win,
  });
  expectSameList(`events ${JSON.stringify(params)} limit ${limit}`, wk.rows, expected);
  return wk;
}

async function checkPositions(params: Params, limit: number): Promise<Walk> {
  const wk = await walk(h, key, '/v2/positions', params, limit);
  const serverTime = Date.parse(wk.first.serverTime);
  const positionIds = list(params.positionIds);
  const win = O.resolveWindow(params as any, serverTime, positionIds !== undefined);
  expect(wk.first.appliedTimeRange).toEqual(O.appliedTimeRange(win));
  const expected = O.positions(
    w,
    {
      traderIds: list(params.traderIds),
      assetIds: list(params.assetIds),
      directions: list(params.directions),
      positionIds,
      window: win,
    },
    serverTime,
  );
  // Statuses resolve against the serverTime of the page a row came from (too_young boundaries).
  const n = Math.min(expected.length, wk.rows.length);
  for (let i = 0; i < n; i++) {
    const p = expected[i];
    if (wk.rowTimes[i] !== serverTime) {
      p.timeBasedPerformances = O.timeBasedPerformances(w, { ...p, openAt: Date.parse(p.openAt) }, wk.rowTimes[i]!);
    }
  }
  expectSameList(`positions ${JSON.stringify(params)} limit ${limit}`, wk.rows, expected);
  return wk;
}

/**
 * Open positions. A position that cannot be marked with finite numbers (no sample at or before
 * serverTime, entry price null or 0, or a non-finite return as on the overflow asset 22) is not
 * served: currentPrice and currentReturnPercentage are required numbers in the contract.
 */
async function checkOpen(params: Params, limit: number): Promise<Walk> {
  const wk = await walk(h, key, '/v2/positions/open', params, limit);
  const serverTime = Date.parse(wk.first.serverTime);
  const f = { traderIds: list(params.traderIds), assetIds: list(params.assetIds), directions: list(params.directions) };
  const expected = O.openPositions(w, f, serverTime);
  expectSameList(`open positions ${JSON.stringify(params)} limit ${limit}`, wk.rows, expected);
  return wk;
}

async function checkMessages(params: Params, limit: number): Promise<Walk> {
  const wk = await walk(h, key, '/v2/messages', params, limit);
  const serverTime = Date.parse(wk.first.serverTime);
  const msgIds = list(params.ids)?.map(String);
  const win = O.resolveWindow(params as any, serverTime, msgIds !== undefined);
  expect(wk.first.appliedTimeRange).toEqual(O.appliedTimeRange(win));
  const expected = O.messages(w, {
    traderIds: list(params.traderIds),
    ids: msgIds,
    sourcePlatforms: list(params.sourcePlatforms),
    window: win,
  });
  expectSameList(`messages ${JSON.stringify(params)} limit ${limit}`, wk.rows, expected);
  return wk;
}

async function checkTraders(params: Params, limit: number): Promise<Walk> {
  const wk = await walk(h, key, '/v2/traders', params, limit);
  const expected = O.traders(w, { search: params.search as string | undefined, sourcePlatforms: list(params.sourcePlatforms) });
  expectSameList(`traders ${JSON.stringify(params)} limit ${limit}`, wk.rows, expected);
  return wk;
}

async function checkAssets(params: Params, limit: number): Promise<Walk> {
  const wk = await walk(h, key, '/v2/assets', params, limit);
  const expected = O.assets(w, {
    search: params.search as string | undefined,
    assetClass: list(params.assetClass),
    assetIds: list(params.assetIds),
    traderIds: list(params.traderIds),
  });
  expectSameList(`assets ${JSON.stringify(params)} limit ${limit}`, wk.rows, expected);
  return wk;
}

/** Traders ordered by their number of positions, most first (live traders only). */
function busyTraders(): number[] {
  const n = new Map<number, number>();
  for (const p of w.positions.values()) if (w.traders.has(p.traderId)) n.set(p.traderId, (n.get(p.traderId) ?? 0) + 1);
  return [...n.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]).map(([id]) => id);
}

// ---------------------------------------------------------------------------------------------------

describe.concurrent('the demo data set exercises the cases it is meant to', () => {
  it('has deleted traders, events, positions, messages and assets without an active market', () => {
    expect(w.deleted.traders.has(7)).toBe(true);
    expect(w.deleted.events.size).toBeGreaterThan(10);
    expect(w.deleted.positions.size).toBeGreaterThan(10);
    expect(w.deleted.messages.size).toBeGreaterThan(5);
    expect([...inactiveAssets].sort((a, b) => a - b)).toEqual([19, 20, 21]);
    const evs = records.filter((r) => r.topic === 'trade-events').map((r) => r.value);
    expect(evs.some((e) => inactiveAssets.has(e.assetId))).toBe(true);
    expect(evs.some((e) => e.traderId === 7)).toBe(true);
  });
});

describe.concurrent('GET /v2/events', () => {
  it('default window (last 90 days), all events, limit 200; excluded rows never appear', async () => {
    const wk = await checkEvents({}, 200);
    const end = Date.parse(wk.first.serverTime);
    expect(wk.first.appliedTimeRange).toEqual({ startTime: iso(end - 90 * DAY), endTime: iso(end) });
    expect(wk.rows.length).toBeGreaterThan(10_000);
    // The raw data has rows of every excluded kind inside the window, and none of them is served.
    const inWin = (e: any) => Date.parse(e.timeOfEvent) >= end - 90 * DAY && Date.parse(e.timeOfEvent) <= end;
    const raw = records.filter((r) => r.topic === 'trade-events' && inWin(r.value)).map((r) => r.value);
    expect(raw.some((e) => inactiveAssets.has(e.assetId))).toBe(true);
    expect(raw.some((e) => w.deleted.events.has(e.id))).toBe(true);
    expect(raw.some((e) => w.deleted.positions.has(e.positionId))).toBe(true);
    expect(raw.some((e) => w.deleted.traders.has(e.traderId))).toBe(true);
    for (const e of wk.rows) {
      expect(inactiveAssets.has(e.assetId)).toBe(false);
      expect(w.deleted.events.has(e.id)).toBe(false);
      expect(w.deleted.positions.has(e.positionId)).toBe(false);
      expect(w.deleted.traders.has(e.traderId)).toBe(false);
    }
  });

  it('comma lists of traders and directions, limit 37', async () => {
    const [a, b] = busyTraders();
    await checkEvents({ traderIds: `${a},${b}`, directions: 'long' }, 37);
    await checkEvents({ traderIds: '1,2,3,5,7', directions: 'long,short' }, 200);
  });

  it('assets and types with an explicit window (both bounds inclusive)', async () => {
    await checkEvents(
      { assetIds: '1,2,22,18,60,28', types: 'open,close', startTime: iso(genNow - 100 * DAY), endTime: iso(genNow - 70 * DAY) },
      200,
    );
    await checkEvents(
      { assetIds: '22,18,60,28', types: 'close,increase', startTime: iso(genNow - 40 * DAY), endTime: iso(genNow - 20 * DAY) },
      37,
    );
    // Bounds equal to an event's own time keep it (inclusive).
    const e = O.events(w, { assetIds: [2], window: { start: genNow - 60 * DAY, end: genNow } }).at(-1)!;
    const wk = await checkEvents({ assetIds: '2', startTime: e.timeOfEvent, endTime: e.timeOfEvent }, 37);
    expect(wk.rows.map((r) => r.id)).toContain(e.id);
  });

  it('only one bound given, types and assets without an active market', async () => {
    await checkEvents({ types: 'increase,decrease', startTime: iso(genNow - 20 * DAY) }, 200);
    await checkEvents({ assetIds: '3,4,5', endTime: iso(genNow - 95 * DAY) }, 200);
    const wk = await checkEvents({ assetIds: '19,20,21', startTime: '2000-01-01T00:00:00Z' }, 200);
    expect(wk.rows).toEqual([]);
    const gone = await checkEvents({ traderIds: '7', startTime: '2000-01-01T00:00:00Z' }, 200);
    expect(gone.rows).toEqual([]);
  });
});

describe.concurrent('GET /v2/positions', () => {
  it('all positions (startTime only), limit 200: every performance status and a null window occur; excluded rows never appear', async () => {
    const wk = await checkPositions({ startTime: '2000-01-01T00:00:00Z' }, 200);
    expect(wk.first.appliedTimeRange).toEqual({ startTime: '2000-01-01T00:00:00.000Z', endTime: null });
    const seen = new Set<string>();
    let nullWindow = 0;
    for (const p of wk.rows) {
      for (const win of O.WINDOWS) {
        const v = p.timeBasedPerformances[win];
        if (v === null) {
          nullWindow++;
          continue;
        }
        seen.add(v.status);
        expect(v.window).toBe(win);
        if (v.status === 'ready') expect(Number.isFinite(v.returnPercentage)).toBe(true);
        else expect(v.returnPercentage).toBeNull();
      }
      expect(inactiveAssets.has(p.assetId)).toBe(false);
      expect(w.deleted.positions.has(p.id)).toBe(false);
      expect(w.deleted.traders.has(p.traderId)).toBe(false);
    }
    expect([...seen].sort()).toEqual([...STATUSES].sort());
    expect(nullWindow).toBeGreaterThan(0);
  });

  it('default window, traders and directions, limit 37', async () => {
    const t = busyTraders();
    const wk = await checkPositions({ traderIds: `${t[2]},${t[5]},3`, directions: 'short' }, 37);
    const end = Date.parse(wk.first.serverTime);
    expect(wk.first.appliedTimeRange).toEqual({ startTime: iso(end - 90 * DAY), endTime: iso(end) });
    await checkPositions({ directions: 'long,short', assetIds: '22,18,60' }, 37);
  });

  it('explicit window and endTime only', async () => {
    await checkPositions({ assetIds: '1,28,2', startTime: iso(genNow - 45 * DAY), endTime: iso(genNow - 2 * DAY) }, 200);
    await checkPositions({ traderIds: '1,2', endTime: iso(genNow - 80 * DAY) }, 200);
  });

  it('positionIds: no default window, deleted and ineligible positions stay out', async () => {
    const all = [...w.positions.values()].sort((a, b) => a.id - b.id);
    const eligible = all.filter((p) => !inactiveAssets.has(p.assetId) && !w.deleted.traders.has(p.traderId));
    const old = eligible
      .filter((p) => p.openAt < genNow - 100 * DAY)
      .slice(0, 40)
      .map((p) => p.id);
    const recent = eligible
      .filter((p) => p.openAt > genNow - 10 * DAY)
      .slice(0, 40)
      .map((p) => p.id);
    const ineligible = all
      .filter((p) => inactiveAssets.has(p.assetId) || w.deleted.traders.has(p.traderId))
      .slice(0, 20)
      .map((p) => p.id);
    const deleted = [...w.deleted.positions].slice(0, 20);
    expect(old.length).toBeGreaterThan(10);
    expect(ineligible.length).toBeGreaterThan(5);
    expect(deleted.length).toBeGreaterThan(5);
    const positionIds = ids([...old, ...recent, ...ineligible, ...deleted, 99_999_999]);
    const wk = await checkPositions({ positionIds }, 37);
    expect(wk.first.appliedTimeRange).toEqual({ startTime: null, endTime: null });
    expect(wk.rows.length).toBe(old.length + recent.length);
    // With a bound given, the window applies to the hydration too.
    await checkPositions({ positionIds, startTime: iso(genNow - 50 * DAY) }, 200);
    await checkPositions({ positionIds, traderIds: ids(busyTraders().slice(0, 30)) }, 200);
  });
});

describe.concurrent('GET /v2/positions/open', () => {
  it('all open positions, limit 200; excluded rows never appear', async () => {
    const wk = await checkOpen({}, 200);
    expect(wk.rows.length).toBeGreaterThan(100);
    for (const p of wk.rows) {
      expect(inactiveAssets.has(p.assetId)).toBe(false);
      expect(w.deleted.positions.has(p.id)).toBe(false);
      expect(w.deleted.traders.has(p.traderId)).toBe(false);
      expect([18, 60]).not.toContain(p.assetId); // no price series: cannot be marked
    }
  });

  it('filters with comma lists, limit 37', async () => {
    const t = busyTraders();
    await checkOpen({ traderIds: ids(t.slice(0, 4)), directions: 'short' }, 37);
    await checkOpen({ assetIds: '2,28,18,60,49', directions: 'long,short' }, 37);
  });

  it('every row carries a finite currentPrice and currentReturnPercentage (overflow asset 22)', async () => {
    const wk = await walk(h, key, '/v2/positions/open', { assetIds: '22' }, 200);
    const bad = wk.rows.filter((r) => !Number.isFinite(r.currentReturnPercentage) || !Number.isFinite(r.currentPrice));
    expect(bad.slice(0, 3), `${bad.length} open positions of asset 22 served with a non-number mark`).toEqual([]);
    expectSameList('open positions of asset 22', wk.rows, O.openPositions(w, { assetIds: [22] }, Date.parse(wk.first.serverTime)));
    // The overflow asset does have open positions with an entry price: they are left out, not nulled.
    expect([...w.positions.values()].some((p) => p.assetId === 22 && p.isOpen && p.openPrice)).toBe(true);
  });
});

describe.concurrent('GET /v2/messages', () => {
  it('default window, all messages, limit 200; deleted messages and traders never appear', async () => {
    const wk = await checkMessages({}, 200);
    const end = Date.parse(wk.first.serverTime);
    expect(wk.first.appliedTimeRange).toEqual({ startTime: iso(end - 90 * DAY), endTime: iso(end) });
    expect(wk.rows.length).toBeGreaterThan(5000);
    for (const m of wk.rows) {
      expect(w.deleted.messages.has(m.id)).toBe(false);
      expect(w.deleted.traders.has(m.traderId)).toBe(false);
    }
  });

  it('traders and platforms as comma lists, explicit windows, limit 37', async () => {
    const t = busyTraders();
    await checkMessages({ traderIds: `1,2,4,7,3,${t[0]}` }, 37);
    await checkMessages({ sourcePlatforms: 'X', startTime: iso(genNow - 30 * DAY), endTime: iso(genNow - 20 * DAY) }, 37);
    await checkMessages({ sourcePlatforms: 'TELEGRAM,X', traderIds: ids(t.slice(0, 5)), endTime: iso(genNow - 60 * DAY) }, 200);
  });

  it('ids hydration: no default window; orphan, deleted and unknown ids stay out', async () => {
    const all = [...w.messages.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
    const owned = new Set(O.messages(w, {}).map((m) => m.id));
    const old = all
      .filter((m) => owned.has(m.id) && Date.parse(m.writtenAt) < genNow - 95 * DAY)
      .slice(0, 60)
      .map((m) => m.id);
    const recent = all
      .filter((m) => owned.has(m.id) && Date.parse(m.writtenAt) > genNow - 5 * DAY)
      .slice(0, 60)
      .map((m) => m.id);
    const deleted = [...w.deleted.messages].slice(0, 10);
    const orphans = all
      .filter((m) => !owned.has(m.id))
      .slice(0, 20)
      .map((m) => m.id);
    expect(old.length).toBeGreaterThan(10);
    expect(orphans.length).toBeGreaterThan(5);
    const msgIds = [...old, ...recent, ...deleted, ...orphans, 'tg-999999', 'no-such-id'].join(',');
    const wk = await checkMessages({ ids: msgIds }, 37);
    expect(wk.first.appliedTimeRange).toEqual({ startTime: null, endTime: null });
    expect(wk.rows.length).toBe(old.length + recent.length);
    await checkMessages({ ids: msgIds, startTime: iso(genNow - 30 * DAY) }, 37);
    await checkMessages({ ids: msgIds, sourcePlatforms: 'TELEGRAM', traderIds: ids(busyTraders().slice(0, 60)) }, 200);
  });
});

describe.concurrent('GET /v2/traders', () => {
  it('the whole directory, limits 37 and 200; deleted traders never appear', async () => {
    const a = await checkTraders({}, 37);
    await checkTraders({}, 200);
    expect(a.rows.length).toBe(w.traders.size);
    for (const t of a.rows) expect(w.deleted.traders.has(t.id)).toBe(false);
    expect(a.rows.some((t) => t.source === null)).toBe(true);
  });

  it('search over name, slug, source display name, handle and profile URL, and platforms', async () => {
    for (const search of ['alpha', 'ALPHA WHALE', 't.me/', 'X.COM', 'signals', '_vip', 'whale-', 'zz-no-match']) {
      await checkTraders({ search }, 37);
    }
    await checkTraders({ sourcePlatforms: 'TELEGRAM' }, 37);
    await checkTraders({ sourcePlatforms: 'X,TELEGRAM', search: 'capital' }, 37);
    await checkTraders({ sourcePlatforms: 'X', search: 'a' }, 200);
  });

  it('searches taken from the data match several rows: name, slug, handle, profile URL, display name parts; mixed case; multi-byte', async () => {
    const cases = traderSearches(w);
    expect(cases.map((c) => c.what)).toEqual(
      expect.arrayContaining(['part of a name', 'part of a slug', 'part of a handle', 'profile URL host', 'part of a display name']),
    );
    expect(cases.filter((c) => c.what.startsWith('multi-byte')).length).toBeGreaterThanOrEqual(4);
    for (const c of cases) {
      expect(c.matches, `${c.what} ${c.search}`).toBeGreaterThanOrEqual(2);
      expect(c.matches, `${c.what} ${c.search}`).toBeLessThan(w.traders.size);
      const wk = await checkTraders({ search: c.search }, c.matches > 10 ? 7 : 1);
      expect(wk.rows.length, `${c.what} ${c.search}`).toBe(c.matches);
      for (const platform of ['TELEGRAM', 'X']) await checkTraders({ search: c.search, sourcePlatforms: platform }, 5);
    }
  });
});

describe.concurrent('GET /v2/assets', () => {
  it('all assets with an active market, limits 37 and 200', async () => {
    const wk = await checkAssets({}, 37);
    await checkAssets({}, 200);
    for (const a of wk.rows) expect(inactiveAssets.has(a.id)).toBe(false);
    const byId = new Map(wk.rows.map((a) => [a.id, a]));
    expect(byId.get(23)?.resolvedAssetClass).toBe('indices');
    expect(byId.get(28)?.resolvedAssetClass).toBe('stocks');
    expect(byId.get(58)?.assetClass).toBe('other');
    expect(byId.get(60)?.resolvedAssetClass).toBe('other');
  });

  it('assetClass lists (indices, stocks, ...), search, assetIds and traderIds intersect', async () => {
    for (const assetClass of [
      'indices',
      'stocks',
      'indices,stocks',
      'crypto',
      'fx,commodities',
      'crypto,stocks,indices,commodities,fx',
      '',
    ]) {
      await checkAssets({ assetClass }, 37);
    }
    await checkAssets({ search: 'coin' }, 37);
    await checkAssets({ search: 'USD', assetClass: 'fx' }, 37);
    await checkAssets({ assetIds: '1,2,19,20,21,22,23,28,58,60,999' }, 37);
    await checkAssets({ traderIds: '1,2' }, 37);
    await checkAssets({ traderIds: '7' }, 37);
    await checkAssets({ traderIds: ids(busyTraders().slice(0, 3)), assetClass: 'crypto,indices', search: 'o' }, 200);
  });

  it('searches taken from the data match several rows: symbol and name parts; mixed case; multi-byte', async () => {
    const cases = assetSearches(w);
    expect(cases.map((c) => c.what)).toEqual(expect.arrayContaining(['part of a symbol', 'part of a name']));
    expect(cases.filter((c) => c.what.startsWith('multi-byte')).length).toBeGreaterThanOrEqual(3);
    for (const c of cases) {
      expect(c.matches, `${c.what} ${c.search}`).toBeGreaterThanOrEqual(2);
      const wk = await checkAssets({ search: c.search }, c.matches > 4 ? 3 : 1);
      expect(wk.rows.length, `${c.what} ${c.search}`).toBe(c.matches);
      await checkAssets({ search: c.search, assetClass: 'crypto,commodities,fx,indices' }, 2);
      await checkAssets({ search: c.search, traderIds: ids([...busyTraders().slice(0, 20), 10_001, 10_002, 10_004]) }, 2);
    }
  });
});

describe.concurrent('meta', () => {
  it('open positions carry no appliedTimeRange; serverTime is close to now', async () => {
    const before = Date.now();
    const p = await page(h, key, '/v2/positions/open', { limit: 1 });
    expect(p.meta.appliedTimeRange).toBeUndefined();
    expect(Math.abs(Date.parse(p.meta.serverTime) - before)).toBeLessThan(60_000);
  });
});

// ---------------------------------------------------------------------------------------------------
// Fold and join edge cases on small data of our own (a second harness): the demo data never has
// two opens in one position, tombstoned opens, re-versioned prices or shared source identities.

describe('fold and join edge cases (own data)', () => {
  let h2: Harness;
  let key2: string;
  const recs: O.TopicRec[] = [];
  const T = Math.floor((Date.now() - 40 * DAY) / 1000) * 1000;
  const at = (hours: number) => new Date(T + hours * 3_600_000).toISOString();
  /** Traders 501..504 carry the general cases; trader 509 the two-opens case checked on its own. */
  const GENERAL = '501,502,503,504';

  beforeAll(async () => {
    h2 = await createHarness();
    recs.push(
      build.source('e1'),
      build.source('e2'),
      build.source('e3'),
      build.source('e3', { version: 2, deleted: true }),
      build.trader(501, { name: 'Edge One', source: { platform: 'TELEGRAM', sourceIdentityId: 'e1' } }),
      build.trader(502, { name: 'Edge Two', source: { platform: 'TELEGRAM', sourceIdentityId: 'e1' } }),
      build.trader(503, { name: 'Edge Three', source: { platform: 'TELEGRAM', sourceIdentityId: 'e2' } }),
      build.trader(500, { name: 'Edge Zero', source: { platform: 'TELEGRAM', sourceIdentityId: 'e2' } }),
      build.trader(500, { name: 'Edge Zero', source: { platform: 'TELEGRAM', sourceIdentityId: 'e2' }, version: 2, deleted: true }),
      build.trader(504, { name: 'Edge Four', source: { platform: 'TELEGRAM', sourceIdentityId: 'e3' } }),
      build.trader(509, { name: 'Edge Nine', source: null }),
      build.asset(601),
      build.asset(602, {
        markets: [
          { quoteSymbol: 'EUR', active: false, preferred: true },
          { quoteSymbol: 'USDC', active: true, preferred: false },
          { quoteSymbol: 'GBP', active: true, preferred: false },
        ],
      }),
      build.asset(603), // no price series
      // Prices of 601: a re-versioned sample and a tombstoned one.
      build.price(601, at(-10), 90),
      build.price(601, at(24), 110),
      build.price(601, at(24), 120, { version: 2 }),
      build.price(601, at(25), 500),
      build.price(601, at(25), 500, { version: 2, deleted: true }),
      build.price(601, at(24 * 7 + 6), 130),
      build.price(601, at(24 * 30 + 24), 140),
      build.price(601, at(24 * 35), 150),
      // 602: forward samples exactly at the tolerance edge and 1 ms past it.
      build.price(602, at(100 + 24 + 1), 50),
      build.price(602, new Date(T + (200 + 24 + 1) * 3_600_000 + 1).toISOString(), 50),
      build.price(602, at(24 * 35), 60),
      // p1: two opens at the same time: the lower id wins.
      build.event(7002, { positionId: 9001, traderId: 501, assetId: 601, direction: 'short', price: 10, timeOfEvent: at(0) }),
      build.event(7001, { positionId: 9001, traderId: 501, assetId: 601, direction: 'long', price: 100, timeOfEvent: at(0) }),
      // p2: open tombstoned, close live -> no position, no events.
      build.event(7003, { positionId: 9002, traderId: 501, assetId: 601, price: 100, timeOfEvent: at(1) }),
      build.event(7004, { positionId: 9002, traderId: 501, assetId: 601, type: 'close', price: 100, timeOfEvent: at(2) }),
      build.event(7003, { positionId: 9002, traderId: 501, assetId: 601, price: 100, timeOfEvent: at(1), version: 2, deleted: true }),
      // p3: close tombstoned -> open again.
      build.event(7005, { positionId: 9003, traderId: 502, assetId: 601, direction: 'short', price: 80, timeOfEvent: at(3) }),
      build.event(7006, { positionId: 9003, traderId: 502, assetId: 601, type: 'close', price: 90, timeOfEvent: at(5) }),
      build.event(7006, {
        positionId: 9003,
        traderId: 502,
        assetId: 601,
        type: 'close',
        price: 90,
        timeOfEvent: at(5),
        version: 2,
        deleted: true,
      }),
      // p4, p5: tolerance edges on 602 (quote: first active market).
      build.event(7007, { positionId: 9004, traderId: 503, assetId: 602, price: 40, timeOfEvent: at(100) }),
      build.event(7008, { positionId: 9005, traderId: 503, assetId: 602, price: 40, timeOfEvent: at(200) }),
      // p6: asset without prices -> null windows; p7: too young.
      build.event(7009, { positionId: 9006, traderId: 504, assetId: 603, price: 5, timeOfEvent: at(10) }),
      build.event(7010, {
        positionId: 9007,
        traderId: 504,
        assetId: 601,
        price: 5,
        timeOfEvent: new Date(Date.now() - 3_600_000).toISOString(),
      }),
      // p9 (trader 509): two opens, the earliest without a price -> openPrice null.
      build.event(7101, { positionId: 9009, traderId: 509, assetId: 601, price: null, timeOfEvent: at(0) }),
      build.event(7102, { positionId: 9009, traderId: 509, assetId: 601, type: 'open', price: 100, timeOfEvent: at(1) }),
      // Messages: e1 is shared by 501 and 502 (501 owns), e2 by deleted 500 and 503 (503 owns), e3's identity is deleted.
      build.message('e-9', 'e1', at(3)),
      build.message('e-10', 'e1', at(3)),
      build.message('e-1', 'e2', at(4)),
      build.message('e-2', 'e3', at(5)),
      build.message('e-3', 'nobody', at(6)),
    );
    await h2.given(recs);
    key2 = await h2.key();
  }, 60_000);
  afterAll(async () => {
    await h2?.close();
  });

  const all = { startTime: '2000-01-01T00:00:00Z' };
  async function both(path: string, params: Params) {
    const wk = await walk(h2, key2, path, params, 3);
    return { wk, serverTime: Date.parse(wk.first.serverTime) };
  }

  it('events, positions, open positions, messages and traders equal the oracle', async () => {
    let r = await both('/v2/events', { ...all, traderIds: GENERAL });
    expectSameList('edge events', r.wk.rows, O.events(recs, { traderIds: [501, 502, 503, 504] }));
    expect(r.wk.rows.map((e) => e.id)).not.toContain(7004);
    r = await both('/v2/positions', { ...all, traderIds: GENERAL });
    expectSameList('edge positions', r.wk.rows, O.positions(recs, { traderIds: [501, 502, 503, 504] }, r.serverTime));
    const byId = new Map(r.wk.rows.map((p) => [p.id, p]));
    expect(byId.get(9001)).toMatchObject({ direction: 'long', openPrice: 100 });
    expect(byId.get(9001)!.timeBasedPerformances['1D']).toMatchObject({ window: '1D', status: 'ready' }); // re-versioned sample 120
    expect(byId.get(9001)!.timeBasedPerformances['1D'].returnPercentage).toBeCloseTo(20, 9);
    expect(byId.has(9002)).toBe(false);
    expect(byId.get(9004)!.timeBasedPerformances['1D'].status).toBe('ready');
    expect(byId.get(9005)!.timeBasedPerformances['1D'].status).toBe('missing_forward_price');
    expect(byId.get(9004)!.quoteSymbol).toBe('USDC');
    expect(byId.get(9006)!.timeBasedPerformances).toEqual({ '1D': null, '7D': null, '30D': null });
    expect(byId.get(9007)!.timeBasedPerformances['1D'].status).toBe('too_young');
    r = await both('/v2/positions/open', { traderIds: GENERAL });
    expectSameList('edge open positions', r.wk.rows, O.openPositions(recs, { traderIds: [501, 502, 503, 504] }, r.serverTime));
    expect(r.wk.rows.map((p) => p.id)).toContain(9003);
    r = await both('/v2/messages', all);
    expectSameList('edge messages', r.wk.rows, O.messages(recs, {}));
    expect(r.wk.rows.map((m) => [m.id, m.traderId])).toEqual([
      ['e-2', 504],
      ['e-1', 503],
      ['e-9', 501],
      ['e-10', 501],
    ]);
    r = await both('/v2/traders', {});
    expectSameList('edge traders', r.wk.rows, O.traders(recs, {}));
    expect(r.wk.rows.find((t) => t.id === 504)!.source).toBeNull();
    r = await both('/v2/traders', { search: 'e3' });
    expectSameList('edge traders search e3', r.wk.rows, O.traders(recs, { search: 'e3' }));
  });

  it('the earliest live open gives openPrice even when it is null (two opens, the first without a price)', async () => {
    const r = await both('/v2/positions', { ...all, traderIds: '509' });
    expectSameList('position 9009', r.wk.rows, O.positions(recs, { traderIds: [509] }, r.serverTime));
    const open = await both('/v2/positions/open', { traderIds: '509' });
    expectSameList('open position 9009', open.wk.rows, O.openPositions(recs, { traderIds: [509] }, open.serverTime));
  });
});
