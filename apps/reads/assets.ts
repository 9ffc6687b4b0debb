import { splitIds, splitList } from '../../schemas/api/common-params.ts';
import type { AssetRow } from '../../schemas/api/resources.ts';
import type { ReadContext } from './context.ts';
import { factsOf, permits } from './facts.ts';
import { listRead } from './list.ts';

import type { AssetsQuery } from '../../schemas/api/queries.ts';

/**
 * Asset discovery: only assets with an active market, ordered by symbol then id. `assetClass`
 * matches the resolved class (equities split into stocks and indices); `traderIds` keeps assets
 * those (signal-visible) traders hold eligible positions in. All filters intersect.
 */
export function listAssets(ctx: ReadContext, q: AssetsQuery) {
  return listRead<AssetRow, AssetRow>(ctx, {
    op: 'list_assets', query: q, historical: false, keyParts: ['string', 'id'],
    fetch: async ({ where, after, limit }) => {
      where.add('deleted = 0 AND hasActiveMarket = 1')
        .when(splitList(q.assetClass), 'resolvedAssetClass IN {classes:Array(String)}', 'classes')
        .when(splitIds(q.assetIds), 'id IN {assetIds:Array(UInt64)}', 'assetIds');
      if (q.search !== undefined) {
        where.add('(positionCaseInsensitiveUTF8(name, {search:String}) > 0 OR positionCaseInsensitiveUTF8(symbol, {search:String}) > 0)', { search: q.search });
      }
      const traderIds = splitIds(q.traderIds);
      if (traderIds) {
        // The live, signal-visible ones among them (the facts of the data version), then their
        // positions, current statements only (a tombstone carries the trader of the statement it cancels).
        const facts = await factsOf(ctx);
        const visible = traderIds.filter((id) => facts.traderPlatform.has(id) && permits(ctx.principal.signalVisibility, id, facts.traderPlatform.get(id)!));
        where.add(`id IN (SELECT assetId FROM (
            SELECT assetId, live, tomb FROM $db.positions WHERE traderId IN {traderIds:Array(UInt64)}
            ORDER BY id, seq DESC LIMIT 1 BY id
          ) WHERE live = 1 AND tomb = 0)`, { traderIds: visible });
      }
      if (after) where.add('(symbol, id) > ({cSymbol:String}, {cId:UInt64})', { cSymbol: String(after[0]), cId: Number(after[1]) });
      return ctx.store.query<AssetRow>(`
        SELECT id, name, symbol, logoUrl, assetClass, resolvedAssetClass, category, quoteSymbol
        FROM $db.assets FINAL WHERE ${where.sql}
        ORDER BY symbol, id LIMIT {limit:UInt32}`, { ...where.params, limit });
    },
    keyOf: (r) => [r.symbol, r.id],
    shape: (rows) => rows,
  });
}
