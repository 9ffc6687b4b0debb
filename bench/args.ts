// Command-line handling shared by the benchmarks: options parsed strictly (an unknown option or a
// positional is refused with the usage text), --help, and positive integers checked; and the
// measurement helpers they share (percentiles, formatting, timing, a handler's query).
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs, type ParseArgsOptionsConfig } from 'node:util';
import { demoKeyFile, runningServerPid, startEmbedded, type Embedded } from '../apps/embedded.ts';
import type { Operation } from '../apps/registry.ts';

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
  if ((values as Record<string, unknown>).help) { console.log(usage); process.exit(0); }
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
  if (!existsSync(dataDir)) die(`--data-dir ${dataDir} does not exist (seed it first: node bin/signalbase.mjs seed --data-dir ${dataDir})`);
  const pid = runningServerPid(dataDir);
  if (pid !== null) {
    die(`a signalbase server (pid ${pid}) is running on ${dataDir}; chdb allows one process per data directory, `
      + 'so stop that server first (or run without --data-dir to use a fresh demo set)');
  }
  return { ownDir: false, dataDir };
}

// Measurement helpers shared by the benchmarks.

/** The p-th percentile of sorted numbers (nearest rank). */
export const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN);
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
export function cleanupOnce(clean: () => Promise<void>, say: (line: string) => void): { cleanup: () => Promise<void>; interrupted: () => boolean } {
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
 * Starts the service on a bench's data dir as `start` runs it (first catch-up, then the start's
 * compaction: a catch-up leaves tables in many parts), and checks what the floors are built from:
 * the demo key and the `tables` of the store. `onStarted` receives the service before it catches
 * up, so that a cleanup can close it whatever happens next.
 */
export async function startBenchService(dataDir: string, say: (line: string) => void, tables: readonly string[], onStarted: (emb: Embedded) => void, t0: number):
  Promise<{ emb: Embedded; demoKey: string; setupSecs: number }> {
  const emb = await startEmbedded({ port: 0, host: '127.0.0.1', dataDir, logLevel: 'silent' }, { say });
  onStarted(emb);
  await emb.firstCatchUp;
  await emb.compacted();
  const setupSecs = (performance.now() - t0) / 1000;
  say(`read models caught up after ${setupSecs.toFixed(1)} s`);
  if (!existsSync(demoKeyFile(dataDir))) throw new Error(`no demo key in ${demoKeyFile(dataDir)}: seed the data dir first`);
  const demoKey = readFileSync(demoKeyFile(dataDir), 'utf8').trim();
  const have = new Set((await emb.store.query<{ name: string }>('SELECT name FROM system.tables WHERE database = {db:String}', { db: emb.store.database })).map((t) => t.name));
  const missing = tables.filter((v) => !have.has(v));
  if (missing.length) throw new Error(`the store has no ${missing.join(', ')} (the read-model layout this bench builds its floors from)`);
  return { emb, demoKey, setupSecs };
}
