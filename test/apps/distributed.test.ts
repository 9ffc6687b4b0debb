// Issue 10: the distributed processes over the peers of this machine: `signalbase projector` on the
// Kafka-protocol peer (librdkafka's mock cluster) into the ClickHouse-protocol peer (HTTP on chdb),
// two `signalbase api` replicas and a `signalbase mcp` sharing Redis, records put on Kafka with
// `signalbase ingest --to kafka`. Expectation: what the embedded projection of the same records
// answers (itself held to the oracles), from either replica, in turn; a cursor of one replica
// works on the other; a revoked key is refused by both; tools answer what REST answers.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateApiKey } from '../../apps/auth/keys.ts';
import { SCOPES, TOPIC_NAMES } from '../../schemas/topics/index.ts';
import { freePort, pollUntil, runCli, type ServerProcess, startProcess } from '../helpers/cli.ts';
import { type ClickHousePeer, startClickHousePeer } from '../helpers/clickhouse-peer.ts';
import { demoSlice } from '../helpers/demo-slice.ts';
import { createHarness, type Harness, type TopicRecord } from '../helpers/harness.ts';
import { type KafkaMock, kafkaMock } from '../helpers/kafka-mock.ts';
import { connect, startTestIssuer } from '../helpers/mcp-client.ts';
import { type RedisPeer, redisPeer } from '../helpers/redis.ts';

const DAY = 86_400_000;
const NOW = Date.now() - 40 * DAY; // every window of the data has come of age: answers do not move with the clock
const ALL = { mode: 'all' };

const demoRecords = (): TopicRecord[] => demoSlice({ seed: 9, now: NOW, traders: 10, assets: 6, priceDays: 90 });

const start = new Date(NOW - 60 * DAY).toISOString();
const end = new Date(NOW).toISOString();
const READS = [
  '/v2/traders?limit=200',
  '/v2/assets?limit=200',
  `/v2/events?limit=200&startTime=${start}&endTime=${end}`,
  `/v2/positions?limit=200&startTime=${start}&endTime=${end}`,
  `/v2/messages?limit=200&startTime=${start}&endTime=${end}`,
  `/v2/feed?limit=100&startTime=${start}&endTime=${end}`,
  `/v2/traders/stats?traderIds=1,2,3,4,5,6,7,8,9,10&startTime=${start}&endTime=${end}`,
  `/v2/assets/stats?assetIds=1,2,3,4,5,6&startTime=${start}&endTime=${end}`,
  `/v2/traders/rankings?metric=avg_return&timeBasedPerformanceWindow=1D&minPositions=0&startTime=${start}&endTime=${end}`,
  `/v2/activity-summaries?interval=week&startTime=${start}&endTime=${end}`,
  `/v1/traders?minTrades=0&startTime=${start}&endTime=${end}`,
];
/** Without what differs by design between servers: the time of the answer and the cursors (signed per deployment). */
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

let mock: KafkaMock | { skip: string };
let redis: RedisPeer;
let peer: ClickHousePeer;
let reference: Harness;
let refKey: string;
let dir: string;
let issuerServer: Awaited<ReturnType<typeof startTestIssuer>> | undefined;
let issuer: string;
const signing = generateKeyPair('ES256');
const procs: ServerProcess[] = [];
const apis: string[] = [];
let mcpUrl: string;
const key = generateApiKey();
const revoked = generateApiKey();
/** KAFKA_TOPIC_PREFIX of this deployment: every command finds its topics under it. */
const PREFIX = 'staging.';
let kafkaEnv: Record<string, string>;

async function get(base: string, path: string, k = key.key) {
  const res = await fetch(`${base}${path}`, { headers: { 'x-api-key': k } });
  return { status: res.status, body: (await res.json()) as any };
}

beforeAll(async () => {
  // The topics under the deployment's prefix (the mock cluster takes no CreateTopics: its metadata names no controller).
  mock = await kafkaMock(1, Object.fromEntries(TOPIC_NAMES.map((t) => [PREFIX + t, 3])));
  redis = await redisPeer();
  if ('skip' in mock || 'skip' in redis) return;
  dir = mkdtempSync(join(tmpdir(), 'signalbase-distributed-'));
  const records = demoRecords();
  reference = await createHarness();
  // chdb takes one data directory per process: the peer serves the harness's (its own database in it).
  peer = await startClickHousePeer(join(tmpdir(), `signalbase-test-${process.pid}`));
  await reference.given(records);
  refKey = await reference.key({ account: { id: 'acme' } });

  // An issuer for the MCP process: its metadata and its JWKS.
  const jwk = { ...(await exportJWK((await signing).publicKey)), kid: 'k1', alg: 'ES256' };
  issuerServer = await startTestIssuer(() => [jwk]);
  issuer = issuerServer.issuer;

  const env = {
    KAFKA_BROKERS: mock.brokers.join(','),
    CLICKHOUSE_URL: peer.url,
    CLICKHOUSE_DATABASE: `dist_${process.pid}`,
    REDIS_URL: redis.url,
    CURSOR_SECRET: 'a shared secret of at least thirty-two bytes',
    LOG_LEVEL: 'warn',
    REDIS_PREFIX: `t${process.pid}`,
    KAFKA_TOPIC_PREFIX: PREFIX,
  };
  kafkaEnv = { KAFKA_BROKERS: env.KAFKA_BROKERS, KAFKA_TOPIC_PREFIX: PREFIX };
  // The records, an account and two keys, through `signalbase ingest --to kafka`.
  const file = join(dir, 'records.ndjson');
  const account = {
    id: 'acme',
    status: 'active',
    emailVerified: true,
    messageVisibility: ALL,
    signalVisibility: ALL,
    historyWindowDays: null,
    version: 1,
  };
  const keyRecord = (k: typeof key, v = 1, isRevoked = false) => ({
    id: k.id,
    keyHash: k.keyHash,
    accountId: 'acme',
    scopes: [...SCOPES],
    revoked: isRevoked,
    createdAt: new Date().toISOString(),
    version: v,
  });
  writeFileSync(
    file,
    [
      ...records,
      { topic: 'accounts', value: account },
      { topic: 'api-keys', value: keyRecord(key) },
      { topic: 'api-keys', value: keyRecord(revoked) },
    ]
      .map((r) => JSON.stringify(r))
      .join('\n'),
  );
  const ingest = await runCli(['ingest', file, '--to', 'kafka'], env, 120_000);
  expect(ingest.code, ingest.stderr).toBe(0);

  procs.push(await startProcess(['projector'], { ...env, METRICS_PORT: String(await freePort()) }, /projector: consuming/, 60_000));
  for (let i = 0; i < 2; i++) {
    const port = await freePort();
    procs.push(await startProcess(['api'], { ...env, PORT: String(port) }, /api: REST/, 60_000));
    apis.push(`http://127.0.0.1:${port}`);
  }
  const mcpPort = await freePort();
  mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`;
  procs.push(await startProcess(['mcp'], { ...env, PORT: String(mcpPort), MCP_URL: mcpUrl, AUTH_ISSUER: issuer }, /mcp: MCP/, 60_000));
  // Projected: the key works and the projector's lag is 0.
  const ready = await pollUntil(
    async () => {
      const r = await get(apis[0]!, '/v2/healthz').catch(() => null);
      const e = await get(apis[0]!, '/v2/events?limit=1').catch(() => null);
      return { lag: r?.body?.data?.results?.[0]?.projectorLag, events: e?.status };
    },
    (v) => v.lag === 0 && v.events === 200,
    150_000,
    500,
  );
  expect(ready.ok, JSON.stringify(ready.value) + procs.map((p) => p.stdout() + p.stderr()).join('\n')).toBe(true);
}, 300_000);

afterAll(async () => {
  for (const p of procs) await p.stop(5000).catch(() => undefined);
  // The peer's store is the process's test directory, which the reference harness's release removes: the peer closes first.
  await peer?.close();
  await reference?.close();
  await issuerServer?.close();
  if (mock && 'stop' in mock) await mock.stop();
  if (redis && 'stop' in redis) await redis.stop();
  if (dir) rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
}, 60_000);

const skipped = () => 'skip' in mock || 'skip' in redis;

describe('projector, two API replicas and an MCP process on Kafka, ClickHouse and Redis', () => {
  it('each replica, in turn, answers every read as the embedded projection does', async (ctx) => {
    if (skipped()) return ctx.skip();
    for (const [i, path] of READS.entries()) {
      const api = apis[i % 2]!;
      const [a, b] = [await get(api, path), await reference.get(path, refKey)];
      expect(a.status, `${api}${path}: ${JSON.stringify(a.body).slice(0, 300)}`).toBe(b.status);
      expect(canonical(a.body.data), path).toEqual(canonical(b.body.data));
      expect(b.body.data.results.length, `${path} has rows`).toBeGreaterThan(0);
    }
  });

  it('a cursor handed out by one replica pages on the other (the shared secret), to the same rows as one server', async (ctx) => {
    if (skipped()) return ctx.skip();
    const path = `/v2/events?limit=7&startTime=${start}&endTime=${end}`;
    const ids: number[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 6; page++) {
      const r = await get(apis[page % 2]!, cursor ? `${path}&cursor=${encodeURIComponent(cursor)}` : path);
      expect(r.status).toBe(200);
      ids.push(...r.body.data.results.map((e: any) => e.id));
      cursor = r.body.data.meta.nextCursor;
      if (!cursor) break;
    }
    const one = await reference.get(`/v2/events?limit=42&startTime=${start}&endTime=${end}`, refKey);
    expect(ids).toEqual(one.body.data.results.map((e: any) => e.id).slice(0, ids.length));
    expect(ids.length).toBeGreaterThan(7);
  });

  it('a key revoked on the log is refused by both replicas within 30 s', async (ctx) => {
    if (skipped()) return ctx.skip();
    for (const api of apis) expect((await get(api, '/v2/assets?limit=1', revoked.key)).status).toBe(200);
    const file = join(dir, 'revoke.ndjson');
    writeFileSync(
      file,
      JSON.stringify({
        topic: 'api-keys',
        value: {
          id: revoked.id,
          keyHash: revoked.keyHash,
          accountId: 'acme',
          scopes: [...SCOPES],
          revoked: true,
          createdAt: new Date().toISOString(),
          version: 2,
        },
      }),
    );
    const ingest = await runCli(['ingest', file, '--to', 'kafka'], kafkaEnv, 60_000);
    expect(ingest.code, ingest.stderr).toBe(0);
    const t0 = Date.now();
    for (const api of apis) {
      const r = await pollUntil(
        () => get(api, '/v2/assets?limit=1', revoked.key).then((x) => x.status),
        (s) => s === 401,
        30_000 - (Date.now() - t0),
        250,
      );
      expect(r.ok, `${api} still takes the revoked key`).toBe(true);
    }
    for (const api of apis) expect((await get(api, '/v2/assets?limit=1')).status).toBe(200); // the other key still works
  });

  it("the MCP process takes the issuer's tokens; a tool answers what REST answers", async (ctx) => {
    if (skipped()) return ctx.skip();
    const token = await new SignJWT({ scope: 'stats.read events.read' })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'at+jwt' })
      .setIssuer(issuer)
      .setAudience(mcpUrl)
      .setSubject('acme')
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign((await signing).privateKey);
    const client = await connect(mcpUrl, { token });
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('rank_traders');
    const args = { metric: 'avg_return', timeBasedPerformanceWindow: '1D', minPositions: 0, startTime: start, endTime: end };
    const tool = await client.callTool({ name: 'rank_traders', arguments: args });
    const rest = await get(apis[0]!, `/v2/traders/rankings?${new URLSearchParams(Object.entries(args).map(([k, v]) => [k, String(v)]))}`);
    expect(canonical(tool.structuredContent)).toEqual(canonical(rest.body.data));
    await client.close();
    // No REST on the MCP process.
    expect((await fetch(mcpUrl.replace('/mcp', '/v2/events'), { headers: { 'x-api-key': key.key } })).status).toBe(404);
  });

  it("every API replica reports the projector's lag, in total and per Kafka partition, without a Kafka client of its own", async (ctx) => {
    if (skipped()) return ctx.skip();
    for (const api of apis) {
      const health = await get(api, '/v2/healthz');
      expect(health.body.data.results[0].projectorLag).toBe(0);
      const text = await (await fetch(`${api}/metrics`)).text();
      expect(text).toMatch(/^signalbase_projector_lag_records 0$/m);
      // Every partition of every topic under the prefix (3 each), each at 0.
      const lines = text.split('\n').filter((l) => l.startsWith('signalbase_consumer_lag_records{'));
      const seen = new Set(lines.map((l) => /topic="([^"]+)",partition="(\d+)"/.exec(l)!.slice(1).join('/')));
      expect(seen).toEqual(new Set(TOPIC_NAMES.flatMap((t) => [0, 1, 2].map((p) => `${PREFIX}${t}/${p}`))));
      for (const l of lines) expect(l).toMatch(/ 0$/);
    }
  });

  it('topics create: every topic exists already on the cluster (under the prefix), nothing to create; SIGNALBASE_CREATE_TOPICS=false skips it', async (ctx) => {
    if (skipped()) return ctx.skip();
    const r = await runCli(['topics', 'create'], kafkaEnv, 60_000);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain(`all ${TOPIC_NAMES.length} topics exist`);
    const skip = await runCli(['topics', 'create'], { SIGNALBASE_CREATE_TOPICS: 'false' }, 60_000);
    expect(skip.code).toBe(0);
    expect(skip.stdout).toMatch(/nothing done/);
  });
});
