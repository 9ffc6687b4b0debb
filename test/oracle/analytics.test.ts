// Unit cases of the analytics oracle (test/oracle/analytics.ts) on the hand-built record set
// `handRecords()`: every expectation below is worked out by hand from the records (comments give
// the arithmetic), so that the oracle the API is compared with is itself checked.
import { describe, expect, it } from 'vitest';
import * as A from './analytics.ts';
import { HAND, handRecords } from './analytics.ts';
import type * as O from './oracle.ts';

const recs = handRecords();
const { ALL, NONE, traders, pol, OPEN } = A.policies;

function ok(ans: A.Answer): any {
  if (ans.status !== 200) throw new Error(`expected 200, got ${JSON.stringify(ans)}`);
  return (ans as any).data;
}
function same(actual: unknown, expected: unknown): void {
  const d = A.diff(actual, expected);
  if (d) throw new Error(`${d}\nactual:   ${JSON.stringify(actual)}\nexpected: ${JSON.stringify(expected)}`);
}
const bias = (label: string, longCount: number, shortCount: number) => {
  const n = longCount + shortCount;
  return { label, longCount, shortCount, longPercentage: n ? (100 * longCount) / n : 0, shortPercentage: n ? (100 * shortCount) / n : 0 };
};
const NULLS = { averageReturnPercentage: null, medianReturnPercentage: null, winRatePercentage: null, sharpeRatio: null };
const perf = (
  window: string,
  sampled: number,
  m: { avg: number; median: number; win: number; sharpe: number | null; n: number } | null,
) => ({
  window,
  ...(m === null
    ? NULLS
    : { averageReturnPercentage: m.avg, medianReturnPercentage: m.median, winRatePercentage: m.win, sharpeRatio: m.sharpe }),
  positionsCount: m?.n ?? 0,
  coverage: { sampledPositionsCount: sampled, scoredPositionsCount: m?.n ?? 0, ratio: sampled === 0 ? null : (m?.n ?? 0) / sampled },
});
const perfs = (sampled: number, d1: Parameters<typeof perf>[2]) => ({
  '1D': perf('1D', sampled, d1),
  '7D': perf('7D', sampled, null),
  '30D': perf('30D', sampled, null),
});
const src = (platform: string, id: string) => ({
  platform,
  sourceIdentityId: id,
  displayName: `Source ${id}`,
  handle: id,
  avatarUrl: null,
  profileUrl: null,
  audienceCount: 10,
});

// ---------------------------------------------------------------------------------------------------

describe('metrics and labels', () => {
  it('mean, exact median (odd and even), win rate (0 is not a win), sample-stddev Sharpe, nulls', () => {
    same(A.metrics([]), NULLS);
    same(A.metrics([-25]), { averageReturnPercentage: -25, medianReturnPercentage: -25, winRatePercentage: 0, sharpeRatio: null });
    same(A.metrics([5, 5, 5]), { averageReturnPercentage: 5, medianReturnPercentage: 5, winRatePercentage: 100, sharpeRatio: null });
    // [10, -10, 30, 0]: mean 7.5, median (0 + 10) / 2 = 5, 2 wins of 4, deviations 2.5 -17.5 22.5 -7.5 -> 875 / 3
    same(A.metrics([10, -10, 30, 0]), {
      averageReturnPercentage: 7.5,
      medianReturnPercentage: 5,
      winRatePercentage: 50,
      sharpeRatio: 7.5 / Math.sqrt(875 / 3),
    });
    // returns that cancel: mean 0, Sharpe 0
    same(A.metrics([0.1, 0.2, -0.3]), {
      averageReturnPercentage: 0,
      medianReturnPercentage: 0.1,
      winRatePercentage: (100 * 2) / 3,
      sharpeRatio: 0,
    });
    // the exact value 1e-9 from 0 fails, but near-zero noise passes (absolute floor)
    expect(A.diff(1e-12, 0)).toBeNull();
    expect(A.diff(1.0000001, 1)).not.toBeNull();
    expect(A.diff(null, 0)).not.toBeNull();
  });

  it('direction bias: 60 % exactly is a label, 57 % is mixed, none without positions', () => {
    const ps = (l: number, s: number) =>
      [...Array(l).fill('long'), ...Array(s).fill('short')].map((direction) => ({ p: { direction } as O.Pos }));
    same(A.directionBias(ps(3, 2)), bias('long', 3, 2));
    same(A.directionBias(ps(2, 3)), bias('short', 2, 3));
    same(A.directionBias(ps(4, 3)), bias('mixed', 4, 3));
    same(A.directionBias(ps(1, 1)), bias('mixed', 1, 1));
    same(A.directionBias(ps(0, 0)), { label: 'none', longCount: 0, shortCount: 0, longPercentage: 0, shortPercentage: 0 });
    same(A.directionBias(ps(0, 1)), bias('short', 0, 1));
  });

  it('UTC buckets: hour, day, ISO week starting on Monday (across the year boundary)', () => {
    const t = (s: string) => Date.parse(s);
    expect(A.bucketStart(t('2026-01-01T00:30:00Z'), 'week')).toBe(t('2025-12-29T00:00:00Z'));
    expect(A.bucketStart(t('2025-12-31T23:59:59.999Z'), 'week')).toBe(t('2025-12-29T00:00:00Z'));
    expect(A.bucketStart(t('2026-01-04T23:59:59.999Z'), 'week')).toBe(t('2025-12-29T00:00:00Z')); // Sunday
    expect(A.bucketStart(t('2026-01-05T00:00:00.000Z'), 'week')).toBe(t('2026-01-05T00:00:00Z')); // Monday
    expect(A.bucketStart(t('2025-12-28T23:59:59.999Z'), 'week')).toBe(t('2025-12-22T00:00:00Z'));
    expect(A.bucketStart(t('2024-02-29T13:45:00Z'), 'day')).toBe(t('2024-02-29T00:00:00Z'));
    expect(A.bucketStart(t('2024-02-29T13:45:00Z'), 'hour')).toBe(t('2024-02-29T13:00:00Z'));
    // aligned buckets meeting [start, end], both inclusive
    expect(A.bucketsMeeting(t('2026-01-01T00:00:00Z'), t('2026-01-07T23:59:59.999Z'), 'hour')).toBe(168);
    expect(A.bucketsMeeting(t('2026-01-01T00:00:00Z'), t('2026-01-08T00:00:00Z'), 'hour')).toBe(169);
    expect(A.bucketsMeeting(t('2026-01-01T00:30:00Z'), t('2026-01-07T23:00:00Z'), 'hour')).toBe(168);
    expect(A.bucketsMeeting(t('2025-12-28T00:00:00Z'), t('2026-01-05T00:00:00Z'), 'week')).toBe(3);
    expect(A.bucketsMeeting(t('2026-01-05T00:00:00Z'), t('2026-01-04T00:00:00Z'), 'day')).toBe(0);
    expect(A.yearStart(t('2025-12-31T23:59:59.999Z'))).toBe(t('2025-01-01T00:00:00Z'));
    expect(A.yearStart(t('2026-01-01T00:00:00.000Z'))).toBe(t('2026-01-01T00:00:00Z'));
  });
});

// ---------------------------------------------------------------------------------------------------

describe('GET /traders/stats (section P)', () => {
  const N = HAND.P;
  const t1Tags = [
    { category: 'thematic', name: 'ai' },
    { category: 'thematic', name: 'memecoins' },
    { category: 'thematic', name: 'ærø' },
    { category: 'risk', name: 'high' },
    { category: 'style', name: 'position' },
    { category: 'style', name: 'swing' },
  ];

  it('every kind of trader, in request order, duplicates once; deleted and unknown ids missing', () => {
    const d = ok(A.traderStats(recs, { traderIds: '1,2,3,4,5,6,7,8,999,1' }, OPEN, N));
    same(d.meta, {
      missingTraderIds: [5, 999],
      serverTime: '2026-01-10T12:00:00.000Z',
      appliedTimeRange: { startTime: null, endTime: null },
    });
    expect(d.results.map((r: any) => r.traderId)).toEqual([1, 2, 3, 4, 6, 7, 8]);
    // Trader 1: 10 sample positions (101..110; 111..114 are on ineligible assets, 115 lost its open).
    // 1D ready: 101 +10, 102 -10 (sample 30 min late), 103 +30 (exactly 1 h late), 104 0, 105 short +20;
    // 106 missing entry, 107 zero entry, 108 forward 1 h + 1 ms late, 109 too young, 110 no series.
    // mean 50/5 = 10, median 10, wins 3/5, deviations 0 -20 20 -10 10 -> 1000 / 4 = 250.
    same(d.results[0], {
      traderId: 1,
      name: 'One',
      source: src('TELEGRAM', 'src-1'),
      tags: t1Tags,
      summary: {
        positionCount: 10,
        directionBias: bias('long', 9, 1),
        timeBasedPerformances: perfs(10, { avg: 10, median: 10, win: 60, sharpe: 10 / Math.sqrt(250), n: 5 }),
      },
    });
    // Trader 2: two identical +5 returns (Sharpe null: deviation 0), two shorts on an asset without prices.
    same(d.results[1], {
      traderId: 2,
      name: 'Two',
      source: src('TELEGRAM', 'src-2'),
      tags: [
        { category: 'thematic', name: 'rates' },
        { category: 'risk', name: 'low' },
      ],
      summary: {
        positionCount: 4,
        directionBias: bias('mixed', 2, 2),
        timeBasedPerformances: perfs(4, { avg: 5, median: 5, win: 100, sharpe: null, n: 2 }),
      },
    });
    // Trader 3: one scored return -25 (Sharpe null below 2); its tag set was deleted.
    same(d.results[2], {
      traderId: 3,
      name: 'Three',
      source: src('TELEGRAM', 'src-3'),
      tags: [],
      summary: {
        positionCount: 1,
        directionBias: bias('long', 1, 0),
        timeBasedPerformances: perfs(1, { avg: -25, median: -25, win: 0, sharpe: null, n: 1 }),
      },
    });
    // Trader 4: nothing at all.
    same(d.results[3], {
      traderId: 4,
      name: 'Four',
      source: null,
      tags: [],
      summary: {
        positionCount: 0,
        directionBias: { label: 'none', longCount: 0, shortCount: 0, longPercentage: 0, shortPercentage: 0 },
        timeBasedPerformances: perfs(0, null),
      },
    });
    // 6: 3 long of 5 (60 %: long), its source has no identity record; 7: 3 short of 5; 8: 4 of 7 (mixed).
    same(d.results[4], {
      traderId: 6,
      name: 'Six',
      source: null,
      tags: [],
      summary: { positionCount: 5, directionBias: bias('long', 3, 2), timeBasedPerformances: perfs(5, null) },
    });
    same(d.results[5].summary.directionBias, bias('short', 2, 3));
    same(d.results[5].source, src('X', 'src-7'));
    same(d.results[6].summary.directionBias, bias('mixed', 4, 3));
  });

  it('sourcePlatforms and signal visibility decide which ids are missing', () => {
    const x = ok(A.traderStats(recs, { traderIds: '1,7,8,6', sourcePlatforms: 'X' }, OPEN, N));
    expect(x.results.map((r: any) => r.traderId)).toEqual([7]);
    expect(x.meta.missingTraderIds).toEqual([1, 8, 6]);
    const tg = ok(A.traderStats(recs, { traderIds: '1,7,8,6', sourcePlatforms: 'TELEGRAM' }, OPEN, N));
    expect(tg.results.map((r: any) => r.traderId)).toEqual([1, 6]);
    expect(tg.meta.missingTraderIds).toEqual([7, 8]);
    const vis = ok(A.traderStats(recs, { traderIds: '1,2,7' }, pol(traders(1, 7)), N));
    expect(vis.results.map((r: any) => r.traderId)).toEqual([1, 7]);
    expect(vis.meta.missingTraderIds).toEqual([2]);
    const plat = ok(A.traderStats(recs, { traderIds: '1,4,7' }, pol({ mode: 'platforms', platforms: ['X'] }), N));
    expect(plat.results.map((r: any) => r.traderId)).toEqual([7]);
    expect(A.traderStats(recs, { traderIds: '1' }, pol(NONE), N)).toEqual({ status: 403, code: 'FORBIDDEN' });
    expect(
      A.traderStats(recs, { traderIds: '1', startTime: '2025-12-02T00:00:00.001Z', endTime: '2025-12-02T00:00:00Z' }, OPEN, N),
    ).toEqual({ status: 400, code: 'VALIDATION_ERROR' });
  });

  it('bounds are inclusive: positions exactly at startTime and endTime count, 1 ms less does not', () => {
    // 102..105: -10, 30, 0, 20: mean 10, median (0 + 20) / 2, 2 wins of 4, deviations -20 20 -10 10 -> 1000 / 3
    const d = ok(A.traderStats(recs, { traderIds: '1', startTime: '2025-12-02T00:00:00Z', endTime: '2025-12-05T00:00:00Z' }, OPEN, N));
    same(d.meta.appliedTimeRange, { startTime: '2025-12-02T00:00:00.000Z', endTime: '2025-12-05T00:00:00.000Z' });
    same(d.results[0].summary, {
      positionCount: 4,
      directionBias: bias('long', 3, 1),
      timeBasedPerformances: perfs(4, { avg: 10, median: 10, win: 50, sharpe: 10 / Math.sqrt(1000 / 3), n: 4 }),
    });
    // 102..104: -10, 30, 0
    const e = ok(A.traderStats(recs, { traderIds: '1', startTime: '2025-12-02T00:00:00Z', endTime: '2025-12-04T23:59:59.999Z' }, OPEN, N));
    same(
      e.results[0].summary.timeBasedPerformances['1D'],
      perf('1D', 3, {
        avg: 20 / 3,
        median: 0,
        win: 100 / 3,
        sharpe: 20 / 3 / Math.sqrt(((-10 - 20 / 3) ** 2 + (30 - 20 / 3) ** 2 + (20 / 3) ** 2) / 2),
        n: 3,
      }),
    );
  });

  it('history window: the start is clamped to serverTime - days (also an omitted one) and echoed', () => {
    // floor = 2026-01-10T12:00Z - 30 days = 2025-12-11T12:00Z: only 108 (missing forward) and 109 (too young)
    const d = ok(A.traderStats(recs, { traderIds: '1' }, pol(ALL, ALL, 30), N));
    same(d.meta.appliedTimeRange, { startTime: '2025-12-11T12:00:00.000Z', endTime: null });
    same(d.results[0].summary, { positionCount: 2, directionBias: bias('long', 2, 0), timeBasedPerformances: perfs(2, null) });
    const older = ok(
      A.traderStats(recs, { traderIds: '1', startTime: '2025-01-01T00:00:00Z', endTime: '2025-12-31T00:00:00Z' }, pol(ALL, ALL, 30), N),
    );
    same(older.meta.appliedTimeRange, { startTime: '2025-12-11T12:00:00.000Z', endTime: '2025-12-31T00:00:00.000Z' });
    expect(older.results[0].summary.positionCount).toBe(1);
    const inside = ok(A.traderStats(recs, { traderIds: '1', startTime: '2025-12-26T00:00:00Z' }, pol(ALL, ALL, 30), N));
    same(inside.meta.appliedTimeRange, { startTime: '2025-12-26T00:00:00.000Z', endTime: null });
    expect(inside.results[0].summary.positionCount).toBe(1);
    // an end before the window: empty sample, no error
    const before = ok(A.traderStats(recs, { traderIds: '1', endTime: '2025-12-01T00:00:00Z' }, pol(ALL, ALL, 30), N));
    expect(before.results[0].summary.positionCount).toBe(0);
  });

  it('too_young flips to ready exactly at openAt + window', () => {
    const q = { traderIds: '1', endTime: '2025-12-01T00:00:00Z' }; // only 101 (1D sample 110 at 2025-12-02T00:00Z)
    const E = Date.parse('2025-12-02T00:00:00Z');
    same(ok(A.traderStats(recs, q, OPEN, E - 1)).results[0].summary.timeBasedPerformances['1D'], perf('1D', 1, null));
    same(
      ok(A.traderStats(recs, q, OPEN, E)).results[0].summary.timeBasedPerformances['1D'],
      perf('1D', 1, { avg: 10, median: 10, win: 100, sharpe: null, n: 1 }),
    );
    // No price series at all: sampled, never scored.
    same(ok(A.traderStats(recs, { traderIds: '6' }, OPEN, N)).results[0].summary.timeBasedPerformances['30D'], perf('30D', 5, null));
  });
});

// ---------------------------------------------------------------------------------------------------

describe('GET /assets/stats (section A)', () => {
  const N = HAND.P;
  it('request order, duplicates removed, ineligible assets missing; positioning and top traders with ties', () => {
    const d = ok(A.assetStats(recs, { assetIds: '7,3,7,999,2,4,5,6' }, OPEN, N));
    same(d.meta, {
      requestedAssetIds: [7, 3, 999, 2, 4, 5, 6],
      missingAssetIds: [3, 999, 4, 5, 6],
      serverTime: '2026-01-10T12:00:00.000Z',
    });
    same(d.filtersApplied, { traderIds: [], direction: null, appliedTimeRange: { startTime: null, endTime: null } });
    // asset 7: long 3+2+2+1+1+1 = 10 (deleted trader 18 and deleted position 1104 left out), short 2+1 = 3;
    // 14, 15 and 16 tie at one long: ids ascending, and the top 5 ends at 15.
    same(d.results[0], {
      assetId: 7,
      summary: { marketPositioning: bias('long', 10, 3), topTraderIds: { long: [11, 12, 13, 14, 15], short: [16, 17] } },
    });
    // asset 2 (no price series): long 1 (t1) + 3 (t6) + 2 (t7) + 4 (t8), short 2 (t2) + 2 + 3 + 3
    same(d.results[1], {
      assetId: 2,
      summary: { marketPositioning: bias('mixed', 10, 10), topTraderIds: { long: [8, 6, 7, 1], short: [7, 8, 2, 6] } },
    });
  });

  it('direction, traderIds (60 % exactly), inclusive bounds, visibility, an empty sample', () => {
    const short = ok(A.assetStats(recs, { assetIds: '7', direction: 'short' }, OPEN, HAND.P));
    same(short.results[0].summary, { marketPositioning: bias('short', 0, 3), topTraderIds: { long: [], short: [16, 17] } });
    expect(short.filtersApplied.direction).toBe('short');
    const some = ok(A.assetStats(recs, { assetIds: '7', traderIds: '16,12,16' }, OPEN, HAND.P));
    same(some.results[0].summary, { marketPositioning: bias('long', 3, 2), topTraderIds: { long: [12, 16], short: [16] } });
    expect(some.filtersApplied.traderIds).toEqual([16, 12]);
    const b = ok(A.assetStats(recs, { assetIds: '7', startTime: '2025-11-04T00:00:00Z', endTime: '2025-11-11T00:00:00Z' }, OPEN, HAND.P));
    same(b.results[0].summary, { marketPositioning: bias('long', 7, 1), topTraderIds: { long: [12, 13, 14, 15, 16], short: [16] } });
    const b2 = ok(
      A.assetStats(recs, { assetIds: '7', startTime: '2025-11-04T00:00:00.001Z', endTime: '2025-11-10T23:59:59.999Z' }, OPEN, HAND.P),
    );
    // 1202, 1301, 1302, 1401, 1501 and 1601 (2025-11-10T00:00Z); 1201 is 1 ms early, 1602 1 ms late
    same(b2.results[0].summary, { marketPositioning: bias('long', 6, 0), topTraderIds: { long: [13, 12, 14, 15, 16], short: [] } });
    const vis = ok(A.assetStats(recs, { assetIds: '7' }, pol(traders(11, 16, 18)), HAND.P));
    same(vis.results[0].summary, { marketPositioning: bias('long', 4, 2), topTraderIds: { long: [11, 16], short: [16] } });
    const none = ok(A.assetStats(recs, { assetIds: '7', startTime: '2026-01-01T00:00:00Z' }, OPEN, HAND.P));
    same(none.results[0].summary, {
      marketPositioning: { label: 'none', longCount: 0, shortCount: 0, longPercentage: 0, shortPercentage: 0 },
      topTraderIds: { long: [], short: [] },
    });
    // history window of 60 days at 2026-01-10T12:00Z: floor 2025-11-11T12:00Z -> 1603, 1701 (shorts)
    const hw = ok(A.assetStats(recs, { assetIds: '7' }, pol(ALL, ALL, 60), HAND.P));
    same(hw.filtersApplied.appliedTimeRange, { startTime: '2025-11-11T12:00:00.000Z', endTime: null });
    same(hw.results[0].summary, { marketPositioning: bias('short', 0, 2), topTraderIds: { long: [], short: [16, 17] } });
  });
});

// ---------------------------------------------------------------------------------------------------

describe('GET /traders/rankings (section R, serverTime 2026-03-01T00:00Z)', () => {
  const N = HAND.R;
  const q10 = { assetIds: '10', timeBasedPerformanceWindow: '1D' };
  const ids = (d: any) => d.results.map((r: any) => r.traderId);
  const vals = (d: any) => d.results.map((r: any) => r.metricValue);

  it('avg_return with the default minPositions 3: one trader; the full row and filtersApplied', () => {
    const d = ok(A.rankings(recs, { ...q10, metric: 'avg_return' }, OPEN, N));
    same(d.filtersApplied, {
      metric: 'avg_return',
      assetIds: [10],
      direction: null,
      timeBasedPerformanceWindow: '1D',
      minPositions: 3,
      windowEvaluability: 'partial',
      appliedTimeRange: { startTime: '2026-01-01T00:00:00.000Z', endTime: '2026-03-01T00:00:00.000Z' },
    });
    same(d.meta, { totalCandidates: 1, serverTime: '2026-03-01T00:00:00.000Z' });
    same(d.results, [
      {
        traderId: 22,
        rank: 1,
        metricValue: 10,
        eventCount: 3,
        positionCount: 3,
        directionBias: bias('long', 3, 0),
        timeBasedPerformance: perf('1D', 3, { avg: 10, median: 10, win: 100, sharpe: null, n: 3 }),
      },
    ]);
  });

  it('ties: metric, then positionCount descending, then trader id; nulls last with minPositions=0', () => {
    // 21: +10 +10, 22: +10 x3, 23: +10 +10, 24: +50, 25: two too young (null), 26: null entry (null), 27: short -20
    const m2 = ok(A.rankings(recs, { ...q10, metric: 'avg_return', minPositions: '2' }, OPEN, N));
    expect(ids(m2)).toEqual([22, 21, 23]);
    const m1 = ok(A.rankings(recs, { ...q10, metric: 'avg_return', minPositions: '1' }, OPEN, N));
    expect(ids(m1)).toEqual([24, 22, 21, 23, 27]);
    const m0 = ok(A.rankings(recs, { ...q10, metric: 'avg_return', minPositions: '0' }, OPEN, N));
    expect(ids(m0)).toEqual([24, 22, 21, 23, 27, 25, 26]);
    same(vals(m0), [50, 10, 10, 10, -20, null, null]);
    expect(m0.results.map((r: any) => r.rank)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    same(m0.results[5].timeBasedPerformance, perf('1D', 2, null));
    expect(m0.meta.totalCandidates).toBe(7);
    const win = ok(A.rankings(recs, { ...q10, metric: 'win_rate', minPositions: '0' }, OPEN, N));
    expect(ids(win)).toEqual([22, 21, 23, 24, 27, 25, 26]);
    same(vals(win), [100, 100, 100, 100, 0, null, null]);
    const med = ok(A.rankings(recs, { ...q10, metric: 'median_return', minPositions: '0', limit: '3' }, OPEN, N));
    expect(ids(med)).toEqual([24, 22, 21]);
    expect(med.meta.totalCandidates).toBe(7);
    // every Sharpe is null (deviation 0 or a single return): positionCount, then id
    const sh = ok(A.rankings(recs, { ...q10, metric: 'sharpe_ratio', minPositions: '0' }, OPEN, N));
    expect(ids(sh)).toEqual([22, 21, 23, 25, 24, 26, 27]);
    expect(vals(sh)).toEqual([null, null, null, null, null, null, null]);
  });

  it('activity metrics: events by their own time (a close of a position opened before the start counts), no window', () => {
    const ev = ok(A.rankings(recs, { assetIds: '10', timeBasedPerformanceWindow: '1D' }, OPEN, N));
    // 23: 2 opens + 2 closes; 21: 2 opens + close (its deleted increase is not counted); 22: 3 opens;
    // 24: open + the close of 2402; 25: 2 opens; 26, 27: 1 open
    expect(ids(ev)).toEqual([23, 22, 21, 25, 24, 26, 27]);
    expect(vals(ev)).toEqual([4, 3, 3, 2, 2, 1, 1]);
    expect(ev.results[4].positionCount).toBe(1);
    expect('timeBasedPerformance' in ev.results[0]).toBe(false);
    same(ev.filtersApplied, {
      metric: 'event_count',
      assetIds: [10],
      direction: null,
      timeBasedPerformanceWindow: '1D',
      minPositions: 3,
      windowEvaluability: 'not_applicable',
      appliedTimeRange: { startTime: '2026-01-01T00:00:00.000Z', endTime: '2026-03-01T00:00:00.000Z' },
    });
    const pc = ok(A.rankings(recs, { assetIds: '10', metric: 'position_count', limit: '2' }, OPEN, N));
    expect(ids(pc)).toEqual([22, 21]);
    expect(pc.meta.totalCandidates).toBe(7);
    const short = ok(A.rankings(recs, { assetIds: '10', direction: 'short' }, OPEN, N));
    same(short.results, [{ traderId: 27, rank: 1, metricValue: 1, eventCount: 1, positionCount: 1, directionBias: bias('short', 0, 1) }]);
    expect(short.filtersApplied.direction).toBe('short');
    const empty = ok(A.rankings(recs, { assetIds: '999', metric: 'avg_return' }, OPEN, N));
    expect(empty.results).toEqual([]);
    expect(empty.meta.totalCandidates).toBe(0);
    expect(empty.filtersApplied.windowEvaluability).toBe('partial');
  });

  it("default startTime is 1 January of the applied endTime's year", () => {
    const y = ok(A.rankings(recs, { assetIds: '10', metric: 'position_count', endTime: '2025-12-31T23:59:59.999Z' }, OPEN, N));
    same(y.filtersApplied.appliedTimeRange, { startTime: '2025-01-01T00:00:00.000Z', endTime: '2025-12-31T23:59:59.999Z' });
    same(y.results, [{ traderId: 24, rank: 1, metricValue: 1, eventCount: 1, positionCount: 1, directionBias: bias('long', 1, 0) }]);
    const jan1 = ok(A.rankings(recs, { assetIds: '10', endTime: '2026-01-01T00:00:00Z' }, OPEN, N));
    same(jan1.filtersApplied.appliedTimeRange, { startTime: '2026-01-01T00:00:00.000Z', endTime: '2026-01-01T00:00:00.000Z' });
    expect(jan1.results).toEqual([]);
  });

  it('windowEvaluability: full, partial, and the 422 with its details and alternatives', () => {
    const full = ok(A.rankings(recs, { ...q10, metric: 'win_rate', endTime: '2026-02-28T00:00:00Z' }, OPEN, N)); // end + 1D = N exactly
    expect(full.filtersApplied.windowEvaluability).toBe('full');
    const part = ok(A.rankings(recs, { ...q10, metric: 'win_rate', startTime: '2026-02-28T00:00:00Z' }, OPEN, N)); // start + 1D = N exactly
    expect(part.filtersApplied.windowEvaluability).toBe('partial');
    expect(A.rankings(recs, { ...q10, metric: 'win_rate', startTime: '2026-02-28T00:00:00.001Z' }, OPEN, N)).toEqual({
      status: 422,
      code: 'PERFORMANCE_WINDOW_NOT_ELAPSED',
      details: {
        requested: { startTime: '2026-02-28T00:00:00.001Z', endTime: null, timeBasedPerformanceWindow: '1D' },
        resolved: { startTime: '2026-02-28T00:00:00.001Z', endTime: '2026-03-01T00:00:00.000Z', timeBasedPerformanceWindow: '1D' },
        // no shorter window than 1D; preserve_evaluation: N - 1D - (1D - 1 ms)
        alternatives: [
          {
            strategy: 'preserve_evaluation',
            startTime: '2026-02-27T00:00:00.001Z',
            endTime: '2026-03-01T00:00:00.000Z',
            timeBasedPerformanceWindow: '1D',
          },
        ],
      },
    });
    // 30D (default) over 10 days starting 19 days before serverTime: 7D has elapsed since the start;
    // preserve_evaluation: 2026-03-01 - 30 days - 10 days = 2026-01-20
    expect(
      A.rankings(recs, { metric: 'sharpe_ratio', startTime: '2026-02-10T00:00:00Z', endTime: '2026-02-20T00:00:00Z' }, OPEN, N),
    ).toEqual({
      status: 422,
      code: 'PERFORMANCE_WINDOW_NOT_ELAPSED',
      details: {
        requested: { startTime: '2026-02-10T00:00:00Z', endTime: '2026-02-20T00:00:00Z', timeBasedPerformanceWindow: null },
        resolved: { startTime: '2026-02-10T00:00:00.000Z', endTime: '2026-02-20T00:00:00.000Z', timeBasedPerformanceWindow: '30D' },
        alternatives: [
          {
            strategy: 'preserve_sample',
            startTime: '2026-02-10T00:00:00.000Z',
            endTime: '2026-02-20T00:00:00.000Z',
            timeBasedPerformanceWindow: '7D',
          },
          {
            strategy: 'preserve_evaluation',
            startTime: '2026-01-20T00:00:00.000Z',
            endTime: '2026-02-20T00:00:00.000Z',
            timeBasedPerformanceWindow: '30D',
          },
        ],
      },
    });
    // 30D, start 5 days before: only 1D has elapsed
    const d5 = A.rankings(recs, { metric: 'avg_return', startTime: '2026-02-24T00:00:00Z' }, OPEN, N) as any;
    expect(d5.details.alternatives.map((a: any) => [a.strategy, a.timeBasedPerformanceWindow])).toEqual([
      ['preserve_sample', '1D'],
      ['preserve_evaluation', '30D'],
    ]);
    // activity metrics never fail
    expect(
      ok(A.rankings(recs, { metric: 'event_count', startTime: '2026-02-28T12:00:00Z' }, OPEN, N)).filtersApplied.windowEvaluability,
    ).toBe('not_applicable');
    expect(A.rankings(recs, { startTime: '2026-02-02T00:00:00Z', endTime: '2026-02-01T00:00:00Z' }, OPEN, N)).toEqual({
      status: 400,
      code: 'VALIDATION_ERROR',
    });
    expect(A.rankings(recs, {}, pol(NONE), N)).toEqual({ status: 403, code: 'FORBIDDEN' });
  });

  it('history window restricts the sample and the events but not the echoed bounds', () => {
    // floor = 2026-03-01 - 40 days = 2026-01-20T00:00Z (inclusive): 21 keeps only its close of 2026-01-20
    const ev = ok(A.rankings(recs, { assetIds: '10' }, pol(ALL, ALL, 40), N));
    same(ev.filtersApplied.appliedTimeRange, { startTime: '2026-01-01T00:00:00.000Z', endTime: '2026-03-01T00:00:00.000Z' });
    expect(ids(ev)).toEqual([23, 25, 24, 26, 27, 21]);
    expect(vals(ev)).toEqual([4, 2, 1, 1, 1, 1]);
    expect(ev.results.map((r: any) => r.positionCount)).toEqual([2, 2, 1, 1, 1, 0]);
    const perfm = ok(A.rankings(recs, { ...q10, metric: 'avg_return', minPositions: '0' }, pol(ALL, ALL, 40), N));
    expect(ids(perfm)).toEqual([24, 23, 27, 25, 26]);
    const vis = ok(A.rankings(recs, { ...q10, metric: 'avg_return', minPositions: '0' }, pol(traders(21, 22, 28)), N));
    expect(ids(vis)).toEqual([22, 21]);
    // Reading A4: 30D from the applied start (1 January) has elapsed, but the 5-day history window
    // leaves only positions (25's, of 2026-02-28) that cannot have reached it: the sample starts at
    // the window, so the read fails, offering 1D (elapsed since the sample's start).
    const a4 = A.rankings(recs, { metric: 'avg_return', minPositions: '0' }, pol(ALL, ALL, 5), N) as any;
    expect([a4.status, a4.code]).toEqual([422, 'PERFORMANCE_WINDOW_NOT_ELAPSED']);
    expect(a4.details.alternatives.map((x: any) => [x.strategy, x.timeBasedPerformanceWindow])).toEqual([
      ['preserve_sample', '1D'],
      ['preserve_evaluation', '30D'],
    ]);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('GET /activity-summaries (section S, serverTime 2026-01-06T12:00Z)', () => {
  const N = HAND.S;
  const S = traders(31, 32, 33, 34, 35);
  const pS = pol(S, S);
  const range = { startTime: '2025-12-28T00:00:00Z', endTime: '2026-01-05T00:00:00.000Z' };
  const b = (start: string, end: string, messageCount: number, eventCount: number) => ({ start, end, messageCount, eventCount });
  const W52 = '2025-12-22T00:00:00.000Z';
  const W01 = '2025-12-29T00:00:00.000Z';
  const W02 = '2026-01-05T00:00:00.000Z';
  const W03 = '2026-01-12T00:00:00.000Z';

  it('ISO weeks across the year boundary: Sunday 23:59:59.999 and Monday 00:00 fall in different weeks', () => {
    const d = ok(A.activitySummaries(recs, { ...range, interval: 'week' }, pS, N));
    same(d.results, [
      { traderId: 31, messageCount: 2, eventCount: 2, buckets: [b(W52, W01, 0, 1), b(W01, W02, 2, 1)] },
      { traderId: 32, messageCount: 2, eventCount: 2, buckets: [b(W01, W02, 2, 1), b(W02, W03, 0, 1)] },
      { traderId: 34, messageCount: 1, eventCount: 0, buckets: [b(W01, W02, 1, 0)] },
    ]);
    same(d.meta, { totalMessages: 5, totalEvents: 4, serverTime: '2026-01-06T12:00:00.000Z' });
    same(d.filtersApplied, {
      groupBy: 'trader',
      interval: 'week',
      eventTypes: ['open', 'close', 'increase', 'decrease'],
      traderIds: [],
      appliedTimeRange: { startTime: '2025-12-28T00:00:00.000Z', endTime: '2026-01-05T00:00:00.000Z' },
    });
  });

  it('days and hours; empty buckets omitted; the bucket limit counts aligned buckets with inclusive ends', () => {
    const d = ok(A.activitySummaries(recs, range, pS, N));
    const day = (s: string) => `${s}T00:00:00.000Z`;
    same(d.results[0].buckets, [
      b(day('2025-12-28'), day('2025-12-29'), 0, 1),
      b(day('2025-12-29'), day('2025-12-30'), 0, 1),
      b(day('2025-12-31'), day('2026-01-01'), 1, 0),
      b(day('2026-01-01'), day('2026-01-02'), 1, 0),
    ]);
    same(d.results[1].buckets, [
      b(day('2026-01-02'), day('2026-01-03'), 2, 0),
      b(day('2026-01-04'), day('2026-01-05'), 0, 1),
      b(day('2026-01-05'), day('2026-01-06'), 0, 1),
    ]);
    expect(A.activitySummaries(recs, { ...range, interval: 'hour' }, pS, N)).toEqual({ status: 422, code: 'BUCKET_LIMIT_EXCEEDED' });
    const h = ok(
      A.activitySummaries(recs, { interval: 'hour', startTime: '2026-01-04T23:00:00Z', endTime: '2026-01-05T00:00:00Z' }, pS, N),
    );
    same(h.results, [
      {
        traderId: 32,
        messageCount: 0,
        eventCount: 2,
        buckets: [
          b('2026-01-04T23:00:00.000Z', '2026-01-05T00:00:00.000Z', 0, 1),
          b('2026-01-05T00:00:00.000Z', '2026-01-05T01:00:00.000Z', 0, 1),
        ],
      },
    ]);
    const limit = (interval: string, startTime: string, endTime: string) =>
      A.activitySummaries(recs, { interval, startTime, endTime }, pS, N).status;
    expect(limit('hour', '2026-01-01T00:00:00Z', '2026-01-07T23:59:59.999Z')).toBe(200);
    expect(limit('hour', '2026-01-01T00:00:00Z', '2026-01-08T00:00:00Z')).toBe(422);
    expect(limit('day', '2025-06-01T00:00:00Z', '2025-11-15T23:59:59.999Z')).toBe(200); // 168 days
    expect(limit('day', '2025-06-01T00:00:00Z', '2025-11-16T00:00:00Z')).toBe(422);
    expect(limit('week', '2023-01-02T00:00:00Z', '2026-03-22T23:59:59.999Z')).toBe(200); // 168 weeks from Monday 2023-01-02
    expect(limit('week', '2023-01-02T00:00:00Z', '2026-03-23T00:00:00Z')).toBe(422);
    // the default range with hours starts at the 168th hour back (7 days would meet 169 hours)
    const dflt = ok(A.activitySummaries(recs, { interval: 'hour' }, pS, N));
    expect(dflt.filtersApplied.appliedTimeRange).toEqual({ startTime: '2025-12-30T13:00:00.000Z', endTime: '2026-01-06T12:00:00.000Z' });
  });

  it('eventTypes restricts events only, traderIds restricts groups (messages by their trader), limit keeps the totals', () => {
    const open = ok(A.activitySummaries(recs, { ...range, interval: 'week', eventTypes: 'open' }, pS, N));
    expect(open.results.map((g: any) => [g.traderId, g.messageCount, g.eventCount])).toEqual([
      [31, 2, 1],
      [32, 2, 1],
      [34, 1, 0],
    ]);
    expect(open.filtersApplied.eventTypes).toEqual(['open']);
    const t = ok(A.activitySummaries(recs, { ...range, interval: 'week', traderIds: '35,32' }, pS, N));
    expect(t.results.map((g: any) => [g.traderId, g.messageCount, g.eventCount])).toEqual([[32, 2, 2]]);
    expect(t.filtersApplied.traderIds).toEqual([35, 32]);
    same(t.meta, { totalMessages: 2, totalEvents: 2, serverTime: '2026-01-06T12:00:00.000Z' });
    const one = ok(A.activitySummaries(recs, { ...range, interval: 'week', limit: '1' }, pS, N));
    expect(one.results.map((g: any) => g.traderId)).toEqual([31]);
    expect([one.meta.totalMessages, one.meta.totalEvents]).toEqual([5, 4]);
    const none = ok(A.activitySummaries(recs, { ...range, interval: 'week', groupBy: 'none' }, pS, N));
    same(none.results, [{ messageCount: 5, eventCount: 4, buckets: [b(W52, W01, 0, 1), b(W01, W02, 5, 2), b(W02, W03, 0, 1)] }]);
    const empty = ok(
      A.activitySummaries(recs, { startTime: '2020-01-01T00:00:00Z', endTime: '2020-01-02T00:00:00Z', groupBy: 'none' }, pS, N),
    );
    same(empty.results, [{ messageCount: 0, eventCount: 0, buckets: [] }]);
  });

  it('visibility: messages need message visibility, events signal visibility, both none is 403', () => {
    const ev = ok(A.activitySummaries(recs, { ...range, interval: 'week' }, pol(S, NONE), N));
    expect(ev.results.map((g: any) => [g.traderId, g.messageCount, g.eventCount])).toEqual([
      [31, 0, 2],
      [32, 0, 2],
    ]);
    const msg = ok(A.activitySummaries(recs, { ...range, interval: 'week' }, pol(NONE, S), N));
    expect(msg.results.map((g: any) => [g.traderId, g.messageCount, g.eventCount])).toEqual([
      [31, 2, 0],
      [32, 2, 0],
      [34, 1, 0],
    ]);
    const tg = ok(A.activitySummaries(recs, { ...range, interval: 'week' }, pol(S, { mode: 'platforms', platforms: ['X'] }), N));
    expect(tg.results.map((g: any) => [g.traderId, g.messageCount, g.eventCount])).toEqual([
      [32, 2, 2],
      [31, 0, 2],
    ]);
    expect(A.activitySummaries(recs, {}, pol(NONE, NONE), N)).toEqual({ status: 403, code: 'FORBIDDEN' });
  });

  it('defaults (7 days before serverTime) and the history window clamp', () => {
    // [2025-12-30T12:00Z, 2026-01-06T12:00Z]: 32: 2 messages + 2 events, 31: 2 messages, 34: 1 message + 1 event
    const d = ok(A.activitySummaries(recs, {}, pS, N));
    same(d.filtersApplied.appliedTimeRange, { startTime: '2025-12-30T12:00:00.000Z', endTime: '2026-01-06T12:00:00.000Z' });
    expect(d.results.map((g: any) => [g.traderId, g.messageCount, g.eventCount])).toEqual([
      [32, 2, 2],
      [31, 2, 0],
      [34, 1, 1],
    ]);
    // 3 days: floor 2026-01-03T12:00Z; 34's message of 2026-01-03T00:00Z is older
    const hw = ok(A.activitySummaries(recs, { ...range, interval: 'week' }, pol(S, S, 3), N));
    same(hw.filtersApplied.appliedTimeRange, { startTime: '2026-01-03T12:00:00.000Z', endTime: '2026-01-05T00:00:00.000Z' });
    same(hw.results, [{ traderId: 32, messageCount: 0, eventCount: 2, buckets: [b(W01, W02, 0, 1), b(W02, W03, 0, 1)] }]);
    // the clamped range is what the bucket limit counts: a year of days, clamped to 3 days, is fine
    expect(A.activitySummaries(recs, { startTime: '2025-01-01T00:00:00Z' }, pol(S, S, 3), N).status).toBe(200);
    expect(A.activitySummaries(recs, { startTime: '2025-01-01T00:00:00Z' }, pS, N).status).toBe(422);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('GET /traders/activity (section T, serverTime 2025-10-20T00:00Z)', () => {
  const N = HAND.T;
  const p = pol(traders(41, 42, 43, 44, 45, 46, 47));
  const rows = (q: A.Query, policy = p) => ok(A.traderActivity(recs, q, policy, N)).results.map((r: any) => [r.traderId, r.positionCount]);

  it('names in UTF-8 byte order (upper case, lower case, Latin-1, CJK), equal names by id; minPositionCount', () => {
    expect(rows({})).toEqual([
      [44, 5],
      [45, 3],
      [41, 3],
      [47, 4],
    ]);
    expect(rows({ minPositionCount: '0' })).toEqual([
      [44, 5],
      [45, 3],
      [41, 3],
      [42, 0],
      [43, 1],
      [47, 4],
      [46, 2],
    ]);
    expect(rows({ minPositionCount: '5' })).toEqual([[44, 5]]);
  });

  it('assetIds: a trader needs a matching position even with minPositionCount=0; sourcePlatforms; bounds; history window', () => {
    expect(rows({ minPositionCount: '0', assetIds: '11' })).toEqual([
      [44, 3],
      [45, 3],
      [41, 3],
      [46, 2],
    ]);
    expect(rows({ minPositionCount: '0', assetIds: '11,12,11' })).toEqual([
      [44, 5],
      [45, 3],
      [41, 3],
      [43, 1],
      [47, 4],
      [46, 2],
    ]);
    expect(rows({ minPositionCount: '1', sourcePlatforms: 'X' })).toEqual([
      [44, 5],
      [41, 3],
      [43, 1],
      [47, 4],
    ]);
    expect(rows({ minPositionCount: '1', startTime: '2025-10-02T00:00:00Z', endTime: '2025-10-04T00:00:00Z' })).toEqual([
      [44, 3],
      [41, 2],
    ]);
    const d = ok(A.traderActivity(recs, { minPositionCount: '1' }, pol(traders(41, 42, 43, 44, 45, 46, 47), ALL, 10), N));
    expect(d.results).toEqual([
      { traderId: 47, positionCount: 4 },
      { traderId: 46, positionCount: 2 },
    ]);
    same(d.meta.appliedTimeRange, { startTime: '2025-10-10T00:00:00.000Z', endTime: null });
    expect(A.traderActivity(recs, {}, pol(NONE), N)).toEqual({ status: 403, code: 'FORBIDDEN' });
  });
});
