import type { Table } from '../../storage/table.ts';

/**
 * How long a read's answer may be cached (the read cache, apps/api/read-cache.ts, says how each
 * part is used): every read with a rule may be cached.
 */
export interface CacheRule {
  /** Historical list: the read's table and time column, which rows enter a window ending at serverTime by. */
  window?: { table: Table; column: string };
  /** The answer changes when the clock reaches a time of this column in this table, e.g. a price sample's `at`. */
  inForce?: { table: Table; column: string };
  /** A shorter lifetime computed from the answer (ms from `now`); 0 means do not cache it. */
  ttlMs?: (data: { results: any[] }, now: number) => number;
  /**
   * The parameters that narrow the answer to rows of those traders and assets only (issue 26): a
   * commit that touches other traders' (or assets') rows of tracked tables (Table.changes) leaves
   * the answer as it is. Name one only when no row of another trader or asset can change it.
   */
  narrows?: { traders?: string; assets?: string };
  /**
   * The read says itself when the clock may change its answer (PageFacts: `window`, `until`,
   * `later`; the analytics reads): an answer that comes without them is not cached.
   */
  saysUntil?: boolean;
}
