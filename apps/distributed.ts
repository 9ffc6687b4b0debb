import { createServer } from 'node:http';
import { Kafka, logLevel } from 'kafkajs';
import { Redis } from 'ioredis';
import { RedisGate } from '../projectors/log/gate.ts';
import { KafkaLog } from '../projectors/log/kafka.ts';
import { feedWatermark } from '../projectors/feed/projection.ts';
import { migrateReadModels, PROJECTOR_GROUP, runProjector } from '../projectors/runner.ts';
import { ClickHouseStore } from '../projectors/store/clickhouse.ts';
import { TOPIC_NAMES } from '../schemas/topics/index.ts';
import { parseRateLimits } from './api/rate-limit.ts';
import { ReadCache } from './api/read-cache.ts';
import { buildApi } from './api/server.ts';
import { ApiKeyAuthenticator } from './auth/keys.ts';
import { RedisCache, RedisWatermarks } from './cache/redis.ts';
import { TokenVerifier } from './mcp/bearer.ts';
import { Metrics } from './metrics.ts';
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
  clickhouseUrl: string;
  clickhouseDatabase: string;
  redisUrl?: string;
}

/** Names of the shared marks in Redis (RedisWatermarks). */
export const DATA_VERSION = 'data-version';

/** Redis keys of one deployment, under REDIS_PREFIX (default `signalbase`), so deployments can share a Redis. */
function redisKeys(env: NodeJS.ProcessEnv) {
  const p = env.REDIS_PREFIX ?? 'signalbase';
  return { prefix: p, cache: `${p}:cache:`, watermarks: `${p}:watermark:`, lag: `${p}:projector:lag` };
}

function need(env: NodeJS.ProcessEnv, name: string, what: string): string {
  const v = env[name];
  if (!v) throw new Error(`${name} is not set: ${what}`);
  return v;
}

export function distributedEnv(env: NodeJS.ProcessEnv, needs: { kafka?: boolean; redis?: boolean } = {}): DistributedEnv {
  const brokers = needs.kafka ? need(env, 'KAFKA_BROKERS', 'the Kafka bootstrap brokers, host:port,host:port') : env.KAFKA_BROKERS ?? '';
  return {
    kafkaBrokers: brokers.split(',').map((b) => b.trim()).filter(Boolean),
    clickhouseUrl: need(env, 'CLICKHOUSE_URL', 'the ClickHouse server, e.g. http://user:password@clickhouse:8123'),
    clickhouseDatabase: env.CLICKHOUSE_DATABASE ?? 'signalbase',
    ...(needs.redis || env.REDIS_URL ? { redisUrl: need(env, 'REDIS_URL', 'Redis, e.g. redis://redis:6379: the state API replicas and projectors share') } : {}),
  };
}

type Say = (line: string) => void;

/** Consumer groups start over from the earliest offsets (a read-model rebuild); the group must have no live member. */
async function resetGroup(brokers: string[], group: string, say: Say): Promise<void> {
  const admin = new Kafka({ clientId: 'signalbase-migrate', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    for (const topic of TOPIC_NAMES) await admin.resetOffsets({ groupId: group, topic, earliest: true });
    say(`consumer group ${group}: offsets reset to the start of every topic`);
  } finally { await admin.disconnect(); }
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
  const keys = redisKeys(env);
  // Instances starting together migrate one at a time (the first rebuilds, the others find the version current).
  const migrate = () => migrateReadModels(store, () => resetGroup(cfg.kafkaBrokers, PROJECTOR_GROUP, say), say);
  await (redis ? new RedisGate(redis, 'migrate', { prefix: keys.prefix }).run(migrate) : migrate());
  const log = new KafkaLog({ brokers: cfg.kafkaBrokers, clientId: 'signalbase-projector', ...(redis ? { gate: (g: string) => new RedisGate(redis, g, { prefix: keys.prefix }) } : {}) });
  const watermarks = redis ? new RedisWatermarks(redis, keys.watermarks) : undefined;
  const cache = redis ? new RedisCache(redis, keys.cache) : undefined;
  let commits = 0;
  const metrics = new Metrics({
    projectorLag: () => sub.lag(), feedWatermark: () => feedWatermark(store),
    dataVersion: async () => (watermarks ? watermarks.get(DATA_VERSION) : commits),
  });
  const sub = runProjector(log, store, {
    onCommit: async (info) => {
      commits++;
      metrics.committed(info);
      // Every API replica keys its cache on this and drops the credentials' answers on it.
      if (redis) await redis.incr(`${keys.watermarks}${DATA_VERSION}`);
      await cache?.clear('auth:');
    },
    onError: (err, topic) => say(`projector: batch of ${topic} failed, retrying: ${(err as Error).message}`),
  });
  // The lag, for the API processes' /healthz (they have no Kafka client).
  const publishLag = setInterval(() => {
    sub.lag().then((lag) => redis?.set(keys.lag, String(lag), 'PX', 30_000)).catch(() => {});
  }, 2000);
  const port = Number(env.METRICS_PORT ?? 9464);
  const server = createServer(async (req, res) => {
    if (req.url !== '/metrics') { res.statusCode = 404; res.end(); return; }
    res.setHeader('content-type', metrics.registry.contentType);
    res.end(await metrics.registry.metrics());
  });
  await new Promise<void>((r) => server.listen(port, env.HOST ?? '127.0.0.1', r));
  say(`projector: consuming ${TOPIC_NAMES.length} topics from ${cfg.kafkaBrokers.join(',')} in group ${PROJECTOR_GROUP} into ${cfg.clickhouseUrl.replace(/\/\/[^@/]*@/, '//')} (database ${store.database}); metrics on :${port}/metrics`);
  return {
    async stop() {
      clearInterval(publishLag);
      server.close();
      await sub.stop();
      await log.close();
      await store.close();
      redis?.disconnect();
    },
  };
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
  const store = await new ClickHouseStore({ url: cfg.clickhouseUrl, database: cfg.clickhouseDatabase }).init();
  const keys = redisKeys(env);
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
  const metrics = new Metrics({ dataVersion: () => watermarks.get(DATA_VERSION) });
  let mcp;
  if (kind === 'mcp') {
    const mcpUrl = need(env, 'MCP_URL', 'the public address of /mcp (the audience of its tokens)');
    const issuer = need(env, 'AUTH_ISSUER', 'the OAuth authorization server whose tokens /mcp accepts');
    const urls = () => ({ mcpUrl, issuer });
    mcp = { verifier: new TokenVerifier({ store, cache, urls }), urls };
  }
  const rateLimits = parseRateLimits(env.RATE_LIMITS);
  const app = buildApi({
    store, auth, dataVersion, metrics, cursors: new CursorCodec(Buffer.from(secret, 'utf8')),
    readCache: new ReadCache(cache), rest: kind === 'api',
    ...(rateLimits ? { rateLimits: { ...rateLimits, redis } } : {}),
    ...(mcp ? { mcp } : {}),
    health: async () => ({ status: 'ok', projectorLag: Number((await redis.get(keys.lag)) ?? 0) }),
    logger: env.LOG_LEVEL === 'silent' ? false : { level: env.LOG_LEVEL ?? 'info' },
  });
  const address = await app.listen({ port: Number(env.PORT ?? (kind === 'api' ? 8080 : 8081)), host: env.HOST ?? '127.0.0.1' });
  say(`${kind}: ${kind === 'api' ? 'REST v1 and v2' : `MCP at ${mcp!.urls().mcpUrl} (tokens of ${mcp!.urls().issuer})`} on ${address}, reading ${store.database} at ${cfg.clickhouseUrl.replace(/\/\/[^@/]*@/, '//')}`);
  return {
    url: address,
    async stop() { await app.close(); await store.close(); redis.disconnect(); },
  };
}

/** `signalbase topics create`: every ingest topic that is missing, with the given partitions and replication. */
export async function createTopics(env: NodeJS.ProcessEnv, partitions: number, replication: number, say: Say): Promise<void> {
  if (env.SIGNALBASE_CREATE_TOPICS === 'false') { say('SIGNALBASE_CREATE_TOPICS=false: topics are managed elsewhere; nothing done'); return; }
  const brokers = need(env, 'KAFKA_BROKERS', 'the Kafka bootstrap brokers').split(',').map((b) => b.trim()).filter(Boolean);
  const admin = new Kafka({ clientId: 'signalbase-topics', brokers, logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    const existing = new Set(await admin.listTopics());
    const missing = TOPIC_NAMES.filter((t) => !existing.has(t));
    if (!missing.length) { say(`all ${TOPIC_NAMES.length} topics exist`); return; }
    await admin.createTopics({ waitForLeaders: true, topics: missing.map((topic) => ({ topic, numPartitions: partitions, replicationFactor: replication })) });
    say(`created ${missing.join(', ')} (${partitions} partitions, replication ${replication})`);
  } finally { await admin.disconnect(); }
}
