import Type from 'typebox';
import { StringEnum } from '../topics/common.ts';
import {
  ASSET_CLASS_FILTER_VALUES,
  DIRECTION_VALUES,
  EnumList,
  EVENT_TYPE_VALUES,
  IdList,
  Limit,
  PLATFORM_VALUES,
  pageParams,
  Query,
  Search,
  StringList,
  type Validated,
  windowParams,
} from './common-params.ts';

/** Query parameters of each read (contract section 4); REST validation, MCP input and OpenAPI derive from these. */
const O = Type.Optional;

export const TraderDirectoryQuery = Query({ search: O(Search), sourcePlatforms: O(EnumList(PLATFORM_VALUES)), ...pageParams() });
export type TraderDirectoryQuery = Validated<Type.Static<typeof TraderDirectoryQuery>>;

/** v1's legacy trader discovery (contract 4 "GET /traders (v1, legacy)"): the directory plus `tradeCount`. */
export const LegacyTradersQuery = Query({
  search: O(Search),
  sourcePlatforms: O(EnumList(PLATFORM_VALUES)),
  minTrades: O(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 3,
      description: 'minimum tradeCount (default 3; 0 gives the full visible directory)',
    }),
  ),
  startTime: O(
    Type.String({
      format: 'date-time',
      description: 'inclusive lower bound on position open time for tradeCount and minTrades (omitted: unbounded)',
    }),
  ),
  endTime: O(
    Type.String({
      format: 'date-time',
      description: 'inclusive upper bound on position open time for tradeCount and minTrades (omitted: unbounded)',
    }),
  ),
  ...pageParams(),
});
export type LegacyTradersQuery = Validated<Type.Static<typeof LegacyTradersQuery>> & { minTrades: number };

export const AssetsQuery = Query({
  search: O(Search),
  assetClass: O(
    EnumList(ASSET_CLASS_FILTER_VALUES, {
      allowEmpty: true,
      description: 'resolved classes to match (any of); empty or omitted: all classes including other',
    }),
  ),
  assetIds: O(IdList('asset ids')),
  traderIds: O(IdList('assets these traders hold positions in')),
  ...pageParams(),
});
export type AssetsQuery = Validated<Type.Static<typeof AssetsQuery>>;

export const EventsQuery = Query({
  traderIds: O(IdList('trader ids')),
  assetIds: O(IdList('asset ids')),
  directions: O(EnumList(DIRECTION_VALUES)),
  types: O(EnumList(EVENT_TYPE_VALUES)),
  ...windowParams,
  ...pageParams(),
});
export type EventsQuery = Validated<Type.Static<typeof EventsQuery>>;

export const MessagesQuery = Query({
  traderIds: O(IdList("messages of these traders' assigned source")),
  ids: O(StringList('Source Message IDs', 200)),
  sourcePlatforms: O(EnumList(PLATFORM_VALUES)),
  ...windowParams,
  ...pageParams(),
});
export type MessagesQuery = Validated<Type.Static<typeof MessagesQuery>>;

const positionFilters = { traderIds: O(IdList('trader ids')), assetIds: O(IdList('asset ids')), directions: O(EnumList(DIRECTION_VALUES)) };

export const PositionsQuery = Query({ ...positionFilters, ...windowParams, ...pageParams(), positionIds: O(IdList('position ids', 200)) });
export type PositionsQuery = Validated<Type.Static<typeof PositionsQuery>>;

export const OpenPositionsQuery = Query({ ...positionFilters, ...pageParams() });
export type OpenPositionsQuery = Validated<Type.Static<typeof OpenPositionsQuery>>;

// Analytics reads (contract sections 2, 4, 8; README "Analytics reads").

/** At most this many ids in `traderIds` of trader stats and `assetIds` of asset stats (contract 8). */
export const STATS_MAX_IDS = 200;

export const TraderStatsQuery = Query({
  traderIds: IdList('traders to report on', STATS_MAX_IDS),
  ...windowParams,
  sourcePlatforms: O(EnumList(PLATFORM_VALUES, { description: 'only traders whose assigned source is on one of these platforms' })),
});
export type TraderStatsQuery = Type.Static<typeof TraderStatsQuery>;

export const AssetStatsQuery = Query({
  assetIds: IdList('assets to report on', STATS_MAX_IDS),
  traderIds: O(IdList('only positions of these traders')),
  direction: O(StringEnum(DIRECTION_VALUES, { description: 'only positions of this direction' })),
  ...windowParams,
});
export type AssetStatsQuery = Type.Static<typeof AssetStatsQuery>;

export const RANKING_METRICS = ['event_count', 'position_count', 'win_rate', 'avg_return', 'median_return', 'sharpe_ratio'] as const;
export type RankingMetric = (typeof RANKING_METRICS)[number];
export const ACTIVITY_METRICS: readonly RankingMetric[] = ['event_count', 'position_count'];
const WINDOW_VALUES = ['1D', '7D', '30D'] as const;
/** Applied by the read, not by validation: a 422 echoes the window as requested (null when omitted). */
export const DEFAULT_PERFORMANCE_WINDOW = '30D';

export const RankingsQuery = Query({
  metric: O(StringEnum(RANKING_METRICS, { default: 'event_count', description: 'what traders are ranked by (default event_count)' })),
  assetIds: O(IdList('only positions and events on these assets')),
  direction: O(StringEnum(DIRECTION_VALUES, { description: 'only positions and events of this direction' })),
  timeBasedPerformanceWindow: O(
    StringEnum(WINDOW_VALUES, { description: 'evaluation window of the performance metrics (default 30D); ignored for activity metrics' }),
  ),
  minPositions: O(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 3,
      description:
        'minimum scored positions for performance metrics (default 3; 0 includes every trader with a position in the sample); ignored for activity metrics',
    }),
  ),
  startTime: O(
    Type.String({
      format: 'date-time',
      description: "inclusive lower bound on position open time (default: 1 January 00:00 UTC of the applied endTime's year)",
    }),
  ),
  endTime: O(Type.String({ format: 'date-time', description: 'inclusive upper bound (default: serverTime)' })),
  limit: O(Limit(50, 10)),
});
export type RankingsQuery = Validated<Type.Static<typeof RankingsQuery>> & { metric: RankingMetric; minPositions: number };

export const ACTIVITY_GROUP_BY = ['trader', 'none'] as const;
export const ACTIVITY_INTERVALS = ['hour', 'day', 'week'] as const;
/** At most this many buckets per group (contract 8): more is BUCKET_LIMIT_EXCEEDED. */
export const MAX_BUCKETS = 168;

export const ActivitySummariesQuery = Query({
  groupBy: O(
    StringEnum(ACTIVITY_GROUP_BY, { default: 'trader', description: 'one group per trader, or one overall group (default trader)' }),
  ),
  interval: O(
    StringEnum(ACTIVITY_INTERVALS, { default: 'day', description: 'bucket size, UTC-aligned; weeks start on Monday (default day)' }),
  ),
  eventTypes: O(EnumList(EVENT_TYPE_VALUES, { description: 'event types counted (default all); message counts are not restricted' })),
  traderIds: O(IdList('only these traders')),
  startTime: O(Type.String({ format: 'date-time', description: 'inclusive lower bound (default: 7 days before the applied endTime)' })),
  endTime: O(Type.String({ format: 'date-time', description: 'inclusive upper bound (default: serverTime)' })),
  limit: O(Limit(50, 10)),
});
export type ActivitySummariesQuery = Validated<Type.Static<typeof ActivitySummariesQuery>> & {
  groupBy: (typeof ACTIVITY_GROUP_BY)[number];
  interval: (typeof ACTIVITY_INTERVALS)[number];
};

export const TraderActivityQuery = Query({
  sourcePlatforms: O(EnumList(PLATFORM_VALUES, { description: 'only traders whose assigned source is on one of these platforms' })),
  minPositionCount: O(
    Type.Integer({
      minimum: 0,
      maximum: 1_000_000_000,
      default: 3,
      description: 'minimum eligible positions (default 3; 0 includes traders with none, unless assetIds is given)',
    }),
  ),
  assetIds: O(IdList('count only positions on these assets; a trader then needs at least one')),
  startTime: O(Type.String({ format: 'date-time', description: 'inclusive lower bound on position open time (omitted: unbounded)' })),
  endTime: O(Type.String({ format: 'date-time', description: 'inclusive upper bound on position open time (omitted: unbounded)' })),
  ...pageParams(),
});
export type TraderActivityQuery = Validated<Type.Static<typeof TraderActivityQuery>> & { minPositionCount: number };

/** Channel and aggregate summaries (contract 4): overlap of the Source / Aggregate Window with the bounds, newest windowStart first. */
export const SummariesQuery = Query({
  startTime: O(Type.String({ format: 'date-time', description: 'summaries whose window ends after this time (windowEnd > startTime)' })),
  endTime: O(Type.String({ format: 'date-time', description: 'summaries whose window starts before this time (windowStart < endTime)' })),
  includeLowSignal: O(Type.Boolean({ default: false, description: 'also return low_signal summaries (default false: only safe ones)' })),
  ...pageParams(),
});
export type SummariesQuery = Validated<Type.Static<typeof SummariesQuery>> & { includeLowSignal: boolean };

/** The longest a since-poll may be held (`wait`, issue 28). */
export const MAX_WAIT_SECONDS = 30;

/** The partner feed (contract 4): groups by source-message post time; `since` polls changes by ingestion watermark. */
export const FeedQuery = Query({
  traderIds: O(IdList("groups of these traders (the trader assigned the message's source)")),
  assetIds: O(IdList('groups with an event on one of these assets')),
  startTime: O(Type.String({ format: 'date-time', description: "inclusive lower bound on the message's writtenAt" })),
  endTime: O(Type.String({ format: 'date-time', description: "inclusive upper bound on the message's writtenAt" })),
  since: O(
    Type.String({
      minLength: 1,
      maxLength: 4096,
      description:
        '0 (from the beginning of ingestion), now (start at the head: no groups, the current watermark in nextCursor) or the nextCursor of an earlier since-poll: changed groups in ingestion order',
    }),
  ),
  wait: O(
    Type.Integer({
      minimum: 1,
      maximum: MAX_WAIT_SECONDS,
      'x-rest-only': true,
      description: `with since: when nothing changed for this caller since the watermark, hold the poll up to this many seconds until a change it can see is committed (long-poll; REST only). The answer's X-Poll-Interval header says how often the server prefers to be polled without it`,
    }),
  ),
  ...pageParams(100, 20),
});
export type FeedQuery = Validated<Type.Static<typeof FeedQuery>>;
