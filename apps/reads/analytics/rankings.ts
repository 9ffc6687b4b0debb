import type { RankingRow, WindowNotElapsedDetails } from '../../../schemas/api/analytics.ts';
import { splitIds } from '../../../schemas/api/common-params.ts';
import { ApiError } from '../../../schemas/api/errors.ts';
import {
  ACTIVITY_METRICS,
  DEFAULT_PERFORMANCE_WINDOW as DEFAULT_WINDOW,
  type RankingMetric,
  type RankingsQuery,
} from '../../../schemas/api/queries.ts';
import { WINDOW_MS, WINDOWS, type WindowName } from '../../../schemas/api/resources.ts';
import { iso } from '../../../schemas/formats.ts';
import { identifier, join, sql, timeWindow } from '../../../storage/sql.ts';
import { ACTIVITY_EVENTS_BY_TRADER_TABLE, ACTIVITY_EVENTS_TABLE } from '../../../storage/tables/activity.ts';
import { POSITION_SAMPLES_TABLE } from '../../../storage/tables/performance.ts';
import { EVENTS_TABLE } from '../../../storage/tables/trading.ts';
import { earliest, firstAfter, nextNewYear, withFacts } from '../clock.ts';
import type { ReadContext } from '../context.ts';
import { type Facts, factsOf } from '../facts.ts';
import { type PageFacts, Where } from '../list.ts';
import { appliedTimeRange, DAY_MS, explicitBounds, type Window, type WindowRule } from '../window.ts';
import { eventCounts as rolledUpEventCounts } from './activity-counts.ts';
import { keepBest } from './best.ts';
import { keptGroups } from './kept-groups.ts';
import {
  averageReturnPercentage,
  clampToHistory,
  currentStatements,
  directionBias,
  firstOpenAfter,
  mayComeOfAge,
  medianReturnPercentage,
  performanceByTrader,
  sampleClock,
  sampleWhere,
  sharpeRatio,
  type TraderAggregates,
  timeBasedPerformance,
  traderEligible,
  type WindowAggregate,
  winRatePercentage,
} from './sample.ts';

/**
 * The bounds of a ranking (contract 4): endTime defaults to serverTime, startTime to 1 January
 * 00:00 UTC of the applied endTime's year; each independently, and an explicit bound is kept as
 * given (the account's history window restricts the sample, not the bounds echoed). Only two
 * explicit bounds in the wrong order are a 400: a start after the default end is an empty sample.
 */
export function rankingBounds(q: { startTime?: string; endTime?: string }, now: number): Window & { start: number; end: number } {
  const given = explicitBounds(q);
  const end = given.end ?? now;
  return { start: given.start ?? Date.UTC(new Date(end).getUTCFullYear(), 0, 1), end };
}

/**
 * Whether the sample's positions can have reached the evaluation window (README): `full` when
 * the last of them has, `partial` when the first can have (the sample starts at the later of
 * startTime and the account's history window); otherwise PERFORMANCE_WINDOW_NOT_ELAPSED with the
 * two alternatives of DESIGN 6.
 */
export function windowEvaluability(
  q: RankingsQuery,
  b: { start: number; end: number },
  sampleStart: number,
  w: WindowName,
  now: number,
): 'full' | 'partial' {
  if (b.end + WINDOW_MS[w] <= now) return 'full';
  if (sampleStart + WINDOW_MS[w] <= now) return 'partial';
  const resolved = { startTime: iso(b.start), endTime: iso(b.end), timeBasedPerformanceWindow: w };
  const shorter = WINDOWS.filter((x) => WINDOW_MS[x] < WINDOW_MS[w] && sampleStart + WINDOW_MS[x] <= now).at(-1);
  const details: WindowNotElapsedDetails = {
    requested: {
      startTime: q.startTime ?? null,
      endTime: q.endTime ?? null,
      timeBasedPerformanceWindow: q.timeBasedPerformanceWindow ?? null,
    },
    resolved,
    alternatives: [
      ...(shorter ? [{ strategy: 'preserve_sample' as const, ...resolved, timeBasedPerformanceWindow: shorter }] : []),
      // Not before 1970 (the earliest date-time the service takes): a range that long keeps its end and starts at the epoch.
      {
        strategy: 'preserve_evaluation' as const,
        startTime: iso(Math.max(0, now - WINDOW_MS[w] - (b.end - b.start))),
        endTime: iso(b.end),
        timeBasedPerformanceWindow: w,
      },
    ],
  };
  throw new ApiError(
    'PERFORMANCE_WINDOW_NOT_ELAPSED',
    `no position opened in the resolved sample can have reached the ${w} evaluation window yet`,
    details,
  );
}

/** Metric value of a candidate: performance metrics as its timeBasedPerformance says them. */
function metricOf(metric: RankingMetric, eventCount: number, positionCount: number, a: WindowAggregate | undefined): number | null {
  switch (metric) {
    case 'event_count':
      return eventCount;
    case 'position_count':
      return positionCount;
    case 'win_rate':
      return winRatePercentage(a);
    case 'avg_return':
      return averageReturnPercentage(a);
    case 'median_return':
      return medianReturnPercentage(a);
    case 'sharpe_ratio':
      return sharpeRatio(a);
  }
}

/** A trader that qualifies, with what orders it and what its row is made of. */
interface Candidate {
  traderId: number;
  metricValue: number | null;
  eventCount: number;
  positionCount: number;
  a: WindowAggregate | undefined;
}

/**
 * The ranking order (README): metric value descending with nulls last, then more positions, then
 * the lower trader id; negative when x goes ahead of y (trader ids make it total).
 */
const ahead = (x: Candidate, y: Candidate): number =>
  (x.metricValue === null ? 1 : 0) - (y.metricValue === null ? 1 : 0) ||
  (y.metricValue ?? 0) - (x.metricValue ?? 0) ||
  y.positionCount - x.positionCount ||
  x.traderId - y.traderId;

/**
 * Trader rankings (README "Analytics reads"): the sample positions per trader from the evaluation
 * rows (one aggregate, in the requested window), the counted events per trader over the time range
 * from the rolled-up activity (activity-counts.ts), or with assetIds from the events statement
 * table's current statements of those assets (sample.ts currentStatements), both restricted by
 * assetIds and direction; the
 * candidates, their order and ranks in memory.
 */
export async function rankTraders(ctx: ReadContext, q: RankingsQuery) {
  const now = ctx.now.getTime();
  const bounds = rankingBounds(q, now);
  const performance = !ACTIVITY_METRICS.includes(q.metric);
  const w = q.timeBasedPerformanceWindow ?? DEFAULT_WINDOW;
  const sampleStart = clampToHistory(bounds, ctx.principal, now).start;
  const evaluability = performance ? windowEvaluability(q, bounds, sampleStart, w, now) : 'not_applicable';
  const facts = await factsOf(ctx);
  const assetIds = splitIds(q.assetIds);
  // Counted events: the rolled-up activity (activity-counts.ts), or with assetIds the events of
  // those of them that are eligible (one set: a second of every eligible id cost a tenth).
  const events = new Where()
    .add('e.live = 1 AND e.tomb = 0')
    .add(
      join(
        timeWindow(identifier('e.timeOfEvent'), { start: sampleStart, end: bounds.end }, { start: 'evStart', end: 'evEnd' }),
        sql` AND `,
      ),
    )
    .when(
      assetIds?.filter((a) => facts.assetQuote.has(a)),
      'e.assetId IN {assetIds:Array(UInt64)}',
      'assetIds',
    )
    .when(q.direction, 'e.direction = {direction:String}', 'direction');
  const sampleWindow: WindowName = performance ? w : '1D';
  const sample = await sampleWhere(ctx, facts, { window: bounds, assetIds, direction: q.direction });
  const [aggregates, eventRows] = await Promise.all([
    performanceByTrader(ctx, sample, {
      windows: [sampleWindow],
      countsOnly: !performance,
      endAtNow: explicitBounds(q).end === null,
    }),
    assetIds
      ? currentStatements<{ traderId: number; n: number }>(
          ctx,
          EVENTS_TABLE,
          'e',
          (from, part) => `
      SELECT e.traderId AS traderId, count() AS n FROM ${from} WHERE ${events.sql} AND ${part} GROUP BY traderId`,
          events.params,
        )
      : eventCountsByTrader(ctx, facts, { start: sampleStart, end: bounds.end, direction: q.direction }, explicitBounds(q).end === null),
  ]);
  const perf = aggregates.groups;
  const eventCounts = new Map(eventRows.map((r) => [Number(r.traderId), Number(r.n)]));
  // Every candidate is counted and compared, but only the `limit` best become rows: a ranking over
  // every trader of the large seed built thousands of rows to keep ten (issue 26: milliseconds of
  // the event loop per ranking read again after a commit).
  const window = performance ? w : '1D';
  const best: Candidate[] = [];
  let totalCandidates = 0;
  const consider = (traderId: number) => {
    if (!traderEligible(facts, ctx.principal, traderId)) return;
    const a = perf.get(traderId)?.get(window);
    const positionCount = a?.sampled ?? 0;
    const eventCount = eventCounts.get(traderId) ?? 0;
    if (
      performance
        ? positionCount === 0 || (a?.scored ?? 0) < q.minPositions
        : (q.metric === 'event_count' ? eventCount : positionCount) === 0
    )
      return;
    totalCandidates++;
    keepBest(
      best,
      { traderId, metricValue: metricOf(q.metric, eventCount, positionCount, a), eventCount, positionCount, a },
      q.limit,
      ahead,
    );
  };
  for (const traderId of perf.keys()) consider(traderId);
  for (const traderId of eventCounts.keys()) if (!perf.has(traderId)) consider(traderId);
  const results: RankingRow[] = best.map((c, i) => {
    const longs = c.a?.longs ?? 0;
    return {
      traderId: c.traderId,
      rank: i + 1,
      metricValue: c.metricValue,
      eventCount: c.eventCount,
      positionCount: c.positionCount,
      directionBias: directionBias(longs, c.positionCount - longs),
      ...(performance ? { timeBasedPerformance: timeBasedPerformance(w, c.a) } : {}),
    };
  });
  const answer = {
    results,
    filtersApplied: {
      metric: q.metric,
      assetIds: assetIds ?? [],
      direction: q.direction ?? null,
      timeBasedPerformanceWindow: w,
      minPositions: q.minPositions,
      windowEvaluability: evaluability,
      appliedTimeRange: appliedTimeRange(bounds),
    },
    meta: { totalCandidates, serverTime: ctx.now.toISOString() },
  };
  return withFacts(
    ctx,
    answer,
    await rankingClock(ctx, q, { bounds, sample, sampleWindow, performance, w, ripens: ripensIn(aggregates, sampleWindow) }),
    [POSITION_SAMPLES_TABLE, EVENTS_TABLE],
  );
}

/**
 * Counted events per trader from the rolled-up activity (activity-counts.ts), kept across requests
 * and commits (keptGroups): a commit has only the traders whose events or rolled-up rows it wrote
 * counted again (a live server rolls activity up in commits of their own, projectors/runner.ts
 * settleLater, whose rows name their traders; a catch-up's roll-up does not, and every trader is
 * read again). Read in full too when an event dated after what is kept enters a range that ends
 * at serverTime (`endAtNow`); not kept where the start trails the clock (the account's history
 * window) or the eligible assets differ.
 */
async function eventCountsByTrader(
  ctx: ReadContext,
  facts: Facts,
  q: { start: number; end: number; direction: string | undefined },
  endAtNow: boolean,
): Promise<{ traderId: number; n: number }[]> {
  const read = async (only: readonly number[] | null) => {
    const rows = await rolledUpEventCounts(ctx, facts, {
      start: q.start,
      end: q.end,
      coarsest: 'day',
      direction: q.direction,
      ...(only ? { only } : {}),
    });
    return new Map(rows.map((r) => [Number(r.g), Number(r.n)]));
  };
  const kept =
    ctx.principal.historyWindowDays == null
      ? await keptGroups(ctx, {
          key: JSON.stringify(['eventCounts', q.start, endAtNow ? null : q.end, q.direction ?? null, facts.assetIds]),
          table: EVENTS_TABLE,
          by: 'traders',
          also: [ACTIVITY_EVENTS_TABLE, ACTIVITY_EVENTS_BY_TRADER_TABLE],
          read,
          until: async (_groups, at, seen) =>
            endAtNow
              ? ((await firstAfter(ctx.store, { table: EVENTS_TABLE, column: 'timeOfEvent' }, at, seen)) ?? Number.POSITIVE_INFINITY)
              : Number.POSITIVE_INFINITY,
          // Fixed bounds: no count moves with the clock (ending at serverTime: events dated after a behind clock may be counted).
          ...(endAtNow ? {} : { from: () => Number.NEGATIVE_INFINITY }),
        })
      : null;
  const counts = kept ? kept.groups : await read(null);
  return [...counts].map(([traderId, n]) => ({ traderId, n }));
}

/** The first `ready` row of window `w` coming of age, when the aggregates say it. */
function ripensIn(a: TraderAggregates, w: WindowName): number | undefined {
  if (a.ripens === undefined) return undefined;
  return a.ripensIn ? (a.ripensIn.get(w) ?? Number.POSITIVE_INFINITY) : a.ripens;
}

/**
 * When the clock may change a ranking (DESIGN 9), for the read cache: the echoed bounds as a rule
 * (an end that is serverTime; a start given, or 1 January of the end's year, which is fixed until
 * the next new year when the end is serverTime); `windowEvaluability` turning `full` when a given
 * end's positions have all reached the window; and from queries of the cache's own: a `ready` row
 * of the sample coming of age (performance metrics), the first position or event after serverTime
 * entering a sample that ends at it, and the oldest position or event leaving a sample that the
 * account's history window starts. Rows of any trader, asset or direction count: an instant may
 * only be too early.
 */
async function rankingClock(
  ctx: ReadContext,
  q: RankingsQuery,
  c: {
    bounds: { start: number; end: number };
    sample: Where;
    sampleWindow: WindowName;
    performance: boolean;
    w: WindowName;
    /** When the aggregates say it (performanceByTrader): the first `ready` row of the sample coming of age. */
    ripens: number | undefined;
  },
): Promise<PageFacts> {
  const now = ctx.now.getTime();
  const given = explicitBounds(q);
  const endAtNow = given.end === null;
  const window: WindowRule = { start: c.bounds.start, end: given.end, endAtNow, startLagMs: null };
  const newYear = given.start === null && endAtNow ? nextNewYear(now) : null;
  const full = c.performance && !endAtNow && now < c.bounds.end + WINDOW_MS[c.w] ? c.bounds.end + WINDOW_MS[c.w] : null;
  const lag = ctx.principal.historyWindowDays == null ? null : ctx.principal.historyWindowDays * DAY_MS;
  const ripen = c.performance && (await mayComeOfAge(ctx));
  const known = c.ripens;
  // Known from the aggregates when no start trails the clock: no query of the sample's own.
  const sampled =
    lag === null && known !== undefined
      ? ripen
        ? async () => known
        : undefined
      : sampleClock(c.sample, { windows: [c.sampleWindow], ripen, lagMs: lag });
  return {
    window,
    until: earliest(newYear, full),
    async later(store, at, seen) {
      const [fromSample, entering, eventEnters, eventLeaves] = [
        sampled ? await sampled(store, at) : null,
        endAtNow ? await firstOpenAfter(store, c.sampleWindow, at, seen) : null,
        endAtNow ? await firstAfter(store, { table: EVENTS_TABLE, column: 'timeOfEvent' }, at, seen) : null,
        // The first counted event at or after the sample's start (history window) leaves first.
        lag !== null
          ? await firstAfter(
              store,
              { table: EVENTS_TABLE, column: 'timeOfEvent' },
              clampToHistory(c.bounds, ctx.principal, at).start - 1,
              seen,
            )
          : null,
      ];
      return earliest(fromSample, entering, eventEnters, eventLeaves === null ? null : eventLeaves + lag! + 1);
    },
  };
}
