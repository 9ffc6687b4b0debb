import type { TObject, TSchema } from 'typebox';
import {
  ActivitySummariesQuery, AssetsQuery, LegacyTradersQuery, AssetStatsQuery, EventsQuery, MessagesQuery, OpenPositionsQuery, PositionsQuery, FeedQuery, RankingsQuery, SummariesQuery,
  TraderActivityQuery, TraderDirectoryQuery, TraderStatsQuery,
} from '../schemas/api/queries.ts';
import {
  ActivitySummariesResponse, AssetStatsResponse, RankingsResponse, TraderActivityResponse, TraderStatsResponse, WindowNotElapsedDetails,
} from '../schemas/api/analytics.ts';
import { FeedResponse, ListEnvelope } from '../schemas/api/envelope.ts';
import { AggregateSummary, AssetRow, ChannelSummary, Event, FeedItem, LegacyTraderRow, Message, OpenPosition, Position, TraderDirectoryRow } from '../schemas/api/resources.ts';
import type { Scope } from '../schemas/topics/index.ts';
import type { ReadContext } from './reads/context.ts';
import type { CacheRule } from './api/read-cache.ts';
import { untilNextStatusChange } from './reads/performance.ts';
import { listAssets } from './reads/assets.ts';
import { listEvents } from './reads/events.ts';
import { listFeed } from './reads/feed.ts';
import { listMessages } from './reads/messages.ts';
import { listOpenPositions, listPositions } from './reads/positions.ts';
import { listAggregateSummaries, listChannelSummaries } from './reads/summaries.ts';
import { listLegacyTraders, listTraderDirectory } from './reads/traders.ts';
import { activitySummaries } from './reads/analytics/activity.ts';
import { assetStats } from './reads/analytics/asset-stats.ts';
import { rankTraders } from './reads/analytics/rankings.ts';
import { traderActivity } from './reads/analytics/trader-activity.ts';
import { traderStats } from './reads/analytics/trader-stats.ts';

export type Version = 'v1' | 'v2';

/**
 * One entry per row of the contract's section 4 table. REST routes (per version), MCP tools and
 * OpenAPI are all generated from these entries; a read is written once, in `apps/reads/`.
 */
export interface Operation {
  /** The MCP tool name, which is also the operation's id. */
  tool: string;
  path: string;
  versions: readonly Version[];
  scope: Scope;
  /** Which visibility the caller's account needs at all (rows are then filtered by it). */
  visibility: 'msg' | 'sig' | 'either' | 'both' | null;
  summary: string;
  query: TObject;
  response: TSchema;
  handler: (ctx: ReadContext, query: any) => Promise<unknown>;
  /** When an answer may be served from the read cache (DESIGN 9); absent: never. */
  cache?: CacheRule;
  /** The 422 error the read may answer (contract 7), and the schema of its `details` (null: none). */
  unprocessable?: { code: 'PERFORMANCE_WINDOW_NOT_ELAPSED' | 'BUCKET_LIMIT_EXCEEDED'; details: TSchema | null };
}

export const OPERATIONS: readonly Operation[] = [
  {
    tool: 'list_trader_directory', path: '/traders', versions: ['v2'], scope: 'directory.read', visibility: 'either',
    summary: 'Trader identity directory: name, slug, avatar and the assigned source identity. Ordered by name, then id.',
    query: TraderDirectoryQuery,
    response: ListEnvelope(TraderDirectoryRow, false),
    handler: listTraderDirectory,
    cache: {}, // no clock in the answer: only the data version (and MAX_TTL_MS) ends an entry
  },
  {
    tool: 'list_traders', path: '/traders', versions: ['v1'], scope: 'directory.read', visibility: 'either',
    summary: 'Legacy trader discovery (v1): directory rows with tradeCount, the eligible visible positions opened within the bounds; at least minTrades (default 3, 0: the whole visible directory). Ordered by name, then id.',
    query: LegacyTradersQuery,
    response: ListEnvelope(LegacyTraderRow, true),
    handler: listLegacyTraders,
  },
  {
    tool: 'list_assets', path: '/assets', versions: ['v1', 'v2'], scope: 'directory.read', visibility: null,
    summary: 'Asset discovery: assets with an active market, with raw and resolved asset class. Ordered by symbol, then id.',
    query: AssetsQuery,
    response: ListEnvelope(AssetRow, false),
    handler: listAssets,
    cache: {}, // no clock in the answer: only the data version (and MAX_TTL_MS) ends an entry
  },
  {
    tool: 'list_events', path: '/events', versions: ['v1', 'v2'], scope: 'events.read', visibility: 'sig',
    summary: 'Trade events, newest first by timeOfEvent (ties by id descending).',
    query: EventsQuery,
    response: ListEnvelope(Event, true),
    handler: listEvents,
    cache: { window: { table: 'events', column: 'timeOfEvent' } },
  },
  {
    tool: 'list_messages', path: '/messages', versions: ['v1', 'v2'], scope: 'messages.read', visibility: 'msg',
    summary: 'Source messages, newest first by writtenAt. `ids` hydrates messages by Source Message ID (no default window then).',
    query: MessagesQuery,
    response: ListEnvelope(Message, true),
    handler: listMessages,
    cache: { window: { table: 'messages', column: 'writtenAt' } },
  },
  {
    tool: 'list_positions', path: '/positions', versions: ['v1', 'v2'], scope: 'positions.read', visibility: 'sig',
    summary: 'Position history (open and closed), newest openAt first, with 1D/7D/30D time-based performances.',
    query: PositionsQuery,
    response: ListEnvelope(Position, true),
    handler: listPositions,
    // too_young turns into another status as the clock passes openAt + window
    cache: { window: { table: 'positions', column: 'openAt' }, ttlMs: untilNextStatusChange },
  },
  {
    tool: 'list_open_positions', path: '/positions/open', versions: ['v1', 'v2'], scope: 'positions.read', visibility: 'sig',
    summary: 'Currently open positions with a best-effort live mark from the latest price.',
    query: OpenPositionsQuery,
    response: ListEnvelope(OpenPosition, false),
    handler: listOpenPositions,
    // live marks: the latest price sample at or before serverTime, so a later sample changes the answer when it comes into force
    cache: { inForce: { table: 'prices', column: 'at' } },
  },
  {
    tool: 'list_feed', path: '/feed', versions: ['v1', 'v2'], scope: 'feed.read', visibility: 'both',
    summary: 'Partner feed: one group per source message with its curated trade events, newest writtenAt first; `since` polls the groups changed after a watermark (store every nextCursor).',
    query: FeedQuery,
    response: FeedResponse(FeedItem),
    handler: listFeed,
    // Pages, and since-polls (keyed per account: the watermark is the caller's own), until the data changes; at most MAX_TTL_MS (10 minutes, contract 8).
    cache: { window: { table: 'feed_groups', column: 'writtenAt' } },
  },
  {
    tool: 'list_channel_summaries', path: '/channel-summaries', versions: ['v1', 'v2'], scope: 'summaries.read', visibility: 'msg',
    summary: 'Generated narrative summaries of one trader channel each, newest windowStart first; only safe ones unless includeLowSignal. Narrative, not evidence for exact counts, rankings or open-position skew.',
    query: SummariesQuery,
    response: ListEnvelope(ChannelSummary, true),
    handler: listChannelSummaries,
  },
  {
    tool: 'list_aggregate_summaries', path: '/aggregate-summaries', versions: ['v1', 'v2'], scope: 'summaries.read', visibility: null,
    summary: 'Generated narrative summaries across all channels, newest windowStart first, with coverage counts; only safe ones unless includeLowSignal. Narrative, not evidence for exact counts, rankings or open-position skew.',
    query: SummariesQuery,
    response: ListEnvelope(AggregateSummary, true),
    handler: listAggregateSummaries,
  },
  // Analytics reads (README "Analytics reads"): answers move with the clock (too_young, default bounds), so none is cached yet.
  {
    tool: 'list_trader_activity', path: '/traders/activity', versions: ['v2'], scope: 'stats.read', visibility: 'sig',
    summary: 'Traders with their count of eligible positions (open time within the bounds, optionally on given assets), at least minPositionCount. Ordered by name, then id.',
    query: TraderActivityQuery,
    response: TraderActivityResponse,
    handler: traderActivity,
  },
  {
    tool: 'list_trader_stats', path: '/traders/stats', versions: ['v1', 'v2'], scope: 'stats.read', visibility: 'sig',
    summary: 'Stats of up to 200 traders: positions opened within the bounds, direction bias, and 1D/7D/30D time-based performance with coverage; tags and source identity.',
    query: TraderStatsQuery,
    response: TraderStatsResponse,
    handler: traderStats,
  },
  {
    tool: 'list_asset_stats', path: '/assets/stats', versions: ['v1', 'v2'], scope: 'stats.read', visibility: 'sig',
    summary: 'Stats of up to 200 assets: market positioning (long/short split of positions opened within the bounds) and the top traders per direction.',
    query: AssetStatsQuery,
    response: AssetStatsResponse,
    handler: assetStats,
  },
  {
    tool: 'rank_traders', path: '/traders/rankings', versions: ['v1', 'v2'], scope: 'stats.read', visibility: 'sig',
    summary: 'Traders ranked by event count, position count, or a time-based performance metric (win rate, average or median return, Sharpe ratio) over positions opened within the bounds. No pagination.',
    query: RankingsQuery,
    response: RankingsResponse,
    handler: rankTraders,
    unprocessable: { code: 'PERFORMANCE_WINDOW_NOT_ELAPSED', details: WindowNotElapsedDetails },
  },
  {
    tool: 'summarize_message_activity', path: '/activity-summaries', versions: ['v1', 'v2'], scope: 'stats.read', visibility: 'either',
    summary: 'Message and trade-event counts per trader (or overall) in UTC hour, day or ISO-week buckets; valid as evidence for counts, volumes and trends. No pagination.',
    query: ActivitySummariesQuery,
    response: ActivitySummariesResponse,
    handler: activitySummaries,
    unprocessable: { code: 'BUCKET_LIMIT_EXCEEDED', details: null },
  },
];
