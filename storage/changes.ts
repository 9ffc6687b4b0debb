import { AsyncLocalStorage } from 'node:async_hooks';
import { type Params, type QueryOptions, type Store, wrapStore } from './port.ts';
import { tableNamed } from './table.ts';
import { sourceKey } from './tables/traders.ts';

/**
 * Change tracking (DESIGN 9, issue 26): what one projector commit changed, per table, so that a
 * cached answer or a derived fact ends only when a commit touches what it was read from.
 *
 * What a commit changed is recorded from the writes themselves, not declared by the projections:
 * every row a batch inserts is a change of its table (and of the tables that materialized views
 * feed from it). For a table that tracks dimensions (a statement table whose sorting key holds
 * `traderId` and `assetId`: a statement that moves to another trader or asset writes a tombstone
 * at its old key, so the rows written name both the old and the new owner), the change also says
 * which traders and assets it touched; any other table's change touches every trader and asset.
 * Anything else that writes (INSERT ... SELECT) changes its whole table; DDL changes everything.
 */

/** What a commit changed in one table: the traders and assets its rows belong to, null when any. */
export interface TableChange {
  traders: Set<number> | null;
  assets: Set<number> | null;
  /**
   * For a table whose rows belong to sources (Table.changes.source): the sources (`platform:id`)
   * its rows belong to, null when any; undefined for the other tables.
   */
  sources?: Set<string> | null;
  /** The range (ms, inclusive) of the times of its rows (the table's `changes.time`), null when any. */
  times: TimeRange | null;
  /** For a table with `changes.marks`: per mark column, the highest value of it written, null when not known. */
  marks?: Record<string, number | null>;
}

export interface TimeRange {
  lo: number;
  hi: number;
}

export interface ChangeSet {
  /** Everything may have changed (DDL, a rebuild, a take-over by another projector). */
  all: boolean;
  tables: Map<string, TableChange>;
}

/** Past this many ids a change touches every trader (or asset): a catch-up batch need not list them. */
const MAX_IDS = 1_000;

export const emptyChangeSet = (): ChangeSet => ({ all: false, tables: new Map() });
/** A table's change before any row is noted in it: no trader, asset or time yet. */
const nothingYet = (): TableChange => ({
  traders: new Set(),
  assets: new Set(),
  times: { lo: Number.POSITIVE_INFINITY, hi: Number.NEGATIVE_INFINITY },
});
/** A change of every row of these tables (a compaction rewrote them). */
export const wholeTables = (tables: readonly string[]): ChangeSet => ({
  all: false,
  tables: new Map(tables.map((t) => [t, { traders: null, assets: null, times: null }])),
});
export const everything = (): ChangeSet => ({ all: true, tables: new Map() });

/**
 * The tables each table's writes also change: materialized views copy inserts into their target,
 * and plain views are read over their tables. Made from the read models' DDL, so it cannot drift
 * from what the store does.
 */
export class TableGraph {
  /** Table -> the tables an insert into it also writes (materialized views). */
  private readonly feeds = new Map<string, string[]>();
  /** `source>target` of the views that copy rows as they are (SELECT *). */
  private readonly copied = new Set<string>();
  /** View -> the tables it reads. */
  private readonly over = new Map<string, string[]>();

  constructor(ddl: readonly string[]) {
    for (const text of ddl) {
      const mv = /CREATE MATERIALIZED VIEW[^$]*\$db\.\w+\s+TO\s+\$db\.(\w+)[\s\S]*?\bFROM\s+\$db\.(\w+)/i.exec(text);
      if (mv) {
        const [, target, source] = mv as unknown as [string, string, string];
        this.feeds.set(source, [...(this.feeds.get(source) ?? []), target]);
        if (/\bAS\s+SELECT\s+\*\s+FROM\s+\$db\.\w+\s*$/i.test(text)) this.copied.add(`${source}>${target}`);
        continue;
      }
      const view = /CREATE VIEW(?: IF NOT EXISTS)?\s+\$db\.(\w+)[\s\S]*?\bAS\b([\s\S]*)/i.exec(text);
      if (view) this.over.set(view[1]!, [...new Set([...view[2]!.matchAll(/\$db\.(\w+)/g)].map((m) => m[1]!))]);
    }
  }

  /** The tables an insert into `table` changes: itself and what views feed from it, transitively. */
  written(table: string): string[] {
    const out = [table];
    for (let i = 0; i < out.length; i++) for (const t of this.feeds.get(out[i]!) ?? []) if (!out.includes(t)) out.push(t);
    return out;
  }

  /** Whether a view writes into `target` the very rows inserted into `source`. */
  copies(source: string, target: string): boolean {
    return this.copied.has(`${source}>${target}`);
  }

  /** The tables a read naming `name` depends on: the tables under a view, else the table itself. */
  read(name: string): string[] {
    const under = this.over.get(name);
    return under ? under.flatMap((t) => this.read(t)) : [name];
  }
}

const recording = new AsyncLocalStorage<ChangeSet>();

/** Runs `fn` (a batch's writes) recording every write made through a `recordingStore` into `into`. */
export function recordChanges<T>(into: ChangeSet, fn: () => Promise<T>): Promise<T> {
  return recording.run(into, fn);
}

/**
 * Notes a write of rows into `table` (and what views copy them into). `values(column)`: the
 * written rows' values of a column, null when not known.
 */
function touch(set: ChangeSet, graph: TableGraph, table: string, values: (column: string) => unknown[] | null): void {
  if (set.all) return;
  for (const name of graph.written(table)) {
    // A view that copies the rows as they are (SELECT *) writes the same values.
    const dims = name === table || graph.copies(table, name) ? tableNamed(name)?.changes : undefined;
    const ids = (column: string | undefined) => (column ? (values(column)?.map(Number) ?? null) : null);
    let c = set.tables.get(name);
    if (!c) {
      c = nothingYet();
      set.tables.set(name, c);
    }
    c.traders = merge(c.traders, ids(dims?.trader));
    c.assets = merge(c.assets, ids(dims?.asset));
    c.times = widen(c.times, dims?.time ? values(dims.time) : null);
    const marks = tableNamed(name)?.changes?.marks;
    if (marks) {
      c.marks ??= {};
      for (const m of marks) c.marks[m] = highest(c.marks[m] ?? Number.NEGATIVE_INFINITY, dims?.marks ? values(m) : null);
    }
    if (tableNamed(name)?.changes?.source)
      c.sources = merge(c.sources === undefined ? new Set() : c.sources, dims?.source ? sourcesOf(values, dims.source) : null);
  }
}

/** The source keys of the rows written, null when the columns are not known. */
function sourcesOf(values: (column: string) => unknown[] | null, [platform, id]: readonly [string, string]): string[] | null {
  const ps = values(platform);
  const ids = values(id);
  return ps && ids ? ps.map((p, i) => sourceKey(String(p), String(ids[i]))) : null;
}

/** A time value as written (ms, or an ISO date-time), in ms; NaN when it is neither. */
function timeOf(v: unknown): number {
  if (typeof v === 'number' || typeof v === 'bigint') return Number(v);
  if (typeof v !== 'string') return Number.NaN;
  return /^-?\d+$/.test(v) ? Number(v) : Date.parse(v);
}

function widen(into: TimeRange | null, values: unknown[] | null): TimeRange | null {
  if (into === null || values === null) return null;
  let { lo, hi } = into;
  for (const v of values) {
    const t = timeOf(v);
    if (Number.isNaN(t)) return null;
    if (t < lo) lo = t;
    if (t > hi) hi = t;
  }
  return { lo, hi };
}

function highest(into: number | null, values: unknown[] | null): number | null {
  if (into === null || values === null) return null;
  let m = into;
  for (const v of values) {
    const n = Number(v);
    if (Number.isNaN(n)) return null;
    if (n > m) m = n;
  }
  return m;
}

function merge<K>(into: Set<K> | null, ids: Iterable<K> | null): Set<K> | null {
  if (into === null || ids === null) return null;
  for (const id of ids) into.add(id);
  return into.size > MAX_IDS ? null : into;
}

const WRITE = /^\s*(INSERT\s+INTO|ALTER|TRUNCATE|DELETE|CREATE|DROP|RENAME|EXCHANGE)\b/i;

/** What a statement run through exec/query writes: a table wholly, everything (DDL), or nothing (a read, OPTIMIZE). */
function writeOf(sql: string): { table: string } | 'all' | undefined {
  const m = WRITE.exec(sql);
  if (!m) return undefined;
  if (/^INSERT/i.test(m[1]!)) {
    const t = /INSERT\s+INTO\s+\$db\.(\w+)/i.exec(sql);
    return t ? { table: t[1]! } : 'all';
  }
  return 'all';
}

/**
 * The store the projectors write through: records each write into the change set of the batch it
 * is part of (recordChanges), and passes everything to `store` unchanged. Writes outside a batch
 * (schema set-up before the first batch) record nothing.
 */
export function recordingStore(store: Store, graph: TableGraph): Store {
  const note = (sql: string) => {
    const set = recording.getStore();
    if (!set) return;
    const w = writeOf(sql);
    if (w === 'all') set.all = true;
    else if (w) touch(set, graph, w.table, () => null);
  };
  return wrapStore(store, {
    query<T>(sql: string, params?: Params, opts?: QueryOptions) {
      note(sql);
      return store.query<T>(sql, params, opts);
    },
    exec(sql: string, params?: Params) {
      note(sql);
      return store.exec(sql, params);
    },
    insert(table: string, rows: readonly object[]) {
      const set = recording.getStore();
      if (set && rows.length) touch(set, graph, table, (column) => rows.map((r) => (r as Record<string, unknown>)[column]));
      return store.insert(table, rows);
    },
    insertCompact(table: string, columns: readonly string[], rows: readonly unknown[][]) {
      const set = recording.getStore();
      if (set && rows.length)
        touch(set, graph, table, (column) => {
          const i = columns.indexOf(column);
          return i < 0 ? null : rows.map((r) => r[i]);
        });
      return store.insertCompact(table, columns, rows);
    },
  });
}

/** A change set as JSON (for the shared change log of distributed mode), and back. */
export function encodeChangeSet(set: ChangeSet): string {
  const tables: Record<string, WireChange> = {};
  for (const [name, c] of set.tables)
    tables[name] = {
      t: c.traders && [...c.traders],
      a: c.assets && [...c.assets],
      s: c.times && [c.times.lo, c.times.hi],
      ...(c.sources !== undefined ? { src: c.sources && [...c.sources] } : {}),
      ...(c.marks !== undefined ? { m: c.marks } : {}),
    };
  return JSON.stringify({ all: set.all, tables });
}

export function decodeChangeSet(json: string): ChangeSet {
  const o = JSON.parse(json) as { all: boolean; tables: Record<string, WireChange> };
  const tables = new Map<string, TableChange>();
  for (const [name, c] of Object.entries(o.tables))
    tables.set(name, {
      traders: c.t && new Set(c.t),
      assets: c.a && new Set(c.a),
      times: c.s ? { lo: c.s[0], hi: c.s[1] } : null,
      ...(c.src !== undefined ? { sources: c.src && new Set(c.src) } : {}),
      // A mark that did not travel is not known.
      ...(c.m !== undefined
        ? { marks: Object.fromEntries(Object.entries(c.m ?? {}).map(([k, v]) => [k, typeof v === 'number' ? v : null])) }
        : {}),
    });
  return { all: o.all, tables };
}

/** A table's change on the shared change log. */
interface WireChange {
  t: number[] | null;
  a: number[] | null;
  s?: [number, number] | null;
  src?: string[] | null;
  m?: Record<string, number | null> | null;
}

/** What a cached answer or a derived fact was read from: tables, and the traders and assets it is narrowed to (null: all). */
export interface Dependencies {
  tables: ReadonlySet<string>;
  traders: readonly number[] | null;
  assets: readonly number[] | null;
  /**
   * Only rows dated in these ranges (ms, inclusive; the time column of each table's `changes`)
   * matter, in every table of `tables`; absent: any time.
   */
  times?: readonly TimeRange[];
  /**
   * In the tables whose rows belong to sources, only the rows of these sources matter (the
   * sources of `traders` when the answer was read; a change of who holds a source is a change of
   * the tables that say it); absent or null: any source.
   */
  sources?: readonly string[] | null;
}

const overlaps = <K>(a: Set<K> | null, b: readonly K[] | null): boolean => a === null || b === null || b.some((x) => a.has(x));
const inTimes = (c: TimeRange | null, ranges: readonly TimeRange[] | undefined): boolean =>
  c === null || ranges === undefined || ranges.some((r) => c.lo <= r.hi && c.hi >= r.lo);

/** Whether a change set touches what `deps` was read from. */
export function intersects(set: ChangeSet, deps: Dependencies): boolean {
  if (set.all) return true;
  for (const t of deps.tables) {
    const c = set.tables.get(t);
    if (!c || !overlaps(c.assets, deps.assets) || !inTimes(c.times, deps.times)) continue;
    // Rows of sources, read for the sources of the traders asked for: the sources decide.
    const bySource = c.sources !== undefined && deps.sources != null;
    if (bySource ? overlaps(c.sources!, deps.sources!) : overlaps(c.traders, deps.traders)) return true;
  }
  return false;
}

/**
 * The commits a process knows of, each with what it changed (issue 26), so that a cached answer
 * or a derived fact read at one of them can tell whether a later commit touched what it was read
 * from. Commits are numbered by a `seq` that grows (the data version). What is older than the
 * oldest commit held is unknown: anything read before it counts as changed.
 */
export class ChangeLog {
  private readonly seqs: number[] = [];
  private readonly sets: ChangeSet[] = [];
  /** Answers read at a seq below this may have missed changes that are no longer (or never were) held. */
  private floor: number;
  private latest: number;

  constructor(
    start = 0,
    private readonly limit = 20_000,
  ) {
    this.floor = start;
    this.latest = start;
  }

  /** The newest commit's seq: an answer read now is read at it (take it before reading the store). */
  get seq(): number {
    return this.latest;
  }

  /** Called with each commit as it is added (held long-polls: ChangeLog.waitFor). */
  private readonly listeners = new Set<(set: ChangeSet) => void>();

  /** A commit: `seq` above every one before it. */
  add(seq: number, set: ChangeSet): void {
    if (!(seq > this.latest)) throw new Error(`change seq ${seq} is not above ${this.latest}`);
    this.seqs.push(seq);
    this.sets.push(set);
    this.latest = seq;
    for (const l of this.listeners) l(set);
    if (this.seqs.length > this.limit) {
      const drop = this.seqs.length - this.limit;
      this.floor = this.seqs[drop - 1]!;
      this.seqs.splice(0, drop);
      this.sets.splice(0, drop);
    }
  }

  /** A commit whose changes are not known (a gap in the shared log): everything read before it is changed. */
  reset(seq: number): void {
    this.seqs.length = 0;
    this.sets.length = 0;
    this.floor = this.latest = Math.max(this.latest, seq);
    for (const l of this.listeners) l(everything());
  }

  /**
   * Resolves true once a commit after `seq` touches `deps` (at once when one already has), false
   * when `ms` pass or `signal` aborts first. Waiting holds a listener and a timer, nothing more.
   */
  waitFor(deps: Dependencies, seq: number, ms: number, signal?: AbortSignal): Promise<boolean> {
    if (this.changedSince(deps, seq)) return Promise.resolve(true);
    return waitOn(ms, signal, (done) => {
      const listener = (set: ChangeSet) => {
        if (intersects(set, deps)) done(true);
      };
      this.listeners.add(listener);
      return () => this.listeners.delete(listener);
    });
  }

  /** What each commit after `seq` (up to the newest known) changed, or null when that is not known. */
  since(seq: number): readonly ChangeSet[] | null {
    return seq < this.floor ? null : this.sets.slice(this.after(seq));
  }

  /** Whether a commit after `seq` (up to `upTo`, default the newest known) touched `deps`. */
  changedSince(deps: Dependencies, seq: number, upTo = Number.POSITIVE_INFINITY): boolean {
    if (seq < this.floor) return true;
    if (seq >= this.latest) return false;
    for (let i = this.after(seq); i < this.sets.length && this.seqs[i]! <= upTo; i++) if (intersects(this.sets[i]!, deps)) return true;
    return false;
  }

  /** The index of the first commit after `seq` (binary search: the log is in seq order). */
  private after(seq: number): number {
    let lo = 0;
    let hi = this.seqs.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.seqs[mid]! <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/**
 * Resolves true when `register`'s `done(true)` is called, false when `ms` pass or `signal` aborts
 * first; what `register` returns is called once it is over (a waiter holds a timer and what it
 * registered, nothing more).
 */
function waitOn(ms: number, signal: AbortSignal | undefined, register: (done: (changed: boolean) => void) => () => void): Promise<boolean> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve(false);
  return new Promise((resolve) => {
    let unregister = () => {};
    const done = (changed: boolean) => {
      clearTimeout(timer);
      unregister();
      signal?.removeEventListener('abort', aborted);
      resolve(changed);
    };
    const aborted = () => done(false);
    const timer = setTimeout(() => done(false), ms);
    signal?.addEventListener('abort', aborted);
    unregister = register(done);
  });
}

/**
 * What reads need of the change log: the seq to read at, and whether what was read at a seq is
 * still current. In distributed mode `current` first learns the commits other processes published.
 */
export interface Changes {
  /** The seq an answer read now is read at; NaN when it cannot be known (nothing read then is kept). */
  current(): number | Promise<number>;
  /**
   * Whether something read at `seq` from `deps` may differ now (as of the last `current`), or with
   * `upTo`, from what it was at that later seq (the commits after it do not count).
   */
  changedSince(deps: Dependencies, seq: number, upTo?: number): boolean;
  /** What each commit after `seq` changed (as of the last `current`), or null when that is not known. */
  since(seq: number): readonly ChangeSet[] | null;
  /** The read models' tables and views: what a read naming one depends on. */
  readonly graph: TableGraph;
  /**
   * Resolves true once a commit after `seq` touches `deps`, false when `ms` pass or `signal`
   * aborts first (a held long-poll, issue 28).
   */
  waitFor(deps: Dependencies, seq: number, ms: number, signal?: AbortSignal): Promise<boolean>;
}

/** The changes of a process that holds the whole log itself (embedded mode, tests): told of each commit as it is added. */
export const localChanges = (log: ChangeLog, graph: TableGraph): Changes => ({
  graph,
  current: () => log.seq,
  changedSince: (deps, seq, upTo) => log.changedSince(deps, seq, upTo),
  since: (seq) => log.since(seq),
  waitFor: (deps, seq, ms, signal) => log.waitFor(deps, seq, ms, signal),
});

/** How often a process that learns commits by asking (distributed mode) asks while a long-poll waits. */
export const CHANGE_POLL_MS = 100;

/**
 * `waitFor` for a process that learns of commits only when it asks (`current`): it asks every
 * CHANGE_POLL_MS while something waits, one cheap question for all the waiters of the process.
 */
export function polledWaitFor(changes: Pick<Changes, 'current' | 'changedSince'>): Changes['waitFor'] {
  const waiters = new Set<{ deps: Dependencies; seq: number; done: (changed: boolean) => void }>();
  let timer: NodeJS.Timeout | undefined;
  const tick = async () => {
    try {
      await changes.current();
    } catch {
      /* not answering just now: asked again next tick */
    }
    for (const w of waiters) if (changes.changedSince(w.deps, w.seq)) w.done(true);
    timer = waiters.size ? setTimeout(tick, CHANGE_POLL_MS) : undefined;
  };
  return (deps, seq, ms, signal) => {
    if (changes.changedSince(deps, seq)) return Promise.resolve(true);
    return waitOn(ms, signal, (done) => {
      const w = { deps, seq, done };
      waiters.add(w);
      timer ??= setTimeout(tick, CHANGE_POLL_MS);
      return () => waiters.delete(w);
    });
  };
}

/**
 * Changes known only as a version number that moves on each commit (a process that is not told
 * what commits changed): every move of it changes everything.
 */
export function versionChanges(version: () => number | Promise<number>, graph: TableGraph): Changes {
  const log = new ChangeLog(Number.NEGATIVE_INFINITY);
  const changes = {
    graph,
    async current() {
      const v = await version();
      if (Number.isFinite(v) && v > log.seq) log.add(v, everything());
      return v;
    },
    changedSince: (deps: Dependencies, seq: number, upTo?: number) => log.changedSince(deps, seq, upTo),
    since: (seq: number) => log.since(seq),
  };
  return { ...changes, waitFor: polledWaitFor(changes) };
}

/**
 * What the commits `since` wrote into `table`, as one change (its traders, assets and dates, each
 * null when some commit does not say), or null when one of them changed everything.
 */
export function writtenTo(since: readonly ChangeSet[], table: string): TableChange | null {
  let out: TableChange | undefined;
  for (const set of since) {
    if (set.all) return null;
    const c = set.tables.get(table);
    if (c) out = joinChange(out, c);
  }
  return out ?? nothingYet();
}

/** Adds what `from` changed to `into`: one commit made of several batches says all they wrote. */
export function mergeChanges(into: ChangeSet, from: ChangeSet): void {
  if (into.all) return;
  if (from.all) {
    into.all = true;
    into.tables.clear();
    return;
  }
  for (const [name, b] of from.tables) into.tables.set(name, joinChange(into.tables.get(name), b));
}

/**
 * What `a` (undefined: nothing yet) and `b` changed in one table together. What one of them does
 * not know (null, or absent where the other says it) is not known.
 */
function joinChange(a: TableChange | undefined, b: TableChange): TableChange {
  const from = a ?? nothingYet();
  const c: TableChange = {
    traders: merge(from.traders && new Set(from.traders), b.traders),
    assets: merge(from.assets && new Set(from.assets), b.assets),
    times: from.times && b.times && { lo: Math.min(from.times.lo, b.times.lo), hi: Math.max(from.times.hi, b.times.hi) },
  };
  if (b.sources !== undefined || a?.sources !== undefined)
    c.sources = (a && !a.sources) || !b.sources ? null : merge(new Set(a?.sources ?? []), b.sources);
  if (b.marks !== undefined || a?.marks !== undefined) {
    c.marks = {};
    for (const k of new Set([...Object.keys(a?.marks ?? {}), ...Object.keys(b.marks ?? {})])) {
      const x = a?.marks?.[k];
      const y = b.marks?.[k];
      c.marks[k] = (a && x == null) || y == null ? null : Math.max(x ?? Number.NEGATIVE_INFINITY, y);
    }
  }
  return c;
}

/** Whether a change set touches any of these tables (everything touches them all). */
export function touches(set: ChangeSet, tables: readonly { name: string }[]): boolean {
  return set.all || tables.some((t) => set.tables.has(t.name));
}
