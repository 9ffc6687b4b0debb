import { Kafka, logLevel } from 'kafkajs';
import { Redis } from 'ioredis';
import type { FastifyInstance } from 'fastify';
import type { LogSubscription } from '../projectors/log/port.ts';
import type { Store } from '../projectors/store/port.ts';
import { RedisGate } from '../projectors/log/gate.ts';
import { KafkaLog, type PartitionPosition } from '../projectors/log/kafka.ts';
import { feedWatermark } from '../projectors/feed/projection.ts';
import { migrateReadModels, PROJECTOR_GROUP, runProjector } from '../projectors/runner.ts';
import { ClickHouseStore } from '../projectors/store/clickhouse.ts';
import { TOPIC_NAMES } from '../schemas/topics/index.ts';
import { parseRateLimits, type RateLimits } from './api/rate-limit.ts';
import { ReadCache } from './api/read-cache.ts';
import { buildApi, type ApiDeps } from './api/server.ts';
import { ApiKeyAuthenticator } from './auth/keys.ts';
import { RedisCache, RedisLagBoard, RedisWatermarks } from './cache/redis.ts';
import { TokenVerifier, type AuthUrls } from './mcp/bearer.ts';
import { metricsListen, parseOrigins, type MetricsListen } from './config.ts';
import { Metrics, serveMetrics } from './metrics.ts';
import { CursorCodec } from './reads/cursor.ts';

/**
 * The distributed mode (DESIGN 3, issue 10): `signalbase projector`, `api` and `mcp` as separate
 * processes on Kafka, a ClickHouse server and Redis, configured by the environment. Redis holds
 * what the processes share: the data version (moved by every projector commit), the read cache,
 * the API keys' and token owners' answers (cleared on every commit), rate-limit counts, the
 * projector's lag, and the projectors' apply turns.
 */

export interface DistributedEnv {
  kafkaBrokers: string[];
  /** KAFKA_TOPIC_PREFIX: prepended to every topic name on the cluster. */
  kafkaTopicPrefix: string;
  clickhouseUrl: string;
  clickhouseDatabase: string;
  redisUrl?: string;
}

/** Names of the shared marks in Redis (RedisWatermarks). */
export const DATA_VERSION = 'data-version';

/** Redis keys of one deployment, under REDIS_PREFIX (default `signalbase`), so deployments can share a Redis. */
export function redisKeys(prefix = 'signalbase') {
  return { prefix, cache: `${prefix}:cache:`, watermarks: `${prefix}:watermark:`, lag: `${prefix}:projector:positions` };
}
export type RedisKeys = ReturnType<typeof redisKeys>;

function need(env: NodeJS.ProcessEnv, name: string, what: string): string {
  const v = env[name];
  if (!v) throw new Error(`${name} is not set: ${what}`);
  return v;
}

export function distributedEnv(env: NodeJS.ProcessEnv, needs: { kafka?: boolean; redis?: boolean } = {}): DistributedEnv {
  const brokers = needs.kafka ? need(env, 'KAFKA_BROKERS', 'the Kafka bootstrap brokers, host:port,host:port') : env.KAFKA_BROKERS ?? '';
  return {
    kafkaBrokers: brokers.split(',').map((b) => b.trim()).filter(Boolean),
    kafkaTopicPrefix: env.KAFKA_TOPIC_PREFIX ?? '',
    clickhouseUrl: need(env, 'CLICKHOUSE_URL', 'the ClickHouse server, e.g. http://user:password@clickhouse:8123'),
    clickhouseDatabase: env.CLICKHOUSE_DATABASE ?? 'signalbase',
    ...(needs.redis || env.REDIS_URL ? { redisUrl: need(env, 'REDIS_URL', 'Redis, e.g. redis://redis:6379: the state API replicas and projectors share') } : {}),
  };
}

type Say = (line: string) => void;

/** Consumer groups start over from the earliest offsets (a read-model rebuild); the group must have no live member. */
async function resetGroup(brokers: string[], prefix: string, group: string, say: Say): Promise<void> {
  const admin = new Kafka({ clientId: 'signalbase-migrate', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    for (const topic of TOPIC_NAMES) await admin.resetOffsets({ groupId: group, topic: prefix + topic, earliest: true });
    say(`consumer group ${group}: offsets reset to the start of every topic`);
  } finally { await admin.disconnect(); }
}

/**
 * A projector member of the group `projector` on Kafka whose commits the other processes see: it
 * takes turns at the store with the other members (RedisGate), each commit moves the data version
 * in Redis (every API replica keys its cache on it) and clears the credentials' answers, and the
 * group's position per partition goes on the lag board for the APIs' /healthz and /metrics (they
 * have no Kafka client). Without Redis: a lone projector.
 */
export function sharedProjector(store: Store, opts: {
  brokers: string[]; topicPrefix?: string; redis?: Redis; keys: RedisKeys; say: Say; metrics?: Metrics; clientId?: string; maxWaitMs?: number;
  onCommit?: (info: { topic: string; applied: number; dead: number }) => void;
}): { log: KafkaLog; sub: LogSubscription; stop(): Promise<void> } {
  const { redis, keys } = opts;
  const cache = redis ? new RedisCache(redis, keys.cache) : undefined;
  const board = redis ? new RedisLagBoard(redis, keys.lag) : undefined;
  const log = new KafkaLog({
    brokers: opts.brokers, topicPrefix: opts.topicPrefix, clientId: opts.clientId ?? 'signalbase-projector', ...(opts.maxWaitMs ? { maxWaitMs: opts.maxWaitMs } : {}),
    ...(redis ? { gate: (g: string) => new RedisGate(redis, g, { prefix: keys.prefix }), onPositions: (p: PartitionPosition[]) => board!.record(p) } : {}),
  });
  const sub = runProjector(log, store, {
    onCommit: async (info) => {
      opts.onCommit?.(info);
      opts.metrics?.committed(info);
      if (redis) await redis.incr(`${keys.watermarks}${DATA_VERSION}`);
      await cache?.clear('auth:');
    },
    onError: (err, topic) => opts.say(`projector: batch of ${topic} failed, retrying: ${(err as Error).message}`),
  });
  // Every partition's position, also those no batch came from lately (reading the lag reports them).
  const report = board ? setInterval(() => { sub.lag().catch(() => {}); }, 2000) : undefined;
  return { log, sub, async stop() { clearInterval(report); await sub.stop(); await log.close(); } };
}

/**
 * `signalbase projector`: consumes the topics in the consumer group `projector` and writes the
 * read models. Several instances share the partitions (and take turns at the store through Redis).
 */
export async function runProjectorProcess(env: NodeJS.ProcessEnv, say: Say): Promise<{ stop(): Promise<void> }> {
  const cfg = distributedEnv(env, { kafka: true });
  const redis = cfg.redisUrl ? new Redis(cfg.redisUrl) : undefined;
  if (!redis) say('REDIS_URL is not set: run a single projector instance (the apply turns and the data version need Redis to be shared)');
  const store = await new ClickHouseStore({ url: cfg.clickhouseUrl, database: cfg.clickhouseDatabase }).init();
  const keys = redisKeys(env.REDIS_PREFIX);
  const watermarks = redis ? new RedisWatermarks(redis, keys.watermarks) : undefined;
  const board = redis ? new RedisLagBoard(redis, keys.lag) : undefined;
  // Instances starting together migrate one at a time (the first rebuilds, the others find the version current).
  const rebuild = async () => { await resetGroup(cfg.kafkaBrokers, cfg.kafkaTopicPrefix, PROJECTOR_GROUP, say); await board?.clear(); };
  const migrate = () => migrateReadModels(store, rebuild, say);
  await (redis ? new RedisGate(redis, 'migrate', { prefix: keys.prefix }).run(migrate) : migrate());
  let commits = 0;
  const metrics = new Metrics({
    projectorLag: () => projector.sub.lag(), feedWatermark: () => feedWatermark(store),
    dataVersion: async () => (watermarks ? watermarks.get(DATA_VERSION) : commits),
    ...(board ? { consumerLag: () => board.partitions() } : {}),
  });
  const projector = sharedProjector(store, { brokers: cfg.kafkaBrokers, topicPrefix: cfg.kafkaTopicPrefix, redis, keys, metrics, say, onCommit: () => { commits++; } });
  // The projector has no other listener: its metrics are on METRICS_PORT (default 9464), on METRICS_HOST, else HOST.
  const server = await serveMetrics(metrics, metricsListen({ METRICS_PORT: '9464', ...env }, env.HOST ?? '127.0.0.1')!);
  say(`projector: consuming ${TOPIC_NAMES.length} topics${cfg.kafkaTopicPrefix ? ` (prefixed ${cfg.kafkaTopicPrefix})` : ''} from ${cfg.kafkaBrokers.join(',')} in group ${PROJECTOR_GROUP} into ${cfg.clickhouseUrl.replace(/\/\/[^@/]*@/, '//')} (database ${store.database}); metrics on ${server.url}`);
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
  store: Store; redis: Redis; keys: RedisKeys;
  /** The cursor-signing secret every replica shares. */
  secret: Buffer;
  mcp?: AuthUrls;
  /** Browser origins allowed on /mcp besides MCP_URL's own (MCP_ALLOWED_ORIGINS). */
  allowedOrigins?: readonly string[];
  /** METRICS_PORT: /metrics served on a listener of its own (opened when the app is ready), not on the app's port. */
  metricsListen?: MetricsListen;
  rateLimits?: Omit<RateLimits, 'redis'>;
  clock?: () => number;
  logger?: ApiDeps['logger'];
}

/**
 * A read replica (REST, or MCP alone) over shared state: the read cache, the data version, the
 * credentials' answers and the rate-limit counts in Redis, cursors signed with the shared secret,
 * the projector's lag as it published it. It holds nothing another replica would need.
 */
export function sharedReadApp(kind: 'api' | 'mcp', o: ReadAppOptions): FastifyInstance {
  const { store, redis, keys } = o;
  const cache = new RedisCache(redis, keys.cache);
  const watermarks = new RedisWatermarks(redis, keys.watermarks);
  const auth = new ApiKeyAuthenticator(store, cache);
  // The projector clears the shared credentials' answers on each commit; this replica forgets its decoded copies when the data version moves.
  let seen = -1;
  const dataVersion = async () => {
    const v = await watermarks.get(DATA_VERSION);
    if (v !== seen) { seen = v; auth.forgetDecoded(); }
    return v;
  };
  const board = new RedisLagBoard(redis, keys.lag);
  const projectorLag = () => board.total();
  const metrics = new Metrics({ dataVersion: () => watermarks.get(DATA_VERSION), projectorLag, consumerLag: () => board.partitions() });
  const urls = o.mcp ? () => o.mcp! : undefined;
  const app = buildApi({
    store, auth, dataVersion, metrics, metricsRoute: !o.metricsListen, cursors: new CursorCodec(o.secret), clock: o.clock,
    readCache: new ReadCache(cache, o.clock), rest: kind === 'api',
    ...(o.rateLimits ? { rateLimits: { ...o.rateLimits, redis } } : {}),
    ...(urls ? { mcp: { verifier: new TokenVerifier({ store, cache, urls, clock: o.clock }), urls, allowedOrigins: o.allowedOrigins } } : {}),
    health: async () => ({ status: 'ok', projectorLag: await projectorLag() }),
    logger: o.logger ?? false,
  });
  if (o.metricsListen) {
    const listen = o.metricsListen;
    let served: Awaited<ReturnType<typeof serveMetrics>> | undefined;
    app.addHook('onReady', async () => { served = await serveMetrics(metrics, listen); });
    app.addHook('onClose', async () => { await served?.close(); });
  }
  return app;
}

/**
 * `signalbase api` (REST) and `signalbase mcp` (the MCP tool server): read the ClickHouse store;
 * share the cache, the data version, rate limits and the cursor secret with the other replicas.
 */
export async function runReadProcess(kind: 'api' | 'mcp', env: NodeJS.ProcessEnv, say: Say): Promise<{ url: string; stop(): Promise<void> }> {
  const cfg = distributedEnv(env, { redis: true });
  const redis = new Redis(cfg.redisUrl!);
  const secret = env.CURSOR_SECRET;
  if (!secret || Buffer.byteLength(secret) < 32) throw new Error('CURSOR_SECRET is not set (32 bytes or more): every replica signs and checks cursors with the same secret');
  let mcp: ReadAppOptions['mcp'];
  if (kind === 'mcp') {
    const mcpUrl = need(env, 'MCP_URL', 'the public address of /mcp (the audience of its tokens)');
    const issuer = need(env, 'AUTH_ISSUER', 'the OAuth authorization server whose tokens /mcp accepts');
    mcp = { mcpUrl, issuer };
  }
  const store = await new ClickHouseStore({ url: cfg.clickhouseUrl, database: cfg.clickhouseDatabase }).init();
  const rateLimits = parseRateLimits(env.RATE_LIMITS);
  const metrics = metricsListen(env);
  const app = sharedReadApp(kind, {
    store, redis, keys: redisKeys(env.REDIS_PREFIX), secret: Buffer.from(secret, 'utf8'), mcp,
    ...(kind === 'mcp' && env.MCP_ALLOWED_ORIGINS ? { allowedOrigins: parseOrigins(env.MCP_ALLOWED_ORIGINS) } : {}),
    ...(metrics ? { metricsListen: metrics } : {}),
    ...(rateLimits ? { rateLimits } : {}),
    logger: env.LOG_LEVEL === 'silent' ? false : { level: env.LOG_LEVEL ?? 'info' },
  });
  const address = await app.listen({ port: Number(env.PORT ?? (kind === 'api' ? 8080 : 8081)), host: env.HOST ?? '127.0.0.1' });
  say(`${kind}: ${kind === 'api' ? 'REST v1 and v2' : `MCP at ${mcp!.mcpUrl} (tokens of ${mcp!.issuer})`} on ${address}${metrics ? ` (metrics on ${metrics.host}:${metrics.port}/metrics)` : ''}, reading ${store.database} at ${cfg.clickhouseUrl.replace(/\/\/[^@/]*@/, '//')}`);
  return {
    url: address,
    async stop() { await app.close(); await store.close(); redis.disconnect(); },
  };
}

/** `signalbase topics create`: every ingest topic that is missing, with the given partitions and replication. */
export async function createTopics(env: NodeJS.ProcessEnv, partitions: number, replication: number, say: Say): Promise<void> {
  if (env.SIGNALBASE_CREATE_TOPICS === 'false') { say('SIGNALBASE_CREATE_TOPICS=false: topics are managed elsewhere; nothing done'); return; }
  const brokers = need(env, 'KAFKA_BROKERS', 'the Kafka bootstrap brokers').split(',').map((b) => b.trim()).filter(Boolean);
  await ensureTopics(brokers, env.KAFKA_TOPIC_PREFIX ?? '', partitions, replication, say);
}

/** Creates the ingest topics (under `prefix`) that are missing. */
export async function ensureTopics(brokers: string[], prefix: string, partitions: number, replication: number, say: Say): Promise<void> {
  const admin = new Kafka({ clientId: 'signalbase-topics', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = TOPIC_NAMES.map((t) => prefix + t).filter((t) => !existing.has(t));
    if (!missing.length) { say(`all ${TOPIC_NAMES.length} topics exist`); return; }
    await admin.createTopics({ waitForLeaders: true, topics: missing.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: replication })) });
    say(`created ${missing.join(', ')} (${partitions} partitions, replication ${replication})`);
  } finally { await admin.disconnect(); }
}
