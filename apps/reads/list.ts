import type { Store } from '../../storage/port.ts';
import { identifier, type Sql, timeWindow } from '../../storage/sql.ts';
import { beforeKey } from '../../storage/statements.ts';
import type { Table } from '../../storage/table.ts';
import type { ReadContext, Seen } from './context.ts';
import { type CursorState, fingerprint, type Key, type KeyPart, type WindowBounds } from './cursor.ts';
import { appliedTimeRange, historyRule, leavesAt, type Window, type WindowRule, windowAt, windowRule } from './window.ts';

export interface ListMeta {
  hasMore: boolean;
  nextCursor: string | null;
  serverTime: string;
  appliedTimeRange?: { startTime: string | null; endTime: string | null };
}
export interface ListResult<T> {
  results: T[];
  meta: ListMeta;
}

/**
 * What the read cache (apps/api/read-cache.ts) needs of a page besides its JSON, attached to the
 * result under this symbol (not enumerable, never serialized): the window as a rule over the
 * clock, the next page's sort key with the filters' fingerprint (the cache signs a fresh cursor
 * per answer), and the time of the oldest row fetched (the limit+1-th when there is one), the
 * first row to leave a window whose start moves.
 */
export const PAGE_FACTS = Symbol('page facts');
export interface PageFacts {
  window?: WindowRule;
  /** `windowless`: the cursor carries no window (a since-poll's watermark). */
  next?: { k: Key; fp: string; windowless?: boolean };
  oldest?: number;
  /** The first instant the clock alone may change the answer, for a read that says it without a window (ms). */
  until?: number;
  /**
   * The same found by queries that only the read cache needs (run once, when it stores the answer,
   * with the base store): ms, Infinity for never. The tables they read are among the read's own
   * (ReadContext.reads), so a commit that would move the instant ends the entry.
   */
  later?: (store: Store, now: number, seen?: Seen) => Promise<number>;
  /** The sort key of each row of the page, and the window it was read in (exports: a resume token per row). */
  keys?: Key[];
  w?: WindowBounds;
}

/** WHERE clauses with their parameters; clause text is constant, values always bound. */
export class Where {
  readonly clauses: string[] = ['1'];
  readonly params: Record<string, unknown>;
  constructor(params: Record<string, unknown> = {}) {
    this.params = { ...params };
  }
  add(clause: string | Sql, params: Record<string, unknown> = {}): this {
    if (typeof clause === 'string') this.clauses.push(clause);
    else {
      this.clauses.push(clause.text);
      Object.assign(this.params, clause.params);
    }
    Object.assign(this.params, params);
    return this;
  }
  /** Adds the clause only when `value` is given. */
  when<V>(value: V | undefined, sql: string, name: string): this {
    return value === undefined ? this : this.add(sql, { [name]: value });
  }
  get sql(): string {
    return this.clauses.join('\n      AND ');
  }
  /**
   * Conditions read before the others (PREWHERE): only on sorting-key columns when the read uses
   * FINAL (every version of a key has the same key columns, so none is dropped alone).
   */
  readonly pre: string[] = [];
  prewhere(sql: string, params: Record<string, unknown> = {}): this {
    this.pre.push(sql);
    Object.assign(this.params, params);
    return this;
  }
  /** `PREWHERE ...`, or nothing. */
  get prewhereSql(): string {
    return this.pre.length ? `PREWHERE ${this.pre.join(' AND ')}` : '';
  }
}

/**
 * The shared shape of every keyset-paginated list read: resolve the cursor and window, run the
 * page query for limit + 1 rows, shape rows, and build `meta`.
 */
export async function listRead<Row, Item>(
  ctx: ReadContext,
  spec: {
    op: string;
    query: Record<string, unknown> & { limit: number; cursor?: string; startTime?: string; endTime?: string };
    /** historical reads resolve a time window and echo `appliedTimeRange`. */
    historical: boolean;
    /**
     * A read that is not historical but that the account's history window bounds by its time field
     * (open positions): `window` gets the window's start, nothing is echoed, and the answer holds
     * until its oldest fetched row leaves the window.
     */
    historyBound?: boolean;
    /** The first instant the clock alone may change a page of a read that knows it otherwise (ms; undefined: never). */
    until?: () => number | undefined;
    /** PageFacts.later of the page, from the rows fetched (with the window they were fetched in). */
    later?: (rows: Row[], window: Window) => PageFacts['later'];
    unboundedDefault?: boolean;
    /** What the sort key holds, position by position; a cursor's key is checked against it. */
    keyParts: readonly KeyPart[];
    fetch: (args: { where: Where; after: CursorState['k'] | undefined; window: Window; limit: number }) => Promise<Row[]>;
    keyOf: (row: Row) => CursorState['k'];
    shape: (rows: Row[]) => Promise<Item[]> | Item[];
  },
): Promise<ListResult<Item>> {
  const fp = fingerprint(spec.op, spec.query);
  const policy = ctx.cursors.policyPrint(ctx.principal);
  const cur =
    spec.query.cursor !== undefined ? ctx.cursors.decode(spec.query.cursor, spec.keyParts, fp, policy, spec.historical) : undefined;
  const rule = spec.historical
    ? windowRule(spec.query, ctx.principal, { fromCursor: cur?.w, unboundedDefault: spec.unboundedDefault })
    : undefined;
  const history = !spec.historical && spec.historyBound ? historyRule(ctx.principal) : null;
  const bound = rule ?? history;
  const window = bound ? windowAt(bound, ctx.now.getTime()) : { start: null, end: null };
  const where = new Where();
  const rows = await spec.fetch({ where, after: cur?.k, window, limit: spec.query.limit + 1 });
  const hasMore = rows.length > spec.query.limit;
  const page = hasMore ? rows.slice(0, spec.query.limit) : rows;
  const nextKey = hasMore ? spec.keyOf(page[page.length - 1]!) : undefined;
  const nextCursor = nextKey
    ? ctx.cursors.encode(
        { k: nextKey, ...(spec.historical ? { w: [window.start, window.end] as [number | null, number | null] } : {}) },
        fp,
        policy,
      )
    : null;
  const meta: ListMeta = { hasMore, nextCursor, serverTime: ctx.now.toISOString() };
  if (spec.historical) meta.appliedTimeRange = appliedTimeRange(window);
  const result: ListResult<Item> = { results: await spec.shape(page), meta };
  const facts: PageFacts = { keys: page.map(spec.keyOf) };
  if (spec.historical) facts.w = [window.start, window.end];
  if (rule) facts.window = rule;
  if (nextKey) facts.next = { k: nextKey, fp };
  if (rule && spec.keyParts[0] === 'time' && rows.length) facts.oldest = Number(spec.keyOf(rows[rows.length - 1]!)[0]);
  // Rows leave a history window oldest first: the oldest fetched (the limit+1-th decides hasMore) is the first whose leaving shows.
  if (history && spec.keyParts[0] === 'time' && rows.length) facts.until = leavesAt(history, Number(spec.keyOf(rows[rows.length - 1]!)[0]));
  const until = spec.until?.();
  if (until !== undefined) facts.until = Math.min(facts.until ?? Infinity, until);
  const later = spec.later?.(rows, window);
  if (later) facts.later = later;
  Object.defineProperty(result, PAGE_FACTS, { value: facts, enumerable: false });
  return result;
}

/** Time-window clauses on a DateTime64 column (bounds inclusive). */
export function addWindow(where: Where, column: string, w: Window): void {
  for (const condition of timeWindow(identifier(column), w, { start: 'wStart', end: 'wEnd' })) where.add(condition);
}

/**
 * Settings of a statement-table page query. The by-trader, by-asset and by-id projections serve
 * the pages of filters that select few rows (apps/reads/stats.ts); any other page is a read in the
 * table's own order, and the planner, left free, may pick a projection and sort all of it instead
 * of stopping early. One thread: a page is the first rows in key order, which parallel streams
 * only read ahead of and merge (open positions' first page: 7.7 ms on two threads, 4.8 ms on one).
 */
export const pageSettings = (selective: boolean): string => `SETTINGS max_threads = 1${selective ? '' : ', optimize_use_projections = 0'}`;

/** What a statement-table page query returns besides the read's own columns (storage/statements.ts). */
export interface StatementRow {
  t: number | string;
  id: number | string;
  live: number;
  tomb: number;
  seq: number;
}

/**
 * A page from a statement table (storage/statements.ts): `fetch(before, n)` returns up to n rows
 * with the page's filters in key order, newest first, strictly before `before`; the rows of one
 * key are adjacent, so versions resolve here (the newest row of each key) and rows that are not
 * live are dropped. Fetches again past what it has seen while the page is short and rows remain;
 * a short last chunk means the end of the filtered range.
 */
export async function statementPage<R extends StatementRow>(
  limit: number,
  after: CursorState['k'] | undefined,
  fetch: (before: [number | string, number | string] | undefined, n: number) => Promise<R[]>,
  /** A further condition on resolved rows that the SQL cannot apply before versions are resolved. */
  keep: (row: R) => boolean = () => true,
  /** The share of rows `keep` is expected to let through: the first read is sized for it. */
  share = 1,
): Promise<R[]> {
  const out: R[] = [];
  let before = after as [number | string, number | string] | undefined;
  let n = Math.ceil((limit + 8) / Math.max(share, 0.05));
  for (;;) {
    const rows = await fetch(before, n);
    const end = rows.length < n;
    // Unless the range ended, the last key's rows may continue in the next chunk: keep them for it.
    let upTo = rows.length;
    if (!end) {
      const last = rows[rows.length - 1]!;
      while (upTo > 0 && rows[upTo - 1]!.t === last.t && rows[upTo - 1]!.id === last.id) upTo--;
      if (upTo === 0) {
        n *= 4;
        continue;
      } // one key fills the chunk: read more at once
    }
    for (let i = 0; i < upTo; ) {
      let best = rows[i]!;
      let j = i + 1;
      for (; j < upTo && rows[j]!.t === best.t && rows[j]!.id === rows[i]!.id; j++) if (rows[j]!.seq > best.seq) best = rows[j]!;
      if (best.live === 1 && best.tomb === 0 && keep(best)) out.push(best);
      i = j;
    }
    if (out.length >= limit || end) return out.slice(0, limit);
    const lastSeen = rows[upTo - 1]!;
    before = [lastSeen.t, lastSeen.id];
    n *= 2;
  }
}

/**
 * Up to n rows of a statement table (alias `s`) in key order, newest first, strictly before
 * `before`, with the page's filters: the one query behind every statement-table page.
 * `columns` are the read's own columns; `t` (the time key in ms), `live`, `tomb` and `seq` come
 * with them. `selective`: a trader, asset or id filter that a projection of the table serves.
 */
export function statementRows<R extends StatementRow>(
  ctx: ReadContext,
  spec: {
    table: Table;
    columns: string;
    timeCol: string;
    idType: 'UInt64' | 'String';
    where: Where;
    selective: boolean;
  },
  before: [number | string, number | string] | undefined,
  n: number,
): Promise<R[]> {
  const b = beforeKey(identifier(`s.${spec.timeCol}`), identifier('s.id'), spec.idType, before);
  return ctx.store.query<R>(
    `
    SELECT ${spec.columns}, toUnixTimestamp64Milli(s.${spec.timeCol}) AS t, s.live AS live, s.tomb AS tomb, s.seq AS seq
    FROM ${spec.table} AS s WHERE ${spec.where.sql} AND ${b.text}
    ORDER BY s.${spec.timeCol} DESC, s.id DESC LIMIT {n:UInt32}
    ${pageSettings(spec.selective)}`,
    { ...spec.where.params, ...b.params, n },
  );
}
