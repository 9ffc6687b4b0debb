// A real Redis for the adapter tests (../shared/TESTING.md): REDIS_URL when set (.ci/run starts
// Debian's redis-server on a free loopback port and exports it), else a redis-server started here
// on a free port and stopped at the end. Without one: a failure under CI=true, a skip with the
// reason on a developer's machine.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';

export type RedisPeer = { url: string; stop: () => Promise<void> } | { skip: string };

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

async function ping(url: string, deadline: number): Promise<void> {
  for (;;) {
    const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    r.on('error', () => {}); // refused while the server starts: retried below
    try {
      await r.connect();
      await r.ping();
      return;
    } catch (err) {
      if (Date.now() > deadline) throw new Error(`no Redis answered at ${url}: ${(err as Error).message}`);
    } finally {
      r.disconnect();
    }
    await new Promise((res) => setTimeout(res, 50));
  }
}

export async function redisPeer(): Promise<RedisPeer> {
  if (process.env.REDIS_URL) {
    await ping(process.env.REDIS_URL, Date.now() + 5000);
    return { url: process.env.REDIS_URL, stop: async () => {} };
  }
  if (spawnSync('redis-server', ['--version']).error) {
    const why = 'redis-server is not installed and REDIS_URL is not set (.ci/run installs it: apt-get install -y redis-server)';
    if (process.env.CI === 'true') throw new Error(why);
    return { skip: why };
  }
  const port = await freePort();
  const child: ChildProcess = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const url = `redis://127.0.0.1:${port}`;
  await ping(url, Date.now() + 10_000);
  return {
    url,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** A redis-server of the test's own, which it can stop and start again on the same port (outage tests). */
export interface OwnRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
  /** SIGSTOP: connections stay open and nothing is answered (a hung server), until `resume`. */
  pause(): void;
  resume(): void;
}

/**
 * Starts Debian's redis-server on a free loopback port, also when REDIS_URL names a shared one (a
 * test that stops Redis must not stop everyone's). Without redis-server: a failure under CI=true,
 * a skip with the reason elsewhere.
 */
export async function ownRedisServer(): Promise<OwnRedis | { skip: string }> {
  if (spawnSync('redis-server', ['--version']).error) {
    const why = 'redis-server is not installed (.ci/run installs it: apt-get install -y redis-server)';
    if (process.env.CI === 'true') throw new Error(why);
    return { skip: why };
  }
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const own: OwnRedis = {
    url,
    port,
    async start() {
      if (child) return;
      child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
        stdio: 'ignore',
      });
      await ping(url, Date.now() + 10_000);
    },
    // SIGKILL: the server is gone at once, as when it crashes (and it keeps nothing: no persistence).
    stop: () =>
      new Promise<void>((resolve) => {
        const c = child;
        child = undefined;
        if (!c || c.exitCode !== null) return resolve();
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
      }),
    close: () => {
      own.resume();
      return own.stop();
    },
    pause: () => {
      child?.kill('SIGSTOP');
    },
    resume: () => {
      child?.kill('SIGCONT');
    },
  };
  await own.start();
  return own;
}
