import { mkdirSync } from 'node:fs';
import { formatQueryParams } from '@clickhouse/client-common';
import { Session } from 'chdb';
import { closeStreamSession, openStreamSession, paramLiteral, streamOn } from './chdb-streams.ts';
import {
  bindDatabase,
  checkIdentifier,
  INSERT_SETTINGS,
  type Params,
  type QueryOptions,
  type Store,
  type StreamChunk,
  type StreamFormat,
} from './port.ts';
import { parseRows } from './rows.ts';
import type { StatementLog } from './statement-log.ts';

/**
 * chdb holds one data directory per process, so sessions are shared per path and stores are
 * isolated by database inside it (tests create one database each). A session runs one statement
 * at a time: a store that must not wait behind another's work (the API's reads behind the
 * projector's inserts: a 2 ms read waited up to 275 ms behind 300k-row inserts, 9-60 ms on a
 * session of its own) opens a session of its own on the same path.
 */
interface SessionState {
  session: Session;
  /** Settings a SET left on the session (chdb takes none per call). */
  sticky: Map<string, string>;
  /** The session's statements in turn: a statement's SET and the statement itself are one step. */
  tail: Promise<unknown>;
}
const sessions = new Map<string, { state: SessionState; users: number }>();

/**
 * The most bytes of SQL the parser takes: a statement's parameters travel in its SET (bindings),
 * and a projector batch's id lists run to megabytes.
 */
const MAX_QUERY_SIZE = 256 * 2 ** 20;

function newSession(path: string): SessionState {
  mkdirSync(path, { recursive: true });
  const session = new Session(path);
  return { session, sticky: new Map(), tail: session.queryAsync(`SET max_query_size = ${MAX_QUERY_SIZE}`, { format: 'Null' }) };
}

/** The shared session of `path`, or (`own`) a session of the caller's own on it. */
function openSession(path: string, own: boolean): SessionState {
  if (own) return newSession(path);
  const entry = sessions.get(path);
  if (entry) {
    entry.users++;
    return entry.state;
  }
  const state = newSession(path);
  sessions.set(path, { state, users: 1 });
  return state;
}

/** Runs `step` on the session after the statements before it (another store sharing the session may be between a SET and its statement). */
function inTurn<T>(state: SessionState, step: (session: Session) => Promise<T>): Promise<T> {
  const run = state.tail.then(
    () => step(state.session),
    () => step(state.session),
  );
  state.tail = run.catch(() => {});
  return run;
}

/** The SET parts that give a session the settings `wanted` (resetting what an earlier SET left and is not wanted). */
function settingsParts(sticky: Map<string, string>, wanted: Readonly<Record<string, string | number>> | undefined): string[] {
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
  return parts;
}

/** Stream sessions kept open for the next streams (exports run few at once: apps/api/server.ts). */
const MAX_IDLE_STREAM_SESSIONS = 2;

const PLACEHOLDER = /\{([A-Za-z_][A-Za-z0-9_]*):/g;

/**
 * The SET parts that bind a statement's `{name:Type}` parameters on its session: ClickHouse's
 * session query parameters (`SET param_name = 'value'`, as clickhouse-client binds them), the value
 * in the text form of the HTTP interface's `param_name` (@clickhouse/client's own formatter, so
 * both stores bind alike) quoted as a string literal by the same formatter. chdb's own binding
 * (queryBindAsync) runs one parameterised statement at a time in the whole process (its parameter
 * state is not per connection): the API's reads and the projector queued behind each other on
 * one core. Values stay out of the statement's text (a SET before it, in the same call); a
 * parameter left on the session by an earlier statement is never read in place of a missing one
 * (refused here, as chdb would).
 */
function paramParts(sql: string, params: Params): string[] {
  return checkedParams(sql, params).map(([name, value]) => `param_${name} = ${literalOf(value)}`);
}

/** The statement's parameters, each of its placeholders bound and each name an identifier. */
function checkedParams(sql: string, params: Params): [string, unknown][] {
  for (const [, name] of sql.matchAll(PLACEHOLDER))
    if (!Object.hasOwn(params, name!)) throw new Error(`query parameter ${name} is not bound`);
  return Object.entries(params).map(([name, value]) => [checkIdentifier(name), value]);
}

/**
 * The text of a frozen array of numbers and strings, kept: a read that binds the same thousands of
 * ids to every request formats them once (issue 26: 7 % of the API's thread went to formatting the
 * groups of activity summaries). Frozen and of primitives, so the kept text cannot go stale.
 */
const literals = new WeakMap<readonly unknown[], string>();
const keepable = (value: unknown): value is readonly unknown[] =>
  Array.isArray(value) && Object.isFrozen(value) && value.every((v) => typeof v === 'number' || typeof v === 'string');

function literalOf(value: unknown): string {
  const kept = Array.isArray(value) ? literals.get(value) : undefined;
  if (kept !== undefined) return kept;
  const literal = paramLiteral(value, formatQueryParams);
  if (keepable(value)) literals.set(value, literal);
  return literal;
}

export interface ChdbStoreOptions {
  /** A session of its own, not the one shared per path. */
  ownSession?: boolean;
  /** Sessions of its own that statements take in turn (reads side by side). */
  sessions?: number;
  /** Settings of every statement on its sessions. */
  sessionSettings?: Record<string, number>;
  /** Where each statement is noted (STATEMENT_LOG), as the session named `session`. */
  statementLog?: { log: StatementLog; session: string };
}

export class ChdbStore implements Store {
  private readonly log: ChdbStoreOptions['statementLog'];
  readonly database: string;
  private readonly session: SessionState;
  private readonly own: boolean;
  /** Settings of every statement on this store's sessions (set once per session). */
  private readonly sessionSettings: Readonly<Record<string, number>>;
  private closed = false;
  /**
   * Reads of an API answer concurrently only on sessions of their own (a session runs one
   * statement at a time): `sessions` > 1 opens that many, and each query takes a free one.
   */
  private readonly lanes: SessionState[];
  private readonly free: SessionState[];
  private readonly waiting: ((lane: SessionState) => void)[] = [];
  /** Sessions of ended streams, for the next ones. */
  private readonly streamIdle: { sid: number; sticky: Map<string, string> }[] = [];

  constructor(
    readonly path: string,
    database = 'signalbase',
    opts: ChdbStoreOptions = {},
  ) {
    this.database = checkIdentifier(database);
    this.log = opts.statementLog;
    this.sessionSettings = opts.sessionSettings ?? {};
    const n = Math.max(1, Math.floor(opts.sessions ?? 1));
    this.own = opts.ownSession === true || n > 1;
    this.session = openSession(path, this.own);
    this.lanes = [this.session];
    for (let i = 1; i < n; i++) this.lanes.push(openSession(path, true));
    this.free = [...this.lanes];
  }

  /** How many statements this store can run at once. */
  get concurrency(): number {
    return this.lanes.length;
  }

  private take(): Promise<SessionState> | SessionState {
    return this.free.pop() ?? new Promise((resolve) => this.waiting.push(resolve));
  }

  private give(lane: SessionState): void {
    const next = this.waiting.shift();
    if (next) next(lane);
    else this.free.push(lane);
  }

  async init(): Promise<this> {
    const set = Object.entries(this.sessionSettings).map(([name, value]) => `${checkIdentifier(name)} = ${Number(value)}`);
    if (set.length && this.own)
      for (const lane of this.lanes) await inTurn(lane, (s) => s.queryAsync(`SET ${set.join(', ')}`, { format: 'Null' }));
    await inTurn(this.session, (s) => s.queryAsync(`CREATE DATABASE IF NOT EXISTS ${this.database}`));
    return this;
  }

  async query<T>(sql: string, params: Params = {}, opts?: QueryOptions): Promise<T[]> {
    return parseRows<T>(await this.run(sql, params, 'JSONCompactEachRowWithNames', opts?.settings));
  }

  async exec(sql: string, params: Params = {}): Promise<void> {
    await this.run(sql, params, 'Null', undefined);
  }

  private async run(sql: string, params: Params, format: string, settings: QueryOptions['settings']): Promise<string> {
    const bound = bindDatabase(sql, this.database);
    const bindings = paramParts(bound, params);
    return this.onLane(bound, async (session, lane) => {
      const set = [...settingsParts(lane.sticky, settings), ...bindings];
      try {
        // The SET in the same call as the statement: under load each call waits its turn on the
        // event loop and the engine's threads, so one call instead of two.
        return (await session.queryAsync(set.length ? `SET ${set.join(', ')}; ${bound}` : bound, { format })).text();
      } catch (err) {
        // Whether the SET took effect is not known: set (or reset) those names again next time.
        for (const name of Object.keys(settings ?? {})) lane.sticky.set(name, '?');
        // chdb keeps what a failed statement had written of its answer (its header, rows before a
        // limit hit) and hands it out at the front of the session's next answer: a statement whose
        // answer is thrown away takes it.
        await session.queryAsync('SELECT 1', { format: 'Null' }).catch(() => {});
        throw err;
      }
    });
  }

  /** Runs `step` on a free lane in its turn, and notes `statement` in the statement log. */
  private async onLane<T>(statement: string, step: (session: Session, lane: SessionState) => Promise<T>): Promise<T> {
    const asked = performance.now();
    let started = Number.NaN;
    let ok = false;
    const lane = await this.take();
    try {
      const value = await inTurn(lane, (session) => {
        started = performance.now();
        return step(session, lane);
      });
      ok = true;
      return value;
    } finally {
      this.give(lane);
      this.noted(asked, started, ok, statement);
    }
  }

  /** Notes a statement in the statement log: asked for at `asked`, run from `started` until now. */
  private noted(asked: number, started: number, ok: boolean, statement: string): void {
    if (!this.log) return;
    const now = performance.now();
    const from = Number.isNaN(started) ? now : started;
    this.log.log.note(this.log.session, from - asked, now - from, ok, statement);
  }

  /**
   * The statement's answer chunk by chunk, as the store's own writer makes it (storage/chdb-streams.ts:
   * into a pipe, a Parquet answer one file), its SET first on the same session: a session of
   * streams, the stream's until it ends (kept for the next one afterwards).
   */
  readonly streamFormats: readonly StreamFormat[] = ['JSONEachRow', 'CSV', 'Parquet'];

  async *stream(sql: string, params: Params, format: StreamFormat, opts?: QueryOptions): AsyncGenerator<StreamChunk> {
    const bound = bindDatabase(sql, this.database);
    // Formatted on the stream's thread: an export's thousands of names and keys are long to format.
    const bindings = checkedParams(bound, params);
    // A session of the stream's own: a client that stops reading holds it, and must not hold a lane the reads wait for.
    const lane = this.streamIdle.pop() ?? {
      sid: openStreamSession(this.path, `SET max_query_size = ${MAX_QUERY_SIZE}`),
      sticky: new Map(),
    };
    const settings = settingsParts(lane.sticky, opts?.settings);
    const asked = performance.now();
    // A stream its reader stops early (an export at its bounds) ends as it should: only a throw is a failure.
    let threw = false;
    try {
      yield* streamOn(lane.sid, { settings, params: bindings }, bound, format);
    } catch (err) {
      threw = true;
      throw err;
    } finally {
      this.noted(asked, asked, !threw, bound);
      // A session whose stream failed is not kept: what its SET left is not known.
      if (threw || this.closed || this.streamIdle.length >= MAX_IDLE_STREAM_SESSIONS) await closeStreamSession(lane.sid);
      else this.streamIdle.push(lane);
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
    // On a lane like any statement.
    await this.onLane(`INSERT INTO ${table} (${rows.length} rows)`, (session) =>
      session.insert({
        table: `${this.database}.${checkIdentifier(table)}`,
        ...(columns ? { columns: columns.map(checkIdentifier) } : {}),
        values: Buffer.from(format === 'JSONCompactEachRow' ? json.slice(1, -1) : json),
        format,
        settings: INSERT_SETTINGS,
      }),
    );
  }

  /** Drops this store's database (tests). */
  async drop(): Promise<void> {
    await inTurn(this.session, (s) => s.queryAsync(`DROP DATABASE IF EXISTS ${this.database}`));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // What is under way on a lane ends first.
    await Promise.all(this.lanes.map((lane) => lane.tail));
    for (const lane of this.lanes.slice(1)) lane.session.close();
    await Promise.all(this.streamIdle.splice(0).map((lane) => closeStreamSession(lane.sid)));
    if (this.own) {
      this.session.session.close();
      return;
    }
    const entry = sessions.get(this.path);
    if (entry && --entry.users === 0) {
      sessions.delete(this.path);
      entry.state.session.close();
    }
  }
}

export async function openChdbStore(path: string, database?: string, opts?: ChdbStoreOptions): Promise<ChdbStore> {
  return new ChdbStore(path, database, opts).init();
}
