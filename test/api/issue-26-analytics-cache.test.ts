import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { cachedAndFresh } from '../helpers/cached-and-fresh.ts';
import { build, createHarness, type Harness, type TopicRecord } from '../helpers/harness.ts';
import { prng, type Rng } from '../helpers/prng.ts';
import { specStart } from '../helpers/spec-clock.ts';

/**
 * Issue 26 item 2: the analytics reads (rankings, trader stats, asset stats, activity summaries,
 * trader activity) are served from the read cache, exactly: a repeated question whose dependencies
 * did not change costs no query, and a cached answer never differs from what a fresh read gives at
 * the request's serverTime. The server's clock is injected; each case runs two apps on one store
 * with one clock and one cursor key: one with the read cache and the harness's change log, one
 * without (the fresh read, whose answer is the expected one). Around each instant at which the
 * clock changes an answer (from the contract: a future-dated row entering a range that ends at
 * serverTime, the oldest row leaving the default 7 days or the account's history window, a `ready`
 * window coming of age at openAt + window, `windowEvaluability` turning `full` at endTime + window,
 * a new year moving the rankings' default start, the hourly default start moving each hour, the
 * 169th bucket), the cached app serves the entry one ms before it and reads again at it.
 */

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
/** A whole minute near today, so that every instant below is exact. */
const T0 = specStart();
const iso = (ms: number) => new Date(ms).toISOString();
const hourOf = (t: number) => Math.floor(t / HOUR) * HOUR;

interface Answer {
  status: number;
  body: any;
  /** The x-cache header: `hit` when a cached answer was served. */
  cache?: unknown;
}
interface Pair {
  clock: { now: number };
  /** The cached app's answer, whether it ran a query of the read, and the fresh app's answer to the same request. */
  read(url: string, key: string): Promise<{ body: any; status: number; cache?: unknown; queried: boolean; fresh: Answer }>;
  close(): Promise<void>;
}

/** Both apps on the harness's store, the cached one reading at the harness's change log. */
async function pair(h: Harness, clock: { now: number }): Promise<Pair> {
  const { cached, fresh: plain, close } = await cachedAndFresh(h, clock);
  const get = async (app: FastifyInstance, url: string, key: string): Promise<Answer> => {
    const res = await app.inject({ method: 'GET', url, headers: { 'x-api-key': key, 'x-request-id': 'same-request' } });
    return { status: res.statusCode, body: res.json(), cache: res.headers['x-cache'] };
  };
  return {
    clock,
    async read(url, key) {
      const spy = vi.spyOn(h.store, 'query');
      const a = await get(cached, url, key);
      // Authentication queries the keys table; only the read's own queries count.
      const queried = spy.mock.calls.some(([sql]) => !String(sql).includes('api_keys'));
      spy.mockRestore();
      return { ...a, queried, fresh: await get(plain, url, key) };
    },
    close,
  };
}

/** Reads `url` at `at` and checks the cached app's answer against the fresh one; returns it. */
async function at(
  p: Pair,
  time: number,
  url: string,
  key: string,
  expected: { queried?: boolean; cached?: boolean; status?: number } = {},
) {
  p.clock.now = time;
  const r = await p.read(url, key);
  expect(r.status, `${url} at ${iso(time)}: ${JSON.stringify(r.body)}`).toBe(r.fresh.status);
  expect(r.body, `${url} at ${iso(time)}`).toEqual(r.fresh.body);
  expect(r.status).toBe(expected.status ?? 200);
  if (expected.queried !== undefined) expect(r.queried, `${url} at ${iso(time)}: queried`).toBe(expected.queried);
  if (expected.cached !== undefined) expect(r.cache === 'hit', `${url} at ${iso(time)}: served from the cache`).toBe(expected.cached);
  return r.body;
}

describe('analytics reads at the clock boundaries (injected clock)', () => {
  let h: Harness;
  let key: string;
  /** An account whose history window is 30 days. */
  let short: string;
  const clock = { now: T0 };
  const HISTORY_DAYS = 30;

  // Positions (open events) and the instants they make:
  const P1 = T0 - DAY + 7 * MIN; // trader 1, asset 1: its 1D window is `ready` (a forward price at T0 + 20 min) and comes of age at T0 + 7 min
  const RIPENS = P1 + DAY;
  const P2 = T0 - 3 * DAY; // trader 1, asset 1: ready long ago
  const P3 = T0 - 20 * DAY; // trader 2, asset 2
  const P4 = T0 - HISTORY_DAYS * DAY + 40 * MIN; // trader 2, asset 1: leaves the 30-day history window at T0 + 40 min + 1 ms
  const P4_LEAVES = P4 + HISTORY_DAYS * DAY + 1;
  const FUTURE = T0 + 5 * MIN; // trader 1, asset 2: opened after T0, enters ranges that end at serverTime then
  const M_OLD = T0 - 7 * DAY + 30 * MIN; // a message that leaves the default 7 days at T0 + 30 min + 1 ms
  const M_OLD_LEAVES = M_OLD + 7 * DAY + 1;

  beforeAll(async () => {
    h = await createHarness({ clock: () => clock.now });
    await h.given([
      build.source('src-1'),
      build.source('src-2'),
      build.trader(1),
      build.trader(2),
      build.asset(1),
      build.asset(2),
      build.price(1, iso(T0 - 40 * DAY), 90),
      build.price(1, iso(P2 + DAY + 5 * MIN), 105),
      build.price(1, iso(P4 + DAY + MIN), 95),
      build.price(1, iso(T0 + 20 * MIN), 110), // the forward price of P1's 1D window, stored before it comes of age
      build.price(2, iso(T0 - 40 * DAY), 50),
      build.price(2, iso(P3 + DAY + MIN), 45),
      build.event(1, { traderId: 1, assetId: 1, price: 100, timeOfEvent: iso(P1) }),
      build.event(2, { traderId: 1, assetId: 1, price: 100, timeOfEvent: iso(P2) }),
      build.event(3, { traderId: 2, assetId: 2, price: 50, direction: 'short', timeOfEvent: iso(P3) }),
      build.event(4, { traderId: 2, assetId: 1, price: 100, timeOfEvent: iso(P4) }),
      build.event(5, { traderId: 1, assetId: 2, price: 50, timeOfEvent: iso(FUTURE) }),
      build.message('m-old', 'src-2', iso(M_OLD)),
      build.message('m-1', 'src-1', iso(T0 - HOUR)),
    ]);
    key = await h.key();
    short = await h.key({ account: { id: 'thirty-days', historyWindowDays: HISTORY_DAYS } });
  });
  afterAll(async () => {
    await h?.close();
  });

  const performance1D = (body: any, traderId: number) =>
    body.data.results.find((r: any) => r.traderId === traderId).summary.timeBasedPerformances['1D'].coverage;

  it('trader stats: a repeat costs no query; a `ready` window is scored from the instant it comes of age', async () => {
    const p = await pair(h, clock);
    try {
      const url = '/v2/traders/stats?traderIds=1,2';
      const first = await at(p, T0, url, key, { queried: true });
      expect(performance1D(first, 1)).toMatchObject({ sampledPositionsCount: 3, scoredPositionsCount: 1 });
      await at(p, T0 + 1, url, key, { queried: false });
      const before = await at(p, RIPENS - 1, url, key, { queried: false });
      expect(performance1D(before, 1).scoredPositionsCount).toBe(1);
      const after = await at(p, RIPENS, url, key, { queried: true });
      expect(performance1D(after, 1).scoredPositionsCount).toBe(2);
      await at(p, RIPENS + 1, url, key, { queried: false });
    } finally {
      await p.close();
    }
  });

  it('trader stats under a history window: each answer has its own appliedTimeRange; the oldest position leaving ends the entry', async () => {
    const p = await pair(h, clock);
    try {
      const url = '/v2/traders/stats?traderIds=2,1';
      await at(p, P4_LEAVES - 5 * MIN, url, short, { queried: true });
      const before = await at(p, P4_LEAVES - 1, url, short, { queried: false });
      expect(before.data.meta.appliedTimeRange).toEqual({ startTime: iso(P4_LEAVES - 1 - HISTORY_DAYS * DAY), endTime: null });
      expect(before.data.results.map((r: any) => r.traderId)).toEqual([2, 1]);
      expect(before.data.results[0].summary.positionCount).toBe(2);
      const after = await at(p, P4_LEAVES, url, short, { queried: true });
      expect(after.data.results[0].summary.positionCount).toBe(1);
    } finally {
      await p.close();
    }
  });

  it('asset stats: a repeat costs no query; under a history window the oldest position leaving ends the entry', async () => {
    const p = await pair(h, clock);
    try {
      const url = '/v2/assets/stats?assetIds=1,2,99';
      const first = await at(p, T0, url, key, { queried: true });
      expect(first.data.meta.missingAssetIds).toEqual([99]);
      await at(p, T0 + HOUR, url, key, {});
      await at(p, T0 + HOUR + 9 * MIN, url, key, { queried: false }); // no clock in this answer: only MAX_TTL_MS ends it

      await at(p, P4_LEAVES - 5 * MIN, url, short, { queried: true });
      const before = await at(p, P4_LEAVES - 1, url, short, { queried: false });
      expect(before.data.filtersApplied.appliedTimeRange.startTime).toBe(iso(P4_LEAVES - 1 - HISTORY_DAYS * DAY));
      expect(before.data.results[0].summary.marketPositioning.longCount).toBe(3);
      const after = await at(p, P4_LEAVES, url, short, { queried: true });
      expect(after.data.results[0].summary.marketPositioning.longCount).toBe(2);
    } finally {
      await p.close();
    }
  });

  it('rankings by activity: a future-dated position and event enter the default range when the clock reaches them', async () => {
    const p = await pair(h, clock);
    try {
      for (const metric of ['event_count', 'position_count']) {
        const url = `/v2/traders/rankings?metric=${metric}`;
        // The first answer may be made of aggregates kept since another metric's (performanceByTrader, keptGroups).
        const first = await at(p, T0, url, key);
        const before = await at(p, FUTURE - 1, url, key, { queried: false });
        expect(before.data.filtersApplied.appliedTimeRange.endTime).toBe(iso(FUTURE - 1));
        // Read again at the instant (the second metric's from the aggregates the first read again there).
        const after = await at(p, FUTURE, url, key, { queried: metric === 'event_count' ? true : undefined });
        const one = (b: any) => b.data.results.find((r: any) => r.traderId === 1);
        expect(one(after).eventCount).toBe(one(first).eventCount + 1);
        expect(one(after).positionCount).toBe(one(first).positionCount + 1);
      }
    } finally {
      await p.close();
    }
  });

  it('rankings by performance: a window coming of age, then windowEvaluability turning full at endTime + window; a 422 is never cached', async () => {
    const p = await pair(h, clock);
    try {
      const end = T0 - HOUR;
      const url = `/v2/traders/rankings?metric=win_rate&timeBasedPerformanceWindow=1D&minPositions=0&startTime=${iso(T0 - 25 * DAY)}&endTime=${iso(end)}`;
      const first = await at(p, T0, url, key);
      expect(first.data.filtersApplied.windowEvaluability).toBe('partial');
      const before = await at(p, RIPENS - 1, url, key, { queried: false });
      const after = await at(p, RIPENS, url, key, { queried: true });
      const scored = (b: any) => b.data.results.find((r: any) => r.traderId === 1).timeBasedPerformance.positionsCount;
      expect(scored(after)).toBe(scored(before) + 1);

      const full = end + DAY;
      await at(p, full - 5 * MIN, url, key, {});
      const partial = await at(p, full - 1, url, key, { queried: false });
      expect(partial.data.filtersApplied.windowEvaluability).toBe('partial');
      // The entry ends there; the figures, which the clock did not change, may come from kept aggregates.
      const now = await at(p, full, url, key);
      expect(now.data.filtersApplied.windowEvaluability).toBe('full');

      // No position of the sample can have reached 30 days: PERFORMANCE_WINDOW_NOT_ELAPSED (its alternatives depend on serverTime), each time afresh.
      const refused = `/v2/traders/rankings?metric=avg_return&timeBasedPerformanceWindow=30D&startTime=${iso(T0 - 2 * DAY)}`;
      const e1 = await at(p, T0, refused, key, { status: 422 });
      expect(e1.error.code).toBe('PERFORMANCE_WINDOW_NOT_ELAPSED');
      const e2 = await at(p, T0 + 1, refused, key, { status: 422 });
      expect(e2.error.details.alternatives).not.toEqual(e1.error.details.alternatives);
    } finally {
      await p.close();
    }
  });

  it('rankings under a history window: the oldest position and event leaving the sample end the entry', async () => {
    const p = await pair(h, clock);
    try {
      const url = `/v2/traders/rankings?metric=event_count&startTime=${iso(T0 - 60 * DAY)}`;
      await at(p, P4_LEAVES - 5 * MIN, url, short, { queried: true });
      const before = await at(p, P4_LEAVES - 1, url, short, { queried: false });
      expect(before.data.filtersApplied.appliedTimeRange.startTime).toBe(iso(T0 - 60 * DAY)); // the bounds echoed are not clamped
      const after = await at(p, P4_LEAVES, url, short, { queried: true });
      const two = (b: any) => b.data.results.find((r: any) => r.traderId === 2);
      expect(two(after).eventCount).toBe(two(before).eventCount - 1);
    } finally {
      await p.close();
    }
  });

  it('rankings: the default start (1 January of the end year) moves at the new year', async () => {
    const newYear = Date.UTC(new Date(T0 + DAY).getUTCFullYear() + 1, 0, 1);
    const p = await pair(h, clock);
    try {
      const url = '/v2/traders/rankings';
      await at(p, newYear - 5 * MIN, url, key);
      const before = await at(p, newYear - 1, url, key, { queried: false });
      expect(before.data.results.length).toBeGreaterThan(0);
      const after = await at(p, newYear, url, key, { queried: true });
      expect(after.data.filtersApplied.appliedTimeRange).toEqual({ startTime: iso(newYear), endTime: iso(newYear) });
      expect(after.data.results).toEqual([]);
    } finally {
      await p.close();
    }
  });

  it('activity summaries (default 7 days): a future-dated event enters, the oldest message leaves', async () => {
    const p = await pair(h, clock);
    try {
      for (const url of ['/v2/activity-summaries', '/v2/activity-summaries?groupBy=none&interval=week']) {
        // The first answer may be made of aggregates kept since another metric's (performanceByTrader, keptGroups).
        const first = await at(p, T0, url, key);
        const before = await at(p, FUTURE - 1, url, key, { queried: false });
        expect(before.data.filtersApplied.appliedTimeRange).toEqual({ startTime: iso(FUTURE - 1 - 7 * DAY), endTime: iso(FUTURE - 1) });
        // Ended (the second summary may be made from what the first read at this data version: no query of its own).
        const entered = await at(p, FUTURE, url, key, { cached: false });
        expect(entered.data.meta.totalEvents).toBe(first.data.meta.totalEvents + 1);

        await at(p, M_OLD_LEAVES - 5 * MIN, url, key, {});
        const kept = await at(p, M_OLD_LEAVES - 1, url, key, { queried: false });
        const left = await at(p, M_OLD_LEAVES, url, key, { cached: false });
        expect(left.data.meta.totalMessages).toBe(kept.data.meta.totalMessages - 1);
      }
    } finally {
      await p.close();
    }
  });

  it('activity summaries by the hour: the default start moves at each whole hour; the 169th bucket is a 422, never cached', async () => {
    const p = await pair(h, clock);
    try {
      const S = T0 + 2 * HOUR; // after every future-dated row
      const next = hourOf(S) + HOUR;
      const url = '/v2/activity-summaries?interval=hour&groupBy=none';
      await at(p, next - 5 * MIN, url, key, {});
      const before = await at(p, next - 1, url, key, { queried: false });
      expect(before.data.filtersApplied.appliedTimeRange.startTime).toBe(iso(hourOf(S) - 167 * HOUR));
      const after = await at(p, next, url, key, { queried: true });
      expect(after.data.filtersApplied.appliedTimeRange.startTime).toBe(iso(next - 167 * HOUR));

      // A given start 167 hours before the current hour: 168 buckets until the next hour, 169 from then on.
      const bounded = `/v2/activity-summaries?interval=hour&startTime=${iso(hourOf(S) - 167 * HOUR)}`;
      await at(p, next - 5 * MIN, bounded, key, {});
      await at(p, next - 1, bounded, key, { queried: false });
      const refused = await at(p, next, bounded, key, { status: 422 });
      expect(refused.error.code).toBe('BUCKET_LIMIT_EXCEEDED');
    } finally {
      await p.close();
    }
  });

  it('trader activity: a repeat and its cursor page cost no query; under a history window the oldest position leaving ends the entry', async () => {
    const p = await pair(h, clock);
    try {
      const url = '/v2/traders/activity?minPositionCount=1&limit=1';
      const first = await at(p, T0 + HOUR, url, key, { queried: true });
      expect(first.data.results).toEqual([{ traderId: 1, positionCount: 3 }]);
      await at(p, T0 + HOUR + 9 * MIN, url, key, { queried: false });
      const cursorPage = `${url}&cursor=${first.data.meta.nextCursor}`;
      // Another answer, from the counts kept since the first page (every trader's): no query either.
      await at(p, T0 + HOUR + 9 * MIN, cursorPage, key, { queried: false });
      const page2 = await at(p, T0 + HOUR + 9 * MIN + 1, cursorPage, key, { queried: false });
      expect(page2.data.results).toEqual([{ traderId: 2, positionCount: 2 }]);

      const two = '/v2/traders/activity?minPositionCount=2';
      await at(p, P4_LEAVES - 5 * MIN, two, short, { queried: true });
      const before = await at(p, P4_LEAVES - 1, two, short, { queried: false });
      expect(before.data.results.map((r: any) => r.traderId)).toEqual([1, 2]);
      expect(before.data.meta.appliedTimeRange).toEqual({ startTime: iso(P4_LEAVES - 1 - HISTORY_DAYS * DAY), endTime: null });
      const after = await at(p, P4_LEAVES, two, short, { queried: true });
      expect(after.data.results.map((r: any) => r.traderId)).toEqual([1]);
    } finally {
      await p.close();
    }
  });
});

describe('analytics reads and commits', () => {
  let h: Harness;
  let key: string;
  const clock = { now: T0 };

  beforeAll(async () => {
    h = await createHarness({ clock: () => clock.now });
    await h.given([
      build.source('src-1'),
      build.trader(1),
      build.asset(1),
      build.price(1, iso(T0 - 10 * DAY), 100),
      build.price(1, iso(T0 - 8 * DAY), 110),
      build.event(1, { traderId: 1, assetId: 1, price: 100, timeOfEvent: iso(T0 - 9 * DAY) }),
    ]);
    key = await h.key();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('a commit of prices alone keeps trader stats and asset stats (their answers are made of evaluation rows, not prices); a position ends them', async () => {
    const p = await pair(h, clock);
    try {
      const urls = ['/v2/traders/stats?traderIds=1', '/v2/assets/stats?assetIds=1'];
      for (const url of urls) await at(p, T0, url, key, { queried: true });
      // No position's evaluation time is within a tolerance before this sample: nothing is evaluated again.
      await h.given([build.price(1, iso(T0 - 3 * DAY), 120)]);
      for (const url of urls) await at(p, T0 + 1, url, key, { queried: false });
      await h.given([build.event(2, { traderId: 1, assetId: 1, price: 100, timeOfEvent: iso(T0 - 2 * DAY) })]);
      for (const url of urls) await at(p, T0 + 2, url, key, { queried: true });
    } finally {
      await p.close();
    }
  });

  it("a position of one trader keeps another trader's cached stats; its own are read again", async () => {
    await h.given([
      build.source('src-2'),
      build.trader(2),
      build.asset(2),
      build.price(2, iso(T0 - 10 * DAY), 100),
      build.event(901, { traderId: 2, assetId: 2, price: 100, timeOfEvent: iso(T0 - 5 * DAY) }),
    ]);
    const p = await pair(h, clock);
    try {
      // Stored now (their figures may come from aggregates kept since an earlier question: performanceByTrader).
      for (const url of ['/v2/traders/stats?traderIds=1', '/v2/traders/stats?traderIds=2']) await at(p, T0 + 3, url, key);
      await h.given([build.event(902, { traderId: 2, assetId: 2, price: 100, timeOfEvent: iso(T0 - 2 * DAY) })]);
      await at(p, T0 + 4, '/v2/traders/stats?traderIds=1', key, { queried: false });
      const two = await at(p, T0 + 4, '/v2/traders/stats?traderIds=2', key, { queried: true });
      expect(JSON.stringify(two)).toContain('"sampledPositionsCount":2');
    } finally {
      await p.close();
    }
  });

  it("a price within a window's tolerance that is not its first sample after the evaluation time changes no evaluation: the answers stay cached; the first sample ends them", async () => {
    const p = await pair(h, clock);
    try {
      const urls = ['/v2/traders/stats?traderIds=1', '/v2/assets/stats?assetIds=1'];
      for (const url of urls) await at(p, T0 + 3, url, key);
      // Position 1's 1D window is evaluated at T0 - 8 days, where a sample is already (its forward price).
      await h.given([build.price(1, iso(T0 - 8 * DAY + 30 * MIN), 999)]);
      for (const url of urls) await at(p, T0 + 4, url, key, { queried: false });
      // Its 7D window is evaluated at T0 - 2 days and has no sample after it yet: this one is its forward price.
      await h.given([build.price(1, iso(T0 - 2 * DAY + HOUR), 130)]);
      for (const url of urls) await at(p, T0 + 5, url, key, { queried: true });
    } finally {
      await p.close();
    }
  });
});

describe('issue 26: analytics cache exactness property', () => {
  const TRADERS = [1, 2, 3];
  const ASSETS = [1, 2, 3];
  const clock = { now: T0 };
  let h: Harness;
  let keys: string[];
  let p: Pair;

  beforeAll(async () => {
    h = await createHarness({ clock: () => clock.now });
    await h.given([
      ...TRADERS.flatMap((t) => [build.source(`src-${t}`), build.trader(t)]),
      ...ASSETS.map((a) => build.asset(a)),
      ...ASSETS.map((a) => build.price(a, iso(T0 - 40 * DAY), 100 + a)),
    ]);
    keys = [await h.key(), await h.key({ account: { id: 'two-days', historyWindowDays: 2 } })];
    p = await pair(h, clock);
  });
  afterAll(async () => {
    await p?.close();
    await h?.close();
  });

  const list = (xs: readonly number[]) => xs.join(',');
  const bounds = (rng: Rng): string => {
    const r = rng.next();
    if (r < 0.5) return '';
    if (r < 0.65) return `&startTime=${iso(T0 - 3 * DAY)}`;
    if (r < 0.8) return `&endTime=${iso(T0 + rng.int(-30, 90) * MIN)}`;
    return `&startTime=${iso(T0 - 2 * DAY)}&endTime=${iso(T0 + rng.int(-10, 120) * MIN)}`;
  };

  /** Analytics questions as users ask them, with default and explicit bounds. */
  function randomUrl(rng: Rng, kind: number): string {
    switch (kind) {
      case 0:
        return `/v2/traders/stats?traderIds=${list(rng.subset(TRADERS, 1, 3))}${bounds(rng)}`;
      case 1:
        return `/v2/assets/stats?assetIds=${list(rng.subset(ASSETS, 1, 3))}${rng.chance(0.3) ? `&traderIds=${list(rng.subset(TRADERS, 1, 2))}` : ''}${rng.chance(0.3) ? '&direction=long' : ''}${bounds(rng)}`;
      case 2: {
        const metric = rng.pick(['event_count', 'position_count', 'win_rate', 'avg_return', 'median_return', 'sharpe_ratio']);
        const window = rng.chance(0.7) ? '&timeBasedPerformanceWindow=1D' : rng.chance(0.5) ? '&timeBasedPerformanceWindow=7D' : '';
        return `/v2/traders/rankings?metric=${metric}${window}&minPositions=${rng.int(0, 2)}${rng.chance(0.3) ? `&assetIds=${list(rng.subset(ASSETS, 1, 2))}` : ''}${bounds(rng)}`;
      }
      case 3: {
        const interval = rng.pick(['hour', 'day', 'week']);
        const r = rng.next();
        const range = r < 0.6 ? '' : r < 0.8 ? `&startTime=${iso(T0 - 100 * HOUR)}` : `&endTime=${iso(T0 + rng.int(-60, 120) * MIN)}`;
        return `/v2/activity-summaries?interval=${interval}&groupBy=${rng.pick(['trader', 'none'])}${rng.chance(0.3) ? `&traderIds=${list(rng.subset(TRADERS, 1, 2))}` : ''}${range}`;
      }
      default:
        return `/v2/traders/activity?minPositionCount=${rng.int(0, 2)}&limit=${rng.int(1, 3)}${rng.chance(0.3) ? `&assetIds=${list(rng.subset(ASSETS, 1, 2))}` : ''}${rng.chance(0.4) ? bounds(rng) : ''}`;
    }
  }

  let nextEvent = 1;
  let nextMessage = 1;
  const events = new Map<number, { traderId: number; assetId: number; version: number }>();

  /**
   * A commit's records: positions opened in the past (some about a day ago, whose 1D window a price
   * sample after serverTime makes `ready` and come of age while the test runs), after serverTime,
   * closes, moves and deletions, price samples before and after serverTime, messages, and asset
   * market changes.
   */
  function randomCommit(rng: Rng): TopicRecord[] {
    const out: TopicRecord[] = [];
    const when = () => {
      const r = rng.next();
      if (r < 0.25) return clock.now - DAY + rng.int(-30, 30) * MIN; // comes of age soon
      if (r < 0.45) return clock.now + rng.int(1, 30) * MIN; // after serverTime
      if (r < 0.6) return clock.now - 2 * DAY + rng.int(-10, 40) * MIN; // near the history window's start
      if (r < 0.75) return clock.now - 7 * DAY + rng.int(-10, 40) * MIN; // near the default 7 days' start
      return clock.now - rng.int(0, 9 * 24) * HOUR - rng.int(0, 59) * MIN;
    };
    for (let i = rng.int(1, 3); i > 0; i--) {
      const kind = rng.next();
      if (kind < 0.4 || events.size === 0) {
        const id = nextEvent++;
        const e = { traderId: rng.pick(TRADERS), assetId: rng.pick(ASSETS), version: 1 };
        events.set(id, e);
        // Some 1D windows come of age minutes from now, with their forward price already stored.
        const ripening = rng.chance(0.3);
        const t = ripening ? clock.now - DAY + rng.int(1, 12) * MIN : when();
        out.push(build.event(id, { ...e, positionId: id, direction: rng.pick(['long', 'short']), price: 100, timeOfEvent: iso(t) }));
        if (ripening) out.push(build.price(e.assetId, iso(t + DAY + rng.int(0, 30) * MIN), rng.int(80, 120)));
      } else if (kind < 0.5) {
        const id = rng.pick([...events.keys()]);
        const e = events.get(id)!;
        Object.assign(e, { traderId: rng.pick(TRADERS), assetId: rng.pick(ASSETS), version: e.version + 1 });
        out.push(build.event(id, { ...e, positionId: id, price: 100, deleted: rng.chance(0.3), timeOfEvent: iso(when()) }));
      } else if (kind < 0.75) {
        // Forward prices: some after serverTime, within the 1D tolerance of positions opened a day before.
        const t = rng.chance(0.5) ? clock.now + rng.int(1, 40) * MIN : when();
        out.push(build.price(rng.pick(ASSETS), iso(t), rng.int(80, 120)));
      } else if (kind < 0.95) {
        out.push(build.message(`m-${nextMessage++}`, `src-${rng.pick(TRADERS)}`, iso(when())));
      } else {
        const a = rng.pick(ASSETS);
        out.push(
          build.asset(a, { version: 1 + rng.int(1, 1e6), markets: [{ quoteSymbol: 'USD', active: rng.chance(0.8), preferred: true }] }),
        );
      }
    }
    return out;
  }

  it('under random commits, clock steps and analytics reads, every cached answer equals a fresh read', async () => {
    const rng = prng(20261126);
    // Few enough questions that they are asked again between commits, as under load.
    // The default questions (each with the clock rules of its defaults), and random ones with bounds and filters.
    const urls = [
      '/v2/traders/stats?traderIds=1,2,3',
      '/v2/assets/stats?assetIds=1,2,3',
      '/v2/traders/rankings',
      '/v2/traders/rankings?metric=win_rate&timeBasedPerformanceWindow=1D&minPositions=0',
      '/v2/activity-summaries',
      '/v2/activity-summaries?groupBy=none&interval=week',
      '/v2/traders/activity?minPositionCount=1',
      ...Array.from({ length: 5 }, (_, i) => randomUrl(rng, i)),
    ];
    let reads = 0;
    let hits = 0;
    const unchanged = new Set<string>();
    const byPath = new Map<string, { reads: number; hits: number }>();
    // Quiet spells (no commit for a while, as between ingest bursts) let entries live until the clock ends them.
    let quiet = 0;
    for (let step = 0; step < 450; step++) {
      const r = rng.next();
      if (quiet > 0) quiet--;
      else if (rng.chance(0.04)) quiet = rng.int(10, 30);
      if (r < 0.1 && quiet === 0) {
        await h.given(randomCommit(rng));
        unchanged.clear();
      } else if (r < 0.25) {
        clock.now += rng.chance(0.6) ? rng.int(1, 60) * 1000 : rng.int(1, 10) * MIN;
        unchanged.clear();
      } else {
        // The default questions most often, as assistants and dashboards ask them.
        const url = rng.chance(0.7) ? urls[rng.int(0, 6)]! : rng.pick(urls);
        const key = rng.chance(0.7) ? keys[0]! : rng.pick(keys);
        const a = await p.read(url, key);
        // Asked again with no commit and no clock step since: served from the cache.
        if (unchanged.has(`${key} ${url}`)) expect(a.queried, `step ${step}: ${url} again`).toBe(false);
        unchanged.add(`${key} ${url}`);
        expect(a.status, `step ${step}: ${url}`).toBe(a.fresh.status);
        expect(a.body, `step ${step}: ${url} at ${iso(clock.now)}`).toEqual(a.fresh.body);
        reads++;
        const path = url.split('?')[0]!;
        const s = byPath.get(path) ?? { reads: 0, hits: 0 };
        byPath.set(path, s);
        s.reads++;
        if (!a.queried) {
          hits++;
          s.hits++;
        }
      }
    }
    console.log(
      `analytics cache property: ${reads} reads, ${hits} served without a query; ${[...byPath].map(([k, v]) => `${k} ${v.hits}/${v.reads}`).join(', ')}`,
    );
    expect(hits).toBeGreaterThan(reads / 8);
    for (const [path, s] of byPath) expect(s.hits, path).toBeGreaterThan(0);
  });
});
