import { checkIdentifier, type Store } from '../../storage/port.ts';
import type { Table } from '../../storage/table.ts';
import type { ReadContext } from './context.ts';
import { PAGE_FACTS, type PageFacts } from './list.ts';

/**
 * What the clock does to answers (DESIGN 9): the instants at which an answer read at `now` may
 * first differ from a fresh read, for the read cache (apps/api/read-cache.ts). Every bound here may
 * be earlier than the true instant (the entry then ends early and is read again), never later.
 */

/**
 * The first time in `table.column` after `now` (ms), or null: when the clock reaches it, a row
 * of that table enters what a clock-relative read sees. Every table named here is ordered by
 * that column first or is small per key, and the read in order stops at the first row.
 */
export async function firstAfter(store: Store, at: { table: Table; column: string }, now: number): Promise<number | null> {
  const column = checkIdentifier(at.column);
  const [row] = await store.query<{ t: number | string }>(
    `
    SELECT toUnixTimestamp64Milli(${column}) AS t FROM ${at.table}
    WHERE ${column} > fromUnixTimestamp64Milli({now:Int64}, 'UTC')
    ORDER BY ${column} LIMIT 1
    SETTINGS optimize_use_projections = 0`,
    { now },
  );
  return row ? Number(row.t) : null;
}

/** The earliest of some instants (ms; null and undefined: none); Infinity when there is none. */
export const earliest = (...ts: readonly (number | null | undefined)[]): number =>
  ts.reduce<number>((m, t) => (t == null || Number.isNaN(t) ? m : Math.min(m, t)), Number.POSITIVE_INFINITY);

/** The first instant of the next UTC year after `t` (a default that is 1 January of the current year moves then). */
export const nextNewYear = (t: number): number => Date.UTC(new Date(t).getUTCFullYear() + 1, 0, 1);

/**
 * Attaches the read cache's facts to an answer that is not a list page (analytics): the tables its
 * `later` bound reads are added to what the answer depends on (ReadContext.reads), so a commit that
 * changes them ends the entry as it would change the bound.
 */
export function withFacts<T extends object>(ctx: ReadContext, answer: T, facts: PageFacts, tables: readonly Table[] = []): T {
  for (const t of tables) ctx.reads?.add(t.name);
  Object.defineProperty(answer, PAGE_FACTS, { value: facts, enumerable: false });
  return answer;
}
