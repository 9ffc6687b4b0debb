import type { AssetStatsRow } from '../../../schemas/api/analytics.ts';
import { splitIds } from '../../../schemas/api/common-params.ts';
import type { AssetStatsQuery } from '../../../schemas/api/queries.ts';
import { POSITION_SAMPLES_TABLE } from '../../../storage/tables/performance.ts';
import { withFacts } from '../clock.ts';
import type { ReadContext } from '../context.ts';
import { factsOf } from '../facts.ts';
import type { Where } from '../list.ts';
import { appliedTimeRange, explicitBounds, windowRule } from '../window.ts';
import { keptGroups, onlyGroups } from './kept-groups.ts';
import { clampToHistory, directionBias, FINAL_SETTINGS, sampleClock, sampleWhere } from './sample.ts';

/** How many trader ids `topTraderIds` lists per direction. */
export const TOP_TRADERS = 5;

/** An asset's sample positions per direction, and the traders with the most of them. */
interface Positioning {
  long: number;
  short: number;
  top: { long: number[]; short: number[] };
}
const NONE: Positioning = { long: 0, short: 0, top: { long: [], short: [] } };

/**
 * Per asset of the sample `where`, its positions per direction and the top traders of each: one
 * query over the evaluation rows of one window (a row per position, a range of the table's key per
 * asset) that returns each (asset, direction)'s total and its top traders only.
 */
async function positioning(ctx: ReadContext, where: Where): Promise<Map<number, Positioning>> {
  const rows = await ctx.store.query<{ assetId: number; traderId: number; direction: 'long' | 'short'; n: number; total: number }>(
    `
    SELECT assetId, direction, traderId, n, total FROM (
      SELECT assetId, direction, traderId, n, sum(n) OVER (PARTITION BY assetId, direction) AS total FROM (
        SELECT p.assetId AS assetId, p.direction AS direction, p.traderId AS traderId, count() AS n
        FROM ${POSITION_SAMPLES_TABLE} AS p FINAL ${where.prewhereSql}
        WHERE ${where.sql} AND p.window = '1D'
        GROUP BY assetId, direction, traderId))
    ORDER BY assetId, direction, n DESC, traderId LIMIT {top:UInt32} BY assetId, direction
    ${FINAL_SETTINGS}`,
    { ...where.params, top: TOP_TRADERS },
  );
  const per = new Map<number, Positioning>();
  for (const r of rows) {
    const id = Number(r.assetId);
    let a = per.get(id);
    if (!a) per.set(id, (a = { long: 0, short: 0, top: { long: [], short: [] } }));
    a[r.direction] = Number(r.total);
    a.top[r.direction].push(Number(r.traderId));
  }
  return per;
}

/**
 * Asset stats (README "Analytics reads"): per requested asset that is live with an active market
 * (request order), the direction bias of its sample positions and the traders with the most of
 * them per direction. One query over the evaluation rows of one window (a row per position, a
 * range of the table's key per asset), restricted to the live traders the caller may see; it
 * returns each (asset, direction)'s total and its top traders only.
 */
export async function assetStats(ctx: ReadContext, q: AssetStatsQuery) {
  const now = ctx.now.getTime();
  const window = clampToHistory(explicitBounds(q), ctx.principal, now);
  const facts = await factsOf(ctx);
  const requestedAssetIds = splitIds(q.assetIds) ?? [];
  const found = requestedAssetIds.filter((id) => facts.assetQuote.has(id));
  const missingAssetIds = requestedAssetIds.filter((id) => !facts.assetQuote.has(id));
  const traderIds = splitIds(q.traderIds);
  const bounds = explicitBounds(q);
  // The default question (no traders, direction or bounds, no history window): every eligible
  // asset's figures, kept across requests and commits; else the requested assets' own.
  const everyAsset =
    found.length > 0 &&
    !traderIds &&
    !q.direction &&
    bounds.start === null &&
    bounds.end === null &&
    ctx.principal.historyWindowDays == null;
  const where = await sampleWhere(ctx, facts, {
    window,
    ...(everyAsset ? {} : { assetIds: found }),
    traderIds,
    direction: q.direction,
    traders: true,
  });
  const kept = everyAsset
    ? await keptGroups(ctx, {
        key: JSON.stringify([where.pre, where.sql, where.params]),
        table: POSITION_SAMPLES_TABLE,
        by: 'assets',
        read: (ids) => positioning(ctx, ids ? onlyGroups(where, 'p.assetId', 'patchAssets', ids) : where),
        // Unbounded, without a history window: no count moves with the clock.
        until: async () => Number.POSITIVE_INFINITY,
        from: () => Number.NEGATIVE_INFINITY,
      })
    : null;
  const per = kept ? kept.groups : found.length ? await positioning(ctx, where) : new Map<number, Positioning>();
  const results: AssetStatsRow[] = found.map((assetId) => {
    const a = per.get(assetId) ?? NONE;
    return { assetId, summary: { marketPositioning: directionBias(a.long, a.short), topTraderIds: a.top } };
  });
  const answer = {
    results,
    filtersApplied: { traderIds: traderIds ?? [], direction: q.direction ?? null, appliedTimeRange: appliedTimeRange(window) },
    meta: { requestedAssetIds, missingAssetIds, serverTime: ctx.now.toISOString() },
  };
  // The clock (DESIGN 9): the bounds given, or none, with the start clamped to the account's history
  // window (each answer gets its own); the counts move only when the oldest sample row leaves that
  // window (no bound defaults to serverTime, and no count depends on a window coming of age).
  const rule = windowRule(q, ctx.principal, { unboundedDefault: true });
  return withFacts(ctx, answer, {
    window: rule,
    later: found.length ? sampleClock(where, { windows: ['1D'], ripen: false, lagMs: rule.startLagMs }) : undefined,
  });
}
