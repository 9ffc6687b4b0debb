import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { EXPORT_CONTENT_TYPES, type ExportFormat, type ExportLimits, RESUME_COLUMN } from '../../schemas/api/exports.ts';
import type { StreamChunk } from '../../storage/port.ts';
import type { ReadContext } from '../reads/context.ts';
import type { Slot } from '../reads/cost.ts';
import { resumeCursor } from '../reads/exports.ts';
import type { Principal } from '../reads/principal.ts';
import { costOf, OPERATIONS, type Operation } from '../registry.ts';
import { type Column, columnsOf, csvHeader, StoreRows } from './export-formats.ts';
import { PARQUET_HOLD_BYTES, StoreParquet } from './parquet-files.ts';
import type { ExportRowBudget } from './rate-limit.ts';

/** A route's checks before its handler (buildApi's `guards`): the address count, authentication and admission against `query`, the account count. */
export type Guards = (
  op: Operation,
  query?: Operation['query'],
) => {
  preValidation: (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => void;
  preHandler?: (req: FastifyRequest, reply: FastifyReply) => Promise<void>;
};

/** What the export routes share with the read routes (apps/api/server.ts). */
export interface ExportRouting {
  guards: Guards;
  /** A turn to stream, for the whole of a native export (it holds a store session while it runs, a paused client too). */
  slot: (principal: Principal) => Promise<Slot> | Slot;
  readContext: (op: Operation, principal: Principal, now: Date) => { ctx: ReadContext; run: <T>(read: () => Promise<T>) => Promise<T> };
  clock: () => number;
  limits: ExportLimits;
  budget: ExportRowBudget;
}

/**
 * How the store writes an export's rows as the list read's JSON and the CSV columns would have
 * them: 64-bit integers as numbers, times in ISO 8601 (UTC, milliseconds), an empty CSV field for
 * null, CSV lines ended with CRLF (RFC 4180), slashes unescaped; a nested object that may be null
 * (a position's window) as a Nullable tuple.
 */
const NATIVE_SETTINGS = {
  output_format_json_quote_64bit_integers: 0,
  output_format_json_escape_forward_slashes: 0,
  date_time_output_format: 'iso',
  format_csv_null_representation: '',
  output_format_csv_crlf_end_of_line: 1,
  timeout_overflow_mode: 'throw',
  enable_nullable_tuple_type: 1,
} as const;

/**
 * A native Parquet export's file (issue 28), written by the store as one file (StoreParquet holds
 * its footer and last row group back): Snappy (what readers all have), row groups of a page's rows
 * or fewer, no page indexes (their offsets could not move) nor bloom filters. The store ends the
 * file at the request's bounds itself: at the first block past its result bytes, or at its
 * seconds (no bound cuts a Parquet file mid-row group).
 */
const PARQUET_ROW_GROUP_BYTES = PARQUET_HOLD_BYTES / 2;
function parquetSettings(limits: ExportLimits) {
  return {
    output_format_parquet_row_group_size: 20_000,
    output_format_parquet_row_group_size_bytes: PARQUET_ROW_GROUP_BYTES,
    output_format_parquet_compression_method: 'snappy',
    output_format_parquet_write_page_index: 0,
    output_format_parquet_write_bloom_filter: 0,
    max_result_bytes: limits.bytesPerRequest,
    result_overflow_mode: 'break',
    max_execution_time: limits.secondsPerRequest,
    timeout_overflow_mode: 'break',
  } as const;
}

/** A native statement's columns as a Parquet file's: each leaf of a nested object a column of its dotted name, integers as INT64. */
function parquetColumnsSql(sql: string, columns: readonly Column[]): string {
  const leaf = (c: Column) => {
    if (!c.path.every((p) => /^\w+$/.test(p))) throw new Error(`export column ${c.name}: not a plain name`);
    let e = c.path[0]!;
    for (const p of c.path.slice(1)) e = `tupleElement(${e}, '${p}')`;
    return `${c.kind === 'int' ? `toInt64(${e})` : e} AS \`${c.name}\``;
  };
  return `SELECT ${[...columns.map(leaf), RESUME_COLUMN].join(', ')} FROM (${sql})`;
}

/**
 * The exports (issue 28, DESIGN 6 row Exports): for each read of the registry with an `export`,
 * one streaming GET under /v2 that writes the list read's whole result set in NDJSON, CSV or
 * Parquet: the family's `native` statement (the list read's filters, scope, visibility, history
 * window and keyset order, done by the store) as the store writes it. The response starts once the
 * store's first chunk is there (an error before it is an error envelope); after that, a failure
 * cuts the connection and the last row received resumes it. Rows are read only as fast as the
 * client takes them (the store's stream pulled by the socket). In NDJSON and CSV the route sends
 * whole rows only and ends at its bounds; in Parquet the store ends its file at them and the route
 * completes its footer. An export that ends at a limit says so in its trailers
 * (`x-export-complete: false`, `x-resume-token`) and, in Parquet, in the file's key-value metadata;
 * a resume that returns no rows is the end of the result in any format.
 */
export function exportRoutes(app: FastifyInstance, r: ExportRouting): void {
  for (const op of OPERATIONS) {
    const ex = op.export;
    if (!ex) continue;
    const family = ex.path.split('/').pop()!;
    app.route({
      method: 'GET',
      url: `/v2${ex.path}`,
      config: { operation: `export_${family}` },
      schema: { querystring: ex.query },
      // The reads' handler timeout would cut every export at ~12 s: an export ends itself at
      // secondsPerRequest (between the store's chunks); this backstop cuts a client that stopped reading.
      handlerTimeout: (r.limits.secondsPerRequest + 60) * 1000,
      ...r.guards(op, ex.query),
      handler: async (req, reply) => {
        const { format, resume, maxRows, ...query } = req.query as Record<string, unknown> & {
          format: ExportFormat;
          resume?: string;
          maxRows?: number;
        };
        const principal = req.principal!;
        const account = principal.accountId;
        const rowsAsked = Math.min(maxRows ?? r.limits.rowsPerRequest, r.limits.rowsPerRequest);
        const left = await r.budget.left(account);
        if (left.rows <= 0) throw r.budget.refusal(left.retryMs);
        const startedAt = Date.now();
        let sent = 0;
        let bytes = 0;
        let cut = false; // ended by a limit rather than by the end of the result
        // The response: the body as the client pulls it; whether a limit ended it and the last row's token, as trailers.
        const respond = (body: AsyncGenerator<Buffer>, token: () => string) => {
          reply.header('content-type', EXPORT_CONTENT_TYPES[format]);
          reply.header('content-disposition', `attachment; filename="${family}.${format}"`);
          reply.trailer('x-export-complete', (_reply, _payload, done) => done(null, String(!cut)));
          reply.trailer('x-resume-token', (_reply, _payload, done) => done(null, token()));
          return reply.send(Readable.from(body, { objectMode: false, highWaterMark: 1 }));
        };
        // A body that ends before its end (the client went away, or a read failed) can never complete:
        // its failure is logged, its source closed, and its connection cut (the client sees the cut and resumes).
        async function* guarded(body: AsyncGenerator<Buffer>, close: () => Promise<unknown> | undefined): AsyncGenerator<Buffer> {
          let ended = false;
          try {
            yield* body;
            ended = true;
          } catch (err) {
            req.log.warn({ err }, `export ${family} failed after ${sent} rows (${bytes} bytes): the connection is cut`);
            throw err;
          } finally {
            await close();
            if (!ended) reply.raw.destroy();
          }
        }
        const { ctx, run } = r.readContext(op, principal, new Date(r.clock()));
        const stream = ctx.store.stream;
        const parquet = format === 'parquet';
        const storeFormat = parquet ? 'Parquet' : format === 'csv' ? 'CSV' : 'JSONEachRow';
        if (!stream || !ctx.store.streamFormats?.includes(storeFormat)) throw new Error(`this store does not stream ${storeFormat}`);
        const rows = Math.min(rowsAsked, left.rows);
        // Read before the rows and before the statement takes the facts it judges them by (they only
        // get newer): a change while they stream comes again in a poll from there (issue 28).
        const headers = ex.headers && (await run(() => ex.headers!(ctx, query)));
        // NDJSON, CSV: one more row than may be sent, to know whether rows remain after the last one sent.
        // Parquet: the CSV statement's columns as the file's, flattened; a look after its last row says.
        const statement = await run(() => ex.native(ctx, query, resume, parquet ? rows : rows + 1, parquet ? 'csv' : format));
        const columns = columnsOf(ex.item);
        const expected = [...columns.map((c) => c.name), RESUME_COLUMN];
        if (statement.columns.join() !== expected.join()) throw new Error(`${op.tool}'s export statement has other columns than its item`);
        if (headers) reply.headers(headers);
        const slot = await r.slot(principal);
        // A stream's settings: the list read's memory bound (the statement reads in key order, holding little), a time bound of its own.
        const storeSettings = (seconds: number, more?: Readonly<Record<string, string | number>>) => ({
          ...NATIVE_SETTINGS,
          max_memory_usage: costOf(op).memoryBytes,
          max_execution_time: seconds,
          priority: slot.priority + 1,
          ...more,
        });
        let source: AsyncIterator<StreamChunk>;
        let first: IteratorResult<StreamChunk>;
        try {
          source = stream
            .call(ctx.store, parquet ? parquetColumnsSql(statement.sql, columns) : statement.sql, statement.params, storeFormat, {
              settings: storeSettings(r.limits.secondsPerRequest + 60, {
                ...(parquet ? parquetSettings(r.limits) : {}),
                ...statement.settings,
              }),
            })
            [Symbol.asyncIterator]();
          // What the store refuses before the first row is an error envelope.
          first = await source.next();
        } catch (err) {
          slot.release();
          throw err;
        }
        const closeSource = async () => {
          await source.return?.();
          slot.release();
        };
        if (parquet) {
          let last: string | null = null;
          // The store ends its file at the first bound met (rows, bytes, time); the route completes its footer.
          async function* parquetBody(): AsyncGenerator<Buffer> {
            const file = new StoreParquet();
            for (let next = first; !next.done; ) {
              const out = file.push(next.value.bytes);
              if (out) bytes += out.length;
              // The store writes on while this piece goes out (see rowsBody).
              const ahead = source.next();
              ahead.catch(() => {});
              if (out) yield out;
              next = await ahead;
            }
            await closeSource();
            const end = await file.last();
            sent = end.rows;
            void r.budget.spend(account, sent);
            last = end.token;
            // Rows after the last one sent: only a look can tell (the store may have ended the file at a
            // bound). The list read's page of one after that row: the export's rows are its pages', and
            // a page costs far less than a statement of the export's own (its parameter sets, its rows' work).
            if (last !== null) {
              const after = r.readContext(op, principal, new Date(r.clock()));
              const cursor = resumeCursor(after.ctx, op.tool, query, last);
              const page = (await after.run(() => op.handler(after.ctx, { ...query, limit: 1, cursor } as never))) as {
                results: unknown[];
              };
              cut = page.results.length > 0;
            }
            const rest = file.end({ complete: !cut, resumeToken: last });
            bytes += rest.length;
            yield rest;
          }
          return respond(guarded(parquetBody(), closeSource), () => last ?? '');
        }
        const split = new StoreRows(format, { rows, bytes: r.limits.bytesPerRequest });
        async function* rowsBody(): AsyncGenerator<Buffer> {
          if (format === 'csv') yield csvHeader(ex!.item);
          for (let next = first; !next.done; ) {
            const before = split.rows;
            const out = split.push(next.value);
            sent = split.rows;
            bytes = split.bytes;
            if (sent > before) void r.budget.spend(account, sent - before);
            cut = out.stopped;
            // The store makes its next chunk while this one goes out (its rejection is met when awaited; unawaited when the client left).
            const ahead = cut ? undefined : source.next();
            ahead?.catch(() => {});
            if (out.bytes?.length) yield out.bytes;
            if (!ahead) break;
            next = await ahead;
            // Time is up: whatever the store has not sent yet is left for a resume.
            if (Date.now() - startedAt >= r.limits.secondsPerRequest * 1000) {
              cut = !next.done;
              break;
            }
          }
        }
        return respond(guarded(rowsBody(), closeSource), () => split.token());
      },
    });
  }
}
