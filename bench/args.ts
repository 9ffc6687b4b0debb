// Command-line handling shared by the benchmarks: options parsed strictly (an unknown option or a
// positional is refused with the usage text), --help, and positive integers checked; and the
// measurement helpers they share (percentiles, formatting, timing, a handler's query).
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, platform, release, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { type ParseArgsOptionsConfig, parseArgs } from 'node:util';
import Fastify, { type FastifyInstance } from 'fastify';
import { createKey, putAccount } from '../apps/admin.ts';
import { demoKeyFile, type Embedded, runningServerPid, startEmbedded } from '../apps/embedded.ts';
import type { Operation } from '../apps/registry.ts';
import type { EmbeddedLog } from '../projectors/log/embedded.ts';
import { SCOPES } from '../schemas/topics/index.ts';

/** `options` must hold `help` (boolean, -h). */
export function benchArgs<const O extends ParseArgsOptionsConfig>(bench: string, usage: string, options: O) {
  const die = (msg: string, code = 2): never => {
    console.error(`${bench}: ${msg}`);
    process.exit(code);
  };
  const parse = () => parseArgs({ options, strict: true, allowPositionals: false }).values;
  let values: ReturnType<typeof parse>;
  try {
    values = parse();
  } catch (err) {
    return die(`${(err as Error).message}\n\n${usage}`);
  }
  if ((values as Record<string, unknown>).help) {
    console.log(usage);
    process.exit(0);
  }
  const posInt = (name: string, v: string | undefined): number => {
    const n = Number(v);
    if (!/^[0-9]+$/.test(v ?? '') || !Number.isSafeInteger(n) || n < 1) die(`--${name} takes a positive integer (got ${v})`);
    return n;
  };
  return { values, die, posInt };
}

/**
 * The bench's data directory: the one given (it must exist, and no server may hold it: chdb opens
 * a data directory from one process only), or a fresh temporary one (`ownDir`: the bench seeds it
 * and removes it at the end).
 */
export function benchDataDir(given: string | undefined, prefix: string, die: (msg: string) => never): { ownDir: boolean; dataDir: string } {
  if (given === undefined) return { ownDir: true, dataDir: mkdtempSync(join(tmpdir(), prefix)) };
  const dataDir = resolve(given);
  if (!existsSync(dataDir)) die(`--data-dir ${dataDir} does not exist (seed it first: node bin/signalbase.cjs seed --data-dir ${dataDir})`);
  const pid = runningServerPid(dataDir);
  if (pid !== null) {
    die(
      `a signalbase server (pid ${pid}) is running on ${dataDir}; chdb allows one process per data directory, ` +
        'so stop that server first (or run without --data-dir to use a fresh demo set)',
    );
  }
  return { ownDir: false, dataDir };
}

// Measurement helpers shared by the benchmarks.

/** The p-th percentile of sorted numbers (nearest rank). */
export const pct = (sorted: number[], p: number) =>
  sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN;
export const sortNum = (xs: number[]) => [...xs].sort((a, b) => a - b);
export const fmtMs = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '-');
export const fmtRatio = (x: number, bad: boolean) => (Number.isFinite(x) ? `${x.toFixed(2)}x${bad ? ' !' : ''}` : '-');
export const fmtInt = (x: number) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en-US') : '-');

export async function timed<T>(f: () => Promise<T>): Promise<[number, T]> {
  const t0 = performance.now();
  const r = await f();
  return [performance.now() - t0, r];
}

/** The handler's query as fastify hands it over: schema defaults applied, integers coerced. */
export function handlerQuery(op: Operation, search: URLSearchParams): Record<string, unknown> {
  const props = (op.query as any).properties as Record<string, any>;
  const q: Record<string, unknown> = {};
  for (const [k, v] of search) {
    if (!props[k]) throw new Error(`${op.path}: unknown query parameter ${k}`);
    q[k] = props[k].type === 'integer' || props[k].type === 'number' ? Number(v) : v;
  }
  for (const [k, s] of Object.entries(props)) if (q[k] === undefined && s.default !== undefined) q[k] = s.default;
  return q;
}

/**
 * A bench's cleanup, run once: on Ctrl-C it runs (the message says what it drops) and the process
 * exits 130; the run's own `finally` awaits the same promise, so it never exits mid-cleanup.
 */
function cleanupOnce(
  clean: () => Promise<void>,
  say: (line: string) => void,
): { cleanup: () => Promise<void>; interrupted: () => boolean } {
  let cleaning: Promise<void> | undefined;
  let interrupted = false;
  const cleanup = () => (cleaning ??= clean());
  process.once('SIGINT', () => {
    interrupted = true;
    say('interrupted: dropping the floor tables');
    void cleanup().finally(() => process.exit(130));
  });
  return { cleanup, interrupted: () => interrupted };
}

/**
 * The cleanup of a bench that starts the service (cleanupOnce): the bare routes and the measurement
 * app closed, the floors dropped (`dropFloors`), the service closed, a fresh data dir removed.
 * The getters give what exists when the cleanup runs (it may run before any of it started).
 */
export function benchCleanup(r: {
  emb: () => Embedded | undefined;
  measureApp: () => FastifyInstance | undefined;
  bareApps: readonly FastifyInstance[];
  dropFloors: (store: Embedded['store']) => Promise<void>;
  ownDir: boolean;
  dataDir: string;
}): { cleanup: () => Promise<void>; interrupted: () => boolean } {
  return cleanupOnce(async () => {
    for (const f of r.bareApps) await f.close().catch(() => {});
    await r
      .measureApp()
      ?.close()
      .catch(() => {});
    const emb = r.emb();
    if (emb) {
      await r.dropFloors(emb.store).catch(() => {});
      await emb.close().catch((err) => progress(`close: ${(err as Error).message}`));
    }
    if (r.ownDir) rmSync(r.dataDir, { recursive: true, force: true });
  }, progress);
}

/** A bench's closing line: the machine, the data, the floors' row counts and where the time went. */
export function machineLine(r: {
  ownDir: boolean;
  dataDir: string;
  extra?: string;
  floorRows: Record<string, number>;
  setupSecs: number;
  floorSecs: number;
  tStart: number;
}): string {
  return (
    `machine: ${cpus().length} CPUs (${cpus()[0]?.model.trim() ?? '?'}), node ${process.version}, ${platform()} ${release()}; ` +
    `data ${r.ownDir ? 'small demo set (fresh)' : r.dataDir}; ${r.extra ? `${r.extra}; ` : ''}` +
    `floors ${Object.entries(r.floorRows)
      .map(([k, v]) => `${k.replace('bench_floor_', '')} ${fmtInt(v)}`)
      .join(', ')}; ` +
    `setup ${r.setupSecs.toFixed(1)} s, floors ${r.floorSecs.toFixed(1)} s, total ${((performance.now() - r.tStart) / 1000).toFixed(1)} s`
  );
}

/**
 * Builds one floor table in a bench's store: dropped if left over, made by `statements` (a CREATE,
 * and what fills it), merged into one part. Returns its row count.
 */
export async function buildFloorTable(store: Embedded['store'], name: string, statements: readonly string[]): Promise<number> {
  await store.exec(`DROP TABLE IF EXISTS $db.${name}`);
  for (const sql of statements) await store.exec(sql);
  await store.exec(`OPTIMIZE TABLE $db.${name} FINAL`);
  const [c] = await store.query<{ n: number }>(`SELECT count() AS n FROM $db.${name}`);
  const rows = Number(c?.n ?? 0);
  progress(`floor ${name}: ${rows} rows`);
  return rows;
}

/** Reports a bench run's failure, unless Ctrl-C caused it (whatever was running fails as the cleanup closes the store: not worth a stack). */
export function reportFailure(bench: string, err: unknown, interrupted: boolean): void {
  if (!interrupted) console.error(`${bench}: ${(err as Error).stack ?? err}`);
}

/**
 * Starts the service on a bench's data dir as `start` runs it (first catch-up, then the start's
 * compaction: a catch-up leaves tables in many parts), and checks what the floors are built from:
 * the demo key and the `tables` of the store. `onStarted` receives the service before it catches
 * up, so that a cleanup can close it whatever happens next.
 */
export async function startBenchService(
  dataDir: string,
  say: (line: string) => void,
  tables: readonly string[],
  onStarted: (emb: Embedded) => void,
  t0: number,
): Promise<{ emb: Embedded; demoKey: string; setupSecs: number }> {
  const emb = await startEmbedded({ port: 0, host: '127.0.0.1', dataDir, logLevel: 'silent' }, { say });
  onStarted(emb);
  await emb.firstCatchUp;
  await emb.compacted();
  const setupSecs = (performance.now() - t0) / 1000;
  say(`read models caught up after ${setupSecs.toFixed(1)} s`);
  if (!existsSync(demoKeyFile(dataDir))) throw new Error(`no demo key in ${demoKeyFile(dataDir)}: seed the data dir first`);
  const demoKey = readFileSync(demoKeyFile(dataDir), 'utf8').trim();
  const have = new Set(
    (
      await emb.store.query<{ name: string }>('SELECT name FROM system.tables WHERE database = {db:String}', { db: emb.store.database })
    ).map((t) => t.name),
  );
  const missing = tables.filter((v) => !have.has(v));
  if (missing.length) throw new Error(`the store has no ${missing.join(', ')} (the read-model layout this bench builds its floors from)`);
  return { emb, demoKey, setupSecs };
}

/** Progress lines of a bench, on stderr (its result table goes to stdout). */
export const progress = (line: string) => console.error(`[bench] ${line}`);

/** Clients of the hot-read measurements. */
export const HOT_CLIENTS = 50;

/** GETs `url` from HOT_CLIENTS concurrent keep-alive clients for `ms`: answers 200 and others. */
export async function hammer(
  url: string,
  headers: Record<string, string>,
  ms: number,
): Promise<{ n: number; secs: number; errors: number }> {
  let n = 0;
  let errors = 0;
  const t0 = performance.now();
  const end = t0 + ms;
  const worker = async () => {
    while (performance.now() < end) {
      try {
        const res = await fetch(url, { headers, signal: AbortSignal.timeout(30_000) });
        await res.arrayBuffer();
        if (res.status === 200) n++;
        else errors++;
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: HOT_CLIENTS }, worker));
  return { n, secs: (performance.now() - t0) / 1000, errors };
}

/** Waits (at most `maxMs`) until the store runs no background merge, so that none competes with a measurement. */
export async function settle(store: { query<T>(sql: string): Promise<T[]> }, what: string, maxMs: number): Promise<void> {
  const t0 = performance.now();
  let said = false;
  for (;;) {
    const [m] = await store.query<{ n: number }>('SELECT count() AS n FROM system.merges');
    const n = Number(m?.n ?? 0);
    if (n === 0) break;
    if (performance.now() - t0 > maxMs) {
      progress(`${what}: still ${n} background merges after ${(maxMs / 1000).toFixed(0)} s; measuring anyway`);
      return;
    }
    if (!said) {
      progress(`${what}: waiting for ${n} background merges to finish`);
      said = true;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  if (said) progress(`${what}: merges done after ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}

const HOT_WARM_MS = 500;
const HOT_LEG_MS = 600; // eight legs, real and bare alternating ABBA BAAB
const HOT_LEGS = ['real', 'bare', 'bare', 'real', 'bare', 'real', 'real', 'bare'] as const;
/** Seconds one hotVersusBare measurement takes. */
export const HOT_SECS = (2 * HOT_WARM_MS + HOT_LEGS.length * HOT_LEG_MS) / 1000;

/**
 * Hot-read throughput: the real service's `path` (under `baseUrl`) against a bare fastify route
 * (kept in `bareApps` until closed, for Ctrl-C) sending the bytes of the service's first answer,
 * both hammered by HOT_CLIENTS in alternating legs. `route` is the bare route's path.
 */
export async function hotVersusBare(
  baseUrl: string,
  route: string,
  path: string,
  headers: Record<string, string>,
  bareApps: FastifyInstance[],
): Promise<{ body: Buffer; real: number; bare: number; errors: number }> {
  const realUrl = baseUrl + path;
  const first = await fetch(realUrl, { headers });
  const body = Buffer.from(await first.arrayBuffer());
  if (first.status !== 200) throw new Error(`${path} answered ${first.status}: ${body.toString().slice(0, 300)}`);
  const contentType = first.headers.get('content-type') ?? 'application/json; charset=utf-8';
  const bare = Fastify({ logger: false });
  bare.get(route, (_req, reply) => {
    reply.header('content-type', contentType).send(body);
  });
  bareApps.push(bare);
  const bareUrl = (await bare.listen({ port: 0, host: '127.0.0.1' })) + path;
  await hammer(realUrl, headers, HOT_WARM_MS);
  await hammer(bareUrl, headers, HOT_WARM_MS);
  const sum = { real: { n: 0, secs: 0 }, bare: { n: 0, secs: 0 } };
  let errors = 0;
  for (const side of HOT_LEGS) {
    const r = await hammer(side === 'real' ? realUrl : bareUrl, headers, HOT_LEG_MS);
    sum[side].n += r.n;
    sum[side].secs += r.secs;
    errors += r.errors;
  }
  await bare.close();
  return { body, real: sum.real.n / sum.real.secs, bare: sum.bare.n / sum.bare.secs, errors };
}

/** Prints a table to stdout: the first `leftCols` columns left-aligned, the others right-aligned. */
export function printTable(head: string[], rows: string[][], leftCols = 1): void {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i < leftCols ? c.padEnd(widths[i]!) : c.padStart(widths[i]!)))
      .join('  ')
      .trimEnd();
  console.log(line(head));
  console.log(widths.map((w) => '-'.repeat(w)).join('  '));
  for (const r of rows) console.log(line(r));
}

/**
 * A case's timings: `warmup` untimed rounds, then up to `reps` rounds (until `until`, performance
 * clock), each timing the handler, the floor and the HTTP request one after the other, so that
 * drift hits all three alike. `http` null: not measured.
 */
export async function interleaved(
  handler: () => Promise<unknown>,
  floor: () => Promise<unknown>,
  http: (() => Promise<unknown>) | null,
  reps: number,
  warmup: number,
  until: number,
): Promise<{ hMs: number[]; fMs: number[]; httpMs: number[]; truncated: boolean }> {
  for (let i = 0; i < warmup && performance.now() < until; i++) {
    await handler();
    await floor();
    if (http) await http();
  }
  const hMs: number[] = [];
  const fMs: number[] = [];
  const httpMs: number[] = [];
  let truncated = false;
  for (let i = 0; i < reps; i++) {
    if (performance.now() > until) {
      truncated = true;
      break;
    }
    hMs.push((await timed(handler))[0]);
    fMs.push((await timed(floor))[0]);
    if (http) httpMs.push((await timed(http))[0]);
  }
  return { hMs, fMs, httpMs, truncated };
}

/** A free TCP port on loopback (for a server the bench starts). */
export const freePort = () =>
  new Promise<number>((ok) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => ok(p));
    });
  });

/**
 * `n` accounts `<prefix>-0..n-1`, all-visibility with every scope, each with a new key, made
 * through the log as `signalbase accounts create` and `keys create` do (the server projects them).
 */
export function benchAccounts(log: EmbeddedLog, prefix: string, n: number): { id: string; key: string }[] {
  return Array.from({ length: n }, (_, i) => {
    const id = `${prefix}-${i}`;
    putAccount(log, {
      id,
      status: 'active',
      emailVerified: true,
      messageVisibility: { mode: 'all' },
      signalVisibility: { mode: 'all' },
      historyWindowDays: null,
      scopes: [...SCOPES],
    });
    return { id, key: createKey(log, id).key };
  });
}
