import { remember } from '../../storage/bounded.ts';
import type { ChangeSet, Changes, Dependencies, TableGraph } from '../../storage/changes.ts';
import { baseStore, type Params, type QueryOptions, type Store, wrapStore } from '../../storage/port.ts';
import type { Table } from '../../storage/table.ts';
import type { CursorCodec } from './cursor.ts';
import type { Principal } from './principal.ts';

export interface ReadContext {
  store: Store;
  principal: Principal;
  /** Server time of this request: relative bounds and statuses resolve against it. */
  now: Date;
  /** Signs and checks keyset cursors. */
  cursors: CursorCodec;
  /** The commits and what each changed (issue 26): what is kept (memos, cached answers) lasts until one touches it. */
  changes?: Changes;
  /** The tables this read has read so far, its own queries' and its memos' (a cached answer lasts until a commit touches them). */
  reads?: Set<string>;
  /**
   * The sources a read of the tables whose rows belong to sources (messages) was narrowed to (the
   * sources of the traders asked for): a commit of other sources' rows leaves its answer (Dependencies.sources).
   */
  sources?: readonly string[];
}

/** The seq an answer was read at, and the commits since: what a fact found for it holds until (issue 26). */
export interface Seen {
  changes: Changes;
  seq: number;
}

/**
 * Visibility as SQL (DESIGN 7): rows outside the policy are omitted inside the query. The
 * expressions passed in are column names of the read's own SQL (constants); the clause is the
 * one of the policy's mode (a policy of `all` needs none, so the query carries no condition and
 * no parameter for it), and the policy's platforms or trader ids travel as parameters.
 */
export function visibilitySql(
  p: Principal,
  kind: 'msg' | 'sig',
  traderIdExpr: string,
  platformExpr: string,
): { sql: string; params: Record<string, unknown> } {
  const policy = kind === 'msg' ? p.messageVisibility : p.signalVisibility;
  switch (policy.mode) {
    case 'all':
      return { sql: '1', params: {} };
    case 'platforms':
      return { sql: `has({${kind}Platforms:Array(String)}, ${platformExpr})`, params: { [`${kind}Platforms`]: policy.platforms ?? [] } };
    case 'traders':
      return { sql: `has({${kind}TraderIds:Array(UInt64)}, ${traderIdExpr})`, params: { [`${kind}TraderIds`]: policy.traderIds ?? [] } };
    default:
      return { sql: '0', params: {} };
  }
}

/**
 * What the reads keep per store (the facts, quotes, marks, spans, tags...), in one place with one
 * lifecycle: a value is kept with the seq it was made at and the tables it was made from (those its
 * loader read, and those it declares), and made anew once a commit touches one of them (issue 26:
 * a price commit does not end the eligibility facts, which are made from traders and assets).
 */
interface Memo {
  seq: number;
  deps: Dependencies;
  value: unknown;
}
const memos = new WeakMap<Changes, WeakMap<Store, Map<object, Memo>>>();

/**
 * Whether no commit up to `seq` (the caller's) touched what a memo was made from; if none did, the
 * memo is as of `seq` from then on, so each commit is looked at once per memo (issue 26: a memo
 * that outlives thousands of commits, as the facts do under a trickle of trades, was checked
 * against all of them again on every read).
 */
export function unchangedSince(changes: Changes, deps: Dependencies, memo: { seq: number }, seq: number): boolean {
  // A seq that is not known (NaN: Redis away) says nothing: the memo is made again.
  if (!Number.isFinite(seq) || !Number.isFinite(memo.seq)) return false;
  if (memo.seq >= seq) return true;
  if (changes.changedSince(deps, memo.seq, seq)) return false;
  memo.seq = seq;
  return true;
}

/**
 * What is kept for one change log and store (issue 26). Per change log: a seq means what its log
 * says, and two apps on one store (a test's cached app and the fresh one it is checked against)
 * each keep their own.
 */
export function keptFor<K, V>(by: WeakMap<Changes, WeakMap<Store, Map<K, V>>>, changes: Changes, store: Store): Map<K, V> {
  let perLog = by.get(changes);
  if (!perLog) by.set(changes, (perLog = new WeakMap()));
  let held = perLog.get(store);
  if (!held) perLog.set(store, (held = new Map()));
  return held;
}

/**
 * A value kept per store until a commit changes what it was made from: never kept for a context
 * without a change log, nor when the log cannot tell the seq (NaN: Redis away in distributed mode).
 * `tables`: what it depends on besides the tables `make` reads through the store it is given (a
 * value that reads lazily later, or reads system tables, says so here). A value that is a promise
 * and rejects is dropped, so the next read makes it again. A read that uses the value depends on
 * its tables too (ReadContext.reads).
 */
export function perDataVersion<T>(
  make: (store: Store) => T,
  opts: {
    tables?: readonly Table[];
    /**
     * The value after the commits since it was made (what each changed), when that is enough to
     * know it (issue 26: ids that rows add to a set), else null: it is made again.
     */
    update?: (value: Awaited<T>, since: readonly ChangeSet[]) => Awaited<T> | null;
  } = {},
): (ctx: ReadContext) => Promise<Awaited<T>> {
  const id = {};
  return async (ctx): Promise<Awaited<T>> => {
    const changes = ctx.changes;
    const seq = changes ? await changes.current() : Number.NaN;
    // Loaded once for every caller, on the store itself: not one caller's cost nor bounded by its deadline.
    const store = baseStore(ctx.store);
    if (!changes || !Number.isFinite(seq)) return make(store) as Awaited<T>;
    const held = keptFor(memos, changes, store);
    const had = held.get(id);
    if (had && unchangedSince(changes, had.deps, had, seq)) {
      for (const t of had.deps.tables) ctx.reads?.add(t);
      return had.value as Awaited<T>;
    }
    if (had && opts.update && !(had.value instanceof Promise)) {
      const since = changes.since(had.seq);
      const value = since && opts.update(had.value as Awaited<T>, since);
      if (value) {
        held.set(id, { seq, deps: had.deps, value });
        for (const t of had.deps.tables) ctx.reads?.add(t);
        return value;
      }
    }
    const tables = new Set<string>(opts.tables?.map((t) => t.name));
    const value = make(trackReads(store, changes.graph, tables));
    const memo: Memo = { seq, deps: { tables, traders: null, assets: null }, value };
    held.set(id, memo);
    const kept = held;
    const settle = () => {
      for (const t of tables) ctx.reads?.add(t);
    };
    if (value instanceof Promise) {
      value.then(
        (v) => {
          // Settled: what an update starts from.
          if (opts.update) memo.value = v;
          settle();
        },
        () => {
          if (kept.get(id) === memo) kept.delete(id);
        },
      );
      await value.catch(() => {});
    }
    settle();
    return value as Awaited<T>;
  };
}

/** Entries a keyed memo holds per store at most (the oldest go first). */
const KEYED_MAX = 256;
const keyedMemos = new WeakMap<Changes, WeakMap<Store, Map<string, Memo>>>();

/**
 * A value kept per store and `key` until a commit touches `deps`, which may be narrower than whole
 * tables (issue 26: the events of a few ineligible assets last while new events land on others).
 * `make` must read nothing but `deps`. Kept like perDataVersion (not without a change log, not
 * past a rejection); a read that uses the value depends on its tables too.
 */
export async function keptUntilChanged<T>(ctx: ReadContext, key: string, deps: Dependencies, make: () => Promise<T>): Promise<T> {
  const changes = ctx.changes;
  const seq = changes ? await changes.current() : Number.NaN;
  for (const t of deps.tables) ctx.reads?.add(t);
  if (!changes || !Number.isFinite(seq)) return make();
  const held = keptFor(keyedMemos, changes, baseStore(ctx.store));
  const had = held.get(key);
  if (had && unchangedSince(changes, had.deps, had, seq)) return had.value as Promise<T>;
  const value = make();
  const memo: Memo = { seq, deps, value };
  remember(held, key, memo, KEYED_MAX);
  const kept = held;
  value.catch(() => {
    if (kept.get(key) === memo) kept.delete(key);
  });
  return value;
}

/**
 * The store as a read sees it, noting in `into` every table its queries name (views as the tables
 * under them): what a cached answer is kept until a commit touches.
 */
export function trackReads(store: Store, graph: TableGraph, into: Set<string>): Store {
  const query = <T>(sql: string, params?: Params, opts?: QueryOptions): Promise<T[]> => {
    for (const m of sql.matchAll(TABLE_REF)) for (const t of graph.read(m[1]!)) into.add(t);
    return store.query<T>(sql, params, opts);
  };
  return wrapStore(store, { query }, baseStore(store));
}
const TABLE_REF = /\$db\.(\w+)/g;

/** A stored 0/1 flag as the contract's boolean (null stays null). */
export const flag = (v: number | null): boolean | null => (v == null ? null : v === 1);
