// The contract suites of the `distributed` vitest project against real Kafka, ClickHouse and Redis
// servers in containers (issue 10), through testcontainers, whenever a Docker engine answers: the
// suites run in a child vitest with the servers' addresses in the environment
// (SIGNALBASE_TEST_KAFKA_BROKERS, CLICKHOUSE_URL, REDIS_URL), which the distributed harness uses
// instead of its peers. Without a Docker engine the suite is skipped and says why. The images are
// those of deploy/compose.yaml.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { GenericContainer, getContainerRuntimeClient, type StartedTestContainer, Wait } from 'testcontainers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const docker: true | string = await getContainerRuntimeClient().then(
  () => true as const,
  (err: Error) => err.message.split('\n')[0]!,
);
if (docker !== true) console.warn(`containers suite skipped: no Docker engine answered (${docker})`);

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

describe.skipIf(docker !== true)('the distributed suites against Kafka, ClickHouse and Redis containers', () => {
  const started: StartedTestContainer[] = [];
  let env: Record<string, string>;

  beforeAll(async () => {
    // Kafka advertises the address clients must use: the host port is chosen before the start.
    const kafkaPort = await freePort();
    const [kafka, clickhouse, redis] = await Promise.all([
      new GenericContainer('apache/kafka:3.9.0')
        .withExposedPorts({ container: 9092, host: kafkaPort })
        .withEnvironment({
          KAFKA_NODE_ID: '1',
          KAFKA_PROCESS_ROLES: 'broker,controller',
          KAFKA_LISTENERS: 'PLAINTEXT://:9092,CONTROLLER://:9093',
          KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://127.0.0.1:${kafkaPort}`,
          KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
          KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
          KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
          KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
          KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
          KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
          KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
          KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'false',
        })
        .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
        .start(),
      new GenericContainer('clickhouse/clickhouse-server:24.8')
        .withExposedPorts(8123)
        .withEnvironment({ CLICKHOUSE_USER: 'signalbase', CLICKHOUSE_PASSWORD: 'signalbase', CLICKHOUSE_DEFAULT_ACCESS_MANAGEMENT: '1' })
        .withWaitStrategy(Wait.forHttp('/ping', 8123))
        .start(),
      new GenericContainer('redis:7')
        .withExposedPorts(6379)
        .withWaitStrategy(Wait.forLogMessage(/Ready to accept connections/))
        .start(),
    ]);
    started.push(kafka, clickhouse, redis);
    env = {
      SIGNALBASE_TEST_KAFKA_BROKERS: `127.0.0.1:${kafkaPort}`,
      CLICKHOUSE_URL: `http://signalbase:signalbase@${clickhouse.getHost()}:${clickhouse.getMappedPort(8123)}`,
      REDIS_URL: `redis://${redis.getHost()}:${redis.getMappedPort(6379)}`,
    };
  }, 300_000);

  afterAll(async () => {
    await Promise.all(started.map((c) => c.stop()));
  });

  it('pass, unchanged, as they do over the peers', async () => {
    const child = spawn('npx', ['vitest', 'run', '--project', 'distributed'], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => {
      out += d;
    });
    child.stderr.on('data', (d) => {
      out += d;
    });
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect(code, out.slice(-20_000)).toBe(0);
    expect(out).toMatch(/tests: \d+ passed, 0 failed/);
  }, 1_800_000);
});
