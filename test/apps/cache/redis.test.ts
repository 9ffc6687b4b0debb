// Issue 10: the shared cache and watermarks on a real Redis (test/helpers/redis.ts), held to the
// same behaviour as the in-process adapters, and shared between replicas (two clients).
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MemoryCache, MemoryWatermarks } from '../../../apps/cache/memory.ts';
import type { Cache, Watermarks } from '../../../apps/cache/port.ts';
import { FailOpenCache, RedisCache, RedisFallback, RedisLagBoard, RedisWatermarks, redisClientOptions } from '../../../apps/cache/redis.ts';
import { redisPeer } from '../../helpers/redis.ts';

const peer = await redisPeer();
if ('skip' in peer) console.warn(`skipping the Redis adapter tests: ${peer.skip}`);
const clients: Redis[] = [];
let run = 0;
/** A client of the peer, and a namespace of this file's own per call (the peer may be shared). */
function client(): Redis {
  const r = new Redis((peer as { url: string }).url, { lazyConnect: false });
  clients.push(r);
  return r;
}
const ns = () => `test:${process.pid}:${++run}:`;
const sleep = (ms: number) => new Promise((res) => setTimeout(res, ms));

afterAll(async () => {
  for (const c of clients) c.disconnect();
  if (!('skip' in peer)) await peer.stop();
});

/** The Cache contract, for either adapter. */
function cacheContract(name: string, make: () => Cache) {
  describe(`${name}: the Cache port`, () => {
    it('returns what was set, and nothing for a key never set', async () => {
      const c = make();
      await c.set('read:v1/a?b=1', 'x'.repeat(10_000), 60e3);
      await c.set('plain', 'no segment', 60e3);
      expect(await c.get('read:v1/a?b=1')).toBe('x'.repeat(10_000));
      expect(await c.get('plain')).toBe('no segment');
      expect(await c.get('read:v1/a?b=2')).toBeUndefined();
    });

    it('expires an entry after its ttl', async () => {
      const c = make();
      await c.set('auth:k', '1', 60);
      expect(await c.get('auth:k')).toBe('1');
      await sleep(150);
      expect(await c.get('auth:k')).toBeUndefined();
    });

    it('clears a whole segment, an inner prefix, or everything, and nothing else', async () => {
      const c = make();
      const keys = ['auth:a', 'auth:b', 'read:v2/events?x', 'read:v2/messages?y', 'read2:z', 'solo', 'sol', 'a*b:[x]'];
      const fill = async () => {
        for (const k of keys) await c.set(k, `v-${k}`, 60e3);
      };
      const present = async () => (await Promise.all(keys.map(async (k) => ((await c.get(k)) === `v-${k}` ? k : null)))).filter(Boolean);
      await fill();
      await c.clear('auth:');
      expect(await present()).toEqual(keys.filter((k) => !k.startsWith('auth:')));
      await c.set('auth:a', 'v-auth:a', 60e3); // after a clear, a key is set and read again
      expect(await c.get('auth:a')).toBe('v-auth:a');
      await fill();
      await c.clear('read:v2/e');
      expect(await present()).toEqual(keys.filter((k) => !k.startsWith('read:v2/e')));
      await fill();
      await c.clear('sol');
      expect(await present()).toEqual(keys.filter((k) => !k.startsWith('sol')));
      await fill();
      await c.clear('a*b:');
      expect(await present()).toEqual(keys.filter((k) => k !== 'a*b:[x]'));
      await fill();
      await c.clear('');
      expect(await present()).toEqual([]);
    });
  });
}

function watermarkContract(name: string, make: () => Watermarks) {
  describe(`${name}: the Watermarks port`, () => {
    it('starts at 0 and never goes back', async () => {
      const w = make();
      expect(await w.get('feed')).toBe(0);
      expect(await w.advance('feed', 5)).toBe(5);
      expect(await w.advance('feed', 3)).toBe(5);
      expect(await w.get('feed')).toBe(5);
      expect(await w.advance('feed', 2 ** 53 - 1)).toBe(2 ** 53 - 1);
      expect(await w.get('other')).toBe(0);
    });
  });
}

cacheContract('in-process', () => new MemoryCache());
watermarkContract('in-process', () => new MemoryWatermarks());

describe.skipIf('skip' in peer)('Redis', () => {
  let a: Redis;
  let b: Redis;
  beforeAll(() => {
    a = client();
    b = client();
  });

  cacheContract('Redis', () => new RedisCache(a, ns()));
  watermarkContract('Redis', () => new RedisWatermarks(a, ns()));

  it('two replicas share entries and clears', async () => {
    const space = ns();
    const one = new RedisCache(a, space);
    const two = new RedisCache(b, space);
    await one.set('read:q', 'answer', 60e3);
    expect(await two.get('read:q')).toBe('answer');
    await two.set('auth:key1', 'principal', 60e3);
    await one.clear('auth:');
    expect(await two.get('auth:key1')).toBeUndefined();
    expect(await two.get('read:q')).toBe('answer');
    // Another namespace sees none of it.
    expect(await new RedisCache(b, ns()).get('read:q')).toBeUndefined();
  });

  it('a watermark advanced concurrently by two instances ends at the highest value, and a reader never sees it go back', async () => {
    const space = ns();
    const one = new RedisWatermarks(a, space);
    const two = new RedisWatermarks(b, space);
    const values = Array.from({ length: 400 }, (_, i) => ((i * 7919) % 1000) + 1);
    let writing = true;
    // A reader on its own connection, one read after the other (replies of concurrent reads may arrive out of order).
    const reader = (async () => {
      const seen: number[] = [];
      const reading = new RedisWatermarks(client(), space);
      while (writing) seen.push(await reading.get('feed'));
      return seen;
    })();
    await Promise.all(
      values.map(async (v, i) => {
        const now = await (i % 2 ? one : two).advance('feed', v);
        expect(now).toBeGreaterThanOrEqual(v);
      }),
    );
    writing = false;
    const seen = await reader;
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.filter((x, i) => i > 0 && x < seen[i - 1]!)).toEqual([]);
    expect(await one.get('feed')).toBe(Math.max(...values));
  });

  it('refuses a watermark that is not a non-negative safe integer', async () => {
    const w = new RedisWatermarks(a, ns());
    for (const v of [-1, 1.5, 2 ** 53, Number.NaN]) await expect(w.advance('feed', v)).rejects.toThrow(RangeError);
    expect(await w.get('feed')).toBe(0);
  });

  it('the lag board: per partition, end minus committed; a figure reported late never undoes a fresher one; a rebuild clears it', async () => {
    const key = ns();
    const [projectorA, projectorB] = [new RedisLagBoard(a, key), new RedisLagBoard(b, key)];
    const pos = (topic: string, partition: number, committed: number, end: number) => ({
      topic,
      partition,
      committed: BigInt(committed),
      end: BigInt(end),
    });
    expect(await projectorA.total()).toBe(0);
    // A batch's position just before its commit, and a lag read that began before it, reported after it.
    await projectorA.record([pos('prices', 0, 100, 120)]);
    await projectorB.record([pos('prices', 0, 40, 110), pos('prices', 1, -1, 5), pos('trade-events', 2, 7, 7)]);
    const byPartition = (await projectorB.partitions()).sort((x, y) => x.topic.localeCompare(y.topic) || x.partition - y.partition);
    expect(byPartition).toEqual([
      { topic: 'prices', partition: 0, lag: 20 },
      { topic: 'prices', partition: 1, lag: 5 },
      { topic: 'trade-events', partition: 2, lag: 0 },
    ]);
    expect(await projectorA.total()).toBe(25);
    await projectorA.record([pos('prices', 0, 120, 120), pos('prices', 1, 5, 5)]);
    expect(await projectorB.total()).toBe(0);
    await projectorB.clear();
    expect(await projectorA.partitions()).toEqual([]);
  });
});

describe.skipIf('skip' in peer)('issue 24: Redis away (the read replicas fail fast and open)', () => {
  it('the data version: find tells "none" from 0, and bump stays above the clock floor, so a Redis restarted empty never gives an earlier version again', async () => {
    const w = new RedisWatermarks(client(), ns());
    expect(await w.find('data-version')).toBeUndefined();
    const floor = Date.now() * 1000;
    const first = await w.bump('data-version', floor);
    expect(first).toBe(floor + 1);
    expect(await w.bump('data-version', floor - 5_000_000)).toBe(first + 1); // a floor below: one more
    expect(await w.find('data-version')).toBe(first + 1);
  });

  it('RedisFallback: while the client is not connected each operation gets its fallback at once, counted, with one line said; when Redis answers, one line says it is back', async () => {
    // A client of a port where nothing listens: refused, reconnecting.
    const away = new Redis('redis://127.0.0.1:1', redisClientOptions());
    clients.push(away);
    const said: string[] = [];
    const errors: string[] = [];
    const fallback = new RedisFallback(away, { say: (l) => said.push(l), onError: (op) => errors.push(op) });
    const cache = new FailOpenCache(new RedisCache(away, ns()), fallback);
    await sleep(100);
    const t0 = performance.now();
    for (let i = 0; i < 50; i++) {
      expect(await cache.get('auth:k')).toBeUndefined();
      await cache.set('auth:k', 'v', 1000);
    }
    expect(performance.now() - t0).toBeLessThan(100);
    expect(errors.filter((e) => e === 'cache_get')).toHaveLength(50);
    expect(said.length, said.join('\n')).toBe(1);
    expect(said[0]).toMatch(/^Redis unavailable/);
    expect(fallback.available).toBe(false);

    // A connected client: the operation runs (the next line says Redis is back once one succeeds after a failure).
    const here = client();
    await sleep(50);
    const back: string[] = [];
    const ok = new RedisFallback(here, { say: (l) => back.push(l), cooldownMs: 0 });
    expect(await ok.run('data_version', () => here.ping(), 'fallback')).toBe('PONG');
    expect(await ok.run('data_version', () => Promise.reject(new Error('boom')), 'fallback')).toBe('fallback');
    expect(await ok.run('data_version', () => here.ping(), 'fallback')).toBe('PONG');
    expect(back.map((l) => l.split(' ').slice(0, 3).join(' '))).toEqual(['Redis unavailable (data_version:', 'Redis is back']);
  });
});
