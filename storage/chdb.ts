import { mkdirSync } from 'node:fs';
import { Session } from 'chdb';
import { bindDatabase, checkIdentifier, INSERT_SETTINGS, type Params, type QueryOptions, type Store } from './port.ts';
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
  if (entry) {
    entry.users++;
    return entry.session;
  }
  mkdirSync(path, { recursive: true });
  const session = new Session(path);
  if (!own) sessions.set(path, { session, users: 1 });
  return session;
}

/** The SET that gives a session the settings `wanted` (resetting what an earlier SET left and is not wanted), or '' when it has them. */
function settingsStatement(sticky: Map<string, string>, wanted: Readonly<Record<string, string | number>> | undefined): string {
  const parts: string[] = [];
  for (const name of sticky.keys())
    if (!wanted || !(name in wanted)) {
      parts.push(`${checkIdentifier(name)} = DEFAULT`);
      sticky.delete(name);
    }
  for (const [name, value] of Object.entries(wanted ?? {})) {
    // Values are the server's own constants (apps/reads/cost.ts), never a caller's.
    const text = typeof value === 'number' ? String(value) : `'${String(value).replace(/[\\']/g, '')}'`;
    if (sticky.get(name) === text) continue;
    parts.push(`${checkIdentifier(name)} = ${text}`);
    sticky.set(name, text);
  }
  return parts.length ? `SET ${parts.join(', ')}` : '';
}

interface Lane {
  session: Session;
  sticky: Map<string, string>;
}

export class ChdbStore implements Store {
  readonly database: string;
  private readonly session: Session;
  private readonly own: boolean;
  /** Settings of every statement on this store's sessions (set once per session). */
  private readonly sessionSettings: Readonly<Record<string, number>>;
  private closed = false;
  /**
   * Reads of an API answer concurrently only on sessions of their own (a session runs one
   * statement at a time): `sessions` > 1 opens that many, and each query takes a free one.
   */
  private readonly lanes: Lane[];
  private readonly free: Lane[];
  private readonly waiting: ((lane: Lane) => void)[] = [];

  constructor(
    readonly path: string,
    database = 'signalbase',
    opts: { ownSession?: boolean; sessions?: number; sessionSettings?: Record<string, number> } = {},
  ) {
    this.database = checkIdentifier(database);
    this.sessionSettings = opts.sessionSettings ?? {};
    const n = Math.max(1, Math.floor(opts.sessions ?? 1));
    this.own = opts.ownSession === true || n > 1;
    this.session = openSession(path, this.own);
    this.lanes = [{ session: this.session, sticky: new Map() }];
    for (let i = 1; i < n; i++) this.lanes.push({ session: openSession(path, true), sticky: new Map() });
    this.free = [...this.lanes];
  }

  /** How many statements this store can run at once. */
  get concurrency(): number {
    return this.lanes.length;
  }

  private take(): Promise<Lane> | Lane {
    return this.free.pop() ?? new Promise((resolve) => this.waiting.push(resolve));
  }

  private give(lane: Lane): void {
    const next = this.waiting.shift();
    if (next) next(lane);
    else this.free.push(lane);
  }

  async init(): Promise<this> {
    const set = Object.entries(this.sessionSettings).map(([name, value]) => `${checkIdentifier(name)} = ${Number(value)}`);
    if (set.length && this.own) for (const lane of this.lanes) await lane.session.queryAsync(`SET ${set.join(', ')}`, { format: 'Null' });
    await this.session.queryAsync(`CREATE DATABASE IF NOT EXISTS ${this.database}`);
    return this;
  }

  async query<T>(sql: string, params: Params = {}, opts?: QueryOptions): Promise<T[]> {
    return parseRows<T>(await this.run(sql, params, 'JSONCompactEachRowWithNames', opts?.settings, opts?.short === true));
  }

  async exec(sql: string, params: Params = {}): Promise<void> {
    await this.run(sql, params, 'Null', undefined, false);
  }

  private async run(sql: string, params: Params, format: string, settings: QueryOptions['settings'], short: boolean): Promise<string> {
    const lane = await this.take();
    // chdb takes no settings per call: a SET, which stays on the session, so a lane's next
    // statement resets what it does not want.
    const set = settingsStatement(lane.sticky, settings);
    try {
      if (set) await lane.session.queryAsync(set, { format: 'Null' });
      const bound = bindDatabase(sql, this.database);
      // chdb runs queryBindAsync one parameterised query at a time in the whole process (it chains
      // them: its parameter state is not per connection), so a short read on a session of this
      // store's own goes through the streaming path instead, which binds per query and runs beside
      // the others; it plans the query on the event loop, so long reads (whose planning is long)
      // keep the chained path. A session shared with other stores may have another's stream open.
      if (format === 'Null' || !short || !this.own) return (await lane.session.queryBindAsync(bound, params, { format })).text();
      return await streamedText(lane.session.queryStreamBind(bound, params, { format }));
    } catch (err) {
      // Whether the SET took effect is not known: set (or reset) those names again next time.
      for (const name of Object.keys(settings ?? {})) lane.sticky.set(name, '?');
      // chdb keeps what a failed statement had written of its answer (its header, rows before a
      // limit hit) and hands it out at the front of the session's next answer: a statement whose
      // answer is thrown away takes it.
      await lane.session.queryAsync('SELECT 1', { format: 'Null' }).catch(() => {});
      throw err;
    } finally {
      this.give(lane);
    }
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
  private async insertLines(
    table: string,
    rows: readonly unknown[],
    format: 'JSONEachRow' | 'JSONCompactEachRow',
    columns?: readonly string[],
  ): Promise<void> {
    if (!rows.length) return;
    const json = JSON.stringify(rows);
    // On a session of its own like any statement: an insert beside a streamed read on the same
    // session made that read come back empty now and then (test/apps/migrate.test.ts, issue 26).
    const lane = await this.take();
    try {
      await lane.session.insert({
        table: `${this.database}.${checkIdentifier(table)}`,
        ...(columns ? { columns: columns.map(checkIdentifier) } : {}),
        values: Buffer.from(format === 'JSONCompactEachRow' ? json.slice(1, -1) : json),
        format,
        settings: INSERT_SETTINGS,
      });
    } finally {
      this.give(lane);
    }
  }

  /** Drops this store's database (tests). */
  async drop(): Promise<void> {
    await this.session.queryAsync(`DROP DATABASE IF EXISTS ${this.database}`);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const lane of this.lanes.slice(1)) lane.session.close();
    if (this.own) {
      this.session.close();
      return;
    }
    const entry = sessions.get(this.path);
    if (entry && --entry.users === 0) {
      sessions.delete(this.path);
      entry.session.close();
    }
  }
}

export async function openChdbStore(
  path: string,
  database?: string,
  opts?: { ownSession?: boolean; sessions?: number; sessionSettings?: Record<string, number> },
): Promise<ChdbStore> {
  return new ChdbStore(path, database, opts).init();
}

/**
 * The text of a streamed JSONCompactEachRowWithNames answer as one answer: chdb writes each block
 * of a stream with its own line of names, which would read as a row of the next block's values
 * (issue 26: an asset id `'assetId'` in a query's parameters, a 500). Each block's names line is
 * dropped but the first; a block that does not start with it is a fault, not rows to guess at.
 */
async function streamedText(chunks: AsyncIterable<{ text(): string }>): Promise<string> {
  let text = '';
  let names: string | undefined;
  for await (const chunk of chunks) {
    const t = chunk.text();
    if (!t) continue;
    const nl = t.indexOf('\n');
    const head = nl === -1 ? t : t.slice(0, nl + 1);
    if (names === undefined) {
      names = head;
      text = t;
    } else if (head === names) text += t.slice(head.length);
    else throw new Error('a streamed answer block did not start with its column names');
  }
  return text;
}
