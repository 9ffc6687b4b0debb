import { remember } from '../../../storage/bounded.ts';
import type { Changes } from '../../../storage/changes.ts';
import { baseStore, type Store } from '../../../storage/port.ts';
import type { Table } from '../../../storage/table.ts';
import { keptFor, type ReadContext } from '../context.ts';

/**
 * A count in buckets over an inclusive time range of tables whose commits say the times of the
 * rows they wrote (issue 26), kept from one request to the next. Read at `seq` over [start, end],
 * it answers a later request over a later range: the rows that left the range at its start are
 * taken off, those that entered it at its end added, and the buckets from the first one a commit
 * since wrote into read again (live rows are dated near now: the last bucket or two), each read
 * over that span alone, instead of days of rows.
 */
interface KeptRange<V> {
  seq: number;
  at: number;
  start: number;
  end: number;
  value: V;
}

/** Questions kept per change log and store (each an answer's worth of buckets). */
const KEPT_MAX = 64;
const kept = new WeakMap<Changes, WeakMap<Store, Map<string, KeptRange<unknown>>>>();

export async function keptRange<V>(
  ctx: ReadContext,
  spec: {
    /** The question but its range: what makes two counts over the same range equal (the counted groups, the filters). */
    key: string;
    /** The tables counted from whose rows' times decide (commits to other tables are the caller's to fold into `key`). */
    tables: readonly Table[];
    start: number;
    end: number;
    /** The count over [start, end] at this request. */
    read: (start: number, end: number) => Promise<V>;
    /** `a` plus `sign` times `b` (a new value: `a` may be kept). */
    add: (a: V, b: V, sign: 1 | -1) => V;
    /** The start of the bucket that holds instant `t`. */
    bucketStart: (t: number) => number;
    /** `v` without its buckets from `cut` on (a bucket start). */
    before: (v: V, cut: number) => V;
  },
): Promise<V> {
  const { start, end } = spec;
  const changes = ctx.changes;
  const seq = changes ? await changes.current() : Number.NaN;
  if (!changes || !Number.isFinite(seq)) return spec.read(start, end);
  const now = ctx.now.getTime();
  const held = keptFor(kept, changes, baseStore(ctx.store)) as Map<string, KeptRange<V>>;
  const had = held.get(spec.key);
  // Overlapping requests may come in any order: one behind what is kept reads for itself.
  if (had && (seq < had.seq || now < had.at)) return spec.read(start, end);
  let value: V;
  const dirty = had && had.start <= start && start <= had.end + 1 && had.end <= end ? firstChanged(changes, had, spec.tables) : null;
  // Buckets from the first one written since are read again whole; the range's start must be before it.
  const cut = dirty === null ? null : dirty > had!.end ? had!.end + 1 : Math.max(spec.bucketStart(dirty), had!.start);
  if (had && cut !== null && start < cut) {
    const [left, rest] = await Promise.all([
      start > had.start ? spec.read(had.start, start - 1) : undefined,
      cut <= end ? spec.read(cut, end) : undefined,
    ]);
    value = cut <= had.end ? spec.before(had.value, cut) : had.value;
    if (left !== undefined) value = spec.add(value, left, -1);
    if (rest !== undefined) value = spec.add(value, rest, 1);
  } else {
    value = await spec.read(start, end);
  }
  remember(held, spec.key, { seq, at: now, start, end, value }, KEPT_MAX);
  return value;
}

/**
 * The earliest time within [had.start, had.end] of a row of `tables` written by a commit after
 * `had.seq` (past had.end: none), or null when that is not known (a commit that did not say when,
 * or commits no longer held).
 */
function firstChanged(changes: Changes, had: KeptRange<unknown>, tables: readonly Table[]): number | null {
  const since = changes.since(had.seq);
  if (!since) return null;
  let first = had.end + 1;
  for (const set of since) {
    if (set.all) return null;
    for (const t of tables) {
      const c = set.tables.get(t.name);
      if (!c) continue;
      if (c.times === null) return null;
      if (c.times.hi >= had.start && c.times.lo <= had.end) first = Math.min(first, Math.max(c.times.lo, had.start));
    }
  }
  return first;
}
