import type { Changes } from '../../storage/changes.ts';
import { baseStore, checkIdentifier, type Store } from '../../storage/port.ts';
import type { Table } from '../../storage/table.ts';
import { keptFor, type ReadContext, type Seen, unchangedSince } from './context.ts';
import { PAGE_FACTS, type PageFacts } from './list.ts';

/**
 * What the clock does to answers (DESIGN 9): the instants at which an answer read at `now` may
 * first differ from a fresh read, for the read cache (apps/api/read-cache.ts). Every bound here may
 * be earlier than the true instant (the entry then ends early and is read again), never later.
 */

/** What firstAfter found: the first time after `from` (null: none), as of `seq`. */
interface FirstKept {
  from: number;
  t: number | null;
  seq: number;
}
/** What firstAfter found per store and column. */
const firsts = new WeakMap<Changes, WeakMap<Store, Map<string, FirstKept[]>>>();
/** Instants kept per column (reads ask from now, and from the start of a trailing window). */
const FIRSTS_KEPT = 8;

/**
 * The first time after `now` that `find` reads (ms, or null: none) of rows of `at.table` by
 * `at.column` (`key`: which rows, when they are a subset of the table). With `seen`, what was found
 * for an earlier `now` answers a later one before that time (no row lies between them) unless a
 * commit since wrote the table, or, where its changes say their rows' dates, a row dated between
 * the later `now` and that time (issue 26: every answer stored after a commit asked it again,
 * though live rows are dated before the clock).
 */
export async function keptFirstAfter(
  store: Store,
  at: { table: Table; column: string; key?: string },
  now: number,
  seen: Seen | undefined,
  find: () => Promise<number | null>,
): Promise<number | null> {
  const deps = { tables: new Set([at.table.name]), traders: null, assets: null };
  // What was found stays the first after `after` unless a row dated after `after` and before it was written since.
  const between = (after: number, t: number | null) =>
    at.table.changes?.time === at.column
      ? { ...deps, times: [{ lo: after + 1, hi: t === null ? Number.POSITIVE_INFINITY : t - 1 }] }
      : deps;
  const known = seen && Number.isFinite(seen.seq) ? seen : undefined;
  if (!known) return find();
  const per = keptFor(firsts, known.changes, baseStore(store));
  const key = `${at.table.name}.${at.column}${at.key ? `:${at.key}` : ''}`;
  const kept = per.get(key) ?? [];
  per.set(key, kept);
  // Newest first. Each commit is looked at once per instant kept (issue 26: an instant that
  // outlives thousands of commits was checked against all of them again on every read): one that
  // wrote no row dated within what an instant covers moves it to the caller's seq; one that wrote
  // rows dated before this request's clock leaves it, and the instant as of this request is kept.
  for (let i = kept.length - 1; i >= 0; i--) {
    const e = kept[i]!;
    if (!(e.from <= now && (e.t === null || now < e.t))) continue;
    if (unchangedSince(known.changes, between(e.from, e.t), e, known.seq)) return e.t;
    if (!known.changes.changedSince(between(now, e.t), e.seq, known.seq)) {
      keep(kept, { from: now, t: e.t, seq: known.seq });
      return e.t;
    }
  }
  const t = await find();
  keep(kept, { from: now, t, seq: known.seq });
  return t;
}

function keep(kept: FirstKept[], e: FirstKept): void {
  kept.push(e);
  if (kept.length > FIRSTS_KEPT) kept.shift();
}

/**
 * The first time in `table.column` after `now` (ms), or null: when the clock reaches it, a row
 * of that table enters what a clock-relative read sees. Every table named here is ordered by
 * that column first or is small per key, and the read in order stops at the first row. Kept with
 * `seen` (keptFirstAfter).
 */
export function firstAfter(store: Store, at: { table: Table; column: string }, now: number, seen?: Seen): Promise<number | null> {
  const column = checkIdentifier(at.column);
  return keptFirstAfter(store, { table: at.table, column }, now, seen, async () => {
    const [row] = await store.query<{ t: number | string }>(
      `
    SELECT toUnixTimestamp64Milli(${column}) AS t FROM ${at.table}
    WHERE ${column} > fromUnixTimestamp64Milli({now:Int64}, 'UTC')
    ORDER BY ${column} LIMIT 1
    SETTINGS optimize_use_projections = 0`,
      { now },
    );
    return row ? Number(row.t) : null;
  });
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
