// Issue 24 item 4: outages survived. Two API replicas and an MCP replica built as `signalbase api`
// and `signalbase mcp` build them (in this process, on real sockets) and a projector built as
// `signalbase projector` builds it, over the Kafka peer (librdkafka's mock cluster), the ClickHouse
// HTTP peer (chdb) and a redis-server of this test's own, which it kills and starts again in the
// middle of a read load; then the same with the ClickHouse peer. Expectations: no 500 and no
// request past BOUND_MS; while Redis is away the replicas answer from the store what they answered
// before (and the projector, which cannot take an apply turn, applies nothing), and when it is back
// the read models equal the embedded projection of every record; while ClickHouse is away a read
// answers from the read cache or 503 STORE_UNAVAILABLE (AUTHENTICATION_UNAVAILABLE when its key's
// look-up found the store away) with Retry-After, /healthz says `degraded`, and everything answers
// again after.
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRateLimits } from '../../apps/api/rate-limit.ts';
import { generateApiKey } from '../../apps/auth/keys.ts';
import { READ_STORE_TIMEOUT_MS } from '../../apps/config.ts';
import { connectRedis, redisKeys, sharedProjector, sharedReadApp } from '../../apps/distributed.ts';
import { KafkaAppender } from '../../projectors/log/kafka.ts';
import { ensureSchema } from '../../projectors/runner.ts';
import { SCOPES, TOPIC_NAMES, topicByName } from '../../schemas/topics/index.ts';
import { ClickHouseStore } from '../../storage/clickhouse.ts';
import { freePort, pollUntil, sleep } from '../helpers/cli.ts';
import { type ClickHousePeer, startClickHousePeer } from '../helpers/clickhouse-peer.ts';
import { demoSlice } from '../helpers/demo-slice.ts';
import { createHarness, type Harness, type TopicRecord } from '../helpers/harness.ts';
import { type KafkaMock, kafkaMock } from '../helpers/kafka-mock.ts';
import { rawMcp, startTestIssuer } from '../helpers/mcp-client.ts';
import { type OwnRedis, ownRedisServer } from '../helpers/redis.ts';

const DAY = 86_400_000;
const NOW = Date.now() - 40 * DAY; // every window of the data has come of age: answers do not move with the clock
const ALL = { mode: 'all' };
/**
 * No request may take longer, whatever is down: its waits on Redis (250 ms a command, README,
 * Distributed mode: Outages) and on the test's ClickHouse peer, which runs one statement at a time
 * for every client (the projector's catch-up included), on a machine other suites share. A client
 * that queued its commands while Redis was away (ioredis' default) waited longer than this.
 */
const BOUND_MS = 5_000;

const start = new Date(NOW - 60 * DAY).toISOString();
const end = new Date(NOW).toISOString();
const READS = [
  '/v2/traders?limit=50',
  '/v2/assets?limit=50',
  `/v2/events?limit=50&startTime=${start}&endTime=${end}`,
  `/v2/positions?limit=50&startTime=${start}&endTime=${end}`,
  `/v2/messages?limit=50&startTime=${start}&endTime=${end}`,
  `/v2/feed?limit=20&startTime=${start}&endTime=${end}`,
  `/v2/traders/stats?traderIds=1,2,3&startTime=${start}&endTime=${end}`,
];
/** Without what differs by design between answers: their time and the cursors (signed per deployment). */
const canonical = (v: unknown): unknown =>
  JSON.parse(
    JSON.stringify(v, (k, x) =>
      k === 'serverTime' || k === 'dataComputedAt' || k === 'nextCursor'
        ? null
        : typeof x === 'number' && !Number.isInteger(x)
          ? Number(x.toPrecision(12))
          : x,
    ),
  );

// The records in three parts: the second (later trade events) reaches Kafka while Redis is away, and
// Redis is killed while the projector applies the third (the last trade events).
const records = demoSlice({ seed: 11, now: NOW, traders: 8, assets: 5, priceDays: 70 });
const events = records.filter((r) => r.topic === 'trade-events');
const second = events.slice(Math.floor(events.length * 0.6), Math.floor(events.length * 0.8));
const third = events.slice(Math.floor(events.length * 0.8));
const late = new Set([...second, ...third]);
const first = records.filter((r) => !late.has(r));
const key = generateApiKey();
const credentials: TopicRecord[] = [
  {
    topic: 'accounts',
    value: {
      id: 'acme',
      status: 'active',
      emailVerified: true,
      messageVisibility: ALL,
      signalVisibility: ALL,
      historyWindowDays: null,
      version: 1,
    },
  },
  {
    topic: 'api-keys',
    value: {
      id: key.id,
      keyHash: key.keyHash,
      accountId: 'acme',
      scopes: [...SCOPES],
      revoked: false,
      createdAt: new Date(NOW).toISOString(),
      version: 1,
    },
  },
];

let redis: OwnRedis | { skip: string };
let mock: KafkaMock | { skip: string };
let peer: ClickHousePeer;
let reference: Harness;
let refKey: string;
let appender: KafkaAppender;
const clients: Redis[] = [];
const stores: ClickHouseStore[] = [];
let projector: ReturnType<typeof sharedProjector>;
const replicas: { app: FastifyInstance; url: string }[] = [];
const said: string[] = [];
/** Set by a test: runs before the projector's next insert (once). */
let killOnInsert: (() => Promise<void>) | undefined;
/** An MCP replica as `signalbase mcp` builds it, and a client with a token of the test's issuer. */
let mcp: { app: FastifyInstance; url: string; token: string; issuer: Awaited<ReturnType<typeof startTestIssuer>> } | undefined;
const TOOL = { name: 'list_events', arguments: { limit: 50, startTime: start, endTime: end } };
/**
 * A tool call over HTTP, timed: its result (structuredContent), or the tool error's code, or the
 * HTTP refusal (503 `temporarily_unavailable` when the token's owner cannot be looked up) with its Retry-After.
 */
async function callTool(): Promise<{ ms: number; data?: unknown; error?: string; status: number; retryAfter?: string | null }> {
  const t0 = performance.now();
  const r = await rawMcp(
    mcp!.url,
    { authorization: `Bearer ${mcp!.token}` },
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: TOOL },
  );
  const ms = performance.now() - t0;
  const json = r.json ?? JSON.parse(/^data: (.*)$/m.exec(r.text)?.[1] ?? 'null');
  if (r.status !== 200) return { ms, status: r.status, error: json?.error, retryAfter: r.headers.get('retry-after') };
  const result = json.result;
  if (result.isError) return { ms, status: r.status, error: JSON.parse(result.content[0].text).error.code };
  return { ms, status: r.status, data: canonical(result.structuredContent) };
}
const skipped = () => 'skip' in redis || 'skip' in mock;

async function append(recs: readonly TopicRecord[]): Promise<void> {
  const byTopic = new Map<string, { key: string; value: unknown }[]>();
  for (const r of recs)
    (byTopic.get(r.topic) ?? byTopic.set(r.topic, []).get(r.topic)!).push({ key: topicByName.get(r.topic)!.key(r.value), value: r.value });
  for (const [topic, list] of byTopic) await appender.append(topic, list);
}

interface Sample {
  phase: string;
  path: string;
  status: number;
  ms: number;
  body: any;
  retryAfter: string | null;
}

async function get(base: string, path: string, k = key.key): Promise<Omit<Sample, 'phase'>> {
  const t0 = performance.now();
  try {
    const res = await fetch(`${base}${path}`, { headers: { 'x-api-key': k }, signal: AbortSignal.timeout(BOUND_MS * 3) });
    const body = res.headers.get('content-type')?.includes('json') ? await res.json() : await res.text();
    return { path, status: res.status, ms: performance.now() - t0, body, retryAfter: res.headers.get('retry-after') };
  } catch (err) {
    return { path, status: 0, ms: performance.now() - t0, body: String(err), retryAfter: null }; // no answer: a hang
  }
}

/** A read load on both replicas (`workers` clients, each asking the next read in turn) until `stop`; samples tagged with the phase they started in. */
function readLoad(phase: { name: string }, workers = 3) {
  const samples: Sample[] = [];
  let running = true;
  let n = 0;
  const loops = Array.from({ length: workers }, async () => {
    while (running) {
      const i = n++;
      const name = phase.name;
      samples.push({ ...(await get(replicas[i % replicas.length]!.url, READS[i % READS.length]!)), phase: name });
      await sleep(5);
    }
  });
  return {
    samples,
    async stop() {
      running = false;
      await Promise.all(loops);
      return samples;
    },
  };
}

const worst = (s: readonly Sample[]) => Math.round(Math.max(0, ...s.map((x) => x.ms)));
const slowest = (s: readonly Sample[]) =>
  [...s]
    .sort((x, y) => y.ms - x.ms)
    .slice(0, 3)
    .map((x) => `${x.phase} ${x.path.split('?')[0]} ${x.status} ${Math.round(x.ms)} ms`)
    .join('; ');
const healthz = async (base: string) => {
  const r = await get(base, '/v2/healthz');
  return { status: r.status, health: r.body?.data?.results?.[0] } as const;
};
/** What a read answers while the store is away: the read's query failed, or the look-up of its key (cached for seconds) did. */
const UNAVAILABLE = ['STORE_UNAVAILABLE', 'AUTHENTICATION_UNAVAILABLE'];
const counter = (text: string, line: RegExp) => Number(line.exec(text)?.[1] ?? 0);

// @clickhouse/client logs every failed request (with its settings) at ERROR: while the peer is
// stopped that is one block per read. Counted here and left out of the output.
const consoleError = console.error;
let clientErrorLines = 0;

beforeAll(async () => {
  console.error = (...args: unknown[]) => {
    if (typeof args[0] === 'string' && args[0].includes('[@clickhouse/client]')) {
      clientErrorLines++;
      return;
    }
    consoleError(...args);
  };
  redis = await ownRedisServer();
  mock = await kafkaMock(1, Object.fromEntries(TOPIC_NAMES.map((t) => [t, 3])));
  if (skipped()) return;
  const redisUrl = (redis as OwnRedis).url;
  const brokers = (mock as KafkaMock).brokers;
  // The reference: the embedded projection of every record (its chdb directory is the one the peer serves).
  reference = await createHarness();
  peer = await startClickHousePeer(join(tmpdir(), `signalbase-test-${process.pid}`));
  await reference.given([...first, ...second]);
  refKey = await reference.key({ account: { id: 'acme' } });

  const database = `outage_${process.pid}`;
  const keys = redisKeys(`t${process.pid}`);
  const projectorStore = await new ClickHouseStore({ url: peer.url, database }).init();
  stores.push(projectorStore);
  await ensureSchema(projectorStore);
  appender = new KafkaAppender({ brokers, clientId: 'outage-ingest' });
  await append([...first, ...credentials]);
  const projectorRedis = connectRedis(redisUrl);
  clients.push(projectorRedis);
  await pollUntil(
    async () => projectorRedis.status,
    (s) => s === 'ready',
    10_000,
    20,
  );
  // The projector's store, which can stop Redis in the middle of a batch: after the batch's reads, before its first insert.
  const tripping = new Proxy(projectorStore, {
    get(target, prop) {
      const v = Reflect.get(target, prop, target);
      if (typeof v !== 'function') return v;
      if (prop !== 'insert' && prop !== 'insertCompact') return v.bind(target);
      return async (...args: unknown[]) => {
        const trip = killOnInsert;
        killOnInsert = undefined;
        await trip?.();
        return v.apply(target, args);
      };
    },
  });
  projector = sharedProjector(tripping, {
    brokers,
    redis: projectorRedis,
    keys,
    clientId: 'outage-projector',
    maxWaitMs: 20,
    say: (l) => said.push(l),
  });
  await projector.sub.caughtUp();

  // Two replicas as `signalbase api` builds them: each its own Redis client and ClickHouse client.
  const secret = randomBytes(32);
  for (let i = 0; i < 2; i++) {
    const r = connectRedis(redisUrl);
    const store = await new ClickHouseStore({ url: peer.url, database, requestTimeoutMs: READ_STORE_TIMEOUT_MS }).init();
    clients.push(r);
    stores.push(store);
    // Rate limits counted in Redis (far above this load): they fail open too.
    const app = sharedReadApp('api', {
      store,
      redis: r,
      keys,
      secret,
      rateLimits: parseRateLimits('default=1000000,address=1000000'),
      say: (l) => said.push(`replica ${i}: ${l}`),
    });
    replicas.push({ app, url: await app.listen({ port: 0, host: '127.0.0.1' }) });
  }
  const ready = await pollUntil(
    () => Promise.all(replicas.map((r) => get(r.url, READS[0]!).then((x) => x.status))),
    (s) => s.every((x) => x === 200),
    20_000,
    100,
  );
  expect(ready.ok, JSON.stringify(ready.value)).toBe(true);

  const signing = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(signing.publicKey)), kid: 'k1', alg: 'ES256' };
  const issuer = await startTestIssuer(() => [jwk]);
  const mcpUrl = `http://127.0.0.1:${await freePort()}/mcp`;
  const r = connectRedis(redisUrl);
  const store = await new ClickHouseStore({ url: peer.url, database, requestTimeoutMs: READ_STORE_TIMEOUT_MS }).init();
  clients.push(r);
  stores.push(store);
  const app = sharedReadApp('mcp', {
    store,
    redis: r,
    keys,
    secret,
    mcp: { mcpUrl, issuer: issuer.issuer },
    say: (l) => said.push(`mcp: ${l}`),
  });
  await app.listen({ port: Number(new URL(mcpUrl).port), host: '127.0.0.1' });
  const token = await new SignJWT({ scope: 'events.read' })
    .setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'at+jwt' })
    .setIssuer(issuer.issuer)
    .setAudience(mcpUrl)
    .setSubject('acme')
    .setIssuedAt()
    .setExpirationTime('10m')
    .sign(signing.privateKey);
  mcp = { app, issuer, url: mcpUrl, token };
}, 180_000);

afterAll(async () => {
  console.error = consoleError;
  await mcp?.app.close();
  await mcp?.issuer.close();
  for (const r of replicas) await r.app.close();
  await projector?.stop();
  await appender?.close();
  for (const c of clients) c.disconnect();
  for (const s of stores) {
    await s.drop().catch(() => {});
    await s.close();
  }
  // The peer's store is the process's test directory, which the reference harness's release removes: the peer closes first.
  await peer?.close();
  await reference?.close();
  if (mock && 'stop' in mock) await mock.stop();
  if (redis && 'close' in redis) await redis.close();
}, 60_000);

describe('issue 24: outages survived', () => {
  // Filled by the Redis test, the baseline of the ClickHouse one.
  const answers = new Map<string, unknown>();

  it('Redis killed during a read load: the replicas answer from the store what they answered before, within the bound; the projector applies nothing without its apply turn, then catches up when Redis is back: nothing lost', async (ctx) => {
    if (skipped()) return ctx.skip();
    const own = redis as OwnRedis;
    const before = new Map<string, unknown>();
    for (const path of READS) {
      const r = await get(replicas[0]!.url, path);
      expect(r.status, `${path}: ${JSON.stringify(r.body).slice(0, 300)}`).toBe(200);
      before.set(path, canonical(r.body.data));
    }
    const toolBefore = await callTool();
    expect(toolBefore.error).toBeUndefined();
    const phase = { name: 'up' };
    const load = readLoad(phase);
    await sleep(500);
    await own.stop();
    phase.name = 'redis-down';
    await sleep(1_500);
    const toolDown = await callTool();
    // The second part reaches Kafka while Redis is away: the projector must not apply it without an apply turn.
    await append(second);
    await sleep(3_000);
    const down = await Promise.all(replicas.map((r) => healthz(r.url)));
    const metrics = await (await fetch(`${replicas[0]!.url}/metrics`)).text();
    await own.start();
    phase.name = 'redis-back';
    await projector.sub.caughtUp();
    await sleep(500);
    const samples = await load.stop();

    const bad = samples.filter((s) => s.status === 0 || s.status >= 500 || s.ms > BOUND_MS);
    expect(bad.map((s) => `${s.phase} ${s.path} ${s.status} ${Math.round(s.ms)} ms ${JSON.stringify(s.body).slice(0, 200)}`)).toEqual([]);
    const during = samples.filter((s) => s.phase === 'redis-down');
    expect(during.length).toBeGreaterThan(20);
    for (const s of during) {
      expect(s.status, s.path).toBe(200);
      // From the store, unchanged: not the second part, which the projector could not apply.
      expect(canonical(s.body.data), s.path).toEqual(before.get(s.path));
    }
    // Healthy while Redis is away (the store answers), with no data version to tell; counted and said (not once per request).
    for (const h of down) expect(h).toMatchObject({ status: 200, health: { status: 'ok', dataVersion: null } });
    // The MCP replica too: its token's owner looked up in the store, the tool's answer from the store.
    expect(toolDown.error).toBeUndefined();
    expect(toolDown.data).toEqual(toolBefore.data);
    expect(toolDown.ms).toBeLessThan(BOUND_MS);
    expect(counter(metrics, /^signalbase_redis_errors_total\{operation="data_version"\} (\d+)$/m)).toBeGreaterThan(0);
    const lines = said.filter((l) => l.startsWith('replica 0: Redis'));
    expect(lines.length, lines.join('\n')).toBeGreaterThanOrEqual(1);
    expect(lines.length, lines.join('\n')).toBeLessThanOrEqual(3);
    console.log(
      `Redis outage: ${during.length} reads while it was away, worst ${worst(during)} ms; ${samples.length} reads in all, worst ${worst(samples)} ms; a tool call while it was away ${Math.round(toolDown.ms)} ms; slowest: ${slowest(samples)}`,
    );

    // Back: the read models equal the embedded projection of every record, on both replicas.
    for (const [i, path] of READS.entries()) {
      const [a, b] = [await get(replicas[i % 2]!.url, path), await reference.get(path, refKey)];
      expect(a.status, path).toBe(b.status);
      expect(canonical(a.body.data), path).toEqual(canonical(b.body.data));
      answers.set(path, canonical(a.body.data));
    }
    expect(answers.get(READS[2]!)).not.toEqual(before.get(READS[2]!)); // the second part is there
    // And cached again: a data version is published anew (Redis restarted empty), and reads hit the shared cache.
    const cached = await pollUntil(
      async () => {
        const h = await healthz(replicas[1]!.url);
        await get(replicas[0]!.url, READS[0]!);
        await get(replicas[1]!.url, READS[0]!);
        const text = await (await fetch(`${replicas[1]!.url}/metrics`)).text();
        return { version: h.health?.dataVersion, hits: counter(text, /^signalbase_read_cache_requests_total\{result="hit"\} (\d+)$/m) };
      },
      (v) => typeof v.version === 'number' && v.hits > 0,
      15_000,
      250,
    );
    expect(cached.ok, JSON.stringify(cached.value)).toBe(true);
  }, 60_000);

  it('Redis hung (SIGSTOP: connected, no answers) during a read load: each Redis command gives up after its timeout, the replicas answer from the store, within the bound', async (ctx) => {
    if (skipped()) return ctx.skip();
    const own = redis as OwnRedis;
    if (!answers.size) for (const path of READS) answers.set(path, canonical((await get(replicas[0]!.url, path)).body.data));
    const phase = { name: 'up' };
    const load = readLoad(phase);
    await sleep(500);
    own.pause();
    phase.name = 'redis-hung';
    // At least 2 s, and until enough reads were answered meanwhile (a loaded machine answers fewer).
    const hungSince = Date.now();
    while (
      Date.now() - hungSince < 2_000 ||
      (load.samples.filter((x) => x.phase === 'redis-hung').length <= 10 && Date.now() - hungSince < 20_000)
    )
      await sleep(100);
    const metrics = await (await fetch(`${replicas[1]!.url}/metrics`)).text();
    own.resume();
    phase.name = 'redis-answers';
    await sleep(1_000);
    const samples = await load.stop();

    const bad = samples.filter((s) => s.status !== 200 || s.ms > BOUND_MS);
    expect(bad.map((s) => `${s.phase} ${s.path} ${s.status} ${Math.round(s.ms)} ms ${JSON.stringify(s.body).slice(0, 200)}`)).toEqual([]);
    const during = samples.filter((s) => s.phase === 'redis-hung');
    expect(during.length).toBeGreaterThan(10);
    for (const s of during) expect(canonical(s.body.data), s.path).toEqual(answers.get(s.path));
    expect(counter(metrics, /^signalbase_redis_errors_total\{operation="data_version"\} (\d+)$/m)).toBeGreaterThan(0);
    console.log(
      `Redis hung: ${during.length} reads while it did not answer, worst ${worst(during)} ms; ${samples.length} reads in all, worst ${worst(samples)} ms; slowest: ${slowest(samples)}`,
    );
  }, 60_000);

  it('the ClickHouse server stopped during a read load: a read answers from the read cache or 503 STORE_UNAVAILABLE with Retry-After, within the bound; /healthz says degraded; all answers again when it is back', async (ctx) => {
    if (skipped()) return ctx.skip();
    if (!answers.size) for (const path of READS) answers.set(path, canonical((await get(replicas[0]!.url, path)).body.data));
    const phase = { name: 'up' };
    const load = readLoad(phase);
    await sleep(500);
    await peer.stop();
    phase.name = 'store-down';
    const degraded = await pollUntil(
      () => Promise.all(replicas.map((r) => healthz(r.url))),
      (hs) => hs.every((h) => h.status === 503 && h.health?.status === 'degraded'),
      3_000,
      100,
    );
    // A read the cache cannot answer (a parameter set not asked before), and a tool call.
    const miss = await get(replicas[0]!.url, `/v2/events?limit=7&startTime=${start}&endTime=${end}`);
    const toolDown = await callTool();
    await sleep(2_500);
    await peer.restart();
    phase.name = 'store-back';
    const ok = await pollUntil(
      () => Promise.all(replicas.map((r) => healthz(r.url))),
      (hs) => hs.every((h) => h.status === 200 && h.health?.status === 'ok'),
      10_000,
      100,
    );
    await sleep(1_000);
    const samples = await load.stop();

    expect(degraded.ok, JSON.stringify(degraded.value)).toBe(true);
    expect(miss.status, JSON.stringify(miss.body)).toBe(503);
    expect(UNAVAILABLE).toContain(miss.body.error.code);
    expect(Number(miss.retryAfter)).toBeGreaterThan(0);
    expect(toolDown.ms).toBeLessThan(BOUND_MS);
    // A tool error STORE_UNAVAILABLE, or the token's owner not looked up: 503 temporarily_unavailable; both with Retry-After.
    if (toolDown.status === 200) expect(toolDown.data ?? toolDown.error).toBe('STORE_UNAVAILABLE');
    else expect(toolDown).toMatchObject({ status: 503, error: 'temporarily_unavailable', retryAfter: expect.stringMatching(/^\d+$/) });
    const bad = samples.filter((s) => s.status === 0 || s.ms > BOUND_MS || (s.status >= 500 && s.status !== 503));
    expect(bad.map((s) => `${s.phase} ${s.path} ${s.status} ${Math.round(s.ms)} ms ${JSON.stringify(s.body).slice(0, 200)}`)).toEqual([]);
    const during = samples.filter((s) => s.phase === 'store-down');
    expect(during.length).toBeGreaterThan(10);
    for (const s of during) {
      if (s.status === 200) expect(canonical(s.body.data), s.path).toEqual(answers.get(s.path));
      else {
        expect(s.status, JSON.stringify(s.body)).toBe(503);
        expect(UNAVAILABLE).toContain(s.body.error.code);
        expect(Number(s.retryAfter)).toBeGreaterThan(0);
      }
    }
    // Since issue 26 the analytics read of the load is cached too: while no commit touches what they
    // read, every read of the load may be answered from the cache (above: each 200 is the answer from
    // before). The read the cache cannot answer (`miss`) is the one that must be a 503.
    const codes = (code: string) => during.filter((s) => s.body?.error?.code === code).length;
    console.log(
      `ClickHouse outage: ${during.length} reads while it was away (503: ${codes('STORE_UNAVAILABLE')} STORE_UNAVAILABLE, ${codes('AUTHENTICATION_UNAVAILABLE')} AUTHENTICATION_UNAVAILABLE), worst ${worst(during)} ms; ${samples.length} reads in all, worst ${worst(samples)} ms; healthz degraded after ${degraded.ms} ms, ok again ${ok.ms} ms after the restart; @clickhouse/client logged ${clientErrorLines} errors so far`,
    );

    expect(ok.ok, JSON.stringify(ok.value)).toBe(true);
    expect(
      samples
        .filter((s) => s.phase === 'store-back')
        .slice(-READS.length * 2)
        .every((s) => s.status === 200),
    ).toBe(true);
    for (const [i, path] of READS.entries()) {
      const r = await get(replicas[i % 2]!.url, path);
      expect(r.status, path).toBe(200);
      expect(canonical(r.body.data), path).toEqual(answers.get(path));
    }
    expect((await callTool()).error).toBeUndefined();
  }, 60_000);

  it('Redis killed while the projector applies a batch (between its reads and its inserts): the batch cannot commit, and is applied again when Redis is back: nothing lost, nothing twice', async (ctx) => {
    if (skipped()) return ctx.skip();
    const own = redis as OwnRedis;
    let tripped!: () => void;
    const killed = new Promise<void>((resolve) => {
      tripped = resolve;
    });
    killOnInsert = async () => {
      await own.stop();
      tripped();
    };
    await append(third);
    const kill = await Promise.race([killed.then(() => true), sleep(20_000).then(() => false)]);
    expect(kill, 'the projector applied a batch of the third part').toBe(true);
    // Its store write goes on; its data version cannot move, so it fails, and is tried again every second.
    await sleep(2_500);
    await own.start();
    await projector.sub.caughtUp();
    await reference.given(third);
    for (const [i, path] of READS.entries()) {
      const [a, b] = [await get(replicas[i % 2]!.url, path), await reference.get(path, refKey)];
      expect(a.status, path).toBe(b.status);
      expect(canonical(a.body.data), path).toEqual(canonical(b.body.data));
    }
  }, 60_000);
});
