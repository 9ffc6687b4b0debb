import type { Store } from './store/port.ts';

/** A record that passed validation at the edge, with where it came from. */
export interface ValidRecord<T = any> { topic: string; key: string; offset: string; value: T }

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
  /** Target table of `handle`'s rows. */
  table?: string;
  handle?(batch: readonly ValidRecord[]): object[];
  /** Runs after the rows of the batch are stored; `version` is monotonic across batches. */
  afterStore?(store: Store, batch: readonly ValidRecord[], version: bigint): Promise<void>;
}

export const bool = (b: boolean | null | undefined): number | null => (b == null ? null : b ? 1 : 0);
export const del = (r: { deleted?: boolean }): number => (r.deleted ? 1 : 0);
