import { type ClickHouseClient, ClickHouseLogLevel, createClient, type Logger } from '@clickhouse/client';
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

/**
 * The Store port on a ClickHouse server (24.8 or newer) over HTTP with @clickhouse/client: the very
 * SQL the embedded chdb store runs, its `{name:Type}` parameters sent as `param_*` bindings
 * (never spliced into the SQL), answers read as JSONCompactEachRowWithNames and parsed as chdb's
 * are. 64-bit integers arrive as JSON numbers, as chdb writes them (the server's default would
 * quote them): every id is validated to at most 2^53 - 1 at ingest (schemas/topics/common.ts Id),
 * so each is exact as a JS number, and counts stay far below that. Sockets idle longer than IDLE_SOCKET_TTL_MS are not reused: the server
 * closes keep-alive connections after its keep_alive_timeout (10 s by default, 3 s on older
 * servers), and a request on a socket it has just closed fails with ECONNRESET.
 */
export const IDLE_SOCKET_TTL_MS = 2_500;

export interface ClickHouseStoreOptions {
  /** The server's HTTP interface, e.g. http://user:password@clickhouse:8123 (credentials in the URL). */
  url: string;
  /** The database the read models live in (created if missing). */
  database?: string;
  /** Longest a request may take, in ms. */
  requestTimeoutMs?: number;
}

/**
 * The client's own log: it logs every failed request (with all its settings), which the caller
 * also gets as an error; during an outage that is thousands of lines. At most one line per 30 s,
 * saying how many were left out.
 */
class SparseLogger implements Logger {
  private static last = 0;
  private static skipped = 0;
  trace(): void {}
  debug(): void {}
  info(): void {}
  warn(p: { message: string; err?: Error }): void {
    SparseLogger.write('warn', p);
  }
  error(p: { message: string; err?: Error }): void {
    SparseLogger.write('error', p);
  }
  private static write(level: string, p: { message: string; err?: Error }): void {
    if (Date.now() - SparseLogger.last < 30_000) {
      SparseLogger.skipped++;
      return;
    }
    SparseLogger.last = Date.now();
    const more = SparseLogger.skipped ? ` (${SparseLogger.skipped} more in the last 30 s)` : '';
    SparseLogger.skipped = 0;
    console.error(`clickhouse client ${level}: ${p.message}${p.err ? `: ${p.err.message.split('\n')[0]}` : ''}${more}`);
  }
}

export class ClickHouseStore implements Store {
  readonly database: string;
  private readonly client: ClickHouseClient;
  private closed = false;

  constructor(opts: ClickHouseStoreOptions) {
    this.database = checkIdentifier(opts.database ?? 'signalbase');
    const url = new URL(opts.url);
    this.client = createClient({
      url: `${url.protocol}//${url.host}${url.pathname === '/' ? '' : url.pathname}`,
      username: decodeURIComponent(url.username) || 'default',
      password: decodeURIComponent(url.password),
      request_timeout: opts.requestTimeoutMs ?? 300_000,
      keep_alive: { enabled: true, idle_socket_ttl: IDLE_SOCKET_TTL_MS },
      log: { LoggerClass: SparseLogger, level: ClickHouseLogLevel.WARN },
      // Plain answers: reads are small, and a compressed answer costs the server and us CPU on loopback.
      compression: { request: false, response: false },
      // Progress headers every 10 s keep a long statement's connection (a rebuild's INSERT ... SELECT) alive through load balancers.
      clickhouse_settings: {
        output_format_json_quote_64bit_integers: 0,
        send_progress_in_http_headers: 1,
        http_headers_progress_interval_ms: '10000',
      },
      // A query's bindings past 4 KiB (a read's id lists) go in a multipart body, not the URL, where
      // proxies refuse long request lines; statements without an answer keep them in the URL, which
      // the server takes up to http_max_uri_size (1 MiB by default).
      use_multipart_params_auto: true,
    });
  }

  async init(): Promise<this> {
    await this.client.command({ query: `CREATE DATABASE IF NOT EXISTS ${this.database}` });
    return this;
  }

  async query<T>(sql: string, params: Params = {}, opts?: QueryOptions): Promise<T[]> {
    const rs = await this.client.query({
      query: bindDatabase(sql, this.database),
      query_params: params,
      format: 'JSONCompactEachRowWithNames',
      ...(opts?.settings ? { clickhouse_settings: opts.settings as Record<string, string> } : {}),
      ...(opts?.timeoutMs ? { abort_signal: AbortSignal.timeout(opts.timeoutMs) } : {}),
    });
    return parseRows<T>(await rs.text());
  }

  /** The statement's answer as the server sends it, line by line as the client reads them. */
  readonly streamFormats: readonly StreamFormat[] = ['JSONEachRow', 'CSV', 'Parquet'];

  async *stream(sql: string, params: Params, format: StreamFormat, opts?: QueryOptions): AsyncGenerator<StreamChunk> {
    if (format === 'Parquet') {
      // A binary format: the response's bytes as they come (the client's way to a Parquet file).
      const { stream } = await this.client.exec({
        query: `${bindDatabase(sql, this.database)}\nFORMAT Parquet`,
        query_params: params,
        ...(opts?.settings ? { clickhouse_settings: opts.settings as Record<string, string> } : {}),
      });
      for await (const chunk of stream as AsyncIterable<Uint8Array>) yield { bytes: chunk };
      return;
    }
    const rs = await this.client.query({
      query: bindDatabase(sql, this.database),
      query_params: params,
      format,
      ...(opts?.settings ? { clickhouse_settings: opts.settings as Record<string, string> } : {}),
    });
    // The client splits the bytes at each line feed and hands out the lines without it (a CSV row
    // may hold one in a quoted field): put back, the lines are the bytes as sent.
    // An NDJSON line is a row; a CSV line may not be.
    for await (const rows of rs.stream() as AsyncIterable<{ text: string }[]>) {
      let text = '';
      for (const row of rows) text += `${row.text}\n`;
      yield { bytes: Buffer.from(text), ...(format === 'JSONEachRow' ? { rows: rows.length } : {}) };
    }
  }

  async exec(sql: string, params: Params = {}): Promise<void> {
    await this.client.command({ query: bindDatabase(sql, this.database), query_params: params });
  }

  async insert(table: string, rows: readonly object[]): Promise<void> {
    if (!rows.length) return;
    await this.client.insert({
      table: `${this.database}.${checkIdentifier(table)}`,
      values: rows as object[],
      format: 'JSONEachRow',
      clickhouse_settings: INSERT_SETTINGS,
    });
  }

  async insertCompact(table: string, columns: readonly string[], rows: readonly unknown[][]): Promise<void> {
    if (!rows.length) return;
    await this.client.insert({
      table: `${this.database}.${checkIdentifier(table)}`,
      values: rows as unknown[][],
      format: 'JSONCompactEachRow',
      columns: columns.map(checkIdentifier) as [string, ...string[]],
      clickhouse_settings: INSERT_SETTINGS,
    });
  }

  /** Drops this store's database (tests). */
  async drop(): Promise<void> {
    await this.client.command({ query: `DROP DATABASE IF EXISTS ${this.database}` });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.client.close();
  }
}

export function openClickHouseStore(opts: ClickHouseStoreOptions): Promise<ClickHouseStore> {
  return new ClickHouseStore(opts).init();
}
