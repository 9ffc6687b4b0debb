import type { AssetStatsRow } from '../../../schemas/api/analytics.ts';
import { splitIds } from '../../../schemas/api/common-params.ts';
import type { AssetStatsQuery } from '../../../schemas/api/queries.ts';
import type { ReadContext } from '../context.ts';
import { factsOf } from '../facts.ts';
import { appliedTimeRange } from '../window.ts';
import { clampToHistory, directionBias, explicitBounds, FINAL_SETTINGS, sampleWhere, traderEligible } from './sample.ts';

/** How many trader ids `topTraderIds` lists per direction. */
export const TOP_TRADERS = 5;

/**
 * Asset stats (README "Analytics reads"): per requested asset that is live with an active market
 * (request order), the direction bias of its sample positions and the traders with the most of
 * them per direction. One aggregate over the evaluation rows of one window (a row per position),
 * by (asset, trader, direction); trader eligibility is checked per group.
 */
export async function assetStats(ctx: ReadContext, q: AssetStatsQuery) {
  const now = ctx.now.getTime();
  const window = clampToHistory(explicitBounds(q), ctx.principal, now);
  const facts = await factsOf(ctx);
  const requestedAssetIds = splitIds(q.assetIds) ?? [];
  const found = requestedAssetIds.filter((id) => facts.assetQuote.has(id));
  const missingAssetIds = requestedAssetIds.filter((id) => !facts.assetQuote.has(id));
  const traderIds = splitIds(q.traderIds);
  const where = sampleWhere(ctx, facts, { window, assetIds: found, traderIds, direction: q.direction });
  const rows = found.length ? await ctx.store.query<{ assetId: number; traderId: number; direction: 'long' | 'short'; n: number }>(`
    SELECT p.assetId AS assetId, p.traderId AS traderId, p.direction AS direction, count() AS n
    FROM $db.position_performances AS p FINAL
    WHERE ${where.sql} AND p.window = '1D'
    GROUP BY assetId, traderId, direction
    ${FINAL_SETTINGS}`, where.params) : [];
  const per = new Map<number, { long: number; short: number; top: { long: [number, number][]; short: [number, number][] } }>();
  for (const id of found) per.set(id, { long: 0, short: 0, top: { long: [], short: [] } });
  for (const r of rows) {
    const traderId = Number(r.traderId);
    if (!traderEligible(facts, ctx.principal, traderId)) continue;
    const a = per.get(Number(r.assetId))!;
    const n = Number(r.n);
    a[r.direction] += n;
    a.top[r.direction].push([traderId, n]);
  }
  const top = (xs: [number, number][]) => xs.sort((x, y) => y[1] - x[1] || x[0] - y[0]).slice(0, TOP_TRADERS).map(([id]) => id);
  const results: AssetStatsRow[] = found.map((assetId) => {
    const a = per.get(assetId)!;
    return { assetId, summary: { marketPositioning: directionBias(a.long, a.short), topTraderIds: { long: top(a.top.long), short: top(a.top.short) } } };
  });
  return {
    results,
    filtersApplied: { traderIds: traderIds ?? [], direction: q.direction ?? null, appliedTimeRange: appliedTimeRange(window) },
    meta: { requestedAssetIds, missingAssetIds, serverTime: ctx.now.toISOString() },
  };
}
