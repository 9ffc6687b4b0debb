import { baseStore, type Store } from '../../storage/port.ts';
import type { EVENTS_TABLE, POSITIONS_TABLE } from '../../storage/tables/trading.ts';

/**
 * Planner statistics: how many rows of a statement table each trader and each asset has. A page
 * filtered to one trader or asset is read either in the table's own (time, id) order, stopping at
 * the page's end, or from the projection ordered by that trader or asset (all its rows in the
 * window, then sorted). The projection wins for a filter that matches few rows; the table's order
 * wins for a busy one, whose rows come early in time order (the busiest asset of the large seed:
 * 5% of events, 7 ms from the projection, 5 ms in order). The counts only choose a plan, never an
 * answer, so they may be stale: they are kept per store and refreshed in the background at most
 * once every STATS_TTL_MS, and a read never waits for them.
 */
export const STATS_TTL_MS = 60_000;
/** Below this share of the table's rows, a trader or asset filter reads from its projection. */
export const PROJECTION_SHARE = 0.02;

/** The statement tables whose counts choose a plan. */
export type StatsTable = typeof EVENTS_TABLE | typeof POSITIONS_TABLE;
interface Counts {
  total: number;
  traderId: Map<number, number>;
  assetId: Map<number, number>;
}
interface Entry {
  at: number;
  counts?: Counts;
  loading?: Promise<void>;
}

const memo = new WeakMap<Store, Map<StatsTable, Entry>>();

async function count(store: Store, table: StatsTable): Promise<Counts> {
  const [traders, assets] = await Promise.all(
    ['traderId', 'assetId'].map((col) =>
      store.query<{ k: number; n: number }>(`SELECT ${col} AS k, count() AS n FROM ${table} GROUP BY k`),
    ),
  );
  const out: Counts = { total: 0, traderId: new Map(), assetId: new Map() };
  for (const r of traders!) {
    out.traderId.set(Number(r.k), Number(r.n));
    out.total += Number(r.n);
  }
  for (const r of assets!) out.assetId.set(Number(r.k), Number(r.n));
  return out;
}

/** The counts of `table` as last loaded (undefined before the first load); starts a refresh when they are due. */
function countsOf(read: Store, table: StatsTable): Counts | undefined {
  // Kept and refreshed on the store itself: the background count outlives the read that starts it.
  const store = baseStore(read);
  let tables = memo.get(store);
  if (!tables) memo.set(store, (tables = new Map()));
  let e = tables.get(table);
  if (!e) tables.set(table, (e = { at: -Infinity }));
  const entry = e;
  if (!entry.loading && Date.now() - entry.at >= STATS_TTL_MS) {
    entry.at = Date.now();
    entry.loading = count(store, table)
      .then(
        (c) => {
          entry.counts = c;
        },
        () => {
          entry.at = -Infinity;
        },
      ) // a failed count is retried by the next read
      .finally(() => {
        entry.loading = undefined;
      });
  }
  return entry.counts;
}

/**
 * Whether a page of `table` with these trader and asset filters should read from a projection:
 * when one of the filters matches under PROJECTION_SHARE of the rows (or before any counts exist).
 */
export function readsFromProjection(
  store: Store,
  table: StatsTable,
  f: { traderIds?: readonly number[]; assetIds?: readonly number[] },
  share = PROJECTION_SHARE,
): boolean {
  if (!f.traderIds && !f.assetIds) return false;
  const c = countsOf(store, table);
  if (!c || c.total === 0) return true;
  const sum = (m: Map<number, number>, ids: readonly number[]) => ids.reduce((s, id) => s + (m.get(id) ?? 0), 0);
  const shares = [f.traderIds && sum(c.traderId, f.traderIds) / c.total, f.assetIds && sum(c.assetId, f.assetIds) / c.total].filter(
    (s): s is number => s !== undefined,
  );
  return Math.min(...shares) < share;
}

/** Loads the counts of `table` now (tests, and a start that wants them before the first read). */
export async function loadStats(store: Store, table: StatsTable): Promise<void> {
  countsOf(store, table);
  await memo.get(baseStore(store))!.get(table)!.loading;
}
