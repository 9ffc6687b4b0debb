/**
 * The Store port: ClickHouse SQL with `{name:Type}` parameters. Adapters: chdb (embedded) now,
 * ClickHouse server over HTTP later, running the very same SQL.
 *
 * Table names are written `$db.table`; the adapter substitutes its own database name (a
 * server-side constant, validated as an identifier), never caller input.
 */
export type Params = Record<string, unknown>;

export interface Store {
  readonly database: string;
  /**
   * The store a wrapper reads through (apps/reads/cost.ts bounds each caller's queries): what is
   * loaded once for every caller (facts per data version, planner counts) is kept and loaded on it.
   */
  readonly underlying?: Store;
  /** Rows as plain objects (JSONEachRow). */
  query<T = Record<string, unknown>>(sql: string, params?: Params, opts?: QueryOptions): Promise<T[]>;
  /** A statement with no rows to return (DDL, INSERT ... SELECT). */
  exec(sql: string, params?: Params): Promise<void>;
  /** Appends rows to a table as JSONEachRow. */
  insert(table: string, rows: readonly object[]): Promise<void>;
  /** Appends rows given as value arrays in `columns` order (JSONCompactEachRow: no field names to write or parse). */
  insertCompact(table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void>;
  /**
   * A statement's answer in one of the store's own output formats, as its bytes, read from the
   * store only as fast as the caller takes them (exports); a Parquet answer is one file, in pieces.
   * Ending the iteration early cancels it.
   */
  stream?(sql: string, params: Params, format: StreamFormat, opts?: QueryOptions): AsyncIterable<StreamChunk>;
  /** The formats `stream` gives. */
  readonly streamFormats?: readonly StreamFormat[];
  close(): Promise<void>;
}

/** A piece of a streamed answer; `rows` when it is that many whole rows (a piece that may end within a row has none). */
export interface StreamChunk {
  bytes: Uint8Array;
  rows?: number;
}

/** The store's output formats an export streams as they are. */
export type StreamFormat = 'JSONEachRow' | 'CSV' | 'Parquet';

/**
 * `store` with some of its methods replaced (a wrapper that records, bounds or tunes what goes
 * through it): the others, and `database`, pass through; `underlying` is `store`'s unless given.
 */
export function wrapStore(
  store: Store,
  over: Partial<Pick<Store, 'query' | 'exec' | 'insert' | 'insertCompact' | 'close'>>,
  underlying: Store | undefined = store.underlying,
): Store {
  return {
    get database() {
      return store.database;
    },
    ...(underlying ? { underlying } : {}),
    query: over.query ?? ((sql, params, opts) => store.query(sql, params, opts)),
    exec: over.exec ?? ((sql, params) => store.exec(sql, params)),
    insert: over.insert ?? ((table, rows) => store.insert(table, rows)),
    insertCompact: over.insertCompact ?? ((table, columns, rows) => store.insertCompact(table, columns, rows)),
    ...(store.stream ? { stream: store.stream.bind(store), streamFormats: store.streamFormats } : {}),
    close: over.close ?? (() => store.close()),
  };
}

/**
 * Settings of every insert, on either adapter: date-times as the projectors write them (checked at
 * ingest, read best-effort), and batches spanning many partitions (a catch-up batch may span many
 * months of a table partitioned by month: position_samples).
 */
export const INSERT_SETTINGS = { date_time_input_format: 'best_effort', max_partitions_per_insert_block: '0' } as const;

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
export function checkIdentifier(name: string): string {
  if (!IDENT.test(name)) throw new Error(`not a valid database identifier: ${name}`);
  return name;
}
export function bindDatabase(sql: string, database: string): string {
  return sql.replaceAll('$db.', `${database}.`);
}

/** Per-query options of a read: ClickHouse settings (the cost bounds: time, memory, rows and bytes read). */
export interface QueryOptions {
  settings?: Readonly<Record<string, string | number>>;
  /** The longest the caller waits for the answer (a server that stopped answering), in ms. */
  timeoutMs?: number;
}

/**
 * What a store failure means to a caller, on either adapter: `too_large` when the query ran into
 * one of its bounds (ClickHouse codes below; the caller can narrow the read), `unavailable` when
 * the store did not answer (connection refused or reset, a timeout of the client, the server
 * shutting down), undefined for anything else (a fault of ours).
 */
export type StoreFailure = { kind: 'too_large'; bound: 'time' | 'memory' | 'rows' | 'bytes' | 'result' } | { kind: 'unavailable' };

const BOUND_CODES: Record<number, 'time' | 'memory' | 'rows' | 'bytes' | 'result'> = {
  159: 'time', // TIMEOUT_EXCEEDED
  160: 'time', // TOO_SLOW (estimated execution time over max_execution_time)
  241: 'memory', // MEMORY_LIMIT_EXCEEDED
  158: 'rows', // TOO_MANY_ROWS
  307: 'bytes', // TOO_MANY_BYTES
  396: 'result', // TOO_MANY_ROWS_OR_BYTES (result size)
};
/** Server-side codes that say the server is going away or cannot take the query now. */
const UNAVAILABLE_CODES = new Set([
  202, // TOO_MANY_SIMULTANEOUS_QUERIES
  210, // NETWORK_ERROR
  209, // SOCKET_TIMEOUT
  394, // QUERY_WAS_CANCELLED (server shutdown)
  242, // TABLE_IS_READ_ONLY
  999, // KEEPER_EXCEPTION
]);
const UNAVAILABLE_ERRNO = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
  'ENOTFOUND',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
]);

export function storeFailure(err: unknown): StoreFailure | undefined {
  if (!err || typeof err !== 'object') return undefined;
  const e = err as { code?: unknown; clickhouseCode?: unknown; message?: unknown; cause?: unknown; name?: unknown };
  // chdb: ChdbQueryError.clickhouseCode (a number); @clickhouse/client: ClickHouseError.code (a numeric string).
  // chdb's streaming path says the code only in its message ("Code: 158. DB::Exception: ...").
  const inMessage = typeof e.message === 'string' ? /^Code: (\d+)\./.exec(e.message)?.[1] : undefined;
  const numeric = Number(e.clickhouseCode ?? (typeof e.code === 'string' && /^\d+$/.test(e.code) ? e.code : (inMessage ?? NaN)));
  if (Number.isFinite(numeric)) {
    const bound = BOUND_CODES[numeric];
    if (bound) return { kind: 'too_large', bound };
    if (UNAVAILABLE_CODES.has(numeric)) return { kind: 'unavailable' };
    return undefined;
  }
  if (typeof e.code === 'string' && UNAVAILABLE_ERRNO.has(e.code)) return { kind: 'unavailable' };
  const message = typeof e.message === 'string' ? e.message : '';
  // @clickhouse/client's own timeout and a socket closed under it; the abort of a query past its deadline.
  if (/^Timeout error|socket hang up|ECONNREFUSED|ECONNRESET|other side closed/i.test(message) || e.name === 'AbortError')
    return { kind: 'unavailable' };
  return e.cause && e.cause !== err ? storeFailure(e.cause) : undefined;
}

/** The store itself, under any wrapper: the key of what is kept per store. */
export const baseStore = (store: Store): Store => store.underlying ?? store;
