import { parseDateTime } from '../schemas/formats.ts';
import type { Store } from '../storage/port.ts';
import type { Table } from '../storage/table.ts';

/** A record that passed validation at the edge, with where it came from and its text as received. */
export interface ValidRecord<T = any> {
  topic: string;
  key: string;
  offset: string;
  value: T;
  raw: string;
}

/**
 * A projection is a plain object: which topics it reads, the DDL of its read model, a pure
 * function from a batch to rows, and (for folded models such as positions) a follow-up that
 * recomputes derived rows from what is stored. Rows are versioned (ReplacingMergeTree), so
 * applying a batch twice changes no read.
 */
export interface Projection {
  name: string;
  canHandle: readonly string[];
  ddl: readonly string[];
  /** Target table of `handle`'s rows; without one, `handle` only describes rows that `afterStore` writes. */
  table?: Table;
  handle?(batch: readonly ValidRecord[]): object[];
  /** Runs after the rows of the batch are stored; `version` is monotonic across batches. */
  afterStore?(store: Store, batch: readonly ValidRecord[], version: bigint): Promise<void>;
  /**
   * Drops what the projection keeps in process of `store` (counters, caches read from it), which
   * it reads again when next needed: the runner calls it when another writer may have written the
   * store since (a take-over), for every projection, without knowing what each keeps.
   */
  forget?(store: Store): void;
}

export const bool = (b: boolean | null | undefined): number | null => (b == null ? null : b ? 1 : 0);
export const del = (r: { deleted?: boolean }): number => (r.deleted ? 1 : 0);

/**
 * Canonical ISO form (`2026-01-01T00:00:00.000Z`) of a validated date-time. The store parses
 * date-times with best_effort, which may read lower-case `t`/`z`, offsets or long fractions
 * differently from our validator: it gets exactly the instant that was validated.
 */
export function canonicalDateTime(s: string): string {
  const ms = parseDateTime(s);
  if (ms === null) throw new Error(`not a valid date-time: ${s}`); // validated records never get here
  return new Date(ms).toISOString();
}
