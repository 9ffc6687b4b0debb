import type { Store } from './port.ts';
import type { Table } from './table.ts';
import {
  ACTIVITY_EVENTS_BY_TRADER_TABLE,
  ACTIVITY_EVENTS_TABLE,
  ACTIVITY_MESSAGES_BY_SOURCE_TABLE,
  ACTIVITY_MESSAGES_TABLE,
} from './tables/activity.ts';
import { FEED_CHANGES_TABLE, FEED_GROUPS_TABLE } from './tables/feed-groups.ts';
import { MESSAGES_TABLE } from './tables/messages.ts';
import { POSITION_PERFORMANCES_TABLE, POSITION_SAMPLES_TABLE } from './tables/performance.ts';
import { AGGREGATE_SUMMARIES_TABLE, CHANNEL_SUMMARIES_TABLE } from './tables/summaries.ts';
import { TRADER_DIRECTORY_TABLE } from './tables/traders.ts';
import { EVENTS_TABLE, OPEN_POSITIONS_TABLE, POSITIONS_TABLE } from './tables/trading.ts';

/** The statement tables. */
export const STATEMENT_TABLES: readonly Table[] = [
  EVENTS_TABLE,
  POSITIONS_TABLE,
  OPEN_POSITIONS_TABLE,
  MESSAGES_TABLE,
  TRADER_DIRECTORY_TABLE,
  CHANNEL_SUMMARIES_TABLE,
  AGGREGATE_SUMMARIES_TABLE,
  FEED_GROUPS_TABLE,
  FEED_CHANGES_TABLE,
];
/**
 * Read tables merged like the statement tables, without tombstones to drop (ReplacingMergeTree on a
 * version). Reads aggregate them with FINAL, which merges every row of a partition in more than
 * one part however few rows lie outside its largest (a tenth more time for trader stats on the
 * large seed after a rebuild left a few small parts per month): each such partition is merged into
 * one part whatever the policy's share.
 */
export const MERGED_TABLES: readonly Table[] = [
  POSITION_PERFORMANCES_TABLE,
  POSITION_SAMPLES_TABLE,
  ACTIVITY_EVENTS_TABLE,
  ACTIVITY_MESSAGES_TABLE,
  ACTIVITY_EVENTS_BY_TRADER_TABLE,
  ACTIVITY_MESSAGES_BY_SOURCE_TABLE,
];

export interface CompactionPolicy {
  /** Compact a statement table once its tombstones exceed this share of its rows... */
  maxTombShare: number;
  /** ...and this count (small tables are left alone). */
  minTombs: number;
  /**
   * Merge a table into one part once the rows outside its largest part exceed this share: a page
   * read (top-n in key order) pays per part it opens, so a table left in many parts after a
   * catch-up reads up to twice as slowly as one part; small fresh parts under the share are left
   * to the store's own merges, which bounds the cost of compaction to a rewrite per such share.
   */
  maxLooseShare: number;
  /** Merge each partition of a table read with FINAL (MERGED_TABLES) that is in more than one part, whatever its share. */
  finalPartitionsWhole: boolean;
}
export const DEFAULT_COMPACTION: CompactionPolicy = { maxTombShare: 0.1, minTombs: 10_000, maxLooseShare: 0.1, finalPartitionsWhole: true };

export interface Compaction {
  table: string;
  rows: number;
  tombs: number;
  parts: number;
  loose: number;
  compacted: boolean;
  why: string;
}

/**
 * Tombstones bounded and parts merged: a tombstone is written at a sorting key an entity left, and
 * merges keep it there as that key's newest row. Once a FINAL merge has collapsed every row of a
 * key into the tombstone, nothing at that key is left for it to cancel, so `FINAL CLEANUP` drops
 * both. A table whose tombstones or loose rows exceed the policy is merged into one part (with
 * CLEANUP where tombstones are over the policy); the others are left alone. Returns what it did.
 */
export async function compactStatements(
  store: Store,
  policy: CompactionPolicy = DEFAULT_COMPACTION,
  tables: readonly Table[] = [...STATEMENT_TABLES, ...MERGED_TABLES],
): Promise<Compaction[]> {
  const out: Compaction[] = [];
  for (const t of tables) {
    const table = t.name;
    const statements = STATEMENT_TABLES.includes(t);
    const [c] = await store.query<{ rows: number; tombs: number }>(
      `SELECT count() AS rows, ${statements ? 'countIf(tomb = 1)' : '0'} AS tombs FROM ${t}`,
    );
    // Per partition: a partitioned table (position_samples) is compacted into one part per partition.
    const [p] = await store.query<{ parts: number; partitions: number; largest: number }>(
      `SELECT sum(n) AS parts, count() AS partitions, sum(largest) AS largest FROM (
         SELECT partition, count() AS n, max(rows) AS largest FROM system.parts
         WHERE database = {db:String} AND table = {table:String} AND active GROUP BY partition)`,
      { db: store.database, table },
    );
    const rows = Number(c?.rows ?? 0);
    const tombs = Number(c?.tombs ?? 0);
    const parts = Number(p?.parts ?? 0);
    const loose = rows - Number(p?.largest ?? 0);
    const cleanup = statements && tombs > policy.minTombs && tombs > policy.maxTombShare * rows;
    const merge =
      loose > 0 &&
      (loose > policy.maxLooseShare * rows || (policy.finalPartitionsWhole && !statements && parts > Number(p?.partitions ?? 0)));
    // Partitions already in one part are not rewritten (optimize_skip_merged_partitions).
    if (cleanup || merge)
      await store.exec(
        `OPTIMIZE TABLE ${t} FINAL${cleanup ? ' CLEANUP' : ''}${cleanup ? '' : ' SETTINGS optimize_skip_merged_partitions = 1'}`,
      );
    out.push({
      table,
      rows,
      tombs,
      parts,
      loose,
      compacted: cleanup || merge,
      why: [cleanup ? `${tombs} tombstones` : '', merge ? `${loose} rows outside the largest part of their partition (${parts} parts)` : '']
        .filter(Boolean)
        .join(', '),
    });
  }
  return out;
}
