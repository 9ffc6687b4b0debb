// Read benchmark (DESIGN 8 and 9): every figure is a ratio against a floor measured in the same
// run on the same machine.
//   HTTP floor:  a bare fastify route (another instance, another port) sending the exact body bytes
//                the real route answered; same client loop, same concurrency.
//   Store floor: the read's handler called directly vs the raw chdb time of the SQL it issued
//                (recorded through a Store proxy, then replayed on the store with the same params).
// Usage: npx tsx bench/reads.ts --help

import { existsSync, readFileSync, rmSync } from 'node:fs';
import { cpus, platform, release } from 'node:os';
import Fastify, { type FastifyInstance } from 'fastify';
import { demoKeyFile, type Embedded, startEmbedded } from '../apps/embedded.ts';
import { CursorCodec } from '../apps/reads/cursor.ts';
import type { Principal } from '../apps/reads/principal.ts';
import { OPERATIONS, type Operation } from '../apps/registry.ts';
import { SCOPES } from '../schemas/topics/index.ts';
import type { Params, Store } from '../storage/port.ts';
import { benchArgs, benchDataDir } from './args.ts';

const USAGE = `Usage: npx tsx bench/reads.ts [options]

Benchmarks the REST v2 reads against two floors measured in the same run:
  http   real route p50 / p50 of a bare fastify route returning the same body bytes
  store  read handler time / raw chdb time of the SQL the handler ran (same SQL, same params)

Options:
  --data-dir DIR      an existing seeded DATA_DIR (e.g. made by
                      'node bin/signalbase.cjs seed --scale large --data-dir /tmp/sblarge');
                      default: a fresh temp dir seeded with the small demo set, removed afterwards.
                      No server may be running on DIR (chdb: one process per data directory).
  --requests N        measured HTTP requests per read and per floor (default 200)
  --concurrency C     requests in flight (default 4)
  --store-reps R      handler calls (and SQL replays) per read (default 20)
  --max-seconds S     budget for the measurements; loops stop early past it (default 180)
  -h, --help          this text

Client and servers share this process (chdb's data directory cannot be opened by a second one),
so the HTTP floor runs under the same conditions. Figures go to stdout, progress to stderr.`;

const {
  values: argv,
  die,
  posInt,
} = benchArgs('bench/reads', USAGE, {
  'data-dir': { type: 'string' },
  requests: { type: 'string', default: '200' },
  concurrency: { type: 'string', default: '4' },
  'store-reps': { type: 'string', default: '20' },
  'max-seconds': { type: 'string', default: '180' },
  help: { type: 'boolean', short: 'h' },
});
const REQUESTS = posInt('requests', argv.requests);
const CONCURRENCY = posInt('concurrency', argv.concurrency);
const STORE_REPS = posInt('store-reps', argv['store-reps']);
const MAX_SECONDS = posInt('max-seconds', argv['max-seconds']);
const WARMUP = Math.max(CONCURRENCY * 4, Math.min(50, Math.ceil(REQUESTS / 5)));
const REQUEST_TIMEOUT_MS = 30_000;

const READS = [
  '/v2/events?limit=50',
  '/v2/events?limit=50&traderIds=1',
  '/v2/messages?limit=50',
  '/v2/messages?ids=<two real ids>',
  '/v2/positions?limit=50',
  '/v2/positions/open?limit=50',
  '/v2/traders?limit=50&search=al',
  '/v2/assets?limit=50',
];

const progress = (line: string) => console.error(`[bench] ${line}`);

// ---------------------------------------------------------------------------------------------
// Data directory: refuse a directory a running server holds, seed a fresh one by default.

const { ownDir, dataDir } = benchDataDir(argv['data-dir'], 'signalbase-bench-', die);
if (!ownDir) {
  if (!existsSync(demoKeyFile(dataDir))) progress(`${dataDir} has no demo key yet: the embedded start will seed the small demo set there`);
}

// ---------------------------------------------------------------------------------------------
// Measurement helpers.

const pct = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN;
const median = (xs: number[]) =>
  pct(
    [...xs].sort((a, b) => a - b),
    50,
  );

interface Sample {
  lat: number[];
  secs: number;
  errors: number;
  truncated: boolean;
}
interface HttpFigures {
  n: number;
  p50: number;
  p95: number;
  rps: number;
  errors: number;
  truncated: boolean;
}

/** `total` GETs (fewer if `until` passes first) with CONCURRENCY in flight (global fetch: undici, keep-alive); latency includes reading the body. */
async function load(url: string, headers: Record<string, string>, total: number, until: number): Promise<Sample> {
  const lat: number[] = [];
  let started = 0;
  let errors = 0;
  let truncated = false;
  const worker = async () => {
    while (started < total) {
      if (performance.now() > until) {
        truncated = true;
        return;
      }
      started++;
      const t0 = performance.now();
      try {
        const res = await fetch(url, { headers, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
        await res.arrayBuffer();
        if (res.status !== 200) errors++;
      } catch {
        errors++;
      }
      lat.push(performance.now() - t0);
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: Math.min(CONCURRENCY, total) }, worker));
  return { lat, secs: (performance.now() - t0) / 1000, errors, truncated };
}

/** Percentiles over every measured request of one side; req/s over the time its loops ran. */
function figures(...samples: Sample[]): HttpFigures {
  const lat = samples.flatMap((s) => s.lat).sort((a, b) => a - b);
  const secs = samples.reduce((t, s) => t + s.secs, 0);
  return {
    n: lat.length,
    p50: pct(lat, 50),
    p95: pct(lat, 95),
    rps: secs > 0 ? lat.length / secs : NaN,
    errors: samples.reduce((t, s) => t + s.errors, 0),
    truncated: samples.some((s) => s.truncated),
  };
}

/**
 * Warm-up (at most `warmMs` of the time), then two measured halves per side, interleaved
 * real/floor/floor/real so drift hits both alike; each loop may use an equal share of what is
 * left until `until`.
 */
async function compareHttp(realUrl: string, floorUrl: string, headers: Record<string, string>, warmMs: number, until: number) {
  const warmUntil = performance.now() + warmMs;
  await load(realUrl, headers, WARMUP, performance.now() + (warmUntil - performance.now()) / 2);
  await load(floorUrl, headers, WARMUP, warmUntil);
  const half = Math.max(1, Math.floor(REQUESTS / 2));
  const rest = Math.max(1, REQUESTS - half);
  const share = (left: number) => performance.now() + Math.max(0, until - performance.now()) / left;
  const r1 = await load(realUrl, headers, half, share(4));
  const f1 = await load(floorUrl, headers, half, share(3));
  const f2 = await load(floorUrl, headers, rest, share(2));
  const r2 = await load(realUrl, headers, rest, share(1));
  return { real: figures(r1, r2), floor: figures(f1, f2) };
}

interface Recorded {
  sql: string;
  params: Params;
  start: number;
  end: number;
}

/** A Store that forwards to `inner` and records every query with its timing. */
function recordingStore(inner: Store, log: Recorded[]): Store {
  const timed = async <T>(sql: string, params: Params | undefined, run: () => Promise<T>): Promise<T> => {
    const rec: Recorded = { sql, params: params ?? {}, start: performance.now(), end: 0 };
    log.push(rec);
    try {
      return await run();
    } finally {
      rec.end = performance.now();
    }
  };
  return {
    get database() {
      return inner.database;
    },
    query: (sql, params) => timed(sql, params, () => inner.query(sql, params)),
    exec: (sql, params) => timed(sql, params, () => inner.exec(sql, params)),
    insert: (table, rows) => inner.insert(table, rows),
    close: () => inner.close(),
  } as Store;
}

/** Replays recorded queries on the raw store; queries that overlapped in the handler (Promise.all) run together again. */
async function replay(store: Store, recs: Recorded[]): Promise<number> {
  const sorted = [...recs].sort((a, b) => a.start - b.start);
  const groups: Recorded[][] = [];
  let groupEnd = -Infinity;
  for (const r of sorted) {
    if (groups.length && r.start < groupEnd) {
      groups[groups.length - 1]!.push(r);
      groupEnd = Math.max(groupEnd, r.end);
    } else {
      groups.push([r]);
      groupEnd = r.end;
    }
  }
  const t0 = performance.now();
  for (const g of groups) await Promise.all(g.map((r) => store.query(r.sql, r.params)));
  return performance.now() - t0;
}

/** The handler's query as fastify hands it over: schema defaults applied, integers coerced. */
function handlerQuery(op: Operation, search: URLSearchParams): Record<string, unknown> {
  const props = (op.query as any).properties as Record<string, any>;
  const q: Record<string, unknown> = {};
  for (const [k, v] of search) {
    if (!props[k]) die(`${op.path}: unknown query parameter ${k}`);
    q[k] = props[k].type === 'integer' || props[k].type === 'number' ? Number(v) : v;
  }
  for (const [k, s] of Object.entries(props)) if (q[k] === undefined && s.default !== undefined) q[k] = s.default;
  return q;
}

const benchPrincipal: Principal = {
  accountId: 'bench',
  keyId: 'bench',
  scopes: new Set(SCOPES),
  messageVisibility: { mode: 'all' },
  signalVisibility: { mode: 'all' },
  historyWindowDays: null,
};

const benchCursors = CursorCodec.random();

async function compareStore(emb: Embedded, op: Operation, query: Record<string, unknown>, until: number) {
  const pastDeadline = () => performance.now() > until;
  const call = (recs: Recorded[]) =>
    op.handler({ store: recordingStore(emb.store, recs), principal: benchPrincipal, now: new Date(), cursors: benchCursors }, query);
  for (let i = 0; i < 3 && !pastDeadline(); i++) {
    const recs: Recorded[] = [];
    await call(recs);
    await replay(emb.store, recs);
  }
  const handlerMs: number[] = [];
  const rawMs: number[] = [];
  let queries = 0;
  let truncated = false;
  for (let i = 0; i < STORE_REPS; i++) {
    if (pastDeadline()) {
      truncated = true;
      break;
    }
    const recs: Recorded[] = [];
    const t0 = performance.now();
    await call(recs);
    handlerMs.push(performance.now() - t0);
    queries = recs.length;
    rawMs.push(await replay(emb.store, recs)); // the same SQL and params, straight on the store, right after
  }
  return { n: handlerMs.length, handler: median(handlerMs), raw: median(rawMs), queries, truncated };
}

// ---------------------------------------------------------------------------------------------
// Run.

const tStart = performance.now();
let emb: Embedded | undefined;
const floors: FastifyInstance[] = [];
let exitCode = 0;

async function cleanup() {
  for (const f of floors) await f.close().catch(() => {});
  if (emb) await emb.close().catch((err) => progress(`close: ${(err as Error).message}`));
  if (ownDir) rmSync(dataDir, { recursive: true, force: true });
}

try {
  progress(`data dir ${dataDir}${ownDir ? ' (fresh, small demo set)' : ''}`);
  emb = await startEmbedded({ port: 0, host: '127.0.0.1', dataDir, logLevel: 'silent' }, { say: progress });
  // start listens at once and projects meanwhile: measure what a caught-up, compacted service answers.
  await emb.compacted();
  const setupSecs = (performance.now() - tStart) / 1000;
  progress(`embedded service up at ${emb.url} after ${setupSecs.toFixed(1)} s`);
  if (!existsSync(demoKeyFile(dataDir))) throw new Error(`no demo key in ${demoKeyFile(dataDir)}: seed the data dir first`);
  const headers = { 'x-api-key': readFileSync(demoKeyFile(dataDir), 'utf8').trim() };

  const budgetEnd = performance.now() + MAX_SECONDS * 1000;
  // Hard stop if something hangs: the soft deadline ends loops, this ends the process.
  setTimeout(
    () => {
      console.error(`bench/reads: still running ${MAX_SECONDS + 60} s after setup; giving up`);
      process.exit(1);
    },
    (MAX_SECONDS + 60) * 1000,
  ).unref();

  const idsRes = await fetch(`${emb.url}/v2/messages?limit=2`, { headers });
  const idsBody = (await idsRes.json()) as any;
  const ids: string[] = idsRes.status === 200 ? idsBody.data.results.map((m: { id: string }) => m.id) : [];
  if (ids.length < 2) throw new Error(`need two message ids, /v2/messages?limit=2 answered ${idsRes.status} with ${ids.length}`);
  const reads = READS.map((r) => r.replace('<two real ids>', ids.map(encodeURIComponent).join(',')));

  const rows: string[][] = [];
  const notes: string[] = [];
  for (const [i, read] of reads.entries()) {
    // Each read gets an equal share of what is left of the budget, so a slow one cannot starve the
    // rest: up to 15% of it for warm-up, the measured HTTP loops until 80%, the store part the rest.
    const readStart = performance.now();
    const readShare = Math.max(0, budgetEnd - readStart) / (reads.length - i);
    const u = new URL(read, emb.url);
    const op = OPERATIONS.find((o) => o.versions.includes('v2') && `/v2${o.path}` === u.pathname);
    if (!op) throw new Error(`no v2 operation for ${u.pathname}`);

    // Capture the real answer: the floor sends these very bytes.
    const first = await fetch(u, { headers });
    const body = Buffer.from(await first.arrayBuffer());
    if (first.status !== 200) throw new Error(`${read} answered ${first.status}: ${body.toString().slice(0, 300)}`);
    const contentType = first.headers.get('content-type') ?? 'application/json; charset=utf-8';
    const results = (JSON.parse(body.toString()) as any).data.results.length as number;

    const floor = Fastify({ logger: false });
    floor.get(u.pathname, (_req, reply) => {
      reply.header('content-type', contentType).send(body);
    });
    floors.push(floor);
    const floorBase = await floor.listen({ port: 0, host: '127.0.0.1' });

    progress(`${read}: ${results} rows, ${body.length} bytes; http ...`);
    const http = await compareHttp(u.href, floorBase + u.pathname + u.search, headers, 0.15 * readShare, readStart + 0.8 * readShare);
    await floor.close();
    progress(`${read}: store ...`);
    const store = await compareStore(emb, op, handlerQuery(op, u.searchParams), readStart + readShare);

    if (http.real.errors || http.floor.errors) {
      notes.push(`${read}: ${http.real.errors} real / ${http.floor.errors} floor requests failed`);
      exitCode = 1;
    }
    if (http.real.truncated || http.floor.truncated || store.truncated)
      notes.push(`${read}: stopped early at the time budget (http ${http.real.n}+${http.floor.n} requests, ${store.n} handler calls)`);
    const f = (x: number, digits: number, suffix = '') => (Number.isFinite(x) ? x.toFixed(digits) + suffix : '-');
    rows.push([
      read.replace(/ids=[^&]+/, 'ids=<2 ids>'),
      String(results),
      String(body.length),
      f(http.real.p50, 2),
      f(http.real.p95, 2),
      f(http.real.rps, 0),
      f(http.floor.p50, 2),
      f(http.floor.p95, 2),
      f(http.floor.rps, 0),
      f(http.real.p50 / http.floor.p50, 1, 'x'),
      store.n ? String(store.queries) : '-',
      f(store.handler, 2),
      f(store.raw, 2),
      f(store.handler / store.raw, 2, 'x'),
    ]);
  }

  const head = [
    'read',
    'rows',
    'bytes',
    'p50 ms',
    'p95 ms',
    'req/s',
    'floor p50',
    'floor p95',
    'floor req/s',
    'http ratio',
    'sql',
    'handler ms',
    'raw sql ms',
    'store ratio',
  ];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ');
  console.log('');
  console.log(
    `REST v2 reads: ${REQUESTS} requests per side at concurrency ${CONCURRENCY} (after ${WARMUP} warm-up), ${STORE_REPS} handler calls; medians of the store figures`,
  );
  console.log(line(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
  console.log(
    'http ratio = real p50 / floor p50 (bare fastify route, same body bytes); store ratio = handler ms / raw sql ms (same SQL + params replayed on the store)',
  );
  for (const n of notes) console.log(`note: ${n}`);
  console.log(
    `machine: ${cpus().length} CPUs (${cpus()[0]?.model.trim() ?? '?'}), node ${process.version}, ${platform()} ${release()}; ` +
      `data ${ownDir ? 'small demo set (fresh)' : dataDir}; setup ${setupSecs.toFixed(1)} s, measuring ${((performance.now() - tStart) / 1000 - setupSecs).toFixed(1)} s`,
  );
} catch (err) {
  console.error(`bench/reads: ${(err as Error).stack ?? err}`);
  exitCode = 1;
} finally {
  await cleanup();
}
process.exit(exitCode);
