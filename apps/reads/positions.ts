import { splitIds, splitList } from '../../schemas/api/common-params.ts';
import type { OpenPosition, Position } from '../../schemas/api/resources.ts';
import { ELIGIBLE_ASSETS_SQL, iso, visibleTradersSql, type ReadContext } from './context.ts';
import { addBefore, addWindow, listRead, type Where } from './list.ts';
import { timeBasedPerformances } from './performance.ts';

import type { OpenPositionsQuery, PositionsQuery } from '../../schemas/api/queries.ts';

interface Row { id: number; direction: 'long' | 'short'; t: number; openPrice: number | null; quoteSymbol: string | null; traderId: number; assetId: number }

function addPositionFilters(where: Where, q: OpenPositionsQuery & { positionIds?: string }) {
  where.add(`p.deleted = 0 AND p.traderId IN (${visibleTradersSql('sig')}) AND p.assetId IN (${ELIGIBLE_ASSETS_SQL})`)
    .when(splitIds(q.traderIds), 'p.traderId IN {traderIds:Array(UInt64)}', 'traderIds')
    .when(splitIds(q.assetIds), 'p.assetId IN {assetIds:Array(UInt64)}', 'assetIds')
    .when(splitList(q.directions), 'p.direction IN {directions:Array(String)}', 'directions')
    .when(splitIds(q.positionIds), 'p.id IN {positionIds:Array(UInt64)}', 'positionIds');
}

const POSITION_COLUMNS = `p.id AS id, p.direction AS direction, toUnixTimestamp64Milli(p.openAt) AS t, p.openPrice AS openPrice,
  a.quoteSymbol AS quoteSymbol, p.traderId AS traderId, p.assetId AS assetId`;
const ASSET_JOIN = 'INNER JOIN (SELECT id, quoteSymbol FROM $db.assets FINAL WHERE deleted = 0) AS a ON a.id = p.assetId';

/** Position history: open and closed, newest openAt first. */
export function listPositions(ctx: ReadContext, q: PositionsQuery) {
  const positionIds = splitIds(q.positionIds);
  return listRead<Row, Position>(ctx, {
    op: 'list_positions', query: q, historical: true, keyParts: ['time', 'id'], unboundedDefault: positionIds !== undefined,
    fetch: ({ where, after, window, limit }) => {
      addPositionFilters(where, q);
      addWindow(where, 'p.openAt', window);
      addBefore(where, 'p.openAt', 'p.id', 'UInt64', after);
      return ctx.store.query<Row>(`
        SELECT ${POSITION_COLUMNS} FROM $db.positions AS p FINAL ${ASSET_JOIN}
        WHERE ${where.sql}
        ORDER BY p.openAt DESC, p.id DESC LIMIT {limit:UInt32}`, { ...where.params, limit });
    },
    keyOf: (r) => [r.t, r.id],
    shape: async (rows) => {
      const perf = await timeBasedPerformances(ctx.store, rows.map((r) => ({ ...r, openAt: r.t })), ctx.now.getTime());
      return rows.map((r) => ({
        id: r.id, direction: r.direction, openAt: iso(r.t), openPrice: r.openPrice, quoteSymbol: r.quoteSymbol,
        timeBasedPerformances: perf.get(r.id)!, traderId: r.traderId, assetId: r.assetId,
      }));
    },
  });
}

/**
 * Open positions with live marks: the mark is the asset's latest price sample at or before
 * serverTime. `currentPrice` and `currentReturnPercentage` are required numbers, so a position
 * that cannot be marked (no price series, an entry price that is null or 0, or a non-finite
 * return) is omitted.
 */
export function listOpenPositions(ctx: ReadContext, q: OpenPositionsQuery) {
  type OpenRow = Row & { currentPrice: number; currentReturnPercentage: number };
  return listRead<OpenRow, OpenPosition>(ctx, {
    op: 'list_open_positions', query: q, historical: false, keyParts: ['time', 'id'],
    fetch: ({ where, after, limit }) => {
      addPositionFilters(where, q);
      where.add('p.isOpen = 1 AND p.openPrice IS NOT NULL AND p.openPrice != 0');
      addBefore(where, 'p.openAt', 'p.id', 'UInt64', after);
      return ctx.store.query<OpenRow>(`
        SELECT ${POSITION_COLUMNS}, m.price AS currentPrice,
               if(p.direction = 'long', (m.price / p.openPrice - 1) * 100, (1 - m.price / p.openPrice) * 100) AS currentReturnPercentage
        FROM $db.positions AS p FINAL ${ASSET_JOIN}
        INNER JOIN (
          SELECT assetId, argMax(price, at) AS price FROM $db.prices FINAL
          WHERE deleted = 0 AND at <= fromUnixTimestamp64Milli({now:Int64}, 'UTC') GROUP BY assetId
        ) AS m ON m.assetId = p.assetId
        WHERE ${where.sql} AND isFinite(currentReturnPercentage)
        ORDER BY p.openAt DESC, p.id DESC LIMIT {limit:UInt32}`, { ...where.params, limit, now: ctx.now.getTime() });
    },
    keyOf: (r) => [r.t, r.id],
    shape: (rows) => rows.map((r) => ({
      id: r.id, direction: r.direction, openAt: iso(r.t), openPrice: r.openPrice, quoteSymbol: r.quoteSymbol,
      currentPrice: r.currentPrice, currentReturnPercentage: r.currentReturnPercentage, traderId: r.traderId, assetId: r.assetId,
    })),
  });
}
