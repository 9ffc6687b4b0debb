import type { TObject, TSchema } from 'typebox';
import {
  ASSET_CLASS_FILTER_VALUES, Cursor, DIRECTION_VALUES, EndTime, EnumList, EVENT_TYPE_VALUES, IdList, Limit, PLATFORM_VALUES, Query, Search,
  StartTime, StringList,
} from '../schemas/api/common-params.ts';
import { ListEnvelope } from '../schemas/api/envelope.ts';
import { AssetRow, Event, Message, OpenPosition, Position, TraderDirectoryRow } from '../schemas/api/resources.ts';
import type { Scope } from '../schemas/topics/index.ts';
import type { ReadContext } from './reads/context.ts';
import { listAssets } from './reads/assets.ts';
import { listEvents } from './reads/events.ts';
import { listMessages } from './reads/messages.ts';
import { listOpenPositions, listPositions } from './reads/positions.ts';
import { listTraderDirectory } from './reads/traders.ts';

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
  visibility: 'msg' | 'sig' | 'either' | null;
  summary: string;
  query: TObject;
  response: TSchema;
  handler: (ctx: ReadContext, query: any) => Promise<unknown>;
}

const windowParams = { startTime: StartTime, endTime: EndTime };
const page = (max = 200, dflt = 50) => ({ limit: Limit(max, dflt), cursor: Cursor });

export const OPERATIONS: readonly Operation[] = [
  {
    tool: 'list_trader_directory', path: '/traders', versions: ['v2'], scope: 'directory.read', visibility: 'either',
    summary: 'Trader identity directory: name, slug, avatar and the assigned source identity. Ordered by name, then id.',
    query: Query({ search: Search, sourcePlatforms: EnumList(PLATFORM_VALUES), ...page() }),
    response: ListEnvelope(TraderDirectoryRow, false),
    handler: listTraderDirectory,
  },
  {
    tool: 'list_assets', path: '/assets', versions: ['v1', 'v2'], scope: 'directory.read', visibility: null,
    summary: 'Asset discovery: assets with an active market, with raw and resolved asset class. Ordered by symbol, then id.',
    query: Query({
      search: Search,
      assetClass: EnumList(ASSET_CLASS_FILTER_VALUES, { allowEmpty: true, description: 'resolved classes to match (any of); empty or omitted: all classes including other' }),
      assetIds: IdList('asset ids'), traderIds: IdList('assets these traders hold positions in'), ...page(),
    }),
    response: ListEnvelope(AssetRow, false),
    handler: listAssets,
  },
  {
    tool: 'list_events', path: '/events', versions: ['v1', 'v2'], scope: 'events.read', visibility: 'sig',
    summary: 'Trade events, newest first by timeOfEvent (ties by id descending).',
    query: Query({
      traderIds: IdList('trader ids'), assetIds: IdList('asset ids'), directions: EnumList(DIRECTION_VALUES), types: EnumList(EVENT_TYPE_VALUES),
      ...windowParams, ...page(),
    }),
    response: ListEnvelope(Event, true),
    handler: listEvents,
  },
  {
    tool: 'list_messages', path: '/messages', versions: ['v1', 'v2'], scope: 'messages.read', visibility: 'msg',
    summary: 'Source messages, newest first by writtenAt. `ids` hydrates messages by Source Message ID (no default window then).',
    query: Query({
      traderIds: IdList('messages of these traders\' assigned source'), ids: StringList('Source Message IDs', 200),
      sourcePlatforms: EnumList(PLATFORM_VALUES), ...windowParams, ...page(),
    }),
    response: ListEnvelope(Message, true),
    handler: listMessages,
  },
  {
    tool: 'list_positions', path: '/positions', versions: ['v1', 'v2'], scope: 'positions.read', visibility: 'sig',
    summary: 'Position history (open and closed), newest openAt first, with 1D/7D/30D time-based performances.',
    query: Query({
      traderIds: IdList('trader ids'), assetIds: IdList('asset ids'), directions: EnumList(DIRECTION_VALUES),
      ...windowParams, ...page(), positionIds: IdList('position ids', 200),
    }),
    response: ListEnvelope(Position, true),
    handler: listPositions,
  },
  {
    tool: 'list_open_positions', path: '/positions/open', versions: ['v1', 'v2'], scope: 'positions.read', visibility: 'sig',
    summary: 'Currently open positions with a best-effort live mark from the latest price.',
    query: Query({ traderIds: IdList('trader ids'), assetIds: IdList('asset ids'), directions: EnumList(DIRECTION_VALUES), ...page() }),
    response: ListEnvelope(OpenPosition, false),
    handler: listOpenPositions,
  },
];
