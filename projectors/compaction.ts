import { checkIdentifier, type Store } from './store/port.ts';

/**
 * Engine clause of a statement table (projectors/statements.ts): ReplacingMergeTree on `seq`, with
 * `tomb` as its is-deleted column. Merges keep the newest row of each sorting key as before (a
 * tombstone included), and reads never use FINAL on these tables, so the is-deleted column changes
 * no read; it lets `compactStatements` drop tombstones with `OPTIMIZE ... FINAL CLEANUP`.
 */
export const statementEngine = (orderBy: string): string =>
  `ENGINE = ReplacingMergeTree(seq, tomb) ORDER BY (${orderBy})
   SETTINGS deduplicate_merge_projection_mode = 'rebuild', allow_experimental_replacing_merge_with_cleanup = 1`;

/** The statement tables. */
export const STATEMENT_TABLES = ['events', 'positions', 'messages', 'trader_directory'] as const;

export interface CompactionPolicy {
  /** Compact a table once its tombstones exceed this share of its rows... */
  maxTombShare: number;
  /** ...and this count (small tables are left alone). */
  minTombs: number;
}
export const DEFAULT_COMPACTION: CompactionPolicy = { maxTombShare: 0.1, minTombs: 10_000 };

/**
 * Tombstones bounded: a tombstone is written at a sorting key an entity left, and merges keep it
 * there as that key's newest row. Once a FINAL merge has collapsed every row of a key into the
 * tombstone, nothing at that key is left for it to cancel, so `FINAL CLEANUP` drops both. A table
 * whose tombstones exceed the policy is compacted; the others are left alone. Returns what it did.
 */
export async function compactStatements(store: Store, policy: CompactionPolicy = DEFAULT_COMPACTION,
  tables: readonly string[] = STATEMENT_TABLES): Promise<{ table: string; rows: number; tombs: number; compacted: boolean }[]> {
  const out = [];
  for (const table of tables) {
    const [c] = await store.query<{ rows: number; tombs: number }>(
      `SELECT count() AS rows, countIf(tomb = 1) AS tombs FROM $db.${checkIdentifier(table)}`);
    const rows = Number(c?.rows ?? 0); const tombs = Number(c?.tombs ?? 0);
    const compacted = tombs > policy.minTombs && tombs > policy.maxTombShare * rows;
    if (compacted) await store.exec(`OPTIMIZE TABLE $db.${table} FINAL CLEANUP`);
    out.push({ table, rows, tombs, compacted });
  }
  return out;
}
