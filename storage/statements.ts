import type { Store } from './port.ts';
import { msTime, param, type Sql, sql } from './sql.ts';
import type { Table } from './table.ts';

/**
 * Statement tables: the layout of the list read models (DESIGN 9).
 *
 * A statement table is a ReplacingMergeTree(seq) ordered by its read's keyset order, e.g.
 * (timeOfEvent, id), followed by every column a read filters on, so a page is a top-(limit+1)
 * read in key order that stops early. Each row is a statement of an entity's current state at
 * its key. When an entity changes, the projector writes the new statement and, if its sorting
 * key differs from the previous statement's, a tombstone copy of the previous statement at the
 * previous key (`tomb = 1`, `live = 0`, seq just below the new statement's). So at every sorting
 * key the row with the highest seq tells the truth, and merges, which collapse equal sorting keys
 * only, can never drop a tombstone before the statement it cancels. Because filtered columns
 * are part of the sorting key, a read may filter before resolving versions: a filter that keeps
 * a stale statement keeps its tombstone too.
 *
 * Reads resolve versions over the few rows of a page (the rows of one key are adjacent in key
 * order): no FINAL, no scan. Merges collapse each key to its newest row, so the table holds one
 * row per key ever occupied. The previous statement always comes from the table itself (the
 * newest row per id), so a crash between writes can leave nothing inconsistent: a replay finds
 * what was written and writes only what is still missing.
 */

/** Columns every statement table has besides the entity's own. */
export const STATEMENT_COLUMNS_DDL = 'live UInt8, tomb UInt8, seq UInt64';

export interface Statement {
  /** 1 when the row may be served (the entity is live and so is what it depends on). */
  live: number;
  tomb: number;
  seq: number;
}

/**
 * Rows to write for one entity: nothing when the new statement equals the previous one; else the
 * new statement with a seq above the previous one (and at least `base`, the batch's sequence),
 * preceded by a tombstone copy of the previous statement when the sorting key changed.
 */
export function statementRows<S extends Statement>(
  prev: S | undefined,
  next: Omit<S, 'seq' | 'tomb'>,
  base: number,
  same: (a: Omit<S, 'seq' | 'tomb'>, b: S) => boolean,
  sameKey: (a: Omit<S, 'seq' | 'tomb'>, b: S) => boolean,
): S[] {
  if (prev && prev.tomb === 0 && same(next, prev)) return [];
  const seq = statementSeq(prev, base);
  // Object.assign, not `{ ...x, more }`: V8 adds properties after a spread on a slow path (~2 µs a row).
  const row = Object.assign({}, next, { tomb: 0, seq }) as S;
  return prev && prev.tomb === 0 && !sameKey(next, prev) ? [Object.assign({}, prev, { live: 0, tomb: 1, seq: seq - 1 }), row] : [row];
}

/** The seq of a new statement: odd, above the previous statement's (room for its tombstone) and at least `base`. */
function statementSeq(prev: Statement | undefined, base: number): number {
  const seq = Math.max(base, prev ? prev.seq + 2 : 0);
  return seq % 2 === 0 ? seq + 1 : seq;
}

/**
 * The first statement of an entity with none stored: what statementRows writes for it, made of
 * `next` itself rather than a copy (a catch-up states most entities for the first time).
 */
export function firstStatement<S extends Statement>(next: Omit<S, 'seq' | 'tomb'>, base: number): S {
  return Object.assign(next, { tomb: 0, seq: statementSeq(undefined, base) }) as S;
}

/**
 * The keyset condition of a page in a statement table's order, newest first and ties by id
 * descending: rows strictly before `before` (the last key read: time in ms, id), or every row.
 */
export function beforeKey(
  time: Sql,
  id: Sql,
  idType: 'UInt64' | 'String',
  before: readonly [number | string, number | string] | undefined,
): Sql {
  if (!before) return sql`1`;
  return sql`(${time}, ${id}) < (${msTime('cT', Number(before[0]))}, ${param('cId', idType, before[1])})`;
}

/** Statement seq of a batch: odd, monotonic with the log position of the batch's last record. */
export const batchSeq = (version: bigint): number => Number(version) * 2 + 1;

/** The newest version of each entity in a batch of records (a later record wins a tie). */
export function newestVersions<T extends { version: number }, K>(values: readonly T[], idOf: (v: T) => K): Map<K, T> {
  const out = new Map<K, T>();
  for (const v of values) {
    const id = idOf(v);
    const had = out.get(id);
    if (!had || v.version >= had.version) out.set(id, v);
  }
  return out;
}

/** The newest row per id (the entity's current statement), from rows of a statement table. */
export function newestById<R extends { seq: number }, K>(rows: readonly R[], idOf: (r: R) => K): Map<K, R> {
  const out = new Map<K, R>();
  for (const r of rows) {
    const id = idOf(r);
    const cur = out.get(id);
    if (!cur || r.seq > cur.seq) out.set(id, r);
  }
  return out;
}

/**
 * `IN` a set of ids bound as one parameter holding their JSON array text (`JSON.stringify(ids)`):
 * `WHERE id IN ${inJsonIds('ids', 'UInt64')}`. A batch's tens of thousands of ids bind and parse
 * in about half the time of an Array parameter, and the set still selects by primary key.
 */
export const inJsonIds = (param: string, type: 'String' | 'UInt64'): string =>
  `(SELECT arrayJoin(JSONExtract({${param}:String}, 'Array(${type})')))`;

/**
 * The text of a validated date-time as the store gets it (`YYYY-MM-DDTHH:MM:SS.sssZ`): the text
 * itself when it is in that form already (validation checked it), else formatted from `ms`.
 */
export const canonicalDateTime = (text: string, ms: number): string =>
  text.length === 24 && text.charCodeAt(10) === 84 && text.charCodeAt(19) === 46 && text.charCodeAt(23) === 90
    ? text
    : new Date(ms).toISOString();

/** Shallow equality of the listed fields (arrays compared element by element). */
export function sameFields<T>(fields: readonly (keyof T)[]): (a: Partial<T>, b: Partial<T>) => boolean {
  return (a, b) =>
    fields.every((f) => {
      const x = a[f] as unknown;
      const y = b[f] as unknown;
      if (Array.isArray(x) && Array.isArray(y)) return x.length === y.length && x.every((v, i) => v === y[i]);
      return x === y;
    });
}

/**
 * SQL of the current statements of a statement table (the newest row per id), for tests, the
 * bench's floors and the rare reads by other keys. Not for list pages: those resolve in key order.
 */
export const currentViewDdl = (view: Table, table: Table, idCol = 'id'): string =>
  `CREATE VIEW IF NOT EXISTS ${view} AS
   SELECT * EXCEPT (tomb) FROM ${table} ORDER BY ${idCol}, seq DESC LIMIT 1 BY ${idCol}`;

/** How a table of versioned entities (a record per version, later wins) is kept as a statement table. */
export interface VersionedStatements<V extends { version: number }, S extends Statement & { version: number }> {
  table: Table;
  columns: readonly string[];
  /** SELECT of the stored statements' fields (as `S`) from `$db.<table>`, without WHERE. */
  select: string;
  idOf: (v: V) => string;
  /** The statement a record makes, not yet placed (live set, no seq or tomb). */
  state: (v: V) => Omit<S, 'seq' | 'tomb'>;
  values: (s: S) => unknown[];
  same: (a: Omit<S, 'seq' | 'tomb'>, b: S) => boolean;
  sameKey: (a: Omit<S, 'seq' | 'tomb'>, b: S) => boolean;
}

/**
 * Applies a batch of versioned records to their statement table: the newest version of each
 * entity in the batch, if newer than its stored statement, becomes its new statement (with a
 * tombstone at the old key when the key moved). The previous statements come from the table
 * (by id, a String column), so a replay writes only what is still missing. Returns the current
 * statement of each entity of the batch that has one, as the table holds it now.
 */
export async function applyVersioned<V extends { version: number }, S extends Statement & { version: number; id: string }>(
  store: Store,
  spec: VersionedStatements<V, S>,
  batch: readonly { value: unknown }[],
  version: bigint,
): Promise<Map<string, S>> {
  const incoming = newestVersions(
    batch.map((r) => r.value as V),
    spec.idOf,
  );
  const prev = newestById(
    await store.query<S>(`${spec.select} WHERE id IN ${inJsonIds('ids', 'String')}`, { ids: JSON.stringify([...incoming.keys()]) }),
    (r) => r.id,
  );
  const base = batchSeq(version);
  const out: unknown[][] = [];
  const current = new Map(prev);
  for (const [id, v] of incoming) {
    const cur = prev.get(id);
    if (cur && v.version <= cur.version) continue;
    for (const row of statementRows(cur, spec.state(v), base, spec.same, spec.sameKey)) {
      out.push(spec.values(row));
      current.set(id, row);
    }
  }
  await store.insertCompact(spec.table.name, spec.columns, out);
  return current;
}

/**
 * Engine clause of a statement table (storage/statements.ts): ReplacingMergeTree on `seq`, with
 * `tomb` as its is-deleted column. Merges keep the newest row of each sorting key as before (a
 * tombstone included), and reads never use FINAL on these tables, so the is-deleted column changes
 * no read; it lets `compactStatements` drop tombstones with `OPTIMIZE ... FINAL CLEANUP`.
 */
export const statementEngine = (orderBy: string): string =>
  `ENGINE = ReplacingMergeTree(seq, tomb) ORDER BY (${orderBy})
   SETTINGS deduplicate_merge_projection_mode = 'rebuild', allow_experimental_replacing_merge_with_cleanup = 1`;
