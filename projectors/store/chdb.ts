import { mkdirSync } from 'node:fs';
import { Session } from 'chdb';
import { bindDatabase, checkIdentifier, INSERT_SETTINGS, type Params, type Store } from './port.ts';
import { parseRows } from './rows.ts';

/**
 * chdb holds one data directory per process, so sessions are shared per path and stores are
 * isolated by database inside it (tests create one database each). A session runs one statement
 * at a time: a store that must not wait behind another's work (the API's reads behind the
 * projector's inserts: a 2 ms read waited up to 275 ms behind 300k-row inserts, 9-60 ms on a
 * session of its own) opens a session of its own on the same path.
 */
const sessions = new Map<string, { session: Session; users: number }>();

/** The shared session of `path`, or (`own`) a session of the caller's own on it. */
function openSession(path: string, own: boolean): Session {
  const entry = own ? undefined : sessions.get(path);
  if (entry) { entry.users++; return entry.session; }
  mkdirSync(path, { recursive: true });
  const session = new Session(path);
  if (!own) sessions.set(path, { session, users: 1 });
  return session;
}

export class ChdbStore implements Store {
  readonly database: string;
  private readonly session: Session;
  private readonly own: boolean;
  private closed = false;

  constructor(readonly path: string, database = 'signalbase', opts: { ownSession?: boolean } = {}) {
    this.database = checkIdentifier(database);
    this.own = opts.ownSession === true;
    this.session = openSession(path, this.own);
  }

  async init(): Promise<this> {
    await this.session.queryAsync(`CREATE DATABASE IF NOT EXISTS ${this.database}`);
    return this;
  }

  async query<T>(sql: string, params: Params = {}): Promise<T[]> {
    const res = await this.session.queryBindAsync(bindDatabase(sql, this.database), params, { format: 'JSONCompactEachRowWithNames' });
    return parseRows<T>(res.text());
  }

  async exec(sql: string, params: Params = {}): Promise<void> {
    await this.session.queryBindAsync(bindDatabase(sql, this.database), params, { format: 'Null' });
  }

  async insert(table: string, rows: readonly object[]): Promise<void> {
    await this.insertLines(table, rows, 'JSONEachRow');
  }

  async insertCompact(table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void> {
    await this.insertLines(table, rows, 'JSONCompactEachRow', columns);
  }

  /**
   * The rows as one JSON array, sent as one insert: both formats read rows separated by commas
   * (JSONEachRow also the enclosing brackets), and one JSON.stringify of the batch costs half as
   * much as one per row.
   */
  private async insertLines(table: string, rows: readonly unknown[], format: 'JSONEachRow' | 'JSONCompactEachRow', columns?: readonly string[]): Promise<void> {
    if (!rows.length) return;
    const json = JSON.stringify(rows);
    await this.session.insert({
      table: `${this.database}.${checkIdentifier(table)}`,
      ...(columns ? { columns: columns.map(checkIdentifier) } : {}),
      values: Buffer.from(format === 'JSONCompactEachRow' ? json.slice(1, -1) : json),
      format,
      settings: INSERT_SETTINGS,
    });
  }

  /** Drops this store's database (tests). */
  async drop(): Promise<void> {
    await this.session.queryAsync(`DROP DATABASE IF EXISTS ${this.database}`);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.own) { this.session.close(); return; }
    const entry = sessions.get(this.path);
    if (entry && --entry.users === 0) {
      sessions.delete(this.path);
      entry.session.close();
    }
  }
}

export async function openChdbStore(path: string, database?: string, opts?: { ownSession?: boolean }): Promise<ChdbStore> {
  return new ChdbStore(path, database, opts).init();
}
