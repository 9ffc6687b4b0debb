import Type from 'typebox';
import {
  ASSET_CLASS_FILTER_VALUES, DIRECTION_VALUES, EnumList, EVENT_TYPE_VALUES, IdList, pageParams, PLATFORM_VALUES, Query, Search,
  StringList, windowParams, type Validated,
} from './common-params.ts';

/** Query parameters of each read (contract section 4); REST validation, MCP input and OpenAPI derive from these. */
const O = Type.Optional;

export const TraderDirectoryQuery = Query({ search: O(Search), sourcePlatforms: O(EnumList(PLATFORM_VALUES)), ...pageParams() });
export type TraderDirectoryQuery = Validated<Type.Static<typeof TraderDirectoryQuery>>;

export const AssetsQuery = Query({
  search: O(Search),
  assetClass: O(EnumList(ASSET_CLASS_FILTER_VALUES, { allowEmpty: true, description: 'resolved classes to match (any of); empty or omitted: all classes including other' })),
  assetIds: O(IdList('asset ids')),
  traderIds: O(IdList('assets these traders hold positions in')),
  ...pageParams(),
});
export type AssetsQuery = Validated<Type.Static<typeof AssetsQuery>>;

export const EventsQuery = Query({
  traderIds: O(IdList('trader ids')), assetIds: O(IdList('asset ids')),
  directions: O(EnumList(DIRECTION_VALUES)), types: O(EnumList(EVENT_TYPE_VALUES)),
  ...windowParams, ...pageParams(),
});
export type EventsQuery = Validated<Type.Static<typeof EventsQuery>>;

export const MessagesQuery = Query({
  traderIds: O(IdList('messages of these traders\' assigned source')),
  ids: O(StringList('Source Message IDs', 200)),
  sourcePlatforms: O(EnumList(PLATFORM_VALUES)),
  ...windowParams, ...pageParams(),
});
export type MessagesQuery = Validated<Type.Static<typeof MessagesQuery>>;

const positionFilters = { traderIds: O(IdList('trader ids')), assetIds: O(IdList('asset ids')), directions: O(EnumList(DIRECTION_VALUES)) };

export const PositionsQuery = Query({ ...positionFilters, ...windowParams, ...pageParams(), positionIds: O(IdList('position ids', 200)) });
export type PositionsQuery = Validated<Type.Static<typeof PositionsQuery>>;

export const OpenPositionsQuery = Query({ ...positionFilters, ...pageParams() });
export type OpenPositionsQuery = Validated<Type.Static<typeof OpenPositionsQuery>>;
