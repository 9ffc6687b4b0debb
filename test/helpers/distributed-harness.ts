// The contract suites over the distributed wiring (issue 10): SIGNALBASE_TEST_WIRING=distributed
// makes createHarness build this one instead of the embedded one, and the suites run unchanged.
//
// - Records go onto Kafka (the librdkafka mock cluster, a cluster of its own per harness, 12
//   partitions per topic; or SIGNALBASE_TEST_KAFKA_BROKERS) through KafkaAppender; `signalbase ingest --to kafka` does the same.
// - A projector consumes them in its consumer group (KafkaLog, apply turns through RedisGate) into
//   the ClickHouse server store over HTTP (the test peer, or CLICKHOUSE_URL), moving the data
//   version in Redis on each commit: `sharedProjector`, as `signalbase projector` runs it.
// - Two read replicas built as `signalbase api` builds them (`sharedReadApp`), each with its own
//   Redis connection, share state only through Redis (cache, data version, credentials' answers,
//   rate limits) and the cursor secret; they read through one store client, the harness's. `get`
//   asks them in turn, so every cursor page, cached answer and key check made on one is used on
//   the other.
//
// The records are first written to an embedded log as a staging file (the CLI's admin helpers
// fold it for account and key versions), then forwarded to Kafka. The replicas are in this
// process rather than separate ones so that a suite's injected clock reaches them; the processes
// themselves are tested in test/apps/distributed.test.ts.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Kafka, logLevel } from 'kafkajs';
import { DATA_VERSION } from '../../apps/cache/port.ts';
import { RedisChangeLog } from '../../apps/cache/redis.ts';
import { ensureTopics, redisKeys, sharedProjector, sharedReadApp } from '../../apps/distributed.ts';
import { EmbeddedLog } from '../../projectors/log/embedded.ts';
import { KafkaAppender } from '../../projectors/log/kafka.ts';
import { ensureSchema } from '../../projectors/runner.ts';
import { TOPIC_NAMES } from '../../schemas/topics/index.ts';
import { wholeTables } from '../../storage/changes.ts';
import { appendGiven, bodyOf, type Harness, type HarnessOptions, putTestKey } from './harness.ts';
import { kafkaMock } from './kafka-mock.ts';
import { redisPeer } from './redis.ts';
import { newTestDatabase, openTestStore, releaseTestDatabase } from './test-store.ts';

/**
 * Partitions per topic. librdkafka's mock cluster keeps about 5 MiB per partition and drops the
 * oldest records past it (no retention setting reaches it), so the suites' data sets (the small
 * demo set: 16.5 MB of prices over ~60 asset keys) are spread over enough partitions; `settle`
 * fails if the mock ever dropped a record.
 */
const PARTITIONS = 12;
let redis: Promise<{ url: string; stop(): Promise<void> }> | undefined;
let harnesses = 0;

/** Redis for the process's harnesses (REDIS_URL in CI); each harness keeps its keys under a prefix of its own. */
async function sharedRedis(): Promise<string> {
  redis ??= redisPeer().then((r) => {
    if ('skip' in r) throw new Error(`the distributed wiring needs Redis: ${r.skip}`);
    return r;
  });
  return (await redis).url;
}

/**
 * Kafka for one harness: SIGNALBASE_TEST_KAFKA_BROKERS (a real cluster, as the containers suite
 * starts one) with topics of the harness's own under a prefix, else a mock cluster of its own.
 */
async function kafkaFor(database: string): Promise<{ brokers: string[]; prefix: string; stop(): Promise<void> }> {
  const real = process.env.SIGNALBASE_TEST_KAFKA_BROKERS;
  if (real) {
    const brokers = real.split(',');
    const prefix = `${database}.`;
    await ensureTopics(brokers, prefix, PARTITIONS, 1, () => {});
    return { brokers, prefix, stop: async () => {} };
  }
  const mock = await kafkaMock(1, Object.fromEntries(TOPIC_NAMES.map((t) => [t, PARTITIONS])));
  if ('skip' in mock) throw new Error(`the distributed wiring needs the Kafka mock cluster: ${mock.skip}`);
  return { brokers: mock.brokers, prefix: '', stop: () => mock.stop() };
}

export async function createDistributedHarness(opts: HarnessOptions): Promise<Harness> {
  if (opts.mcp || opts.metrics)
    throw new Error(
      'the distributed harness runs the REST suites: MCP and metrics have suites of their own over these processes (test/apps/distributed.test.ts)',
    );
  harnesses++;
  const database = newTestDatabase();
  const kafka = await kafkaFor(database);
  const redisUrl = await sharedRedis();
  const keys = redisKeys(`signalbase-test:${database}`);
  const dataDir = mkdtempSync(join(tmpdir(), 'signalbase-log-'));
  const staging = new EmbeddedLog(dataDir, 20);
  const appender = new KafkaAppender({ brokers: kafka.brokers, clientId: 'test-ingest', topicPrefix: kafka.prefix });
  const say = (line: string) => {
    if (process.env.SIGNALBASE_TEST_VERBOSE) console.log(line);
  };

  const store = await openTestStore(database);
  await ensureSchema(store);
  const projectorRedis = new Redis(redisUrl);
  let version = 0;
  const startProjector = (on: typeof store) =>
    sharedProjector(on, {
      brokers: kafka.brokers,
      topicPrefix: kafka.prefix,
      clientId: 'test-projector',
      maxWaitMs: 20,
      redis: projectorRedis,
      keys,
      say,
      onCommit: () => {
        version++;
      },
    });
  // The projector writes through a store client of its own, as `signalbase projector` does.
  const projectorStores = [await openTestStore(database)];
  let projector = startProjector(projectorStores[0]!);

  // Two replicas, each with its own Redis connection (cache, credentials' answers, rate limits,
  // data version) and cursor codec on the one shared secret. They read through the harness's
  // store client, `h.store`, which the suites inspect and instrument (the SQL a read sends).
  const secret = randomBytes(32);
  const replicas = await Promise.all(
    [0, 1].map(async () => {
      const replicaRedis = new Redis(redisUrl);
      const app = sharedReadApp('api', {
        store,
        redis: replicaRedis,
        keys,
        secret,
        clock: opts.clock,
        ...(opts.rateLimits ? { rateLimits: opts.rateLimits } : {}),
        ...(opts.exportLimits ? { exportLimits: opts.exportLimits } : {}),
      });
      await app.ready();
      return { app, redis: replicaRedis };
    }),
  );
  let turn = 0;

  // Whatever the staging log holds past what was forwarded goes onto Kafka, one call at a time, in
  // large appends: the mock cluster hands a consumer one producer batch per partition and fetch,
  // so appends of 5,000 records (about 400 per partition) made the projector's catch-up on the
  // small demo set 122 trade-event batches and 86 s. The appender sends at most 2,000 records of a
  // partition at once (kafkajs groups a send's records in quadratic time: 120,000 in one send cost
  // this process about 36 s of CPU per demo set).
  const forwarded = new Map<string, number>();
  let forwarding: Promise<void> = Promise.resolve();
  const forward = () =>
    (forwarding = forwarding.then(async () => {
      for (const topic of TOPIC_NAMES) {
        let from = forwarded.get(topic) ?? 0;
        for (;;) {
          const { records, next } = staging.read(topic, from, 120000);
          if (next === from) break;
          await appender.append(
            topic,
            records.map((r) => {
              if (r.oversize)
                throw new Error(
                  'the distributed harness does not forward records over MAX_RECORD_BYTES (Kafka brokers refuse them before the projector sees them)',
                );
              return { key: r.key, raw: r.value };
            }),
          );
          from = next;
        }
        forwarded.set(topic, from);
      }
    }));
  const admin = new Kafka({ brokers: kafka.brokers, clientId: 'test-admin', logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  const settle = async () => {
    await forward();
    await projector.sub.caughtUp();
    for (const topic of TOPIC_NAMES) {
      const dropped = (await admin.fetchTopicOffsets(kafka.prefix + topic)).filter((p) => p.low !== '0');
      if (dropped.length)
        throw new Error(
          `the Kafka mock dropped the oldest records of ${topic} partitions ${dropped.map((p) => p.partition).join(', ')} (about 5 MiB per partition): raise PARTITIONS in ${import.meta.url}`,
        );
    }
  };

  let accounts = 0;
  const h: Harness = {
    store,
    log: staging,
    app: replicas[0]!.app,
    dataDir,
    async given(records) {
      appendGiven(staging, records);
      await settle();
    },
    settle,
    dataVersion: () => version,
    async compacted(tables) {
      const changes = new RedisChangeLog(projectorRedis, keys.watermarks + DATA_VERSION, keys.changes);
      await changes.publish(wholeTables(tables), 0);
    },
    async restartProjector() {
      await projector.stop();
      const fresh = await openTestStore(store.database);
      projectorStores.push(fresh);
      projector = startProjector(fresh);
    },
    openStore: () => openTestStore(store.database, true),
    async key(o = {}) {
      const key = putTestKey(staging, `acct${++accounts}`, o);
      await settle();
      return key;
    },
    async get(path, key) {
      const { app } = replicas[turn++ % replicas.length]!;
      const res = await app.inject({ method: 'GET', url: path, headers: key ? { 'x-api-key': key } : {} });
      return { status: res.statusCode, body: bodyOf(res), headers: res.headers };
    },
    listen: () => Promise.reject(new Error('the distributed harness has no MCP')),
    urls: () => {
      throw new Error('the distributed harness has no MCP');
    },
    password: () => Promise.reject(new Error('the distributed harness has no MCP')),
    token: () => Promise.reject(new Error('the distributed harness has no MCP')),
    async close() {
      for (const r of replicas) {
        await r.app.close();
        r.redis.disconnect();
      }
      await projector.stop();
      await appender.close();
      await admin.disconnect();
      await kafka.stop();
      for (const s of projectorStores) await s.close();
      // The harness's keys go with it (a shared REDIS_URL outlives the run).
      for (let cursor = '0'; ; ) {
        const [next, found] = await projectorRedis.scan(cursor, 'MATCH', `${keys.prefix}:*`, 'COUNT', 1000);
        if (found.length) await projectorRedis.del(...found);
        if ((cursor = next) === '0') break;
      }
      projectorRedis.disconnect();
      await store.drop();
      await store.close();
      rmSync(dataDir, { recursive: true, force: true });
      await releaseTestDatabase();
      if (--harnesses === 0) {
        const r = redis;
        redis = undefined;
        await (await r)?.stop();
      }
    },
  };
  return h;
}
