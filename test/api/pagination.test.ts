// Keyset pagination as a property: for seeded random filters and limits (1..200), walking every
// page of /v2/events, /v2/positions, /v2/positions/open, /v2/messages, /v2/traders and /v2/assets
// gives each row of the oracle's answer exactly once, in order. Then the same with tombstones
// appended mid-walk (rows ahead and rows already returned), and the cursor errors.
//
// The data set is our own, built to make keyset cursors work hard: many rows share the same sort
// time (events, positions, messages), ids are not monotonic in time, message ids sort as strings
// ('m-9' > 'm-10'), trader names and asset symbols repeat and include upper/lower case and
// multi-byte UTF-8 (ClickHouse orders strings byte-wise).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import { type Ep, expectedFor, PATH } from '../oracle/lists.ts';
import * as O from '../oracle/oracle.ts';
import { type Params, page, prng, type Rng, url, walk } from '../oracle/walk.ts';

const SEC = 1000;
const HOUR = 3_600_000;
const DAY = 24 * HOUR;

// ---------------------------------------------------------------------------------------------------
// Data

const NOW = Math.floor(Date.now() / SEC) * SEC;
const BASE = NOW - 20 * DAY;
/** 30 shared instants (some with milliseconds): rows pile up on the same sort time. */
const INSTANTS = Array.from({ length: 30 }, (_, i) => BASE + i * 13 * HOUR + (i % 4 === 1 ? 123 : 0));
const iso = (t: number) => new Date(t).toISOString();
const TRADER_IDS = Array.from({ length: 36 }, (_, i) => i + 1);
const ASSET_IDS = Array.from({ length: 20 }, (_, i) => i + 1);

function makeData(): O.TopicRec[] {
  const r = prng(20_240_611);
  const recs: O.TopicRec[] = [];
  const names = ['Alpha', 'alpha', 'ALPHA', 'Alpha Beta', 'Beta', 'Zed', 'zed', 'Ärger', 'Émile', '😀 Smile', 'Öl Desk', 'beta'];
  const platformOf = (id: number) => (id % 3 === 0 ? 'X' : 'TELEGRAM');
  for (const id of TRADER_IDS) {
    const platform = platformOf(id);
    if (id !== 8) {
      recs.push(
        build.source(`s${id}`, {
          platform,
          displayName: id % 5 === 0 ? null : `Desk ${id}`,
          handle: id % 7 === 0 ? null : `h${id}_calls`,
          profileUrl: platform === 'X' ? `https://x.com/h${id}` : `https://t.me/h${id}`,
        }),
      );
    }
    if (id === 9) recs.push(build.source('s9', { platform, version: 2, deleted: true }));
    const source =
      id === 5 || id === 6
        ? null
        : id === 30
          ? { platform: platformOf(1), sourceIdentityId: 's1' }
          : { platform, sourceIdentityId: `s${id}` };
    recs.push(build.trader(id, { name: r.pick(names), slug: id % 11 === 0 ? null : `slug-${id}`, source }));
  }
  for (const id of [33, 34, 35, 36]) recs.push(build.trader(id, { name: 'Gone', version: 2, deleted: true, source: null }));

  const symbols = ['AAA', 'AAA', 'aaa', 'ÄÄÄ', 'BBB', 'CCC', 'CCC', 'Z', 'zz', '€UR'];
  const classes: (string | null)[] = ['crypto', 'equities', 'equities', 'commodities', 'fx', 'other', null, 'bonds'];
  for (const id of ASSET_IDS) {
    const assetClass = r.pick(classes);
    const category = assetClass === 'equities' ? r.pick(['Indices', 'INDICES', 'Technology']) : r.pick([null, 'Indices', 'Misc']);
    let markets: any[] = [{ quoteSymbol: 'USD', active: true, preferred: true }];
    if (id === 17 || id === 18) markets = [{ quoteSymbol: 'USD', active: false, preferred: true }];
    if (id === 19) markets = [];
    if (id % 4 === 2)
      markets = [
        { quoteSymbol: 'EUR', active: false, preferred: true },
        { quoteSymbol: 'USDT', active: true, preferred: false },
        { quoteSymbol: 'USDC', active: true, preferred: false },
      ];
    recs.push(
      build.asset(id, {
        symbol: r.pick(symbols),
        name: `${r.pick(['Gold', 'Coin', 'Index', 'Ärmel'])} ${id}`,
        assetClass,
        category,
        markets,
      }),
    );
    if (id <= 15) {
      for (let t = BASE - 35 * DAY; t < NOW - HOUR; t += 12 * HOUR)
        recs.push(build.price(id, iso(t), Math.round(100 * (1 + r.next())) / 10));
    }
  }
  recs.push(build.asset(20, { version: 2, deleted: true }));

  // Positions and events. Event ids are a shuffled pool: id order is unrelated to time order.
  const pool = r.subset(
    Array.from({ length: 4000 }, (_, i) => i + 1),
    4000,
  );
  let next = 0;
  const evs: any[] = [];
  for (let pid = 1; pid <= 260; pid++) {
    const traderId = r.pick(TRADER_IDS);
    const assetId = r.pick(ASSET_IDS);
    const direction = r.chance(0.6) ? 'long' : 'short';
    const k = r.int(0, INSTANTS.length - 3);
    const price = r.chance(0.05) ? null : r.chance(0.03) ? 0 : Math.round(1000 * (5 + r.next() * 20)) / 100;
    const common = { positionId: pid, traderId, assetId, direction };
    evs.push(build.event(pool[next++]!, { ...common, type: 'open', price, timeOfEvent: iso(INSTANTS[k]!) }));
    if (r.chance(0.4))
      evs.push(
        build.event(pool[next++]!, {
          ...common,
          type: r.pick(['increase', 'decrease']),
          price: 11,
          timeOfEvent: iso(INSTANTS[r.int(k, k + 1)]!),
        }),
      );
    if (r.chance(0.55))
      evs.push(
        build.event(pool[next++]!, { ...common, type: 'close', price: 12, timeOfEvent: iso(INSTANTS[r.int(k + 1, INSTANTS.length - 1)]!) }),
      );
  }
  recs.push(...evs);
  for (const e of evs) if (r.chance(0.03)) recs.push({ topic: 'trade-events', value: { ...e.value, version: 2, deleted: true } });

  // Messages: shared timestamps, string ids of varying length, some of unassigned sources.
  const used = new Set<string>();
  for (let i = 0; i < 320; i++) {
    let id: string;
    do id = `${r.pick(['m-', 'm-', 'x-', 'M-'])}${r.int(1, r.chance(0.5) ? 99 : 99_999)}`;
    while (used.has(id));
    used.add(id);
    const owner = r.pick([...TRADER_IDS, 101, 102]);
    const sid = owner > 100 ? `orphan${owner}` : `s${owner}`;
    const platform = owner > 100 ? 'X' : r.chance(0.93) ? platformOf(owner) : platformOf(owner + 1);
    const t = r.chance(0.8) ? INSTANTS[r.int(0, INSTANTS.length - 1)]! : NOW - r.int(1, 100) * 6 * HOUR;
    recs.push(
      build.message(id, sid, iso(t), {
        platform,
        attachments: r.chance(0.2) ? [{ type: 'image', url: `https://cdn.example.com/${i}.png` }] : [],
      }),
    );
    if (r.chance(0.03)) recs.push(build.message(id, sid, iso(t), { platform, version: 2, deleted: true }));
  }
  return recs;
}

// ---------------------------------------------------------------------------------------------------
// Endpoints: oracle answer, sort order, key

/** < 0 when row a must come before row b; the contract's order, written independently of the oracle. */
function order(ep: Ep, a: any, b: any): number {
  switch (ep) {
    case 'events':
      return Date.parse(b.timeOfEvent) - Date.parse(a.timeOfEvent) || b.id - a.id;
    case 'positions':
    case 'open':
      return Date.parse(b.openAt) - Date.parse(a.openAt) || b.id - a.id;
    case 'messages':
      return Date.parse(b.source.preview.writtenAt) - Date.parse(a.source.preview.writtenAt) || O.cmpBytes(b.id, a.id);
    case 'traders':
      return O.cmpBytes(a.name, b.name) || a.id - b.id;
    case 'assets':
      return O.cmpBytes(a.symbol, b.symbol) || a.id - b.id;
  }
}

function expectStrictOrder(ep: Ep, rows: any[], label: string): void {
  for (let i = 1; i < rows.length; i++) {
    if (!(order(ep, rows[i - 1], rows[i]) < 0)) {
      throw new Error(`${label}: rows ${i - 1} and ${i} out of order: ${JSON.stringify(rows[i - 1])} then ${JSON.stringify(rows[i])}`);
    }
  }
}

function expectNoDuplicates(rows: any[], label: string): void {
  const seen = new Set<unknown>();
  for (const r of rows) {
    if (seen.has(r.id)) throw new Error(`${label}: row ${JSON.stringify(r.id)} returned twice`);
    seen.add(r.id);
  }
}

const keys = (rows: any[]) => rows.map((r) => r.id);

// ---------------------------------------------------------------------------------------------------
// Random filters

const csv = (xs: readonly (string | number)[]) => xs.join(',');

function randomWindow(r: Rng, q: Params): void {
  const u = r.next();
  if (u < 0.35) return; // default window
  const a = r.pick(INSTANTS);
  const b = r.pick(INSTANTS);
  if (u < 0.75) {
    q.startTime = iso(Math.min(a, b));
    q.endTime = iso(Math.max(a, b));
  } // bounds on tie instants
  else if (u < 0.88) q.startTime = iso(a);
  else q.endTime = iso(a);
}

function randomParams(ep: Ep, r: Rng, recs: O.TopicRec[]): Params {
  const q: Params = {};
  const w = O.buildWorld(recs);
  switch (ep) {
    case 'events':
    case 'positions':
    case 'open':
      if (r.chance(0.4)) q.traderIds = csv(r.subset(TRADER_IDS, 1, 8));
      if (r.chance(0.3)) q.assetIds = csv(r.subset(ASSET_IDS, 1, 6));
      if (r.chance(0.3)) q.directions = csv(r.subset(['long', 'short']));
      if (ep === 'events' && r.chance(0.3)) q.types = csv(r.subset(['open', 'close', 'increase', 'decrease']));
      if (ep === 'positions' && r.chance(0.2))
        q.positionIds = csv(
          r.subset(
            Array.from({ length: 270 }, (_, i) => i + 1),
            1,
            60,
          ),
        );
      else if (ep !== 'open') randomWindow(r, q);
      break;
    case 'messages':
      if (r.chance(0.4)) q.traderIds = csv(r.subset(TRADER_IDS, 1, 8));
      if (r.chance(0.2)) q.ids = csv(r.subset([...w.messages.keys(), ...w.deleted.messages, 'nope'], 1, 80));
      if (r.chance(0.3)) q.sourcePlatforms = csv(r.subset(['TELEGRAM', 'X']));
      if (q.ids === undefined || r.chance(0.3)) randomWindow(r, q);
      break;
    case 'traders':
      if (r.chance(0.5))
        q.search = r.pick(['a', 'AL', 'zed', 'beta', 'desk 1', 'H2', 't.me', 'X.COM/', 'slug-1', '😀', 'ärger', 'no-such']);
      if (r.chance(0.3)) q.sourcePlatforms = csv(r.subset(['TELEGRAM', 'X']));
      break;
    case 'assets':
      if (r.chance(0.4)) q.assetClass = csv(r.subset(['crypto', 'stocks', 'indices', 'commodities', 'fx']));
      if (r.chance(0.3)) q.search = r.pick(['a', 'AAA', 'coin', 'ärmel', '€', 'gold 1']);
      if (r.chance(0.3)) q.assetIds = csv(r.subset(ASSET_IDS, 1, 10));
      if (r.chance(0.3)) q.traderIds = csv(r.subset(TRADER_IDS, 1, 6));
      break;
  }
  return q;
}

function randomLimit(r: Rng): number {
  const u = r.next();
  return u < 0.3 ? r.int(1, 5) : u < 0.7 ? r.int(6, 40) : r.int(41, 200);
}

// ---------------------------------------------------------------------------------------------------

let h: Harness;
let key: string;
let records: O.TopicRec[];

beforeAll(async () => {
  h = await createHarness();
  records = makeData();
  await h.given(records);
  key = await h.key();
});
afterAll(async () => {
  await h?.close();
});

describe('walk-all-pages property (seeded)', () => {
  const EPS: Ep[] = ['events', 'positions', 'open', 'messages', 'traders', 'assets'];

  it('the data set piles rows onto shared sort keys', () => {
    const w = O.buildWorld(records);
    const evTimes = new Set([...w.events.values()].map((e) => e.timeOfEvent));
    expect(w.events.size).toBeGreaterThan(400);
    expect(evTimes.size).toBeLessThanOrEqual(INSTANTS.length);
    expect(O.traders(records).length).toBeGreaterThan(25);
    expect(new Set(O.traders(records).map((t) => t.name)).size).toBeLessThan(15);
    expect(O.messages(records, {}).length).toBeGreaterThan(200);
  });

  for (const ep of EPS) {
    it(`${PATH[ep]}: every row exactly once, in order, for random filters and limits`, async () => {
      const r = prng(0xc0ffee + EPS.indexOf(ep));
      let walks = 0;
      let rowsSeen = 0;
      let nonEmpty = 0;
      let multiPage = 0;
      for (let i = 0; i < 14; i++) {
        const q = randomParams(ep, r, records);
        // Mostly limits that give several pages, otherwise any limit in 1..200; at most ~80 pages a walk.
        const probe = expectedFor(ep, records, q, Date.now()).length;
        let limit = probe > 1 && r.chance(0.6) ? r.int(1, Math.min(200, Math.ceil(probe / 2))) : randomLimit(r);
        if (probe / limit > 80) limit = Math.ceil(probe / 80);
        const varying = r.chance(0.4);
        const limitOf = varying ? (p: number) => (p === 0 ? limit : Math.max(1, Math.min(200, limit + ((p * 7919) % 5) - 2))) : limit;
        const wk = await walk(h, key, PATH[ep], q, limitOf, 400);
        const serverTime = Date.parse(wk.first.serverTime);
        const label = `${url(PATH[ep], q)} limit ${limit}${varying ? ' (varying)' : ''}`;
        expectNoDuplicates(wk.rows, label);
        expectStrictOrder(ep, wk.rows, label);
        const expected = expectedFor(ep, records, q, serverTime);
        expect(keys(wk.rows), label).toEqual(keys(expected));
        if (ep === 'positions') {
          // Statuses resolve against the serverTime of each page.
          expected.forEach((p, k) => {
            if (wk.rowTimes[k] !== serverTime)
              p.timeBasedPerformances = O.timeBasedPerformances(records, { ...p, openAt: Date.parse(p.openAt) }, wk.rowTimes[k]!);
          });
        }
        expect(O.diff(wk.rows, expected), label).toBeNull();
        walks++;
        rowsSeen += wk.rows.length;
        // A walk that comes back empty only proves something when the oracle says so too.
        if (expected.length > 0) expect(wk.rows.length, `${label}: the oracle expects ${expected.length} rows`).toBeGreaterThan(0);
        if (wk.rows.length > 0) nonEmpty++;
        if (wk.pages > 1) multiPage++;
      }
      expect(walks).toBe(14);
      expect(rowsSeen).toBeGreaterThan(0);
      // Most walks return rows (a read that answered nothing would fail here), half of them span pages.
      expect(nonEmpty, `${PATH[ep]}: walks that returned rows`).toBeGreaterThanOrEqual(11);
      expect(multiPage, `${PATH[ep]}: walks of more than one page`).toBeGreaterThanOrEqual(7);
    });
  }
});

// ---------------------------------------------------------------------------------------------------
// Deletion mid-walk

/** The latest live record of an entity, from the oracle's world. */
function tomb(topic: O.TopicRec['topic'], value: any): O.TopicRec {
  return { topic, value: { ...value, version: value.version + 1, deleted: true } };
}

interface DeletionCase {
  ep: Ep;
  q: Params;
  limit: number;
  pagesBefore: number;
  /** Tombstones for the chosen rows: `ahead` not yet returned, `done` already returned. */
  tombstones: (w: O.World, ahead: any[], done: any[]) => O.TopicRec[];
}

async function deletionWalk(c: DeletionCase) {
  const label = `${url(PATH[c.ep], c.q)} limit ${c.limit}`;
  const first = await page(h, key, PATH[c.ep], { ...c.q, limit: c.limit });
  const serverTime = Date.parse(first.meta.serverTime);
  const before = expectedFor(c.ep, records, c.q, serverTime);
  const done: any[] = [...first.results];
  let cursor = first.meta.nextCursor as string | null;
  for (let p = 1; p < c.pagesBefore && cursor; p++) {
    const pg = await page(h, key, PATH[c.ep], { ...c.q, limit: c.limit, cursor });
    done.push(...pg.results);
    cursor = pg.meta.nextCursor;
  }
  expect(cursor, `${label}: the walk must still have pages ahead`).not.toBeNull();
  expect(keys(done)).toEqual(keys(before).slice(0, done.length));
  const ahead = before.slice(done.length);

  const tombs = c.tombstones(O.buildWorld(records), ahead, done);
  expect(tombs.length).toBeGreaterThan(0);
  await h.given(tombs);
  records = [...records, ...tombs];
  const after = new Set(keys(expectedFor(c.ep, records, c.q, serverTime)));

  const rest: any[] = [];
  while (cursor) {
    const pg = await page(h, key, PATH[c.ep], { ...c.q, limit: c.limit, cursor });
    rest.push(...pg.results);
    cursor = pg.meta.nextCursor;
  }
  const all = [...done, ...rest];
  expectNoDuplicates(all, label);
  expectStrictOrder(c.ep, all, label);
  const goneAhead = ahead.filter((r) => !after.has(r.id));
  expect(goneAhead.length, `${label}: some rows ahead must have been deleted`).toBeGreaterThan(0);
  const doneKeys = new Set(keys(done));
  expect(keys(all), label).toEqual(keys(before).filter((k) => doneKeys.has(k) || after.has(k)));
  expect(keys(rest), label).toEqual(keys(ahead.filter((r) => after.has(r.id))));
  return { done, rest, goneAhead };
}

describe('deletion mid-walk: tombstones ahead of and behind the cursor', () => {
  const window = { startTime: iso(INSTANTS[0]!), endTime: iso(INSTANTS.at(-1)!) };

  it('/v2/events: deleted events (incl. the cursor row and an open, which takes its position along)', async () => {
    await deletionWalk({
      ep: 'events',
      q: window,
      limit: 9,
      pagesBefore: 3,
      tombstones: (w, ahead, done) =>
        [done.at(-1), done[0], ahead[0], ahead[5], ahead.find((e) => e.type === 'open'), ahead.at(-1)]
          .filter(Boolean)
          .map((e) => tomb('trade-events', w.events.get(e.id))),
    });
  });

  it('/v2/positions: positions whose events are all tombstoned', async () => {
    await deletionWalk({
      ep: 'positions',
      q: { ...window, directions: 'long,short' },
      limit: 6,
      pagesBefore: 4,
      tombstones: (w, ahead, done) => {
        const pids = new Set([done.at(-1).id, done[1].id, ahead[0].id, ahead[3].id, ahead.at(-1).id]);
        return [...w.events.values()].filter((e) => pids.has(e.positionId)).map((e) => tomb('trade-events', e));
      },
    });
  });

  it('/v2/positions/open: deleted traders take their open positions along', async () => {
    await deletionWalk({
      ep: 'open',
      q: {},
      limit: 4,
      pagesBefore: 2,
      tombstones: (w, ahead, done) =>
        [...new Set([done.at(-1).traderId, ahead[2].traderId, ahead.at(-1).traderId])].map((id) => tomb('traders', w.traders.get(id))),
    });
  });

  it('/v2/messages: deleted messages', async () => {
    await deletionWalk({
      ep: 'messages',
      q: {},
      limit: 11,
      pagesBefore: 2,
      tombstones: (w, ahead, done) =>
        [done.at(-1), done[3], ahead[0], ahead[1], ahead[7], ahead.at(-1)].map((m) => tomb('messages', w.messages.get(m.id))),
    });
  });

  it('/v2/traders: deleted traders', async () => {
    await deletionWalk({
      ep: 'traders',
      q: {},
      limit: 5,
      pagesBefore: 2,
      tombstones: (w, ahead, done) =>
        [done.at(-1), done[0], ahead[0], ahead[4], ahead.at(-1)].map((t) => tomb('traders', w.traders.get(t.id))),
    });
  });

  it('/v2/assets: a deleted asset and one whose markets all became inactive', async () => {
    await deletionWalk({
      ep: 'assets',
      q: {},
      limit: 3,
      pagesBefore: 2,
      tombstones: (w, ahead, done) => {
        const inactive = w.assets.get(ahead[1].id);
        return [
          tomb('assets', w.assets.get(done.at(-1).id)),
          tomb('assets', w.assets.get(ahead[0].id)),
          {
            topic: 'assets',
            value: { ...inactive, version: inactive.version + 1, markets: inactive.markets.map((m: any) => ({ ...m, active: false })) },
          },
        ];
      },
    });
  });
});

// ---------------------------------------------------------------------------------------------------
// Cursor errors

describe('cursor errors', () => {
  const changed: [Ep, Params, Params][] = [
    ['events', { traderIds: '1,2,3,4,10,11,12' }, { traderIds: '1,2,3' }],
    ['events', { startTime: iso(INSTANTS[0]!) }, { startTime: iso(INSTANTS[1]!) }],
    ['positions', { directions: 'long' }, { directions: 'short' }],
    ['open', {}, { assetIds: '1' }],
    ['messages', { sourcePlatforms: 'TELEGRAM' }, { sourcePlatforms: 'X' }],
    ['traders', { search: 'a' }, { search: 'al' }],
    ['assets', {}, { assetClass: 'crypto' }],
  ];
  for (const [ep, q1, q2] of changed) {
    it(`${PATH[ep]}: a cursor used with other filters -> 400 INVALID_CURSOR`, async () => {
      const first = await page(h, key, PATH[ep], { ...q1, limit: 1 });
      expect(first.meta.nextCursor).not.toBeNull();
      const res = await h.get(url(PATH[ep], { ...q2, limit: 1, cursor: first.meta.nextCursor }), key);
      expect(res.status).toBe(400);
      expect(res.body.success).toBe(false);
      expect(res.body.error.code).toBe('INVALID_CURSOR');
      expect(typeof res.body.requestId).toBe('string');
      // The same cursor with the same filters still works (only `limit` changed).
      const ok = await h.get(url(PATH[ep], { ...q1, limit: 2, cursor: first.meta.nextCursor }), key);
      expect(ok.status).toBe(200);
    });
  }

  it('a cursor of another read -> 400 INVALID_CURSOR', async () => {
    const ev = await page(h, key, '/v2/events', { limit: 1 });
    const res = await h.get(url('/v2/positions', { limit: 1, cursor: ev.meta.nextCursor }), key);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('INVALID_CURSOR');
  });

  const garbage = [
    'garbage!!',
    'not-a-cursor',
    '%%%',
    'eyJrIjpbMSwyXX0', // base64url of {"k":[1,2]} (no fingerprint)
    Buffer.from('hello world').toString('base64url'),
    Buffer.from(JSON.stringify({ k: 'x', f: 'abc' })).toString('base64url'),
    Buffer.from(JSON.stringify({ k: [1, 2], w: [1], f: 'abc' })).toString('base64url'),
  ];
  for (const ep of ['events', 'positions', 'open', 'messages', 'traders', 'assets'] as Ep[]) {
    it(`${PATH[ep]}: a garbage cursor -> 400 INVALID_CURSOR "Malformed cursor"`, async () => {
      for (const cursor of garbage) {
        const res = await h.get(url(PATH[ep], { cursor }), key);
        expect(res.status, cursor).toBe(400);
        expect(res.body.success).toBe(false);
        expect(res.body.error.code, cursor).toBe('INVALID_CURSOR');
        expect(res.body.error.message, cursor).toBe('Malformed cursor');
      }
    });
  }
});
