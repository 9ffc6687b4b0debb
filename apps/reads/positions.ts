import { splitIds, splitList } from '../../schemas/api/common-params.ts';
import type { OpenPosition, Position } from '../../schemas/api/resources.ts';
import { ELIGIBLE_ASSETS_SQL, iso, visibleTradersSql, type ReadContext } from './context.ts';
import { addWindow, beforeSql, listRead, pageSettings, statementPage, type StatementRow, type Where } from './list.ts';
import { timeBasedPerformances } from './performance.ts';

import type { OpenPositionsQuery, PositionsQuery } from '../../schemas/api/queries.ts';

interface Row extends StatementRow {
  id: number; direction: 'long' | 'short'; openPrice: number | null; quoteSymbol: string | null; traderId: number; assetId: number;
}

function addPositionFilters(where: Where, q: OpenPositionsQuery & { positionIds?: string }) {
  where.add(`p.traderId IN (${visibleTradersSql('sig')}) AND p.assetId IN (${ELIGIBLE_ASSETS_SQL})`)
    .when(splitIds(q.traderIds), 'p.traderId IN {traderIds:Array(UInt64)}', 'traderIds')
    .when(splitIds(q.assetIds), 'p.assetId IN {assetIds:Array(UInt64)}', 'assetIds')
    .when(splitList(q.directions), 'p.direction IN {directions:Array(String)}', 'directions')
    .when(splitIds(q.positionIds), 'p.id IN {positionIds:Array(UInt64)}', 'positionIds');
}

/**
 * Up to n rows of the positions statement table (ordered by (openAt, id), with projections by
 * trader and by asset) in key order before `before`, with the quote symbol of their asset.
 */
function positionRows(ctx: ReadContext, q: OpenPositionsQuery & { positionIds?: string }, where: Where, before: [number, number | string] | undefined, n: number) {
  const b = beforeSql('p.openAt', 'p.id', 'UInt64', before);
  return ctx.store.query<Row>(`
    SELECT s.id AS id, s.direction AS direction, toUnixTimestamp64Milli(s.openAt) AS t, s.openPrice AS openPrice,
           a.quoteSymbol AS quoteSymbol, s.traderId AS traderId, s.assetId AS assetId, s.live AS live, s.tomb AS tomb, s.seq AS seq
    FROM (
      SELECT * FROM $db.positions AS p WHERE ${where.sql} AND ${b.sql}
      ORDER BY p.openAt DESC, p.id DESC LIMIT {n:UInt32}
    ) AS s
    LEFT JOIN (SELECT id, quoteSymbol FROM $db.assets FINAL WHERE deleted = 0) AS a ON a.id = s.assetId
    ORDER BY s.openAt DESC, s.id DESC
    ${pageSettings(q.traderIds !== undefined || q.assetIds !== undefined || q.positionIds !== undefined)}`, { ...where.params, ...b.params, n });
}

/** Position history: open and closed, newest openAt first. */
export function listPositions(ctx: ReadContext, q: PositionsQuery) {
  const positionIds = splitIds(q.positionIds);
  return listRead<Row, Position>(ctx, {
    op: 'list_positions', query: q, historical: true, keyParts: ['time', 'id'], unboundedDefault: positionIds !== undefined,
    fetch: ({ where, after, window, limit }) => {
      addPositionFilters(where, q);
      addWindow(where, 'p.openAt', window);
      return statementPage<Row>(limit, after, (before, n) => positionRows(ctx, q, where, before, n));
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

type OpenRow = Row & { currentPrice: number | null; currentReturnPercentage: number };

/** How far back the first look for an asset's latest mark goes: marks are usually recent, so this reads little. */
const RECENT_MARK_MS = 2 * 86_400_000;

/**
 * The latest live price sample at or before serverTime of each asset (prices are ordered by
 * (assetId, at)): first within the last two days, then, for assets with no recent sample, over
 * their whole series.
 */
async function latestMarks(ctx: ReadContext, assetIds: number[]): Promise<Map<number, number>> {
  const marks = new Map<number, number>();
  const look = async (ids: number[], since: number | null) => {
    if (!ids.length) return;
    for (const m of await ctx.store.query<{ assetId: number; price: number }>(`
      SELECT assetId, argMax(price, at) AS price FROM $db.prices FINAL
      WHERE assetId IN {ids:Array(UInt64)} AND deleted = 0 AND at <= fromUnixTimestamp64Milli({now:Int64}, 'UTC')
        ${since === null ? '' : "AND at >= fromUnixTimestamp64Milli({since:Int64}, 'UTC')"}
      GROUP BY assetId`, { ids, now: ctx.now.getTime(), ...(since === null ? {} : { since }) })) marks.set(m.assetId, m.price);
  };
  await look(assetIds, ctx.now.getTime() - RECENT_MARK_MS);
  await look(assetIds.filter((a) => !marks.has(a)), null);
  return marks;
}

/**
 * Open positions with live marks: the mark is the asset's latest price sample at or before
 * serverTime. `currentPrice` and `currentReturnPercentage` are required numbers, so a position
 * that cannot be marked (no price series, an entry price that is null or 0, or a non-finite
 * return) is omitted. Marks are looked up for the assets of each chunk of candidates only.
 */
export function listOpenPositions(ctx: ReadContext, q: OpenPositionsQuery) {
  return listRead<OpenRow, OpenPosition>(ctx, {
    op: 'list_open_positions', query: q, historical: false, keyParts: ['time', 'id'],
    fetch: ({ where, after, limit }) => {
      addPositionFilters(where, q);
      where.add('p.isOpen = 1 AND p.openPrice IS NOT NULL AND p.openPrice != 0');
      return statementPage<OpenRow>(limit, after, async (before, n) => {
        const rows = await positionRows(ctx, q, where, before, n) as OpenRow[];
        const marks = await latestMarks(ctx, [...new Set(rows.map((r) => r.assetId))]);
        for (const r of rows) {
          const mark = marks.get(r.assetId);
          r.currentPrice = mark ?? null;
          if (mark !== undefined && r.openPrice) {
            const ratio = mark / r.openPrice;
            r.currentReturnPercentage = r.direction === 'long' ? (ratio - 1) * 100 : (1 - ratio) * 100;
          }
        }
        return rows;
      }, (r) => r.currentPrice !== null && Number.isFinite(r.currentReturnPercentage));
    },
    keyOf: (r) => [r.t, r.id],
    shape: (rows) => rows.map((r) => ({
      id: r.id, direction: r.direction, openAt: iso(r.t), openPrice: r.openPrice, quoteSymbol: r.quoteSymbol,
      currentPrice: r.currentPrice!, currentReturnPercentage: r.currentReturnPercentage, traderId: r.traderId, assetId: r.assetId,
    })),
  });
}
