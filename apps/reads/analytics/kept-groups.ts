import { remember } from '../../../storage/bounded.ts';
import { type ChangeSet, type Changes, writtenTo } from '../../../storage/changes.ts';
import { baseStore, type Store } from '../../../storage/port.ts';
import type { Table } from '../../../storage/table.ts';
import { keptFor, type ReadContext, type Seen } from '../context.ts';
import { Where } from '../list.ts';

/**
 * An aggregate per group (a trader or an asset) of one question, kept from one request to the next
 * (issue 26): read at `at` and `seq`, it answers a request at a clock in [from, until) and a later
 * seq for every group no commit since wrote into the table it was read from (the table's changes
 * name their traders and assets); `until` is the first instant the clock alone may change a group.
 */
export interface KeptGroups<V> {
  seq: number;
  at: number;
  /** The earliest clock at which the groups are as kept (at most `at`): a request whose clock is behind `at` but not `from` is answered too. */
  from: number;
  until: number;
  groups: Map<number, V>;
  /** What a caller derives from `groups`, made once per version of them. */
  view?: unknown;
}

/** Questions kept per change log and store (each a few hundred kB: a value per group). */
const KEPT_MAX = 24;
const kept = new WeakMap<Changes, WeakMap<Store, Map<string, KeptGroups<unknown>>>>();
/** The read of each question under way: requests that come meanwhile wait for it instead of reading too (a commit ends it for all at once). */
const reading = new WeakMap<Changes, WeakMap<Store, Map<string, Promise<unknown>>>>();

/**
 * The groups of the question `key`, kept (KeptGroups): after commits that wrote some groups of
 * `table`, only those are read again (`read(ids)`, at this request's clock); `read(null)` reads
 * every group, when nothing is kept, the clock reached `until`, or a commit did not say which
 * groups it wrote. `until` gives the groups' first instant of change by the clock alone after
 * `now`, `from` their last one at or before it. Null when nothing can be kept (no change log; a
 * request whose clock is behind the `from` of what is kept, as overlapping requests may be): the
 * caller reads for itself.
 */
export async function keptGroups<V>(
  ctx: ReadContext,
  spec: {
    key: string;
    table: Table;
    by: 'traders' | 'assets';
    /** Tables the groups are read from too, whose changes name the groups as `table`'s do (one that does not: every group is read again). */
    also?: readonly Table[];
    read: (ids: readonly number[] | null) => Promise<Map<number, V>>;
    until: (groups: ReadonlyMap<number, V>, now: number, seen: Seen) => Promise<number>;
    /**
     * The earliest clock at which groups read at `now` are as read (default `now`): the last
     * instant the clock changed one of them, or -Infinity when none moves with the clock.
     */
    from?: (groups: ReadonlyMap<number, V>, now: number) => number;
    /**
     * Once the clock reached `until`: the groups it changed from `at` (what is kept was read at)
     * to `now`, when the clock changes each group at instants of its own that the kept groups
     * know; null when it may have changed others (every group is read again).
     */
    due?: (groups: ReadonlyMap<number, V>, at: number, now: number, seen: Seen) => Promise<readonly number[] | null>;
  },
): Promise<KeptGroups<V> | null> {
  const now = ctx.now.getTime();
  const changes = ctx.changes;
  const seq = changes ? await changes.current() : Number.NaN;
  if (!changes || !Number.isFinite(seq)) return null;
  const store = baseStore(ctx.store);
  const under = keptFor(reading, changes, store);
  // One read of a question at a time: requests that came meanwhile take what it read when that is
  // as new as their commit (issue 26: under live ingest the same patch ran several times at once).
  for (let running = under.get(spec.key); running; running = under.get(spec.key)) await running.catch(() => {});
  const held = keptFor(kept, changes, store) as Map<string, KeptGroups<V>>;
  const had = held.get(spec.key);
  if (had && now < had.from) return null;
  const tables = [spec.table, ...(spec.also ?? [])];
  for (const t of tables) ctx.reads?.add(t.name);
  // The groups written since what is kept (null: not known, read every group); none when it is as new as this request's commit.
  let written: Set<number> | null = null;
  // Past `until`, only the groups the clock changed are read again, where `due` names them.
  const due = had && now >= had.until && spec.due ? await spec.due(had.groups, had.at, now, { changes, seq }) : undefined;
  if (had && (now < had.until || due)) {
    const since = had.seq >= seq ? [] : changes.since(had.seq);
    written = since && writtenOf(since, tables, spec.by);
    if (written && due) written = new Set([...written, ...due]);
  }
  if (had && written?.size === 0 && now < had.until) {
    had.seq = Math.max(had.seq, seq);
    return had;
  }
  const made = refresh(ctx, spec, had, written, seq, now, changes);
  under.set(spec.key, made);
  try {
    const value = await made;
    remember(held, spec.key, value, KEPT_MAX);
    return value;
  } finally {
    if (under.get(spec.key) === made) under.delete(spec.key);
  }
}

/** The groups the commits `since` wrote into any of `tables`, or null when one of them does not say. */
function writtenOf(since: readonly ChangeSet[], tables: readonly Table[], by: 'traders' | 'assets'): Set<number> | null {
  const out = new Set<number>();
  for (const t of tables) {
    const ids = writtenTo(since, t.name)?.[by];
    if (!ids) return null;
    for (const id of ids) out.add(id);
  }
  return out;
}

/** What is kept of a question after the commits since `had` wrote `written` (null: unknown, or nothing kept): patched, or read in full. */
async function refresh<V>(
  ctx: ReadContext,
  spec: {
    read: (ids: readonly number[] | null) => Promise<Map<number, V>>;
    until: (groups: ReadonlyMap<number, V>, now: number, seen: Seen) => Promise<number>;
    from?: (groups: ReadonlyMap<number, V>, now: number) => number;
  },
  had: KeptGroups<V> | undefined,
  written: ReadonlySet<number> | null,
  seq: number,
  now: number,
  changes: Changes,
): Promise<KeptGroups<V>> {
  let groups: Map<number, V>;
  let from: number;
  const fromOf = (read: ReadonlyMap<number, V>) => Math.min(now, spec.from ? spec.from(read, now) : now);
  if (had && written) {
    // The groups written since, read again at this request's clock; the others are as they were
    // (from had.from on, a clock this request's is not behind).
    const ids = [...written];
    const fresh = ids.length ? await spec.read(ids) : new Map<number, V>();
    groups = new Map(had.groups);
    for (const id of ids) groups.delete(id);
    for (const [id, v] of fresh) groups.set(id, v);
    from = Math.max(had.from, fromOf(fresh));
  } else {
    groups = await spec.read(null);
    from = fromOf(groups);
  }
  return { seq, at: now, from, until: await spec.until(groups, now, { changes, seq }), groups };
}

/** `where` and `column IN {name}` (the groups to read again), read first (PREWHERE: a range of the table's key per group). */
export function onlyGroups(where: Where, column: string, name: string, ids: readonly number[]): Where {
  const out = new Where({ ...where.params, [name]: ids });
  out.clauses.push(...where.clauses.slice(1));
  out.pre.push(...where.pre, `${column} IN {${name}:Array(UInt64)}`);
  return out;
}
