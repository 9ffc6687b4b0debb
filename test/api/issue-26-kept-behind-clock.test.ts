import { describe, expect, it } from 'vitest';
import { cachedPair, groupReads } from '../helpers/cached-and-fresh.ts';
import { build } from '../helpers/harness.ts';
import { specStart } from '../helpers/spec-clock.ts';

/**
 * Issue 26: under live ingest, requests overlap, and one whose clock was taken a moment before
 * another's reached the per-trader aggregates after the other had read them again at its later
 * clock. It then read every trader's aggregate for itself (the costliest analytics query, about a
 * second on the large seed under load), so trader stats served a tenth of their static rate. A
 * request behind the clock the aggregates were read at is now answered from them unless the clock
 * changed them in between: a `ready` window coming of age, or (a range ending at serverTime) a
 * position opened; then trader stats read the traders asked for only. Every answer must still
 * equal a fresh read at the request's own clock.
 */

const MIN = 60_000;
const DAY = 24 * 60 * MIN;
const T0 = specStart();
const iso = (ms: number) => new Date(ms).toISOString();

/** The per-trader aggregate over the sample's rows (the query that is kept), and which traders it was asked for. */
const AGGREGATE = /position_samples AS p FINAL[\s\S]*GROUP BY g, window/;

describe('kept per-trader aggregates answer a request whose clock is behind them (issue 26)', () => {
  // Trader 2's second position: its 1D window is `ready` (forward price at T0 + 20 min) and comes of age at T0 + 7 min.
  const RIPENS = T0 + 7 * MIN;
  // A position of trader 3 opened at T0 + 30 min: it enters rankings whose range ends at serverTime then.
  const OPENS = T0 + 30 * MIN;
  const open = T0 - 3 * DAY;
  const p = cachedPair(T0, () => [
    ...[1, 2, 3].flatMap((t) => [build.source(`src-${t}`), build.trader(t), build.asset(t), build.price(t, iso(T0 - 40 * DAY), 90)]),
    ...[1, 2, 3].map((t) => build.price(t, iso(open + DAY + 5 * MIN), 100 + 5 * t)),
    ...[1, 2, 3].map((t) => build.event(t, { traderId: t, assetId: t, price: 100, timeOfEvent: iso(open) })),
    build.price(2, iso(T0 + 20 * MIN), 150),
    build.event(20, { traderId: 2, assetId: 2, price: 100, timeOfEvent: iso(RIPENS - DAY) }),
    build.event(30, { traderId: 3, assetId: 3, price: 100, timeOfEvent: iso(OPENS) }),
  ]);

  /** The cached app's answer to `url` at `time`, checked against a fresh read, and the aggregates it queried (patched traders, or 'all'). */
  async function read(url: string, time: number) {
    p.clock.now = time;
    const headers = { 'x-api-key': p.key, 'x-request-id': 'r' };
    const { result: res, reads } = await groupReads(p.h, AGGREGATE, ['patchTraders', 'needTraders'], () =>
      p.cached.inject({ method: 'GET', url, headers }),
    );
    const fresh = await p.fresh.inject({ method: 'GET', url, headers });
    expect(res.statusCode, `${url} at ${iso(time)}: ${res.body}`).toBe(200);
    expect(res.json(), `${url} at ${iso(time)}`).toEqual(fresh.json());
    return { body: res.json() as any, reads: reads.map((r) => (r === 'all' ? r : [...r].sort())) };
  }

  const scored1D = (body: any, traderId: number) =>
    body.data.results.find((r: any) => r.traderId === traderId).summary.timeBasedPerformances['1D'].coverage.scoredPositionsCount;

  it('trader stats: behind the clock read at but not behind the last window coming of age, no query; behind it, the traders asked for read', async () => {
    // Each request its own URL (the traders in another order), so that the read cache does not answer it.
    const ahead = await read('/v2/traders/stats?traderIds=1,2,3', RIPENS + 10 * MIN);
    expect(ahead.reads).toEqual(['all']);
    expect(scored1D(ahead.body, 2)).toBe(2);
    // Behind by 9 minutes, still after trader 2's window came of age: the same figures, no query.
    const behind = await read('/v2/traders/stats?traderIds=2,1,3', RIPENS + MIN);
    expect(behind.reads).toEqual([]);
    expect(scored1D(behind.body, 2)).toBe(2);
    // Before it: the window is not of age yet, and the figures are read for that clock (of the traders asked for only).
    const before = await read('/v2/traders/stats?traderIds=2,1', RIPENS - 1);
    expect(before.reads).toEqual([[1, 2]]);
    expect(scored1D(before.body, 2)).toBe(1);
  });

  it('rankings ending at serverTime: behind the clock read at but after the last position opened, no query; before it, read again', async () => {
    const url = (n: number) => `/v2/traders/rankings?metric=position_count&minPositions=0&limit=${n}`;
    const count = (body: any, traderId: number) => body.data.results.find((r: any) => r.traderId === traderId)?.metricValue;
    const ahead = await read(url(10), OPENS + 10 * MIN);
    expect(ahead.reads).toEqual(['all']);
    expect(count(ahead.body, 3)).toBe(2);
    const behind = await read(url(11), OPENS + MIN);
    expect(behind.reads).toEqual([]);
    expect(count(behind.body, 3)).toBe(2);
    // Before trader 3's second position opened: it is not in the sample yet.
    const before = await read(url(12), OPENS - 1);
    expect(before.reads).toEqual(['all']);
    expect(count(before.body, 3)).toBe(1);
  });
});
