// The contract suites read with one key, some in parallel, on a loaded machine: admission is held to its own tests (issue 24), not to their timing.

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { ALL, createKey, putAccount } from '../../apps/admin.ts';
import type { RateLimits } from '../../apps/api/rate-limit.ts';
import { ReadCache } from '../../apps/api/read-cache.ts';
import { buildApi } from '../../apps/api/server.ts';
import { DevAuthorizationServer } from '../../apps/auth/dev-server.ts';
import { ApiKeyAuthenticator } from '../../apps/auth/keys.ts';
import { setPassword } from '../../apps/auth/passwords.ts';
import { loadSigningKey, mintAccessToken } from '../../apps/auth/signing.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { type AuthUrls, TokenVerifier } from '../../apps/mcp/bearer.ts';
import type { Metrics } from '../../apps/metrics.ts';
import { Admission, admissionDefaults } from '../../apps/reads/cost.ts';
import { READ_MODEL_GRAPH } from '../../projectors/index.ts';
import { EmbeddedLog } from '../../projectors/log/embedded.ts';
import { type Commit, ensureSchema, runProjector } from '../../projectors/runner.ts';
import type { ExportLimits } from '../../schemas/api/exports.ts';
import { type AccountRecord, SCOPES, type Scope, type TopicName, topicByName } from '../../schemas/topics/index.ts';
import { ChangeLog, type Changes, localChanges, touches, wholeTables } from '../../storage/changes.ts';
import type { Store } from '../../storage/port.ts';
import { ACCESS_TABLES } from '../../storage/tables/access.ts';
import { createDistributedHarness } from './distributed-harness.ts';
import { newTestDatabase, openTestStore, releaseTestDatabase, type TestStore } from './test-store.ts';

export type { TestStore } from './test-store.ts';

export interface TopicRecord {
  topic: TopicName;
  value: any;
}

export interface Harness {
  store: TestStore;
  log: EmbeddedLog;
  app: FastifyInstance;
  /** Appends records through the log and waits until the projector has applied them. */
  given(records: readonly TopicRecord[]): Promise<void>;
  /** Waits until everything appended so far is projected. */
  settle(): Promise<void>;
  /** The data version (projector commits so far). */
  dataVersion(): number;
  /** The change log the harness's app reads at (embedded wiring): another app on the same store may share it. */
  changes?: Changes;
  /** Says that these tables were compacted (their parts replaced), as the embedded server does after a compaction. */
  compacted(tables: readonly string[]): Promise<void>;
  /**
   * Stops the projector and starts a new one on a new store object for the same database (no
   * state carried over in memory, as after a process restart); it continues from the committed offsets.
   */
  restartProjector(): Promise<void>;
  /** A new store object on the harness's database (a session or connection of its own), as a restarted service opens; the caller closes it. */
  openStore(): Promise<TestStore>;
  /** Creates (or updates) an account through the log and returns a new key for it. */
  key(opts?: KeyOptions): Promise<string>;
  /** With `mcp`: listens on a free loopback port and returns its origin (the MCP URL is origin + /mcp, the dev issuer the origin). */
  listen(): Promise<string>;
  /** With `mcp`: the MCP URL and issuer (after listen). */
  urls(): AuthUrls;
  /** With `mcp`: sets an account's sign-in password. */
  password(account: string, password: string): Promise<void>;
  /** With `mcp`: an access token of the dev issuer, as `signalbase tokens create` mints it (claims overridable for failure cases). */
  token(opts: { account: string; scopes?: readonly Scope[]; ttlSeconds?: number; audience?: string; issuer?: string }): Promise<string>;
  /** The harness's DATA_DIR (log, and with `mcp` the auth files). */
  dataDir: string;
  /** GET with a key; returns status, parsed body (the text of an export) and headers. */
  get(url: string, key?: string): Promise<{ status: number; body: any; headers: Record<string, unknown> }>;
  close(): Promise<void>;
}

/** A response's parsed JSON; the text of anything else (an export's rows). */
export function bodyOf(res: { json(): any; payload: string; headers: Record<string, unknown> }): any {
  return String(res.headers['content-type'] ?? '').startsWith('application/json') ? res.json() : res.payload;
}

/** Appends the records to the log, each under its topic's key (an invalid record under '': it is dead-lettered). */
export function appendGiven(log: EmbeddedLog, records: readonly TopicRecord[]): void {
  const byTopic = new Map<string, { key: string; value: unknown }[]>();
  for (const r of records) {
    const topic = topicByName.get(r.topic)!;
    let key = '';
    try {
      key = topic.key(r.value);
    } catch {
      /* invalid record: dead-lettered */
    }
    (byTopic.get(r.topic) ?? byTopic.set(r.topic, []).get(r.topic)!).push({ key, value: r.value });
  }
  for (const [topic, recs] of byTopic) log.appendSync(topic, recs);
}

export type KeyOptions = { scopes?: readonly Scope[]; account?: Partial<Omit<AccountRecord, 'version'>> };

/** Appends an account (all visible, no history window unless overridden) and a new key of it; returns the key. */
export function putTestKey(log: EmbeddedLog, defaultId: string, opts: KeyOptions): string {
  const id = opts.account?.id ?? defaultId;
  putAccount(log, {
    id,
    status: 'active',
    emailVerified: true,
    messageVisibility: ALL,
    signalVisibility: ALL,
    historyWindowDays: null,
    ...opts.account,
  });
  return createKey(log, id, opts.scopes ?? SCOPES).key;
}

export interface HarnessOptions {
  clock?: () => number;
  /** The projector's live commit cadence (ms): with it, activity is rolled up in commits of its own, as on a live `start`. */
  cadenceMs?: number;
  rateLimits?: RateLimits;
  admission?: Admission;
  /** The exports' bounds (issue 28); EXPORT_LIMITS when omitted. */
  exportLimits?: ExportLimits;
  metrics?: (h: { lag: () => Promise<number>; store: Store }) => Metrics;
  /** Mounts the MCP tool server and the dev authorization server (real HTTP: call `listen`). */
  mcp?: boolean | { jwksCooldownMs?: number; issuer?: string };
  /**
   * Awaited before each commit is made known to the app (embedded wiring): a test holds one back,
   * as a commit round or a busy lane does, while the projector's other lane goes on.
   */
  beforeAnnounce?: (commit: Commit) => Promise<void>;
}

/** `clock`: the server's clock in ms (read cache expiry, serverTime); the real one when omitted. */
export async function createHarness(opts: HarnessOptions = {}): Promise<Harness> {
  if (process.env.SIGNALBASE_TEST_WIRING === 'distributed') return createDistributedHarness(opts);
  const clock = opts.clock ?? Date.now;
  const dataDir = mkdtempSync(join(tmpdir(), 'signalbase-log-'));
  const store = await openTestStore(newTestDatabase());
  await ensureSchema(store);
  const log = new EmbeddedLog(dataDir, 20);
  const authCache = new MemoryCache();
  const auth = new ApiKeyAuthenticator(store, authCache);
  let urls: AuthUrls | undefined;
  const mcpUrls = () =>
    urls ??
    (() => {
      throw new Error('call listen() first');
    })();
  // `issuer`: tokens come from that authorization server (AUTH_ISSUER), and the dev one is not mounted.
  const { issuer: otherIssuer, ...mcpOpts } = typeof opts.mcp === 'object' ? opts.mcp : {};
  const mcp = opts.mcp
    ? { verifier: new TokenVerifier({ store, cache: authCache, urls: mcpUrls, clock, ...mcpOpts }), urls: mcpUrls }
    : undefined;
  const devAuth = opts.mcp && !otherIssuer ? new DevAuthorizationServer({ dataDir, store, urls: mcpUrls, clock }) : undefined;
  let version = 0;
  // As the embedded server: each commit's changes end what they touch (issue 26).
  const changeLog = new ChangeLog();
  let projector: ReturnType<typeof runProjector>;
  const metrics = opts.metrics?.({ lag: () => projector.lag(), store });
  const announce = (info: Commit) => {
    changeLog.add(++version, info.changes);
    metrics?.committed(info);
    // As the embedded server: credentials' answers end when the accounts or keys change.
    return touches(info.changes, ACCESS_TABLES) ? auth.invalidate() : undefined;
  };
  const held = opts.beforeAnnounce;
  const onCommit = held
    ? async (info: Commit) => {
        await held(info);
        await announce(info);
      }
    : announce;
  projector = runProjector(log, store, { onCommit, ...(opts.cadenceMs ? { cadenceMs: opts.cadenceMs } : {}) });
  const projectorStores: TestStore[] = [];
  const app = buildApi({
    store,
    auth,
    readCache: new ReadCache(new MemoryCache(undefined, undefined, clock), clock),
    dataVersion: () => version,
    changes: localChanges(changeLog, READ_MODEL_GRAPH),
    clock,
    rateLimits: opts.rateLimits,
    ...(opts.exportLimits ? { exportLimits: opts.exportLimits } : {}),
    metrics,
    admission: opts.admission ?? new Admission({ ...admissionDefaults(), perAccount: 4, maxWaitMs: 9_000 }),
    ...(mcp ? { mcp } : {}),
    ...(devAuth ? { devAuth } : {}),
  });
  await app.ready();
  let accounts = 0;
  const h: Harness = {
    store,
    log,
    app,
    dataDir,
    async listen() {
      const address = await app.listen({ port: 0, host: '127.0.0.1' });
      urls = { mcpUrl: `${address}/mcp`, issuer: otherIssuer ?? address };
      return address;
    },
    urls: mcpUrls,
    password: (account, password) => setPassword(dataDir, account, password),
    async token(o) {
      const u = mcpUrls();
      return mintAccessToken(await loadSigningKey(dataDir), {
        issuer: o.issuer ?? u.issuer,
        audience: o.audience ?? u.mcpUrl,
        accountId: o.account,
        scopes: o.scopes ?? SCOPES,
        clientId: 'test',
        ttlSeconds: o.ttlSeconds ?? 600,
        now: clock(),
      });
    },
    async given(records) {
      appendGiven(log, records);
      await projector.caughtUp();
    },
    settle: () => projector.caughtUp(),
    dataVersion: () => version,
    changes: localChanges(changeLog, READ_MODEL_GRAPH),
    async compacted(tables) {
      changeLog.add(++version, wholeTables(tables));
    },
    async restartProjector() {
      await projector.stop();
      const fresh = await openTestStore(store.database);
      projectorStores.push(fresh);
      projector = runProjector(log, fresh, { onCommit, ...(opts.cadenceMs ? { cadenceMs: opts.cadenceMs } : {}) });
    },
    openStore: () => openTestStore(store.database, true),
    async key(opts = {}) {
      const key = putTestKey(log, `acct${++accounts}`, opts);
      await projector.caughtUp();
      return key;
    },
    async get(url, key) {
      const res = await app.inject({ method: 'GET', url, headers: key ? { 'x-api-key': key } : {} });
      return { status: res.statusCode, body: bodyOf(res), headers: res.headers };
    },
    async close() {
      await app.close();
      await projector.stop();
      for (const s of projectorStores) await s.close();
      await store.drop();
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
      await releaseTestDatabase();
    },
  };
  return h;
}

/** Small record builders with sensible defaults, for specs that state their own data. */
export const build = {
  trader: (id: number, over: Record<string, unknown> = {}) => ({
    topic: 'traders' as const,
    value: {
      id,
      name: `Trader ${id}`,
      slug: `trader-${id}`,
      avatarUrl: null,
      source: { platform: 'TELEGRAM', sourceIdentityId: `src-${id}` },
      version: 1,
      ...over,
    },
  }),
  source: (sourceIdentityId: string, over: Record<string, unknown> = {}) => ({
    topic: 'source-identities' as const,
    value: {
      platform: 'TELEGRAM',
      sourceIdentityId,
      displayName: `Source ${sourceIdentityId}`,
      handle: sourceIdentityId,
      avatarUrl: null,
      profileUrl: `https://t.me/${sourceIdentityId}`,
      audienceCount: 100,
      version: 1,
      ...over,
    },
  }),
  asset: (id: number, over: Record<string, unknown> = {}) => ({
    topic: 'assets' as const,
    value: {
      id,
      name: `Asset ${id}`,
      symbol: `A${id}`,
      logoUrl: null,
      assetClass: 'crypto',
      category: null,
      markets: [{ quoteSymbol: 'USD', active: true, preferred: true }],
      version: 1,
      ...over,
    },
  }),
  event: (id: number, over: Record<string, unknown> = {}) => ({
    topic: 'trade-events' as const,
    value: {
      id,
      type: 'open',
      direction: 'long',
      price: 100,
      timeOfEvent: '2026-01-01T00:00:00.000Z',
      assumed: false,
      retrospective: false,
      autoGenerated: false,
      positionId: id,
      traderId: 1,
      assetId: 1,
      messageId: null,
      version: 1,
      ...over,
    },
  }),
  price: (assetId: number, at: string, price: number, over: Record<string, unknown> = {}) => ({
    topic: 'prices' as const,
    value: {
      assetId,
      at,
      price,
      version: 1,
      ...over,
    },
  }),
  message: (id: string, sourceIdentityId: string, writtenAt: string, over: Record<string, unknown> = {}) => ({
    topic: 'messages' as const,
    value: {
      id,
      platform: 'TELEGRAM',
      sourceIdentityId,
      writtenAt,
      url: null,
      text: `message ${id}`,
      attachments: [],
      isEdited: false,
      isReply: false,
      isQuote: false,
      isRepost: false,
      version: 1,
      ...over,
    },
  }),
};
