import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { EXPORT_CONTENT_TYPES, type ExportFormat, type ExportLimits } from '../../schemas/api/exports.ts';
import type { ReadContext } from '../reads/context.ts';
import type { CursorCodec } from '../reads/cursor.ts';
import { type ExportChunk, exportChunks } from '../reads/exports.ts';
import type { ListResult } from '../reads/list.ts';
import type { Principal } from '../reads/principal.ts';
import { OPERATIONS, type Operation } from '../registry.ts';
import { exportWriter } from './export-formats.ts';
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
  readContext: (op: Operation, principal: Principal, now: Date) => { ctx: ReadContext; run: <T>(read: () => Promise<T>) => Promise<T> };
  cursors: CursorCodec;
  clock: () => number;
  limits: ExportLimits;
  budget: ExportRowBudget;
}

/**
 * The exports (issue 28, DESIGN 6 row Exports): for each read of the registry with an `export`,
 * one streaming GET under /v2 that writes the list read's whole result set, page after page, in
 * NDJSON, CSV or Parquet. The response starts once the first page is read (an error before it is
 * an error envelope); after that, a failure cuts the connection and the last row received
 * resumes it. Rows are read only as fast as the client takes them (a stream pulled by the
 * socket): a slow client holds two pages in memory (one sent, one read ahead). An export that ends at a limit says so in its
 * trailers (`x-export-complete: false`, `x-resume-token`) and, in Parquet, in the file's
 * key-value metadata; a resume that returns no rows is the end of the result in any format.
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
        reply.header('content-type', EXPORT_CONTENT_TYPES[format]);
        reply.header('content-disposition', `attachment; filename="${family}.${format}"`);
        reply.trailer('x-export-complete', (_reply, _payload, done) => done(null, String(!cut)));
        reply.trailer('x-resume-token', (_reply, _payload, done) => done(null, last ?? ''));
        return reply.send(Readable.from(body(), { objectMode: false, highWaterMark: 1 }));
      },
    });
  }
}
