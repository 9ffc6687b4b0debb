import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { EXPORT_CONTENT_TYPES, type ExportFormat, type ExportLimits, RESUME_COLUMN } from '../../schemas/api/exports.ts';
import type { ReadContext } from '../reads/context.ts';
import type { Slot } from '../reads/cost.ts';
import type { CursorCodec } from '../reads/cursor.ts';
import { type ExportChunk, exportChunks } from '../reads/exports.ts';
import type { ListResult } from '../reads/list.ts';
import type { Principal } from '../reads/principal.ts';
import { costOf, OPERATIONS, type Operation } from '../registry.ts';
import { columnsOf, exportWriter, StoreRows } from './export-formats.ts';
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
  cursors: CursorCodec;
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
 * The exports (issue 28, DESIGN 6 row Exports): for each read of the registry with an `export`,
 * one streaming GET under /v2 that writes the list read's whole result set, page after page, in
 * NDJSON, CSV or Parquet. The response starts once the first page is read (an error before it is
 * an error envelope); after that, a failure cuts the connection and the last row received
 * resumes it. Rows are read only as fast as the client takes them (a stream pulled by the
 * socket): a slow client holds two pages in memory (one sent, one read ahead). An export that ends at a limit says so in its
 * trailers (`x-export-complete: false`, `x-resume-token`) and, in Parquet, in the file's
 * key-value metadata; a resume that returns no rows is the end of the result in any format.
 * A family with a `native` statement is, in NDJSON and CSV, that statement's answer as the store
 * writes it (whole rows only, cut at the same bounds), the pages' export otherwise.
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
      // secondsPerRequest (between pages); this backstop cuts a client that stopped reading.
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
        let budgetLeft = left.rows;
        let cut = false; // ended by a limit rather than by the end of the result
        // The response: the body as the client pulls it; whether a limit ended it and the last row's token, as trailers.
        const respond = (body: AsyncGenerator<Buffer>, token: () => string) => {
          reply.header('content-type', EXPORT_CONTENT_TYPES[format]);
          reply.header('content-disposition', `attachment; filename="${family}.${format}"`);
          reply.trailer('x-export-complete', (_reply, _payload, done) => done(null, String(!cut)));
          reply.trailer('x-resume-token', (_reply, _payload, done) => done(null, token()));
          return reply.send(Readable.from(body, { objectMode: false, highWaterMark: 1 }));
        };
        const native = ex.native;
        if (native && (format === 'ndjson' || format === 'csv')) {
          const { ctx, run } = r.readContext(op, principal, new Date(r.clock()));
          const stream = ctx.store.stream;
          if (stream) {
            // One more row than may be sent: whether rows remain after the last one sent.
            const rows = Math.min(rowsAsked, budgetLeft);
            const statement = await run(() => native(ctx, query, resume, rows + 1, format));
            const expected = [...columnsOf(ex.item).map((c) => c.name), RESUME_COLUMN];
            if (statement.columns.join() !== expected.join())
              throw new Error(`${op.tool}'s export statement has other columns than its item`);
            // Read before the rows, as the pages' export reads them.
            if (ex.headers) reply.headers(await run(() => ex.headers!(ctx, query)));
            const slot = await r.slot(principal);
            let source: AsyncIterator<Uint8Array>;
            let first: IteratorResult<Uint8Array>;
            try {
              source = stream
                .call(ctx.store, statement.sql, statement.params, format === 'csv' ? 'CSV' : 'JSONEachRow', {
                  settings: {
                    ...NATIVE_SETTINGS,
                    // The list read's memory bound (the statement reads in key order, holding little); its time bound is the export's own.
                    max_memory_usage: costOf(op).memoryBytes,
                    max_execution_time: r.limits.secondsPerRequest + 60,
                    priority: slot.priority + 1,
                  },
                })
                [Symbol.asyncIterator]();
              // What the store refuses before the first row is an error envelope.
              first = await source.next();
            } catch (err) {
              slot.release();
              throw err;
            }
            const split = new StoreRows(format);
            let last: Buffer | undefined;
            // Rows of a chunk up to the first bound met; `cut` once one is met with rows left.
            const take = (chunk: Uint8Array): Buffer | undefined => {
              const out = split.push(chunk, (row) => {
                if (sent >= rows) return false;
                if (sent > 0 && bytes >= r.limits.bytesPerRequest) return false;
                sent++;
                bytes += row.length;
                last = row;
                return true;
              });
              if (out.stopped) cut = true;
              return out.bytes;
            };
            async function* nativeBody(): AsyncGenerator<Buffer> {
              let ended = false;
              let spent = 0;
              try {
                if (format === 'csv') yield exportWriter('csv', ex!.item).start();
                for (let next = first; !next.done; next = await source.next()) {
                  const out = take(next.value);
                  if (sent > spent) void r.budget.spend(account, sent - spent);
                  spent = sent;
                  if (out?.length) yield out;
                  if (cut) break;
                  if (Date.now() - startedAt >= r.limits.secondsPerRequest * 1000) {
                    // Time is up: whatever the store has not sent yet is left for a resume.
                    const more = await source.next();
                    if (!more.done) cut = true;
                    break;
                  }
                }
                ended = true;
              } catch (err) {
                req.log.warn({ err }, `export ${family} failed after ${sent} rows: the connection is cut`);
                throw err;
              } finally {
                await source.return?.();
                slot.release();
                if (!ended) reply.raw.destroy();
              }
            }
            return respond(nativeBody(), () => (last ? StoreRows.token(format, last) : ''));
          }
        }
        const page = (limit: number, cursor: string | undefined) => {
          const { ctx, run } = r.readContext(op, principal, new Date(r.clock()));
          return run(() => op.handler(ctx, { ...query, limit, ...(cursor ? { cursor } : {}) }) as Promise<ListResult<unknown>>);
        };
        const chunks = exportChunks({
          op: op.tool,
          query,
          principal,
          cursors: r.cursors,
          resume,
          page,
          budget: (queued) => Math.min(rowsAsked - sent, budgetLeft) - queued,
        })[Symbol.asyncIterator]();
        // Headers wait for the first page: what the read refuses (a resume token of other filters, the store away) is an error envelope.
        const headers = ex.headers
          ? await (() => {
              const { ctx, run } = r.readContext(op, principal, new Date(r.clock()));
              return run(() => ex.headers!(ctx, query));
            })()
          : {};
        const first = await chunks.next();
        const writer = exportWriter(format, ex.item);
        let last: string | null = null;
        const write = (chunk: ExportChunk): Buffer => {
          const room = r.limits.bytesPerRequest - bytes;
          const out = writer.rows(chunk.items, chunk.tokens, room);
          if (out.rows < chunk.items.length) cut = true;
          sent += out.rows;
          bytes += out.bytes.length;
          budgetLeft -= out.rows;
          if (out.rows) last = chunk.tokens[out.rows - 1]!;
          void r.budget.spend(account, out.rows);
          return out.bytes;
        };
        async function* body(): AsyncGenerator<Buffer> {
          let ended = false;
          try {
            yield writer.start();
            let next = first;
            while (!next.done) {
              if (next.value.items.length) yield write(next.value);
              if (!next.value.more) break;
              // Rows remain: a bound of this request ends it here (the client resumes), else the next page.
              if (
                cut ||
                sent >= rowsAsked ||
                budgetLeft <= 0 ||
                bytes >= r.limits.bytesPerRequest ||
                Date.now() - startedAt >= r.limits.secondsPerRequest * 1000
              ) {
                cut = true;
                break;
              }
              next = await chunks.next();
            }
            yield writer.end({ complete: !cut, resumeToken: last });
            ended = true;
          } catch (err) {
            req.log.warn({ err }, `export ${family} failed after ${sent} rows: the connection is cut`);
            throw err;
          } finally {
            await chunks.return?.(undefined);
            // Stopped before its end (the client went away, or a read failed): the response can never
            // complete, so its connection is closed: the client sees the cut and resumes.
            if (!ended) reply.raw.destroy();
          }
        }
        reply.headers(headers);
        return respond(body(), () => last ?? '');
      },
    });
  }
}
