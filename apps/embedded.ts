import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { EmbeddedLog } from '../projectors/log/embedded.ts';
import { ensureSchema, runProjector } from '../projectors/runner.ts';
import { openChdbStore, type ChdbStore } from '../projectors/store/chdb.ts';
import type { LogSubscription } from '../projectors/log/port.ts';
import { SCOPES } from '../schemas/topics/index.ts';
import { ALL, createKey, DEMO_ACCOUNT, putAccount } from './admin.ts';
import { buildApi } from './api/server.ts';
import { ApiKeyAuthenticator } from './auth/keys.ts';
import type { Config } from './config.ts';
import { appendDemo } from './seed.ts';
import { MemoryCache, MemoryWatermarks } from './cache/memory.ts';
import { ReadCache } from './api/read-cache.ts';

/** Watermark of committed projector batches: it changes exactly when a read's answer may change. */
export const DATA_VERSION = 'data-version';
export const storePath = (dataDir: string) => join(dataDir, 'chdb');
const pidFile = (dataDir: string) => join(dataDir, 'server.pid');
const seededMarker = (dataDir: string) => join(dataDir, 'seeded.json');
export const demoKeyFile = (dataDir: string) => join(dataDir, 'demo-api-key.txt');

/** The pid of a live `start` on this DATA_DIR, if any (the CLI then leaves projection to it). */
export function runningServerPid(dataDir: string): number | null {
  try {
    const pid = Number(readFileSync(pidFile(dataDir), 'utf8'));
    process.kill(pid, 0);
    return pid;
  } catch { return null; }
}

export type Say = (line: string) => void;

/** Creates the `demo` account and a key with every scope, once per DATA_DIR (the key file marks it). */
export function ensureDemoAccess(dataDir: string, log: EmbeddedLog): void {
  if (existsSync(demoKeyFile(dataDir))) return;
  putAccount(log, { id: DEMO_ACCOUNT, status: 'active', emailVerified: true, messageVisibility: ALL, signalVisibility: ALL, historyWindowDays: null });
  const { key } = createKey(log, DEMO_ACCOUNT, SCOPES);
  writeFileSync(demoKeyFile(dataDir), key + '\n', { mode: 0o600 });
}

/** Records that DATA_DIR holds demo data, so `start` does not seed it again. */
export const markSeeded = (dataDir: string, scale: string, records: number) =>
  writeFileSync(seededMarker(dataDir), JSON.stringify({ scale, records, at: new Date().toISOString() }));

/** Seeds the demo data and the demo account/key on the first start only. */
export async function seedOnFirstStart(dataDir: string, log: EmbeddedLog, say: Say): Promise<void> {
  if (existsSync(seededMarker(dataDir))) return;
  say('first start: seeding the small demo data set through the log');
  const records = await appendDemo(log, { scale: 'small', now: new Date() });
  ensureDemoAccess(dataDir, log);
  markSeeded(dataDir, 'small', records);
}

export interface Embedded {
  app: FastifyInstance;
  store: ChdbStore;
  log: EmbeddedLog;
  projector: LogSubscription;
  url: string;
  close(): Promise<void>;
}

/** `signalbase start`: embedded log + chdb + in-process watermarks, REST on one port. */
export async function startEmbedded(cfg: Config, opts: { seed?: boolean; say?: Say } = {}): Promise<Embedded> {
  const say = opts.say ?? ((l: string) => console.log(l));
  mkdirSync(cfg.dataDir, { recursive: true });
  const other = runningServerPid(cfg.dataDir);
  if (other && other !== process.pid) throw new Error(`another signalbase (pid ${other}) is already running on ${cfg.dataDir}`);
  writeFileSync(pidFile(cfg.dataDir), String(process.pid));

  const log = new EmbeddedLog(cfg.dataDir);
  if (opts.seed !== false) await seedOnFirstStart(cfg.dataDir, log, say);

  const store = await openChdbStore(storePath(cfg.dataDir));
  await ensureSchema(store);
  const auth = new ApiKeyAuthenticator(store, new MemoryCache());
  const watermarks = new MemoryWatermarks();
  let commits = 0;
  let projected = 0;
  const projector = runProjector(log, store, {
    onCommit: async ({ applied, dead }) => { await watermarks.advance(DATA_VERSION, ++commits); projected += applied + dead; await auth.invalidate(); },
    onError: (err, topic) => say(`projector: batch of ${topic} failed, retrying: ${(err as Error).message}`),
  });
  const t0 = Date.now();
  const ticker = setInterval(() => say(`projecting the log: ${projected} records applied`), 5000);
  await projector.caughtUp();
  clearInterval(ticker);
  say(`read models up to date (${projected} records projected in ${((Date.now() - t0) / 1000).toFixed(1)} s)`);

  const readCache = new ReadCache(new MemoryCache());
  const app = buildApi({ store, auth, readCache, dataVersion: () => watermarks.get(DATA_VERSION), logger: cfg.logLevel === 'silent' ? false : { level: cfg.logLevel } });
  const address = await app.listen({ port: cfg.port, host: cfg.host });
  const url = address.replace('[::1]', 'localhost');
  return {
    app, store, log, projector, url,
    async close() {
      await app.close();
      await projector.stop();
      await store.close();
      if (runningServerPid(cfg.dataDir) === process.pid) rmSync(pidFile(cfg.dataDir), { force: true });
    },
  };
}
