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
 * What a projection keeps in memory of one store between batches (counters above what is stored,
 * caches of what it read there): `init` makes it, empty. On a take-over (another writer may have
 * written the store since) the session forgets it: `reset` clears in place what was read from the
 * store (for state that must outlive it, such as a lock); without `reset` the state is dropped and
 * `init` makes a new one when it is next asked for.
 */
export interface ProjectionState<S> {
  init(): S;
  reset?(state: S): void;
}

/** What a projection's follow-up works with: the store, and the state each projection keeps of it (projectors/session.ts). */
export interface ProjectionContext {
  readonly store: Store;
  /** `projection`'s state of this store, made by its `state.init` when first asked for. */
  stateOf<S>(projection: Projection<S>): S;
  /** Runs `work` now or, on a live projector, a little later with the pending work of other batches (ProjectorSession.settle). */
  settle(name: string, work: () => Promise<void>): Promise<void>;
}

/**
 * A projection is a plain object: which topics it reads, the DDL of its read model, a pure
 * function from a batch to rows, and (for folded models such as positions) a follow-up that
 * recomputes derived rows from what is stored. Rows are versioned (ReplacingMergeTree), so
 * applying a batch twice changes no read. What it keeps in memory between batches it declares as
 * `state` (no module-level state): a session per store holds it, and the runner resets every
 * projection's state at once without knowing what each keeps.
 */
export interface Projection<S = unknown> {
  name: string;
  canHandle: readonly string[];
  ddl: readonly string[];
  /** Target table of `handle`'s rows; without one, `handle` only describes rows that `afterStore` writes. */
  table?: Table;
  handle?(batch: readonly ValidRecord[]): object[];
  /** What the projection keeps in memory of a store between batches (ctx.stateOf(projection) in `afterStore`). */
  state?: ProjectionState<S>;
  /** Runs after the rows of the batch are stored; `version` is monotonic across batches. */
  afterStore?(ctx: ProjectionContext, batch: readonly ValidRecord[], version: bigint): Promise<void>;
  /** Finishes what a projector that stopped left undone of this projection's settled work (a live projector runs it when its session starts, and after a take-over). */
  resume?(ctx: ProjectionContext): Promise<void>;
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
