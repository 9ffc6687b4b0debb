import type { TraderActivityRow } from '../../../schemas/api/analytics.ts';
import { splitIds, splitList } from '../../../schemas/api/common-params.ts';
import type { TraderActivityQuery } from '../../../schemas/api/queries.ts';
import type { ReadContext } from '../context.ts';
import { factsOf } from '../facts.ts';
import { listRead } from '../list.ts';
import { DAY_MS } from '../window.ts';
import { firstOpenFrom, positionCounts, traderEligible } from './sample.ts';

interface Row {
  id: number;
  name: string;
  positionCount: number;
}

/**
 * Trader activity (README "Analytics reads"): live, signal-visible traders with their count of
 * sample positions, at least `minPositionCount` (and one with `assetIds`), by name then id, in
 * keyset pages. The counts are one aggregate per page over the evaluation rows of one window (a
 * row per position); the order is the facts' list of live traders by name.
 */
export function traderActivity(ctx: ReadContext, q: TraderActivityQuery) {
  return listRead<Row, TraderActivityRow>(ctx, {
    op: 'list_trader_activity',
    query: q,
    historical: true,
    unboundedDefault: true,
    keyParts: ['string', 'id'],
    fetch: async ({ after, window, limit }) => {
      const facts = await factsOf(ctx);
      const assetIds = splitIds(q.assetIds);
      const platforms = splitList(q.sourcePlatforms);
      const counts = await positionCounts(ctx, facts, { window, assetIds });
      const min = Math.max(q.minPositionCount, assetIds ? 1 : 0);
      const from = after ? Buffer.from(String(after[0]), 'utf8') : null;
      const out: Row[] = [];
      for (const id of facts.tradersByName) {
        const name = facts.traderName.get(id)!;
        if (from && (Buffer.compare(Buffer.from(name, 'utf8'), from) || id - Number(after![1])) <= 0) continue;
        const positionCount = counts.get(id) ?? 0;
        if (positionCount < min || !traderEligible(facts, ctx.principal, id, platforms)) continue;
        out.push({ id, name, positionCount });
        if (out.length >= limit) break;
      }
      return out;
    },
    // The clock (DESIGN 9): bounds are given or none (the rule, with the history window's start,
    // gives each answer its own); counts move when the oldest sample row leaves a history window.
    later: (_rows, window) => {
      const days = ctx.principal.historyWindowDays;
      if (days == null || window.start === null) return undefined;
      const lag = days * DAY_MS;
      return async (store) => {
        // Positions of any trader or asset count: the instant may only be too early.
        const oldest = await firstOpenFrom(store, '1D', window.start!, window.end);
        return oldest === null ? Number.POSITIVE_INFINITY : oldest + lag + 1;
      };
    },
    keyOf: (r) => [r.name, r.id],
    shape: (rows) => rows.map((r) => ({ traderId: r.id, positionCount: r.positionCount })),
  });
}
