import { randomBytes } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { appendDemo } from '../projectors/demo/append.ts';
import { READ_MODEL_GRAPH } from '../projectors/index.ts';
import { EmbeddedLog } from '../projectors/log/embedded.ts';
import type { LogSubscription } from '../projectors/log/port.ts';
import { counted, migrateReadModels, PROJECTOR_GROUP, runProjector } from '../projectors/runner.ts';
import { SCOPES } from '../schemas/topics/index.ts';
import { ChangeLog, localChanges, touches, wholeTables } from '../storage/changes.ts';
import { type ChdbStore, openChdbStore } from '../storage/chdb.ts';
import { compactStatements } from '../storage/compaction.ts';
import { StatementLog } from '../storage/statement-log.ts';
import { ACCESS_TABLES } from '../storage/tables/access.ts';
import { feedWatermark } from '../storage/tables/feed-groups.ts';
import { ALL, createKey, DEMO_ACCOUNT, listAccounts, putAccount } from './admin.ts';
import { ReadCache } from './api/read-cache.ts';
import { buildApi } from './api/server.ts';
import { DevAuthorizationServer } from './auth/dev-server.ts';
import { ApiKeyAuthenticator } from './auth/keys.ts';
import { readPasswords, setPassword } from './auth/passwords.ts';
import { MemoryCache, MemoryWatermarks } from './cache/memory.ts';
import { DATA_VERSION } from './cache/port.ts';
import type { Config } from './config.ts';
import { authUrls, DEFAULT_LIVE_CADENCE_MS, originOf } from './config.ts';
import { tuneServiceHeap } from './heap.ts';
import { type AuthUrls, TokenVerifier } from './mcp/bearer.ts';
import { Metrics, serveMetrics } from './metrics.ts';
import { Admission, admissionDefaults } from './reads/cost.ts';
import { CursorCodec } from './reads/cursor.ts';

export const storePath = (dataDir: string) => join(dataDir, 'chdb');
const pidFile = (dataDir: string) => join(dataDir, 'server.pid');
const seededMarker = (dataDir: string) => join(dataDir, 'seeded.json');
export const demoKeyFile = (dataDir: string) => join(dataDir, 'demo-api-key.txt');
export const demoPasswordFile = (dataDir: string) => join(dataDir, 'demo-password.txt');
/** The MCP URL and issuer of the last `start` on this DATA_DIR: `tokens create` mints for them. */
export const authUrlsFile = (dataDir: string) => join(dataDir, 'auth', 'urls.json');

/** The pid of a live `start` on this DATA_DIR, if any (the CLI then leaves projection to it). */
export function runningServerPid(dataDir: string): number | null {
  try {
    const pid = Number(readFileSync(pidFile(dataDir), 'utf8'));
    process.kill(pid, 0);
    return pid;
  } catch {
    return null;
  }
}

export type Say = (line: string) => void;

/**
 * The key that signs cursors (DESIGN 6), created once per DATA_DIR and kept there (mode 0600),
 * so cursors stay valid across restarts. A `secret` (CURSOR_SECRET) takes precedence.
 */
export function cursorCodec(dataDir: string, secret?: string): CursorCodec {
  if (secret) return new CursorCodec(Buffer.from(secret, 'utf8'));
  const file = join(dataDir, 'cursor-secret');
  if (!existsSync(file)) writeFileSync(file, randomBytes(32).toString('base64url'), { mode: 0o600, flag: 'wx' });
  return new CursorCodec(Buffer.from(readFileSync(file, 'utf8').trim(), 'base64url'));
}

/** Creates the `demo` account and a key with every scope, once per DATA_DIR (the key file marks it). */
export function ensureDemoAccess(dataDir: string, log: EmbeddedLog): void {
  if (existsSync(demoKeyFile(dataDir))) return;
  putAccount(log, {
    id: DEMO_ACCOUNT,
    status: 'active',
    emailVerified: true,
    messageVisibility: ALL,
    signalVisibility: ALL,
    historyWindowDays: null,
  });
  const { key } = createKey(log, DEMO_ACCOUNT, SCOPES);
  writeFileSync(demoKeyFile(dataDir), `${key}\n`, { mode: 0o600 });
}

/**
 * Gives the demo account a random password for the dev sign-in page, once per DATA_DIR (also for
 * a DATA_DIR made before passwords existed); `accounts password demo` changes it.
 */
export async function ensureDemoPassword(dataDir: string, log: EmbeddedLog): Promise<void> {
  if (existsSync(demoPasswordFile(dataDir)) || readPasswords(dataDir)[DEMO_ACCOUNT]) return;
  if (!listAccounts(log).some((a) => a.id === DEMO_ACCOUNT)) return;
  const password = randomBytes(12).toString('base64url');
  await setPassword(dataDir, DEMO_ACCOUNT, password);
  writeFileSync(demoPasswordFile(dataDir), `${password}\n`, { mode: 0o600 });
}

/** Records that DATA_DIR holds demo data, so `start` does not seed it again. */
export const markSeeded = (dataDir: string, scale: string, records: number) =>
  writeFileSync(seededMarker(dataDir), JSON.stringify({ scale, records, at: new Date().toISOString() }), { mode: 0o600 });

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
  /** Resolves after the first catch-up with the log (healthz turns `ok`). */
  firstCatchUp: Promise<void>;
  /** The store the API reads through: a chdb session of its own, so reads never queue behind the projector's inserts. */
  store: ChdbStore;
  log: EmbeddedLog;
  projector: LogSubscription;
  url: string;
  /** The MCP endpoint and the issuer of its tokens (the dev authorization server unless AUTH_ISSUER names another). */
  mcp: AuthUrls & { dev: boolean };
  /** With METRICS_PORT: where /metrics is served (not on `url`). */
  metricsUrl?: string;
  /** Resolves once the first catch-up and the compaction run it starts are over. */
  compacted(): Promise<void>;
  close(): Promise<void>;
}

/** Store queries the API runs at once: one chdb session each. */
const READ_SLOTS = 4;

/** How often the statement tables are checked for tombstones to compact. */
const COMPACTION_INTERVAL_MS = 10 * 60_000;

/**
 * Makes DATA_DIR this process's: private to its owner and claimed by a pid file (refused while
 * another live `start` holds it). It holds credentials (key and password files, the signing key,
 * refresh tokens) and the accounts' data: the owner's alone, also when it was made before
 * (chmod), not only when new.
 */
function claimDataDir(dataDir: string, say: Say): void {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  try {
    chmodSync(dataDir, 0o700);
  } catch (err) {
    say(`cannot make ${dataDir} private to its owner (mode 0700): ${(err as Error).message}`);
  }
  const other = runningServerPid(dataDir);
  if (other && other !== process.pid) throw new Error(`another signalbase (pid ${other}) is already running on ${dataDir}`);
  writeFileSync(pidFile(dataDir), String(process.pid), { mode: 0o600 });
}

/** The embedded log of DATA_DIR, its torn tails sealed, seeded on the first start (unless `seed` is false) and the demo password set. */
async function openLog(dataDir: string, opts: { seed: boolean; say: Say }): Promise<EmbeddedLog> {
  const log = new EmbeddedLog(dataDir);
  // A crash mid-append leaves a torn last line: give it a line of its own (it is dead-lettered).
  for (const topic of log.sealTornTails()) opts.say(`${topic}: a torn last line (an interrupted append) goes to the dead-letter table`);
  if (opts.seed) await seedOnFirstStart(dataDir, log, opts.say);
  await ensureDemoPassword(dataDir, log);
  return log;
}

/** The chdb sessions of a `start`: the projector's, the reads', and maintenance's. */
interface Stores {
  /** The projector's, where the read models are migrated first. */
  store: ChdbStore;
  reads: ChdbStore;
  maintenance: ChdbStore;
}

/** The projector's sessions: its two lanes' (projectors/runner.ts SEPARATE_LANES) and its settled work's. */
const PROJECTOR_SESSIONS = 3;

/** Opens the store of DATA_DIR, its read models of the current layout (migrated), and the sessions reads and compaction run on. */
async function openStores(dataDir: string, log: EmbeddedLog, say: Say, statements?: StatementLog): Promise<Stores> {
  const noted = (session: string) => (statements ? { statementLog: { log: statements, session } } : {});
  mkdirSync(storePath(dataDir), { recursive: true, mode: 0o700 });
  // The projector's statements run at ClickHouse priority 1, above every API read (2 and lower,
  // apps/reads/cost.ts), on sessions of its own: one for each of its two lanes and one for its
  // settled work (the activity roll-ups, the copy to position_samples), so that none waits for
  // another's statements: on one shared session a live round waited behind the other lane's round
  // and behind the roll-ups (issue 26: bench/README, live.ts).
  const store = await openChdbStore(storePath(dataDir), undefined, {
    ownSession: true,
    sessions: PROJECTOR_SESSIONS,
    sessionSettings: { priority: 1 },
    ...noted('projector'),
  });
  // Read models of another layout version are rebuilt from the log, never served as they are.
  await migrateReadModels(store, () => log.writeOffsets(PROJECTOR_GROUP, {}), say);
  // The API reads through a session of its own (storage/chdb.ts): one session runs one
  // statement at a time, and the projector's inserts would hold reads back.
  // READ_SLOTS sessions of its own, so reads run side by side (an admission slot per session, apps/reads/cost.ts).
  // Four more for what reads without a slot (credentials, the facts loaded once per data version,
  // the planner's background counts), so that they never hold up a read that has one.
  const reads = await openChdbStore(storePath(dataDir), undefined, {
    ownSession: true,
    sessions: READ_SLOTS + 4,
    ...noted('reads'),
  });
  // Compaction too (OPTIMIZE ... FINAL runs for seconds on the large seed): live batches do not wait behind it.
  const maintenance = await openChdbStore(storePath(dataDir), undefined, { ownSession: true, ...noted('maintenance') });
  return { store, reads, maintenance };
}

/**
 * Compaction runs one after the other on the maintenance session: `run` queues one (none once
 * `closing` says so), `idle` resolves when those queued are over. Tombstones are bounded and
 * tables read from few parts: the read tables are checked after the first catch-up and then
 * every COMPACTION_INTERVAL_MS, and compacted past the policy.
 */
function compactionQueue(opts: { maintenance: ChdbStore; say: Say; closing: () => boolean; onCompacted: (tables: string[]) => void }): {
  run: () => void;
  idle: () => Promise<void>;
} {
  let compacting: Promise<void> = Promise.resolve();
  let checks = 0;
  const run = () => {
    compacting = compacting
      .then(async () => {
        if (opts.closing()) return;
        const t0 = Date.now();
        const first = checks++ === 0;
        const compacted: string[] = [];
        for (const r of await compactStatements(opts.maintenance)) {
          if (!r.compacted) continue;
          opts.say(`compacted ${r.table} (${r.rows} rows): ${r.why}`);
          compacted.push(r.table);
        }
        if (compacted.length) opts.onCompacted(compacted);
        // The first check's end is said either way: until then the server also merges what it loaded (bench/live.ts waits for it).
        if (compacted.length || first)
          opts.say(`compaction check done: ${compacted.length} tables compacted in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
      })
      .catch((err) => opts.say(`compaction failed, retried later: ${(err as Error).message}`));
  };
  return { run, idle: () => compacting };
}

/**
 * The embedded read cache's budget (values counted at two bytes a character). A page of each list
 * for each of a thousand traders (8 to 32 thousand characters each) took most of the former 256 MB:
 * pages asked again every half minute were pushed out by answers asked once (issue 26).
 */
const READ_CACHE_ENTRIES = 200_000;
const READ_CACHE_BYTES = 1 << 30;

/** `signalbase start`: embedded log + chdb + in-process watermarks, REST on one port. */
export async function startEmbedded(cfg: Config, opts: { seed?: boolean; say?: Say } = {}): Promise<Embedded> {
  const say = opts.say ?? ((l: string) => console.log(l));
  tuneServiceHeap();
  claimDataDir(cfg.dataDir, say);
  const log = await openLog(cfg.dataDir, { seed: opts.seed !== false, say });
  const statements = cfg.statementLog
    ? new StatementLog(cfg.statementLog, (err) => say(`statement log: cannot append to ${cfg.statementLog}: ${err.message}`))
    : undefined;
  if (statements) say(`noting every store statement in ${statements.path}`);
  const { store, reads, maintenance } = await openStores(cfg.dataDir, log, say, statements);
  // One cache of credential answers (API keys and token owners): every projector commit clears it.
  const authCache = new MemoryCache();
  const auth = new ApiKeyAuthenticator(reads, authCache);
  // MCP: known once the server listens (its port may be chosen by the system).
  let urls: (AuthUrls & { dev: boolean }) | undefined;
  const mcpUrls = () =>
    urls ??
    (() => {
      throw new Error('not listening yet');
    })();
  const verifier = new TokenVerifier({ store: reads, cache: authCache, urls: mcpUrls });
  const dev = authUrls(cfg, originOf(cfg.host, cfg.port)).dev;
  const watermarks = new MemoryWatermarks();
  // What each commit changed (issue 26): a cached answer or a memo lasts until one touches what it read.
  const changeLog = new ChangeLog();
  const changes = localChanges(changeLog, READ_MODEL_GRAPH);
  let commits = 0;
  let projected = 0;
  // The gauges read the projector when scraped (it is started just below).
  const metrics = new Metrics({
    projectorLag: () => projector.lag(),
    feedWatermark: () => feedWatermark(reads),
    dataVersion: () => watermarks.get(DATA_VERSION),
  });
  const projector = runProjector(log, store, {
    cadenceMs: cfg.liveCadenceMs ?? DEFAULT_LIVE_CADENCE_MS,
    onCommit: async (info) => {
      changeLog.add(++commits, info.changes);
      await watermarks.advance(DATA_VERSION, commits);
      const n = counted(info);
      projected += n.applied + n.dead;
      metrics.committed(info);
      // Credentials' answers are read from the accounts and keys: other commits leave them (issue 26).
      if (touches(info.changes, ACCESS_TABLES)) await auth.invalidate();
    },
    onError: (err, topic) => say(`projector: batch of ${topic} failed, retrying: ${(err as Error).message}`),
  });

  // Listen at once, whatever the log holds: healthz says `starting` (503) until the first catch-up.
  let caughtUp = false;
  let closing = false;
  const readCache = new ReadCache(new MemoryCache(READ_CACHE_ENTRIES, READ_CACHE_BYTES));
  const app = buildApi({
    store: reads,
    auth,
    readCache,
    cursors: cursorCodec(cfg.dataDir, cfg.cursorSecret),
    rateLimits: cfg.rateLimits,
    metrics,
    admission: new Admission(admissionDefaults(READ_SLOTS)),
    dataVersion: () => watermarks.get(DATA_VERSION),
    changes,
    health: async () => ({ status: caughtUp ? 'ok' : 'starting', projectorLag: await projector.lag() }),
    logger: cfg.logLevel === 'silent' ? false : { level: cfg.logLevel },
    mcp: { verifier, urls: mcpUrls, allowedOrigins: cfg.mcpAllowedOrigins },
    // METRICS_PORT: /metrics on a listener of its own, not on the API port.
    metricsRoute: !cfg.metrics,
    ...(dev ? { devAuth: new DevAuthorizationServer({ dataDir: cfg.dataDir, store: reads, urls: mcpUrls }) } : {}),
  });
  const address = await app.listen({ port: cfg.port, host: cfg.host });
  const url = address.replace('[::1]', 'localhost');
  urls = authUrls(cfg, url);
  mkdirSync(join(cfg.dataDir, 'auth'), { recursive: true, mode: 0o700 });
  writeFileSync(authUrlsFile(cfg.dataDir), JSON.stringify({ mcpUrl: urls.mcpUrl, issuer: urls.issuer }), { mode: 0o600 });
  const metricsServer = cfg.metrics ? await serveMetrics(metrics, cfg.metrics) : undefined;

  const t0 = Date.now();
  const ticker = setInterval(async () => say(`projecting the log: ${projected} records applied, ${await projector.lag()} to go`), 5000);
  // A compaction changes no answer, but replaces the parts that what is kept of a table's layout names (merged parts).
  const onCompacted = (tables: string[]) => changeLog.add(++commits, wholeTables(tables));
  const compaction = compactionQueue({ maintenance, say, closing: () => closing, onCompacted });
  const compactor = setInterval(compaction.run, COMPACTION_INTERVAL_MS);
  const firstCatchUp = projector
    .caughtUp()
    .then(() => {
      if (closing) return; // stop() releases waiters without a catch-up
      caughtUp = true;
      say(`read models up to date (${projected} records projected in ${((Date.now() - t0) / 1000).toFixed(1)} s)`);
      compaction.run();
    })
    .finally(() => clearInterval(ticker));
  return {
    app,
    store: reads,
    log,
    projector,
    url,
    firstCatchUp,
    mcp: urls,
    ...(metricsServer ? { metricsUrl: metricsServer.url } : {}),
    async compacted() {
      await firstCatchUp;
      await compaction.idle();
    },
    async close() {
      closing = true;
      clearInterval(ticker);
      clearInterval(compactor);
      await app.close();
      await metricsServer?.close();
      await projector.stop();
      await compaction.idle();
      await reads.close();
      await maintenance.close();
      await store.close();
      await statements?.close();
      if (runningServerPid(cfg.dataDir) === process.pid) rmSync(pidFile(cfg.dataDir), { force: true });
    },
  };
}
