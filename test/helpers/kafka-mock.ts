// A real Kafka-protocol peer for the Kafka adapter tests (../shared/TESTING.md): librdkafka's mock
// cluster, driven by the small C harness kafka-mock.c. KAFKA_MOCK_BIN names a compiled harness
// (.ci/run compiles it); else it is compiled here with gcc against Debian's librdkafka-dev. Without
// either: a failure under CI=true, a skip with the reason on a developer's machine.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export interface KafkaMock {
  /** host:port of each broker (brokers are numbered 1..N). */
  brokers: string[];
  /** Sends one harness command (`leader t 0 2`, `down 1`, ...) and resolves on its "ok". */
  command(line: string): Promise<void>;
  stop(): Promise<void>;
}

const SOURCE = join(dirname(fileURLToPath(import.meta.url)), 'kafka-mock.c');

/** The harness binary, compiled once per machine user, or the reason there is none. */
function binary(): { path: string } | { skip: string } {
  if (process.env.KAFKA_MOCK_BIN) return { path: process.env.KAFKA_MOCK_BIN };
  const path = join(tmpdir(), `signalbase-kafka-mock-${process.getuid?.() ?? 0}`);
  if (existsSync(path)) return { path };
  mkdirSync(dirname(path), { recursive: true });
  const cc = spawnSync('gcc', ['-O2', '-o', `${path}.${process.pid}`, SOURCE, '-lrdkafka'], { encoding: 'utf8' });
  if (cc.error || cc.status !== 0)
    return {
      skip: `cannot compile the Kafka mock harness (gcc and Debian's librdkafka-dev; .ci/run installs them): ${cc.error?.message ?? cc.stderr.slice(0, 300)}`,
    };
  spawnSync('mv', [`${path}.${process.pid}`, path]);
  return { path };
}

/** Starts a mock cluster of `brokers` brokers with the given topics (name: partitions). */
export async function kafkaMock(brokers: number, topics: Record<string, number>): Promise<KafkaMock | { skip: string }> {
  const bin = binary();
  if ('skip' in bin) {
    if (process.env.CI === 'true') throw new Error(bin.skip);
    return bin;
  }
  const child = spawn(bin.path, [String(brokers), ...Object.entries(topics).map(([t, n]) => `${t}:${n}`)], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines = createInterface({ input: child.stdout! });
  const waiting: { resolve: (line: string) => void; reject: (err: Error) => void }[] = [];
  let exited: Error | undefined;
  lines.on('line', (line) => waiting.shift()?.resolve(line));
  child.once('exit', (code) => {
    exited = new Error(`the Kafka mock harness exited (${code})`);
    for (const w of waiting.splice(0)) w.reject(exited);
  });
  const next = () =>
    new Promise<string>((resolve, reject) => {
      if (exited) reject(exited);
      else waiting.push({ resolve, reject });
    });
  const first = await next();
  if (!first.startsWith('bootstrap ')) throw new Error(`the Kafka mock harness said: ${first}`);
  // One command at a time: answers come in order.
  let chain: Promise<unknown> = Promise.resolve();
  return {
    brokers: first.slice('bootstrap '.length).trim().split(','),
    command(line) {
      const run = chain.then(async () => {
        const answer = next();
        child.stdin!.write(`${line}\n`);
        const a = await answer;
        if (a !== 'ok') throw new Error(`kafka mock: ${line}: ${a}`);
      });
      chain = run.catch(() => {});
      return run;
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) {
          resolve();
          return;
        }
        child.once('exit', () => resolve());
        child.stdin!.end();
        setTimeout(() => child.kill('SIGKILL'), 2000).unref();
      }),
  };
}
