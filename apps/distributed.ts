import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';
import { READ_MODEL_GRAPH } from '../projectors/index.ts';
import { RedisGate } from '../projectors/log/gate.ts';
import { KafkaLog, type PartitionPosition } from '../projectors/log/kafka.ts';
import type { LogSubscription } from '../projectors/log/port.ts';
import { type Commit, migrateReadModels, PROJECTOR_GROUP, runProjector } from '../projectors/runner.ts';
import type { ExportLimits } from '../schemas/api/exports.ts';
import { TOPIC_NAMES } from '../schemas/topics/index.ts';
import { everything, touches } from '../storage/changes.ts';
import { ClickHouseStore } from '../storage/clickhouse.ts';
import type { Store } from '../storage/port.ts';
import { ACCESS_TABLES } from '../storage/tables/access.ts';
import { feedWatermark } from '../storage/tables/feed-groups.ts';
import type { RateLimits } from './api/rate-limit.ts';
import { ReadCache } from './api/read-cache.ts';
import { type ApiDeps, buildApi } from './api/server.ts';
import { ApiKeyAuthenticator } from './auth/keys.ts';
import { DATA_VERSION } from './cache/port.ts';
import {
  FailOpenCache,
  REDIS_COMMAND_TIMEOUT_MS,
  RedisCache,
  RedisChangeLog,
  RedisFallback,
  RedisLagBoard,
  RedisWatermarks,
  redisClientOptions,
  SharedChanges,
} from './cache/redis.ts';
import { ConfigError, type MetricsListen, readSettings } from './config.ts';
import { tuneServiceHeap } from './heap.ts';
import { type AuthUrls, TokenVerifier } from './mcp/bearer.ts';
import { Metrics, serveMetrics } from './metrics.ts';
import { CursorCodec } from './reads/cursor.ts';

/**
 * The distributed mode (DESIGN 3, issue 10): `signalbase projector`, `api` and `mcp` as separate
 * processes on Kafka, a ClickHouse server and Redis, configured by the environment. Redis holds
 * what the processes share: the data version (moved by every projector commit), the read cache,
 * the API keys' and token owners' answers (cleared on every commit), rate-limit counts, the
 * projector's lag, and the projectors' apply turns.
 */

/** Redis keys of one deployment, under REDIS_PREFIX (default `signalbase`), so deployments can share a Redis. */
export function redisKeys(prefix = 'signalbase') {
  return {
    prefix,
    cache: `${prefix}:cache:`,
    watermarks: `${prefix}:watermark:`,
    lag: `${prefix}:projector:positions`,
    changes: `${prefix}:changes`,
  };
}
export type RedisKeys = ReturnType<typeof redisKeys>;

type Say = (line: string) => void;

/**
 * A Redis client of a distributed process (apps/cache/redis.ts redisClientOptions): a command
 * fails after `commandTimeoutMs` (REDIS_COMMAND_TIMEOUT_MS, 250 ms by default)
 * instead of queueing while Redis is away, and the client reconnects by itself.
 */
export function connectRedis(url: string, commandTimeoutMs = REDIS_COMMAND_TIMEOUT_MS): Redis {
  return new Redis(url, redisClientOptions(commandTimeoutMs));
}

/** Resolves once the client is connected (its commands fail at once before that), saying every 30 s that it waits. */
async function redisReady(redis: Redis, say: Say): Promise<void> {
  for (let waited = 0; redis.status !== 'ready'; waited += 100) {
    if (waited && waited % 30_000 === 0) say(`waiting for Redis (${redis.status}) for ${waited / 1000} s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `say` for a line that may repeat many times a second (a batch retried while Redis is away): one line per kind and `everyMs`. */
function sayNowAndThen(say: Say, everyMs = 30_000): (kind: string, line: string) => void {
  const last = new Map<string, { at: number; more: number }>();
  return (kind, line) => {
    const now = Date.now();
    const l = last.get(kind);
    if (l && now - l.at < everyMs) {
      l.more++;
      return;
    }
    say(l?.more ? `${line} (and ${l.more} more like it in ${Math.round((now - l.at) / 1000)} s)` : line);
    last.set(kind, { at: now, more: 0 });
  };
}

/** Longest the health probe of a read replica waits for the store (ms). */
export const STORE_PROBE_TIMEOUT_MS = 1_000;

/** Whether the store answers a `SELECT 1` within STORE_PROBE_TIMEOUT_MS; one probe a second at most, however often /healthz is asked. */
function storeProbe(store: Store): () => Promise<boolean> {
  let last: { at: number; up: Promise<boolean> } | undefined;
  return () => {
    const now = Date.now();
    if (!last || now - last.at >= 1_000)
      last = {
        at: now,
        up: store.query('SELECT 1', {}, { timeoutMs: STORE_PROBE_TIMEOUT_MS }).then(
          () => true,
          () => false,
        ),
      };
    return last.up;
  };
}

/** Consumer groups start over from the earliest offsets (a read-model rebuild); the group must have no live member. */
async function resetGroup(brokers: string[], prefix: string, group: string, say: Say): Promise<void> {
  const admin = new Kafka({ clientId: 'signalbase-migrate', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    for (const topic of TOPIC_NAMES) await admin.resetOffsets({ groupId: group, topic: prefix + topic, earliest: true });
    say(`consumer group ${group}: offsets reset to the start of every topic`);
  } finally {
    await admin.disconnect();
  }
}

/**
 * A projector member of the group `projector` on Kafka whose commits the other processes see: it
 * takes turns at the store with the other members (RedisGate), each commit moves the data version
 * in Redis (every API replica keys its cache on it) and clears the credentials' answers, and the
 * group's position per partition goes on the lag board for the APIs' /healthz and /metrics (they
 * have no Kafka client). Without Redis: a lone projector.
 */
export function sharedProjector(
  store: Store,
  opts: {
    brokers: string[];
    topicPrefix?: string;
    redis?: Redis;
    keys: RedisKeys;
    say: Say;
    metrics?: Metrics;
    clientId?: string;
    maxWaitMs?: number;
    onCommit?: (commit: Commit) => void;
  },
): { log: KafkaLog; sub: LogSubscription; stop(): Promise<void> } {
  const { redis, keys } = opts;
  const cache = redis ? new RedisCache(redis, keys.cache) : undefined;
  const versions = redis ? new RedisWatermarks(redis, keys.watermarks) : undefined;
  const changeLog = redis ? new RedisChangeLog(redis, keys.watermarks + DATA_VERSION, keys.changes) : undefined;
  let published = false;
  const complain = sayNowAndThen(opts.say);
  // The client reconnects by itself; without a listener ioredis prints each failed attempt.
  redis?.on('error', (err: Error) =>
    complain('redis', `projector: Redis: ${err.message} (batches wait for it: none is applied without an apply turn)`),
  );
  const board = redis ? new RedisLagBoard(redis, keys.lag) : undefined;
  const log = new KafkaLog({
    brokers: opts.brokers,
    topicPrefix: opts.topicPrefix,
    clientId: opts.clientId ?? 'signalbase-projector',
    ...(opts.maxWaitMs ? { maxWaitMs: opts.maxWaitMs } : {}),
    ...(redis
      ? { gate: (g: string) => new RedisGate(redis, g, { prefix: keys.prefix }), onPositions: (p: PartitionPosition[]) => board!.record(p) }
      : {}),
  });
  const sub = runProjector(log, store, {
    onCommit: async (info) => {
      opts.onCommit?.(info);
      opts.metrics?.committed(info);
      // Within the apply turn, before the offsets commit: if Redis fails here, the batch is applied again.
      // Above the clock: the version never comes back to one that replicas cached answers under (a Redis restarted empty).
      // With what the commit changed (issue 26), in one script: a replica that sees the version can read its changes.
      // Until a first publish succeeds, everything: a process that died in a batch may have written what it never published.
      await changeLog?.publish(published ? info.changes : everything(), Date.now() * 1000);
      published = true;
      if (touches(info.changes, ACCESS_TABLES)) await cache?.clear('auth:');
    },
    // While Redis or the store is away each batch fails every second: one line per topic and cause now and then.
    onError: (err, topic) =>
      complain(`${topic}:${(err as Error).message}`, `projector: batch of ${topic} failed, retrying: ${(err as Error).message}`),
  });
  // Every partition's position, also those no batch came from lately (reading the lag reports them).
  // A Redis restarted without its data has no data version (replicas read uncached meanwhile): publish one above every earlier one.
  const republish = () =>
    versions
      ?.find(DATA_VERSION)
      .then((v) => (v === undefined ? versions.bump(DATA_VERSION, Date.now() * 1000) : v))
      .catch(() => {});
  const report = board
    ? setInterval(() => {
        sub.lag().catch(() => {});
        void republish();
      }, 2000)
    : undefined;
  void republish();
  return {
    log,
    sub,
    async stop() {
      clearInterval(report);
      await sub.stop();
      await log.close();
    },
  };
}

/**
 * `signalbase projector`: consumes the topics in the consumer group `projector` and writes the
 * read models. Several instances share the partitions (and take turns at the store through Redis).
 */
export async function runProjectorProcess(env: NodeJS.ProcessEnv, say: Say): Promise<{ stop(): Promise<void> }> {
  const cfg = readSettings('projector', env);
  const redis = cfg.redisUrl ? connectRedis(cfg.redisUrl, cfg.redisCommandTimeoutMs) : undefined;
  if (!redis) say('REDIS_URL is not set: run a single projector instance (the apply turns and the data version need Redis to be shared)');
  if (redis) await redisReady(redis, say);
  const store = await new ClickHouseStore({ url: cfg.clickhouseUrl!, database: cfg.clickhouseDatabase! }).init();
  const keys = redisKeys(cfg.redisPrefix);
  const watermarks = redis ? new RedisWatermarks(redis, keys.watermarks) : undefined;
  const board = redis ? new RedisLagBoard(redis, keys.lag) : undefined;
  // Instances starting together migrate one at a time (the first rebuilds, the others find the version current).
  const rebuild = async () => {
    await resetGroup(cfg.kafkaBrokers!, cfg.kafkaTopicPrefix!, PROJECTOR_GROUP, say);
    await board?.clear();
  };
  const migrate = () => migrateReadModels(store, rebuild, say);
  await (redis ? new RedisGate(redis, 'migrate', { prefix: keys.prefix }).run(migrate) : migrate());
  let commits = 0;
  const metrics = new Metrics({
    projectorLag: () => projector.sub.lag(),
    feedWatermark: () => feedWatermark(store),
    dataVersion: async () => (watermarks ? watermarks.get(DATA_VERSION) : commits),
    ...(board ? { consumerLag: () => board.partitions() } : {}),
  });
  const projector = sharedProjector(store, {
    brokers: cfg.kafkaBrokers!,
    topicPrefix: cfg.kafkaTopicPrefix!,
    redis,
    keys,
    metrics,
    say,
    onCommit: () => {
      commits++;
    },
  });
  // The projector has no other listener: its metrics are on METRICS_PORT (default 9464), on METRICS_HOST, else HOST.
  const server = await serveMetrics(metrics, { port: cfg.metricsPort!, host: cfg.metricsHost! });
  say(
    `projector: consuming ${TOPIC_NAMES.length} topics${cfg.kafkaTopicPrefix ? ` (prefixed ${cfg.kafkaTopicPrefix})` : ''} from ${cfg.kafkaBrokers!.join(',')} in group ${PROJECTOR_GROUP} into ${cfg.clickhouseUrl!.replace(/\/\/[^@/]*@/, '//')} (database ${store.database}); metrics on ${server.url}`,
  );
  return {
    async stop() {
      await server.close();
      await projector.stop();
      await store.close();
      redis?.disconnect();
    },
  };
}

export interface ReadAppOptions {
  store: Store;
  redis: Redis;
  keys: RedisKeys;
  /** The cursor-signing secret every replica shares. */
  secret: Buffer;
  mcp?: AuthUrls;
  /** Browser origins allowed on /mcp besides MCP_URL's own (MCP_ALLOWED_ORIGINS). */
  allowedOrigins?: readonly string[];
  /** METRICS_PORT: /metrics served on a listener of its own (opened when the app is ready), not on the app's port. */
  metricsListen?: MetricsListen;
  rateLimits?: Omit<RateLimits, 'redis' | 'redisPrefix'>;
  /** The exports' bounds (EXPORT_LIMITS when omitted); their rows per minute are counted in Redis. */
  exportLimits?: ExportLimits;
  clock?: () => number;
  logger?: ApiDeps['logger'];
  /** Where the Redis fallback's lines go (RedisFallback: when Redis fails, now and then while it stays away, when it is back). */
  say?: Say;
  /** After a Redis failure, how long Redis is not asked (ms; RedisFallback). */
  redisCooldownMs?: number;
}

/**
 * A read replica (REST, or MCP alone) over shared state: the read cache, the data version, the
 * credentials' answers and the rate-limit counts in Redis, cursors signed with the shared secret,
 * the projector's lag as it published it. It holds nothing another replica would need.
 */
export function sharedReadApp(kind: 'api' | 'mcp', o: ReadAppOptions): FastifyInstance {
  const { store, redis, keys } = o;
  // Redis away: each use of it fails fast and open (a cache miss, an unknown data version, the last lag known), counted and said now and then.
  const fallback = new RedisFallback(redis, {
    say: o.say ?? (() => {}),
    onError: (operation) => metrics.redisErrors.inc({ operation }),
    ...(o.redisCooldownMs !== undefined ? { cooldownMs: o.redisCooldownMs } : {}),
  });
  const cache = new FailOpenCache(new RedisCache(redis, keys.cache), fallback);
  const watermarks = new RedisWatermarks(redis, keys.watermarks);
  const auth = new ApiKeyAuthenticator(store, cache);
  // The projector clears the shared credentials' answers on each commit; this replica forgets its decoded copies when the data version moves.
  let seen = -1;
  // NaN when Redis cannot tell it (away, or restarted empty until a version is published again):
  // the read cache then keeps nothing and reads the store, and the credentials' answers decoded
  // here are forgotten once and then live their own few seconds, looked up in the store again.
  const dataVersion = async () => {
    const v = (await fallback.run('data_version', () => watermarks.find(DATA_VERSION), undefined)) ?? Number.NaN;
    if (!Object.is(v, seen)) {
      seen = v;
      auth.forgetDecoded();
    }
    return v;
  };
  const shared = new RedisChangeLog(redis, keys.watermarks + DATA_VERSION, keys.changes);
  const changes = new SharedChanges(
    dataVersion,
    async (v) => {
      const found = await fallback.run('changes', () => shared.after(v), undefined);
      if (!found) throw new Error('Redis did not answer');
      return found;
    },
    READ_MODEL_GRAPH,
  );
  const board = new RedisLagBoard(redis, keys.lag);
  let lag = { total: 0, partitions: [] as { topic: string; partition: number; lag: number }[] };
  const lagBoard = async () =>
    (lag = await fallback.run(
      'lag_board',
      async () => {
        const partitions = await board.partitions();
        return { total: partitions.reduce((n, p) => n + p.lag, 0), partitions };
      },
      lag,
    ));
  const projectorLag = async () => (await lagBoard()).total;
  const metrics = new Metrics({ dataVersion, projectorLag, consumerLag: async () => (await lagBoard()).partitions });
  const storeAnswers = storeProbe(store);
  const urls = o.mcp ? () => o.mcp! : undefined;
  const app = buildApi({
    store,
    auth,
    dataVersion,
    changes,
    metrics,
    metricsRoute: !o.metricsListen,
    cursors: new CursorCodec(o.secret),
    clock: o.clock,
    readCache: new ReadCache(cache, o.clock),
    rest: kind === 'api',
    ...(o.rateLimits ? { rateLimits: { ...o.rateLimits, redis, redisPrefix: keys.prefix } } : {}),
    exportRedis: { redis, prefix: keys.prefix },
    ...(o.exportLimits ? { exportLimits: o.exportLimits } : {}),
    ...(urls
      ? { mcp: { verifier: new TokenVerifier({ store, cache, urls, clock: o.clock }), urls, allowedOrigins: o.allowedOrigins } }
      : {}),
    health: async () => {
      const [up, lag] = await Promise.all([storeAnswers(), projectorLag()]);
      return { status: up ? 'ok' : 'degraded', projectorLag: lag };
    },
    logger: o.logger ?? false,
  });
  if (o.metricsListen) {
    const listen = o.metricsListen;
    let served: Awaited<ReturnType<typeof serveMetrics>> | undefined;
    app.addHook('onReady', async () => {
      served = await serveMetrics(metrics, listen);
    });
    app.addHook('onClose', async () => {
      await served?.close();
    });
  }
  return app;
}

/**
 * `signalbase api` (REST) and `signalbase mcp` (the MCP tool server): read the ClickHouse store;
 * share the cache, the data version, rate limits and the cursor secret with the other replicas.
 */
export async function runReadProcess(
  kind: 'api' | 'mcp',
  env: NodeJS.ProcessEnv,
  say: Say,
): Promise<{ url: string; stop(): Promise<void> }> {
  tuneServiceHeap();
  const cfg = readSettings(kind, env);
  const redis = connectRedis(cfg.redisUrl!, cfg.redisCommandTimeoutMs);
  const mcp: ReadAppOptions['mcp'] = kind === 'mcp' ? { mcpUrl: cfg.mcpUrl!, issuer: cfg.authIssuer! } : undefined;
  // A read stops at its own deadline first (apps/reads/cost.ts); this bounds every other request to the server, e.g. a credential look-up.
  const store = await new ClickHouseStore({
    url: cfg.clickhouseUrl!,
    database: cfg.clickhouseDatabase!,
    requestTimeoutMs: cfg.clickhouseRequestTimeoutMs!,
  }).init();
  const metrics = cfg.metricsPort !== undefined ? { port: cfg.metricsPort, host: cfg.metricsHost! } : undefined;
  const app = sharedReadApp(kind, {
    store,
    redis,
    keys: redisKeys(cfg.redisPrefix),
    secret: Buffer.from(cfg.cursorSecret!, 'utf8'),
    mcp,
    say: (line) => say(`${kind}: ${line}`),
    ...(cfg.mcpAllowedOrigins ? { allowedOrigins: cfg.mcpAllowedOrigins } : {}),
    ...(metrics ? { metricsListen: metrics } : {}),
    ...(cfg.rateLimits ? { rateLimits: cfg.rateLimits } : {}),
    logger: cfg.logLevel === 'silent' ? false : { level: cfg.logLevel! },
  });
  const address = await app.listen({ port: cfg.port!, host: cfg.host! });
  say(
    `${kind}: ${kind === 'api' ? 'REST v1 and v2' : `MCP at ${mcp!.mcpUrl} (tokens of ${mcp!.issuer})`} on ${address}${metrics ? ` (metrics on ${metrics.host}:${metrics.port}/metrics)` : ''}, reading ${store.database} at ${cfg.clickhouseUrl!.replace(/\/\/[^@/]*@/, '//')}`,
  );
  return {
    url: address,
    async stop() {
      await app.close();
      await store.close();
      redis.disconnect();
    },
  };
}

/** `signalbase topics create`: every ingest topic that is missing, with the given partitions and replication. */
export async function createTopics(env: NodeJS.ProcessEnv, partitions: number, replication: number, say: Say): Promise<void> {
  const cfg = readSettings('topics', env);
  if (!cfg.createTopics) {
    say('SIGNALBASE_CREATE_TOPICS=false: topics are managed elsewhere; nothing done');
    return;
  }
  if (!cfg.kafkaBrokers) throw new ConfigError(['KAFKA_BROKERS is not set: the Kafka bootstrap brokers, host:port,host:port']);
  await ensureTopics(cfg.kafkaBrokers, cfg.kafkaTopicPrefix!, partitions, replication, say);
}

/** Creates the ingest topics (under `prefix`) that are missing. */
export async function ensureTopics(brokers: string[], prefix: string, partitions: number, replication: number, say: Say): Promise<void> {
  const admin = new Kafka({ clientId: 'signalbase-topics', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = TOPIC_NAMES.map((t) => prefix + t).filter((t) => !existing.has(t));
    if (!missing.length) {
      say(`all ${TOPIC_NAMES.length} topics exist`);
      return;
    }
    await admin.createTopics({
      waitForLeaders: true,
      topics: missing.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: replication })),
    });
    say(`created ${missing.join(', ')} (${partitions} partitions, replication ${replication})`);
  } finally {
    await admin.disconnect();
  }
}
