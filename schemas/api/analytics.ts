import Type from 'typebox';
import { DateTime, Direction, EventType, Nullable, StringEnum } from '../topics/common.ts';
import { AppliedTimeRange, ListMeta, SuccessEnvelope } from './envelope.ts';
import { ACTIVITY_GROUP_BY, ACTIVITY_INTERVALS, RANKING_METRICS } from './queries.ts';
import { SourceIdentity, WINDOWS } from './resources.ts';

/** Resources of the analytics reads (contract section 2; the README's "Analytics reads" says how each figure is computed). */

const Count = Type.Integer({ minimum: 0 });

/** Long/short split of a set of positions; label `long` or `short` at a share of 60 % or more, else `mixed`; `none` with no positions. */
export const BIAS_LABELS = ['long', 'short', 'mixed', 'none'] as const;
export const DirectionBias = Type.Object({
  label: StringEnum(BIAS_LABELS),
  longCount: Count,
  shortCount: Count,
  longPercentage: Type.Number({ description: 'share of long positions, 0 to 100 (0 with no positions)' }),
  shortPercentage: Type.Number({ description: 'share of short positions, 0 to 100 (0 with no positions)' }),
});
export type DirectionBias = Type.Static<typeof DirectionBias>;

export const Coverage = Type.Object({
  sampledPositionsCount: Count,
  scoredPositionsCount: Count,
  ratio: Nullable(Type.Number({ description: 'scored / sampled; null when nothing was sampled' })),
});

/** Metrics over the `ready` returns of a sample for one window (null metrics and positionsCount 0 when none is ready). */
export const TimeBasedPerformance = Type.Object({
  window: StringEnum(WINDOWS),
  averageReturnPercentage: Nullable(Type.Number()),
  medianReturnPercentage: Nullable(Type.Number()),
  winRatePercentage: Nullable(Type.Number()),
  sharpeRatio: Nullable(Type.Number()),
  positionsCount: Count,
  coverage: Coverage,
});
export type TimeBasedPerformance = Type.Static<typeof TimeBasedPerformance>;

export const Tag = Type.Object({ category: Type.String(), name: Type.String() });

export const TraderStatsRow = Type.Object({
  traderId: Type.Integer(),
  name: Type.String(),
  source: Nullable(SourceIdentity),
  tags: Type.Array(Tag),
  summary: Type.Object({
    positionCount: Count,
    directionBias: DirectionBias,
    timeBasedPerformances: Type.Object({ '1D': TimeBasedPerformance, '7D': TimeBasedPerformance, '30D': TimeBasedPerformance }),
  }),
});
export type TraderStatsRow = Type.Static<typeof TraderStatsRow>;

export const TraderStatsResponse = SuccessEnvelope(
  Type.Object({
    results: Type.Array(TraderStatsRow),
    meta: Type.Object({
      missingTraderIds: Type.Array(Type.Integer()),
      serverTime: DateTime,
      appliedTimeRange: AppliedTimeRange,
    }),
  }),
);

export const AssetStatsRow = Type.Object({
  assetId: Type.Integer(),
  summary: Type.Object({
    marketPositioning: DirectionBias,
    topTraderIds: Type.Object({ long: Type.Array(Type.Integer()), short: Type.Array(Type.Integer()) }),
  }),
});
export type AssetStatsRow = Type.Static<typeof AssetStatsRow>;

export const AssetStatsResponse = SuccessEnvelope(
  Type.Object({
    results: Type.Array(AssetStatsRow),
    filtersApplied: Type.Object({
      traderIds: Type.Array(Type.Integer()),
      direction: Nullable(Direction),
      appliedTimeRange: AppliedTimeRange,
    }),
    meta: Type.Object({
      requestedAssetIds: Type.Array(Type.Integer()),
      missingAssetIds: Type.Array(Type.Integer()),
      serverTime: DateTime,
    }),
  }),
);

/** `full`: every position of the sample has reached the window; `partial`: some have; `not_applicable`: an activity metric. */
export const WINDOW_EVALUABILITY = ['full', 'partial', 'not_applicable'] as const;

export const RankingRow = Type.Object({
  traderId: Type.Integer(),
  rank: Type.Integer({ minimum: 1 }),
  metricValue: Nullable(Type.Number()),
  eventCount: Count,
  positionCount: Count,
  directionBias: DirectionBias,
  timeBasedPerformance: Type.Optional(TimeBasedPerformance),
});
export type RankingRow = Type.Static<typeof RankingRow>;

export const RankingsResponse = SuccessEnvelope(
  Type.Object({
    results: Type.Array(RankingRow),
    filtersApplied: Type.Object({
      metric: StringEnum(RANKING_METRICS),
      assetIds: Type.Array(Type.Integer()),
      direction: Nullable(Direction),
      timeBasedPerformanceWindow: StringEnum(WINDOWS),
      minPositions: Count,
      windowEvaluability: StringEnum(WINDOW_EVALUABILITY),
      appliedTimeRange: AppliedTimeRange,
    }),
    meta: Type.Object({ totalCandidates: Count, serverTime: DateTime }),
  }),
);

export const ActivityBucket = Type.Object({ start: DateTime, end: DateTime, messageCount: Count, eventCount: Count });
export const ActivityGroup = Type.Object({
  traderId: Type.Optional(Type.Integer()),
  messageCount: Count,
  eventCount: Count,
  buckets: Type.Array(ActivityBucket),
});
export type ActivityGroup = Type.Static<typeof ActivityGroup>;

export const ActivitySummariesResponse = SuccessEnvelope(
  Type.Object({
    results: Type.Array(ActivityGroup),
    filtersApplied: Type.Object({
      groupBy: StringEnum(ACTIVITY_GROUP_BY),
      interval: StringEnum(ACTIVITY_INTERVALS),
      eventTypes: Type.Array(EventType),
      traderIds: Type.Array(Type.Integer()),
      appliedTimeRange: AppliedTimeRange,
    }),
    meta: Type.Object({ totalMessages: Count, totalEvents: Count, serverTime: DateTime }),
  }),
);

export const TraderActivityRow = Type.Object({ traderId: Type.Integer(), positionCount: Count });
export type TraderActivityRow = Type.Static<typeof TraderActivityRow>;
export const TraderActivityResponse = SuccessEnvelope(Type.Object({ results: Type.Array(TraderActivityRow), meta: ListMeta(true) }));

/** `details` of PERFORMANCE_WINDOW_NOT_ELAPSED (contract 7). */
const RangeAndWindow = { startTime: DateTime, endTime: DateTime, timeBasedPerformanceWindow: StringEnum(WINDOWS) };
export const WindowNotElapsedDetails = Type.Object({
  requested: Type.Object({
    startTime: Nullable(DateTime),
    endTime: Nullable(DateTime),
    timeBasedPerformanceWindow: Nullable(StringEnum(WINDOWS)),
  }),
  resolved: Type.Object(RangeAndWindow),
  alternatives: Type.Array(Type.Object({ strategy: StringEnum(['preserve_sample', 'preserve_evaluation']), ...RangeAndWindow })),
});
export type WindowNotElapsedDetails = Type.Static<typeof WindowNotElapsedDetails>;
