import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cachedAndFresh, groupReads } from '../helpers/cached-and-fresh.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

/**
 * Issue 26: under live ingest every trade commit ended trader activity's answers, and each counted
 * every trader's sample positions again. Every trader's counts are now kept from one request to
 * the next, and after a commit only the traders it wrote are counted again. What a user sees must
 * not change: each answer of the app with the read cache and the change log equals the answer of
 * an app without either (a fresh read), positions on an asset without an active market left out.
 */

const DAY = 86_400_000;
const T0 = Math.floor(Date.now() / 60_000) * 60_000;
const iso = (ms: number) => new Date(ms).toISOString();

/** The count of sample positions per trader (the query that is kept). */
const COUNT = /count\(\) AS n FROM \$db\.position_samples AS p FINAL/;

describe('trader activity: position counts kept across requests and commits (issue 26)', () => {
  let h: Harness;
  let key: string;
  const clock = { now: T0 };
  let cached: FastifyInstance;
  let plain: FastifyInstance;
  let close: () => Promise<void>;

  beforeAll(async () => {
    h = await createHarness({ clock: () => clock.now });
    // Three traders on assets 1-3; asset 4 has no active market, and trader 1 has a position on it.
    await h.given([
      ...[1, 2, 3].flatMap((t) => [build.source(`src-${t}`), build.trader(t), build.asset(t)]),
      build.asset(4, { markets: [{ quoteSymbol: 'USD', active: false, preferred: true }] }),
      build.event(1, { traderId: 1, assetId: 1, timeOfEvent: iso(T0 - 3 * DAY) }),
      build.event(2, { traderId: 1, assetId: 1, timeOfEvent: iso(T0 - 2 * DAY) }),
      build.event(3, { traderId: 2, assetId: 2, timeOfEvent: iso(T0 - 2 * DAY) }),
      build.event(4, { traderId: 3, assetId: 3, timeOfEvent: iso(T0 - 2 * DAY) }),
      build.event(5, { traderId: 1, assetId: 4, timeOfEvent: iso(T0 - 2 * DAY) }),
    ]);
    key = await h.key();
    ({ cached, fresh: plain, close } = await cachedAndFresh(h, clock));
  });
  afterAll(async () => {
    await close?.();
    await h?.close();
  });

  /** The counts per trader at `time` (checked against a fresh read), and the counts the cached app queried (their patched traders, or 'all'). */
  async function activity(time: number) {
    clock.now = time;
    const url = '/v2/traders/activity?minPositionCount=0&limit=10';
    const { result: res, reads: counted } = await groupReads(h, COUNT, 'patchTraders', () =>
      cached.inject({ method: 'GET', url, headers: { 'x-api-key': key, 'x-request-id': 'r' } }),
    );
    const fresh = await plain.inject({ method: 'GET', url, headers: { 'x-api-key': key, 'x-request-id': 'r' } });
    expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
    expect(res.json(), `${url} at ${iso(time)}`).toEqual(fresh.json());
    const counts = Object.fromEntries((res.json() as any).data.results.map((r: any) => [r.traderId, r.positionCount]));
    return { counts, counted };
  }

  it('counts every trader once, then after a commit only the traders it wrote', async () => {
    const first = await activity(T0);
    // Trader 1's position on asset 4 does not count (no active market).
    expect(first.counts).toEqual({ 1: 2, 2: 1, 3: 1 });
    expect(first.counted).toEqual(['all']);

    // Trader 3 opens a position: only trader 3 is counted again.
    await h.given([build.event(6, { traderId: 3, assetId: 3, timeOfEvent: iso(T0 - DAY) })]);
    const second = await activity(T0 + 1000);
    expect(second.counts).toEqual({ 1: 2, 2: 1, 3: 2 });
    expect(second.counted).toEqual([[3]]);

    // Trader 1 opens another position on asset 4, and trader 2's is deleted: those two, and the new one still does not count.
    await h.given([
      build.event(7, { traderId: 1, assetId: 4, timeOfEvent: iso(T0 - DAY) }),
      build.event(3, { traderId: 2, assetId: 2, timeOfEvent: iso(T0 - 2 * DAY), deleted: true, version: 2 }),
    ]);
    const third = await activity(T0 + 2000);
    expect(third.counts).toEqual({ 1: 2, 2: 0, 3: 2 });
    expect(third.counted.map((c) => (Array.isArray(c) ? [...c].sort() : c))).toEqual([[1, 2]]);

    // Asset 4's market turns active: which assets count changed, so every trader is counted again.
    await h.given([build.asset(4, { version: 2 })]);
    const fourth = await activity(T0 + 3000);
    expect(fourth.counts).toEqual({ 1: 4, 2: 0, 3: 2 });
    expect(fourth.counted).toEqual(['all']);
  });
});
