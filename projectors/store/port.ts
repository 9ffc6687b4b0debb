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
  /** Rows as plain objects (JSONEachRow). */
  query<T = Record<string, unknown>>(sql: string, params?: Params): Promise<T[]>;
  /** A statement with no rows to return (DDL, INSERT ... SELECT). */
  exec(sql: string, params?: Params): Promise<void>;
  /** Appends rows to a table as JSONEachRow. */
  insert(table: string, rows: readonly object[]): Promise<void>;
  /** Appends rows given as value arrays in `columns` order (JSONCompactEachRow: no field names to write or parse). */
  insertCompact(table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void>;
  close(): Promise<void>;
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
