import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cachedAndFresh, groupReads } from '../helpers/cached-and-fresh.ts';
import { appendGiven, build, createHarness, type Harness } from '../helpers/harness.ts';
import { specStart } from '../helpers/spec-clock.ts';

/**
 * Issue 26: under live ingest every trade commit ended every ranking, and each was read again from
 * the whole sample. The per-trader aggregates of a sample are now kept from one request to the
 * next: the rankings of every window and metric share them, and after a commit only the traders
 * it wrote are read again, once for all of them. What a user sees must not change: each answer of the app with
 * the read cache and the change log equals the answer of an app without either (a fresh read), at
 * the same injected clock, including the instant a `ready` window of a trader read again comes of
 * age.
 */

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const T0 = specStart();
const iso = (ms: number) => new Date(ms).toISOString();

/** The aggregate over the sample's rows (the query that is kept), and which traders it was asked for. */
const AGGREGATE = /position_samples AS p FINAL[\s\S]*GROUP BY g, window/;

describe('rankings: per-trader aggregates kept across requests and commits (issue 26)', () => {
  let h: Harness;
  let key: string;
  const clock = { now: T0 };
  let cached: FastifyInstance;
  let plain: FastifyInstance;
  let close: () => Promise<void>;

  beforeAll(async () => {
    h = await createHarness({ clock: () => clock.now });
    // Three traders, one asset each; each position's 1D window is `ready` from its forward price.
    const open = T0 - 3 * DAY;
    const forward = open + DAY + 5 * MIN;
    await h.given([
      ...[1, 2, 3].flatMap((t) => [build.source(`src-${t}`), build.trader(t), build.asset(t), build.price(t, iso(T0 - 40 * DAY), 90)]),
      build.price(1, iso(forward), 110), // trader 1: +10 %
      build.price(2, iso(forward), 95), // trader 2: -5 %
      build.price(3, iso(forward), 102), // trader 3: +2 %
      ...[1, 2, 3].map((t) => build.event(t, { traderId: t, assetId: t, price: 100, timeOfEvent: iso(open) })),
    ]);
    key = await h.key();
    ({ cached, fresh: plain, close } = await cachedAndFresh(h, clock));
  });
  afterAll(async () => {
    await close?.();
    await h?.close();
  });

  /** The cached app's answer at `time` (checked against a fresh read), and the aggregates it queried (their patched traders, or 'all'). */
  async function rank(metric: string, time: number, window = '1D') {
    clock.now = time;
    const url = `/v2/traders/rankings?metric=${metric}&timeBasedPerformanceWindow=${window}&minPositions=0`;
    const { result: res, reads: aggregates } = await groupReads(h, AGGREGATE, 'patchTraders', () =>
      cached.inject({ method: 'GET', url, headers: { 'x-api-key': key, 'x-request-id': 'r' } }),
    );
    const fresh = await plain.inject({ method: 'GET', url, headers: { 'x-api-key': key, 'x-request-id': 'r' } });
    expect(res.statusCode, `${url} at ${iso(time)}: ${res.body}`).toBe(200);
    expect(res.json(), `${url} at ${iso(time)}`).toEqual(fresh.json());
    // Returns in percent, to a thousandth (the sums are floating point).
    const order = (res.json() as any).data.results.map((r: any) => [r.traderId, Math.round(r.metricValue * 1000) / 1000]);
    return { order, aggregates };
  }

  it('the rankings of every window and metric share one aggregate; a commit has only its traders read again, once; a patched trader ripens on time', async () => {
    const first = await rank('avg_return', T0);
    expect(first.order).toEqual([
      [1, 10],
      [3, 2],
      [2, -5],
    ]);
    expect(first.aggregates).toEqual(['all']);
    // Another metric of the same window, later (nothing entered the sample since): no aggregate read.
    const second = await rank('win_rate', T0 + 1000);
    expect(second.aggregates).toEqual([]);
    expect(second.order.map((r: number[]) => r[0])).toEqual([1, 3, 2]);
    // Another window, and a metric of counts: the same aggregate, no read either.
    expect((await rank('avg_return', T0 + 1500, '7D')).aggregates).toEqual([]);
    expect((await rank('position_count', T0 + 1600)).aggregates).toEqual([]);

    // Trader 2 opens two positions: one `ready` long ago (+50 %), one whose 1D window comes of age at T0 + 7 min (+30 %).
    await h.given([
      build.price(2, iso(T0 - 2 * DAY - 12 * HOUR + 5 * MIN), 150),
      build.event(20, { traderId: 2, assetId: 2, price: 100, timeOfEvent: iso(T0 - 3 * DAY - 12 * HOUR) }),
      build.price(2, iso(T0 + 20 * MIN), 130),
      build.event(21, { traderId: 2, assetId: 2, price: 100, timeOfEvent: iso(T0 - DAY + 7 * MIN) }),
    ]);
    const patched = await rank('avg_return', T0 + 2000);
    expect(patched.aggregates).toEqual([[2]]);
    // The commit's trader was read again for every window and metric at once.
    const counted = await rank('position_count', T0 + 2100);
    expect(counted.aggregates).toEqual([]);
    expect(counted.order).toEqual([
      [2, 3],
      [1, 1],
      [3, 1],
    ]);
    expect((await rank('avg_return', T0 + 2200, '7D')).aggregates).toEqual([]);
    // Trader 2's mean: (-5 + 50) / 2 = 22.5 (the third window is not of age yet).
    expect(patched.order).toEqual([
      [2, 22.5],
      [1, 10],
      [3, 2],
    ]);
    // Just before and at the instant the third window comes of age: the clock changed trader 2
    // alone, and only trader 2 is read again.
    const before = await rank('avg_return', T0 + 7 * MIN - 1);
    expect(before.order[0]).toEqual([2, 22.5]);
    expect(before.aggregates).toEqual([]);
    const ripe = await rank('avg_return', T0 + 7 * MIN);
    expect(ripe.order[0]).toEqual([2, 25]);
    expect(ripe.aggregates).toEqual([[2]]);
    // A commit of trader 3 alone: trader 3 read again, trader 2 kept as it was at its instant.
    await h.given([build.event(3, { traderId: 3, assetId: 3, price: 100, timeOfEvent: iso(T0 - 3 * DAY), deleted: true, version: 2 })]);
    const third = await rank('avg_return', T0 + 8 * MIN);
    expect(third.aggregates).toEqual([[3]]);
    expect(third.order).toEqual([
      [2, 25],
      [1, 10],
    ]);
  });
});

describe("rankings: counted events kept across commits follow a live server's roll-ups (issue 26)", () => {
  let h: Harness;
  let key: string;
  const clock = { now: T0 };
  let cached: FastifyInstance;
  let plain: FastifyInstance;
  let close: () => Promise<void>;

  beforeAll(async () => {
    // Activity rolled up in commits of its own, after the events' (projectors/runner.ts settleLater).
    h = await createHarness({ clock: () => clock.now, cadenceMs: 20 });
    await h.given([
      ...[1, 2].flatMap((t) => [build.source(`src-${t}`), build.trader(t)]),
      build.asset(1),
      build.price(1, iso(T0 - 40 * DAY), 90),
      build.event(1, { traderId: 1, assetId: 1, timeOfEvent: iso(T0 - 5 * DAY) }),
      build.event(2, { traderId: 1, assetId: 1, timeOfEvent: iso(T0 - 5 * DAY + HOUR) }),
      build.event(3, { traderId: 2, assetId: 1, timeOfEvent: iso(T0 - 5 * DAY) }),
    ]);
    key = await h.key();
    ({ cached, fresh: plain, close } = await cachedAndFresh(h, clock));
  });
  afterAll(async () => {
    await close?.();
    await h?.close();
  });

  const counts = async (time: number) => {
    clock.now = time;
    const url = '/v2/traders/rankings?metric=event_count';
    const res = await cached.inject({ method: 'GET', url, headers: { 'x-api-key': key, 'x-request-id': 'r' } });
    const fresh = await plain.inject({ method: 'GET', url, headers: { 'x-api-key': key, 'x-request-id': 'r' } });
    expect(res.json(), `${url} at ${iso(time)}`).toEqual(fresh.json());
    return Object.fromEntries((res.json() as any).data.results.map((r: any) => [r.traderId, r.eventCount]));
  };

  it('a read between an events commit and its roll-up keeps nothing the roll-up changes', async () => {
    expect(await counts(T0)).toEqual({ 1: 2, 2: 1 });
    // Trader 2's event in a whole hour of the range (counted from the roll-ups): committed, not rolled up yet.
    const version = h.dataVersion();
    appendGiven(h.log, [build.event(4, { traderId: 2, assetId: 1, timeOfEvent: iso(T0 - 3 * DAY) })]);
    for (let i = 0; i < 200 && h.dataVersion() === version; i++) await new Promise((r) => setTimeout(r, 5));
    expect(h.dataVersion()).toBeGreaterThan(version);
    await counts(T0 + 1000);
    await h.settle();
    expect(await counts(T0 + 2000)).toEqual({ 1: 2, 2: 2 });
  });

  it("a roll-up names the traders it rolled up: after trader 1's event and its roll-up, only trader 1's counts are read again", async () => {
    await counts(T0 + 3000);
    await h.given([build.event(5, { traderId: 1, assetId: 1, timeOfEvent: iso(T0 - 2 * DAY) })]);
    await h.settle();
    // The cached app's read alone (counts() reads the fresh app too, which reads every trader).
    clock.now = T0 + 4000;
    const url = '/v2/traders/rankings?metric=event_count';
    const { reads } = await groupReads(h, /activity_events/, 'eOnlyGroups', () =>
      cached.inject({ method: 'GET', url, headers: { 'x-api-key': key, 'x-request-id': 'r' } }),
    );
    const result = await counts(T0 + 4000);
    expect(result).toEqual({ 1: 3, 2: 2 });
    expect(reads.length).toBeGreaterThan(0);
    for (const ids of reads) expect(ids).toEqual([1]);
  });
});
