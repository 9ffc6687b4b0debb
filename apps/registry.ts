import type Type from 'typebox';
import type { TObject, TSchema } from 'typebox';
import {
  ActivitySummariesResponse,
  AssetStatsResponse,
  RankingsResponse,
  TraderActivityResponse,
  TraderStatsResponse,
  WindowNotElapsedDetails,
} from '../schemas/api/analytics.ts';
import { FeedResponse, ListEnvelope } from '../schemas/api/envelope.ts';
import { exportQuery } from '../schemas/api/exports.ts';
import {
  ActivitySummariesQuery,
  AssetStatsQuery,
  AssetsQuery,
  EventsQuery,
  FeedQuery,
  LegacyTradersQuery,
  MessagesQuery,
  OpenPositionsQuery,
  PositionsQuery,
  RankingsQuery,
  SummariesQuery,
  TraderActivityQuery,
  TraderDirectoryQuery,
  TraderStatsQuery,
} from '../schemas/api/queries.ts';
import {
  AggregateSummary,
  AssetRow,
  ChannelSummary,
  Event,
  FeedItem,
  LegacyTraderRow,
  Message,
  OpenPosition,
  Position,
  TraderDirectoryRow,
} from '../schemas/api/resources.ts';
import type { Scope } from '../schemas/topics/index.ts';
import { FEED_CHANGES_TABLE, FEED_GROUPS_TABLE } from '../storage/tables/feed-groups.ts';
import { MESSAGES_TABLE } from '../storage/tables/messages.ts';
import { PRICES_TABLE } from '../storage/tables/prices.ts';
import { EVENTS_TABLE, POSITIONS_TABLE } from '../storage/tables/trading.ts';
import { activitySummaries } from './reads/analytics/activity.ts';
import { assetStats } from './reads/analytics/asset-stats.ts';
import { rankTraders } from './reads/analytics/rankings.ts';
import { traderActivity } from './reads/analytics/trader-activity.ts';
import { traderStats } from './reads/analytics/trader-stats.ts';
import { listAssets } from './reads/assets.ts';
import type { CacheRule } from './reads/cache-rule.ts';
import type { ReadContext } from './reads/context.ts';
import { ANALYTICS_COST, LIST_COST, type ReadCost } from './reads/cost.ts';
import type { CursorCodec } from './reads/cursor.ts';
import { exportEvents, listEvents } from './reads/events.ts';
import type { NativeExportOf } from './reads/exports.ts';
import { exportFeed, listFeed, sincePollShare } from './reads/feed.ts';
import { exportMessages, listMessages } from './reads/messages.ts';
import { untilNextStatusChange } from './reads/performance.ts';
import { exportPositions, listOpenPositions, listPositions } from './reads/positions.ts';
import type { Principal } from './reads/principal.ts';
import { listAggregateSummaries, listChannelSummaries } from './reads/summaries.ts';
import { listLegacyTraders, listTraderDirectory } from './reads/traders.ts';

export type Version = 'v1' | 'v2';

/**
 * One entry per row of the contract's section 4 table. REST routes (per version), MCP tools and
 * OpenAPI are all generated from these entries; a read is written once, in `apps/reads/`.
 */
export interface Operation<Q extends TObject = TObject> {
  /** The MCP tool name, which is also the operation's id. */
  tool: string;
  path: string;
  versions: readonly Version[];
  scope: Scope;
  /** Which visibility the caller's account needs at all (rows are then filtered by it). */
  visibility: 'msg' | 'sig' | 'either' | 'both' | null;
  summary: string;
  /** When to use it (and what it is evidence for): the MCP tool's description and the agent guide say it. */
  guidance: string;
  query: Q;
  response: TSchema;
  /** The read, its query typed from `query` (`operation` checks each entry's handler against it). */
  handler(ctx: ReadContext, query: Type.Static<Q>): Promise<unknown>;
  /** When an answer may be served from the read cache (DESIGN 9); absent: never. */
  cache?: CacheRule;
  /** The 422 error the read may answer (contract 7), and the schema of its `details` (null: none). */
  unprocessable?: { code: 'PERFORMANCE_WINDOW_NOT_ELAPSED' | 'BUCKET_LIMIT_EXCEEDED'; details: TSchema | null };
  /** The bounds of each of its store queries (issue 24): LIST_COST unless it says otherwise. */
  cost?: ReadCost;
  /** How its MCP tool sizes answers for assistants (issue 27). */
  mcp: McpSizing;
  /** A read that may be held until the data changes (the feed's since-polls, issue 28). */
  longPoll?: LongPoll;
  /** The family's export (issue 28): its whole result set in one streaming GET; REST only. */
  export?: ExportRoute;
}

/**
 * An export (apps/api/exports.ts): at `/v2{path}`, the read's result set in NDJSON, CSV or
 * Parquet, with the read's own filters (`query`: exportQuery of the read's query) and its rows'
 * schema (`item`: the columns).
 */
export interface ExportRoute {
  path: string;
  query: TObject;
  item: TSchema;
  /** Headers the export starts with, read before its first row (the feed: the watermark to poll from afterwards). */
  headers?: (ctx: ReadContext, query: Record<string, unknown>) => Promise<Record<string, string>>;
  /** The export as one statement of the store, written in the store's own output formats. */
  native: NativeExportOf;
}

/**
 * A long-poll (REST): when `seconds` says the request asks to be held and its answer is `empty`,
 * the request waits, costing no query, until a commit touches `tables`, then reads again; it
 * answers when the answer is no longer empty or the seconds have passed. Every answer of such a
 * read says how often the server prefers to be polled (X-Poll-Interval, seconds).
 */
export interface LongPoll {
  /** Whether the request is one of the polls (X-Poll-Interval), and how long it asks to be held (undefined: not at all). */
  polls(query: Record<string, unknown>): boolean;
  seconds(query: Record<string, unknown>): number | undefined;
  tables: readonly { name: string }[];
  empty(answer: any): boolean;
  /** What the poll asks after an empty answer: from where that answer left it. */
  next(query: Record<string, unknown>, answer: any): Record<string, unknown>;
  intervalSeconds: number;
  /**
   * What makes woken polls one question whoever asks (they then share one read), and how one
   * caller's answer becomes another's; null: this poll shares with no other account.
   */
  share?: (
    query: Record<string, unknown>,
    p: Principal,
    cursors: CursorCodec,
  ) => { key: string; resign(answer: any, from: Principal, to: Principal): any } | null;
}

/**
 * What an assistant pays for one tool result, in tokens (o200k_base): the text and the
 * structuredContent of a result each stay within `MCP_BUDGET.default` when the call leaves `limit`
 * out (and for the stats tools, which have none), within `MCP_BUDGET.asked` when it gives one.
 * A page that would exceed it comes back with fewer rows (at least one) and a cursor for the rest.
 */
export const MCP_BUDGET = { default: 2_000, asked: 8_000 } as const;

export interface McpSizing {
  /** The MCP default of `limit`, where the read has one: a page an assistant can read whole (REST keeps the contract's). */
  limit?: number;
  /** Which other tool answers the follow-up question, and with what: the description and the result's text say it. */
  next: string;
}

/**
 * Whether a handler's query type `V` is its schema's: what the schema validates (`S`, with the
 * defaults validation fills in made required), and no parameter the schema does not have.
 */
type QueryCheck<V, S> = V extends S
  ? Exclude<keyof V, keyof S> extends never
    ? unknown
    : { handlerReadsParametersTheSchemaLacks: Exclude<keyof V, keyof S> }
  : { handlerQueryIsNotWhatTheSchemaValidates: never };

/** An entry of OPERATIONS, its handler's query type checked against its own query schema. */
const operation = <Q extends TObject, V>(
  op: Omit<Operation<Q>, 'handler'> & { handler: (ctx: ReadContext, query: V) => Promise<unknown> } & QueryCheck<V, Type.Static<Q>>,
): Operation => op as unknown as Operation;

export const OPERATIONS: readonly Operation[] = [
  operation({
    tool: 'list_trader_directory',
    path: '/traders',
    versions: ['v2'],
    scope: 'directory.read',
    visibility: 'either',
    summary: 'Trader identity directory: name, slug, avatar and the assigned source identity. Ordered by name, then id.',
    guidance:
      'Use to find traders by name or platform and to turn names into traderIds for the other tools. Directory rows say who a trader is, not what they traded: it grants no content and carries no counts.',
    query: TraderDirectoryQuery,
    response: ListEnvelope(TraderDirectoryRow, false),
    handler: listTraderDirectory,
    cache: {}, // no clock in the answer: only the data version (and MAX_TTL_MS) ends an entry
    mcp: {
      limit: 15,
      next: "list_trader_stats (traderIds) for a trader's figures, list_events or list_positions (traderIds) for what they traded",
    },
  }),
  operation({
    tool: 'list_traders',
    path: '/traders',
    versions: ['v1'],
    scope: 'directory.read',
    visibility: 'either',
    summary:
      'Legacy trader discovery (v1): directory rows with tradeCount, the eligible visible positions opened within the bounds; at least minTrades (default 3, 0: the whole visible directory). Ordered by name, then id.',
    guidance:
      'Legacy form of trader discovery (REST v1) with a tradeCount per trader; prefer list_trader_directory to find traders and list_trader_activity or list_trader_stats for counts.',
    query: LegacyTradersQuery,
    response: ListEnvelope(LegacyTraderRow, true),
    handler: listLegacyTraders,
    mcp: {
      limit: 15,
      next: "list_trader_stats (traderIds) for a trader's figures, list_events or list_positions (traderIds) for what they traded",
    },
  }),
  operation({
    tool: 'list_assets',
    path: '/assets',
    versions: ['v1', 'v2'],
    scope: 'directory.read',
    visibility: null,
    summary: 'Asset discovery: assets with an active market, with raw and resolved asset class. Ordered by symbol, then id.',
    guidance:
      'Use to find assets by symbol, name or class and to turn symbols into assetIds for the other tools; traderIds lists the assets those traders hold positions in.',
    query: AssetsQuery,
    response: ListEnvelope(AssetRow, false),
    handler: listAssets,
    cache: {}, // no clock in the answer: only the data version (and MAX_TTL_MS) ends an entry
    mcp: {
      limit: 25,
      next: 'list_asset_stats (assetIds) for the long/short split, list_open_positions or list_events (assetIds) for the positions and trades',
    },
  }),
  operation({
    tool: 'list_events',
    path: '/events',
    versions: ['v1', 'v2'],
    scope: 'events.read',
    visibility: 'sig',
    summary: 'Trade events, newest first by timeOfEvent (ties by id descending).',
    guidance:
      'Use to see individual trade events (open, close, increase, decrease) with their prices and times, for example to show what a trader did recently. Page with cursor; do not page through events to count them: exact counts come from summarize_message_activity, list_trader_stats and rank_traders.',
    query: EventsQuery,
    response: ListEnvelope(Event, true),
    handler: listEvents,
    cache: { window: { table: EVENTS_TABLE, column: 'timeOfEvent' }, narrows: { traders: 'traderIds', assets: 'assetIds' } },
    export: {
      path: '/exports/events',
      query: exportQuery(EventsQuery),
      item: Event,
      native: (ctx, q, resume, rows) => exportEvents(ctx, q, resume, rows),
    },
    mcp: {
      limit: 15,
      next: 'list_messages (ids = messageId) for the source text, list_positions (positionIds) for the position and its returns',
    },
  }),
  operation({
    tool: 'list_messages',
    path: '/messages',
    versions: ['v1', 'v2'],
    scope: 'messages.read',
    visibility: 'msg',
    summary: 'Source messages, newest first by writtenAt. `ids` hydrates messages by Source Message ID (no default window then).',
    guidance:
      'Use to read what traders actually wrote (the source messages behind the signals), or to hydrate messages by id from events and the feed. Not evidence for trade counts.',
    query: MessagesQuery,
    response: ListEnvelope(Message, true),
    handler: listMessages,
    cache: { window: { table: MESSAGES_TABLE, column: 'writtenAt' } },
    export: {
      path: '/exports/messages',
      query: exportQuery(MessagesQuery),
      item: Message,
      native: (ctx, q, resume, rows, format) => exportMessages(ctx, q, resume, rows, format),
    },
    mcp: {
      limit: 8,
      next: "list_events (traderIds, with the message's time) for the trades it announced, list_trader_directory for who wrote it",
    },
  }),
  operation({
    tool: 'list_positions',
    path: '/positions',
    versions: ['v1', 'v2'],
    scope: 'positions.read',
    visibility: 'sig',
    summary: 'Position history (open and closed), newest openAt first, with 1D/7D/30D time-based performances.',
    guidance:
      'Use to see individual positions (open and closed) with their entry and fixed-window 1D/7D/30D returns; positionIds hydrates known positions. For aggregate performance use list_trader_stats or rank_traders instead of paging positions.',
    query: PositionsQuery,
    response: ListEnvelope(Position, true),
    handler: listPositions,
    // too_young turns into another status as the clock passes openAt + window
    cache: {
      window: { table: POSITIONS_TABLE, column: 'openAt' },
      ttlMs: untilNextStatusChange,
      narrows: { traders: 'traderIds', assets: 'assetIds' },
    },
    export: {
      path: '/exports/positions',
      query: exportQuery(PositionsQuery),
      item: Position,
      native: (ctx, q, resume, rows, format) => exportPositions(ctx, q, resume, rows, format),
    },
    mcp: {
      limit: 10,
      next: "list_events (traderIds, assetIds) for the trades of a position, list_trader_stats for a trader's aggregate performance",
    },
  }),
  operation({
    tool: 'list_open_positions',
    path: '/positions/open',
    versions: ['v1', 'v2'],
    scope: 'positions.read',
    visibility: 'sig',
    summary: 'Currently open positions with a best-effort live mark from the latest price.',
    guidance:
      'Use for what is open right now, with a best-effort current mark; the mark carries no timestamp. For the long/short skew of an asset use list_asset_stats.',
    query: OpenPositionsQuery,
    response: ListEnvelope(OpenPosition, false),
    handler: listOpenPositions,
    // live marks: the latest price sample at or before serverTime, so a later sample changes the answer when it comes into force
    cache: { inForce: { table: PRICES_TABLE, column: 'at' }, narrows: { traders: 'traderIds', assets: 'assetIds' } },
    mcp: { limit: 15, next: "list_asset_stats (assetIds) for the long/short skew, list_positions (positionIds) for a position's history" },
  }),
  operation({
    tool: 'list_feed',
    path: '/feed',
    versions: ['v1', 'v2'],
    scope: 'feed.read',
    visibility: 'both',
    summary:
      'Partner feed: one group per source message with its curated trade events, newest writtenAt first; `since` polls the groups changed after a watermark (store every nextCursor).',
    guidance:
      'Use to follow new signals as they arrive: groups of one source message and its curated trade events. A partner polls with since and stores every nextCursor; an assistant usually wants the first page.',
    query: FeedQuery,
    response: FeedResponse(FeedItem),
    handler: listFeed,
    // Pages, and since-polls, until the data changes; at most MAX_TTL_MS (10 minutes, contract 8). Shared by
    // the accounts of one policy (since-polls at one watermark too: LongPoll.share), each told its own
    // dataComputedAt and signed its own nextCursor (apps/api/read-cache.ts).
    cache: { window: { table: FEED_GROUPS_TABLE, column: 'writtenAt' } },
    // A since-poll with `wait` is held until a feed change is committed (then read again: held
    // only while the caller still sees nothing new) or the seconds pass.
    longPoll: {
      polls: (q) => q.since !== undefined,
      seconds: (q) => (q.since !== undefined ? (q.wait as number | undefined) : undefined),
      tables: [FEED_CHANGES_TABLE],
      empty: (a) => !a.results.length && !a.meta.removedIds?.length && !a.meta.hasMore,
      // Its nextCursor: a held `since=now` goes on from the head it started at.
      next: (q, a) => ({ ...q, since: a.meta.nextCursor }),
      intervalSeconds: 5,
      share: (q, p, cursors) => sincePollShare(q as FeedQuery, p, cursors),
    },
    // The groups, and the watermark to since-poll from afterwards (read before them: a change while they stream comes again in a poll).
    export: {
      path: '/exports/feed',
      query: exportQuery(FeedQuery, ['since', 'wait']),
      item: FeedItem,
      native: (ctx, q, resume, rows, format) => exportFeed(ctx, q, resume, rows, format),
      headers: async (ctx, q) => ({
        'x-feed-since': (await listFeed(ctx, { ...q, since: 'now', limit: 1 } as FeedQuery)).meta.nextCursor!,
      }),
    },
    mcp: { limit: 3, next: 'list_messages (ids) for a message in full, list_positions (positionIds) for the positions behind the events' },
  }),
  operation({
    tool: 'list_channel_summaries',
    path: '/channel-summaries',
    versions: ['v1', 'v2'],
    scope: 'summaries.read',
    visibility: 'msg',
    summary:
      'Generated narrative summaries of one trader channel each, newest windowStart first; only safe ones unless includeLowSignal. Narrative, not evidence for exact counts, rankings or open-position skew.',
    guidance:
      'Use for the narrative of one channel over a window (themes, bias, insights). Generated text: never evidence for exact counts, rankings or open-position skew.',
    query: SummariesQuery,
    response: ListEnvelope(ChannelSummary, true),
    handler: listChannelSummaries,
    mcp: {
      limit: 8,
      next: 'list_messages (startTime, endTime) for what was actually written, summarize_message_activity for exact counts',
    },
  }),
  operation({
    tool: 'list_aggregate_summaries',
    path: '/aggregate-summaries',
    versions: ['v1', 'v2'],
    scope: 'summaries.read',
    visibility: null,
    summary:
      'Generated narrative summaries across all channels, newest windowStart first, with coverage counts; only safe ones unless includeLowSignal. Narrative, not evidence for exact counts, rankings or open-position skew.',
    guidance:
      'Use for the market narrative across all channels over a window. Generated text: never evidence for exact counts, rankings or open-position skew.',
    query: SummariesQuery,
    response: ListEnvelope(AggregateSummary, true),
    handler: listAggregateSummaries,
    mcp: {
      limit: 3,
      next: 'list_channel_summaries for single channels, summarize_message_activity and rank_traders for exact counts and rankings',
    },
  }),
  // Analytics reads (README "Analytics reads"): cached like the lists (issue 26). Each says when the clock may change its
  // answer (saysUntil: its bounds as a rule over the clock, windows coming of age, rows entering or leaving a default range);
  // commits end an answer when they touch the tables it read. A 422 is an error, never cached.
  operation({
    tool: 'list_trader_activity',
    path: '/traders/activity',
    versions: ['v2'],
    scope: 'stats.read',
    visibility: 'sig',
    summary:
      'Traders with their count of eligible positions (open time within the bounds, optionally on given assets), at least minPositionCount. Ordered by name, then id.',
    guidance:
      'Use to list which traders opened at least minPositionCount eligible positions in a period (optionally on given assets), alphabetically with their exact positionCount.',
    query: TraderActivityQuery,
    response: TraderActivityResponse,
    handler: traderActivity,
    cache: { saysUntil: true },
    cost: ANALYTICS_COST,
    mcp: { next: 'list_trader_stats (traderIds) for their performance, list_positions (traderIds) for the positions counted' },
  }),
  operation({
    tool: 'list_trader_stats',
    path: '/traders/stats',
    versions: ['v1', 'v2'],
    scope: 'stats.read',
    visibility: 'sig',
    summary:
      'Stats of up to 200 traders: positions opened within the bounds, direction bias, and 1D/7D/30D time-based performance with coverage; tags and source identity.',
    guidance:
      'Use for exact per-trader figures over a period: position counts, long/short bias and fixed-window performance with coverage. Ids not found or not visible come back in meta.missingTraderIds.',
    query: TraderStatsQuery,
    response: TraderStatsResponse,
    handler: traderStats,
    // Only the requested traders' sample rows, names, sources and tags make an answer.
    cache: { saysUntil: true, narrows: { traders: 'traderIds' } },
    cost: ANALYTICS_COST,
    mcp: { next: 'list_positions (traderIds) for the positions behind the figures, rank_traders to compare traders' },
  }),
  operation({
    tool: 'list_asset_stats',
    path: '/assets/stats',
    versions: ['v1', 'v2'],
    scope: 'stats.read',
    visibility: 'sig',
    summary:
      'Stats of up to 200 assets: market positioning (long/short split of positions opened within the bounds) and the top traders per direction.',
    guidance:
      'Use for the exact long/short split of positions opened on given assets in a period and the top traders per direction. Ids not found come back in meta.missingAssetIds.',
    query: AssetStatsQuery,
    response: AssetStatsResponse,
    handler: assetStats,
    // Only sample rows of the requested assets (and of the traders asked for, when given) are counted.
    cache: { saysUntil: true, narrows: { assets: 'assetIds', traders: 'traderIds' } },
    cost: ANALYTICS_COST,
    mcp: { next: 'list_open_positions (assetIds) for what is open now, list_trader_stats (traderIds) for the top traders' },
  }),
  operation({
    tool: 'rank_traders',
    path: '/traders/rankings',
    versions: ['v1', 'v2'],
    scope: 'stats.read',
    visibility: 'sig',
    summary:
      'Traders ranked by event count, position count, or a time-based performance metric (win rate, average or median return, Sharpe ratio) over positions opened within the bounds. No pagination.',
    guidance:
      'Use to answer who is the most active or best-performing trader. Exact and valid as evidence. Performance metrics need positions whose evaluation window has elapsed: otherwise the error PERFORMANCE_WINDOW_NOT_ELAPSED lists alternatives (a shorter window, or an earlier start) to retry with.',
    query: RankingsQuery,
    response: RankingsResponse,
    handler: rankTraders,
    // Every trader is a candidate: no narrowing.
    cache: { saysUntil: true },
    cost: ANALYTICS_COST,
    unprocessable: { code: 'PERFORMANCE_WINDOW_NOT_ELAPSED', details: WindowNotElapsedDetails },
    mcp: { next: "list_trader_stats (traderIds) for a ranked trader's full figures, list_positions (traderIds) for their positions" },
  }),
  operation({
    tool: 'summarize_message_activity',
    path: '/activity-summaries',
    versions: ['v1', 'v2'],
    scope: 'stats.read',
    visibility: 'either',
    summary:
      'Message and trade-event counts per trader (or overall) in UTC hour, day or ISO-week buckets; valid as evidence for counts, volumes and trends. No pagination.',
    guidance:
      'Use for exact counts and trends of messages and trade events per trader or overall, in hour, day or week buckets; valid as evidence for counts, volumes and trends. More than 168 buckets per group is BUCKET_LIMIT_EXCEEDED: use a larger interval or a shorter range.',
    query: ActivitySummariesQuery,
    response: ActivitySummariesResponse,
    handler: activitySummaries,
    cache: { saysUntil: true },
    cost: ANALYTICS_COST,
    unprocessable: { code: 'BUCKET_LIMIT_EXCEEDED', details: null },
    mcp: { limit: 5, next: 'list_messages or list_events (traderIds, startTime, endTime of a bucket) for the items counted' },
  }),
];

export const costOf = (op: Operation): ReadCost => op.cost ?? LIST_COST;

const none = (m: Principal['messageVisibility']): boolean => m.mode === 'none';

/** Why the caller may not use the read at all (its scope, or the visibility the read needs), or null: both surfaces refuse with it. */
export function policyRefusal(op: Operation, p: Principal, credential = 'key'): string | null {
  if (!p.scopes.has(op.scope)) return `This ${credential} lacks the ${op.scope} scope`;
  if (op.visibility === 'msg' && none(p.messageVisibility)) return 'This account has no message visibility';
  if (op.visibility === 'sig' && none(p.signalVisibility)) return 'This account has no signal visibility';
  if (op.visibility === 'either' && none(p.messageVisibility) && none(p.signalVisibility))
    return 'This account has neither message nor signal visibility';
  if (op.visibility === 'both' && (none(p.messageVisibility) || none(p.signalVisibility)))
    return 'The feed needs both message and signal visibility';
  return null;
}
