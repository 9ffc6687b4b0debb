import { remember } from '../../../storage/bounded.ts';
import type { Changes } from '../../../storage/changes.ts';
import { baseStore, type Store } from '../../../storage/port.ts';
import type { Table } from '../../../storage/table.ts';
import { keptFor, type ReadContext } from '../context.ts';

/**
 * A count in buckets over an inclusive time range of tables whose commits say the times of the
 * rows they wrote (issue 26), kept from one request to the next. It is kept in three parts: the
 * body, in the question's buckets, up to a mark; the tail after the mark, by instant (live rows
 * land there, and the projector writes them seconds after their time, so a commit's rows fall
 * before the last answer's end); and, once the range's start has trailed, the edge: the rows by
 * instant just after the start, the next to leave. A later request over a later range reads only
 * what a commit since wrote from its first instant on (seconds of statements), takes the rows that
 * left off from the edge, and moves the settled tail into the body, instead of reading a day of
 * rows again. A commit that writes into the body reads its buckets from the first one written.
 */
interface KeptRange<V> {
  seq: number;
  at: number;
  start: number;
  end: number;
  /** The count over [start, mark - 1], in buckets; the tail over [mark, end] by instant. */
  mark: number;
  body: V;
  tail: V;
  /** The count by instant over [start, edge.to] (edge.to < mark), when read. */
  edge?: { to: number; value: V };
}

/** Questions kept per change log and store (each an answer's worth of buckets). */
const KEPT_MAX = 64;
/** The tail is moved into the body when it spans more than `max` ms, but for its last `keep` ms. */
export const TAIL_MS = { keep: 30_000, max: 300_000 };
/** The edge read at once: the rows leaving in this many ms of a trailing start. */
export const EDGE_MS = 15 * 60_000;
const kept = new WeakMap<Changes, WeakMap<Store, Map<string, KeptRange<unknown>>>>();

export interface KeptRangeSpec<V> {
  /** The question but its range: what makes two counts over the same range equal (the counted groups, the filters). */
  key: string;
  /** The tables counted from whose rows' times decide (commits to other tables are the caller's to fold into `key`). */
  tables: readonly Table[];
  start: number;
  end: number;
  /** The count over [start, end] in buckets. */
  read: (start: number, end: number) => Promise<V>;
  /** The count over [start, end] by instant (a bucket per ms: only short spans are read so). */
  readByInstant: (start: number, end: number) => Promise<V>;
  /** The count of nothing. */
  empty: () => V;
  /** An instant at or after the time of every row the tables hold (a range after it counts nothing: no read). */
  latest: () => Promise<number>;
  /** A count by instant in buckets. */
  bucketed: (v: V) => V;
  /** `a` plus `sign` times `b` (a new value: `a` may be kept). */
  add: (a: V, b: V, sign: 1 | -1) => V;
  /** `v`'s buckets that start in [from, to) (a new value). */
  within: (v: V, from: number, to: number) => V;
  /** The start of the bucket that holds instant `t`. */
  bucketStart: (t: number) => number;
}

export async function keptRange<V>(ctx: ReadContext, spec: KeptRangeSpec<V>): Promise<V> {
  const { start, end } = spec;
  const changes = ctx.changes;
  const seq = changes ? await changes.current() : Number.NaN;
  if (!changes || !Number.isFinite(seq)) return spec.read(start, end);
  const now = ctx.now.getTime();
  const held = keptFor(kept, changes, baseStore(ctx.store)) as Map<string, KeptRange<V>>;
  const had = held.get(spec.key);
  // Overlapping requests may come in any order: one behind what is kept reads for itself.
  if (had && (seq < had.seq || now < had.at)) return spec.read(start, end);
  const follows = had && had.start <= start && start <= had.mark && had.end <= end;
  const next = (follows && (await advance(spec, had, firstChanged(changes, had, spec.tables)))) || (await fresh(spec));
  remember(held, spec.key, { ...next, seq, at: now }, KEPT_MAX);
  return spec.add(next.body, spec.bucketed(next.tail), 1);
}

type Parts<V> = Omit<KeptRange<V>, 'seq' | 'at'>;

/** The count read whole: the body up to the last hour's start (whole hours and days), the rest by instant. */
async function fresh<V>(spec: KeptRangeSpec<V>): Promise<Parts<V>> {
  const { start, end } = spec;
  const mark = Math.max(start, Math.floor(end / 3_600_000) * 3_600_000);
  const [body, tail] = await Promise.all([mark > start ? spec.read(start, mark - 1) : spec.empty(), spec.readByInstant(mark, end)]);
  return settle(spec, { start, end, mark, body, tail });
}

/**
 * The kept count moved to [spec.start, spec.end], given the first instant in the kept range that
 * a commit since wrote (past its end: none), or null (read it whole).
 */
async function advance<V>(spec: KeptRangeSpec<V>, had: KeptRange<V>, dirty: number | null): Promise<Parts<V> | null> {
  const { start, end } = spec;
  // Nothing known, or more than a short span to read by instant (a range moved by hours): read it whole.
  if (dirty === null || end - had.mark > 2 * TAIL_MS.max || start - had.start > EDGE_MS) return null;
  let { mark, body, edge } = had;
  let tail: V;
  const reads: Promise<void>[] = [];
  if (dirty < mark) {
    // A commit wrote among the body's rows: its buckets from the first one written are read again, and the whole tail.
    // (The first bucket may start before the range: it is dropped whole and its rows in the range read.)
    const cut = spec.bucketStart(dirty);
    if (edge && dirty <= edge.to) edge = undefined;
    const [again, read] = await Promise.all([spec.read(Math.max(cut, had.start), mark - 1), spec.readByInstant(mark, end)]);
    body = spec.add(spec.within(body, Number.NEGATIVE_INFINITY, cut), again, 1);
    tail = read;
  } else {
    // The tail up to the first instant written since, and from there on read.
    const from = Math.min(dirty, had.end + 1);
    tail = spec.within(had.tail, Number.NEGATIVE_INFINITY, from);
    // The clock alone moved the end (no commit since, or none in the range): rows after it are only those dated ahead.
    if (from <= end && (from <= had.end || from <= (await spec.latest())))
      reads.push(spec.readByInstant(from, end).then((v) => void (tail = spec.add(tail, v, 1))));
  }
  if (start > had.start) {
    // The rows that left at the start come off the body, taken from the edge (read ahead when it does not reach).
    if (!edge || edge.to < start - 1) {
      const to = Math.min(mark - 1, Math.max(start - 1, had.start + EDGE_MS));
      reads.push(spec.readByInstant(had.start, to).then((value) => void (edge = { to, value })));
    }
  }
  await Promise.all(reads);
  if (start > had.start) {
    const gone = spec.within(edge!.value, Number.NEGATIVE_INFINITY, start);
    body = spec.add(body, spec.bucketed(gone), -1);
    edge = { to: edge!.to, value: spec.within(edge!.value, start, Number.POSITIVE_INFINITY) };
  }
  return settle(spec, { start, end, mark, body, tail, edge });
}

/** A tail spanning more than TAIL_MS.max moved into the body but for its last TAIL_MS.keep (no read). */
function settle<V>(spec: KeptRangeSpec<V>, p: Parts<V>): Parts<V> {
  if (p.end - p.mark <= TAIL_MS.max) return p;
  const mark = p.end + 1 - TAIL_MS.keep;
  const settled = spec.within(p.tail, Number.NEGATIVE_INFINITY, mark);
  return {
    ...p,
    mark,
    body: spec.add(p.body, spec.bucketed(settled), 1),
    tail: spec.within(p.tail, mark, Number.POSITIVE_INFINITY),
    edge: p.edge && p.edge.to < mark ? p.edge : undefined,
  };
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
