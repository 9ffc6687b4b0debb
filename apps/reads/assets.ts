import { splitIds, splitList } from '../../schemas/api/common-params.ts';
import type { AssetsQuery } from '../../schemas/api/queries.ts';
import type { AssetRow } from '../../schemas/api/resources.ts';
import { POSITIONS_TABLE } from '../../storage/tables/trading.ts';
import type { ReadContext } from './context.ts';
import { factsOf, permits } from './facts.ts';
import { listRead } from './list.ts';
import { historyRule, leavesAt, windowAt } from './window.ts';

/** Byte order of two strings' UTF-8, as ClickHouse orders String columns. */
const cmpBytes = (a: string, b: string): number => Buffer.compare(Buffer.from(a), Buffer.from(b));

/**
 * Asset discovery: only assets with an active market, ordered by symbol then id. `assetClass`
 * matches the resolved class (equities split into stocks and indices); `traderIds` keeps assets
 * those (signal-visible) traders hold eligible positions in, opened within the account's history
 * window (DESIGN 6: only the directory itself is outside it). All filters intersect. The eligible
 * assets are a few hundred rows, kept with the facts of the data version in the read's order, so
 * a page is filtered from memory; only `traderIds` asks the store (the traders' positions).
 */
export function listAssets(ctx: ReadContext, q: AssetsQuery) {
  const history = historyRule(ctx.principal);
  /** When the first held asset's last position in the history window leaves it: the answer may change then. */
  let until: number | undefined;
  return listRead<AssetRow, AssetRow>(ctx, {
    op: 'list_assets',
    query: q,
    historical: false,
    keyParts: ['string', 'id'],
    until: () => until,
    fetch: async ({ after, limit }) => {
      const facts = await factsOf(ctx);
      const classes = splitList(q.assetClass);
      const ids = splitIds(q.assetIds);
      const search = q.search?.toLowerCase();
      const traderIds = splitIds(q.traderIds);
      let held: Set<number> | undefined;
      if (traderIds) {
        // The live, signal-visible ones among them, then their positions: current statements only
        // (a tombstone carries the trader of the statement it cancels).
        const visible = traderIds.filter(
          (id) => facts.traderPlatform.has(id) && permits(ctx.principal.signalVisibility, id, facts.traderPlatform.get(id)!),
        );
        // Positions opened before the account's history window do not count (the window's start, resolved versions only).
        const floor = history ? windowAt(history, ctx.now.getTime()).start : null;
        const rows = visible.length
          ? await ctx.store.query<{ assetId: number; last: number | string }>(
              `
          SELECT assetId, max(t) AS last FROM (
            SELECT assetId, toUnixTimestamp64Milli(openAt) AS t, live, tomb FROM ${POSITIONS_TABLE} WHERE traderId IN {traderIds:Array(UInt64)}
            ORDER BY id, seq DESC LIMIT 1 BY id
          ) WHERE live = 1 AND tomb = 0${floor !== null ? ' AND t >= {floor:Int64}' : ''} GROUP BY assetId SETTINGS max_threads = 1`,
              { traderIds: visible, ...(floor !== null ? { floor } : {}) },
            )
          : [];
        held = new Set(rows.map((r) => Number(r.assetId)));
        if (history && rows.length) until = leavesAt(history, Math.min(...rows.map((r) => Number(r.last))));
      }
      const out: AssetRow[] = [];
      for (const a of facts.assetRows) {
        if (after && (cmpBytes(a.symbol, String(after[0])) || a.id - Number(after[1])) <= 0) continue;
        if (classes && !classes.includes(a.resolvedAssetClass)) continue;
        if (ids && !ids.includes(a.id)) continue;
        if (held && !held.has(a.id)) continue;
        if (search !== undefined && !a.name.toLowerCase().includes(search) && !a.symbol.toLowerCase().includes(search)) continue;
        out.push(a);
        if (out.length === limit) break;
      }
      return out;
    },
    keyOf: (r) => [r.symbol, r.id],
    shape: (rows) => rows,
  });
}
