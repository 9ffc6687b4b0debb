// Issue 10, and issue 24 (counted per account; on by default): rate limits (DESIGN 6: 429
// RATE_LIMITED with Retry-After; RATE_LIMITS sets requests per minute per account), counted per
// account after authentication, in process or shared by API replicas through Redis.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRateLimits, type RateLimits } from '../../apps/api/rate-limit.ts';
import { buildApi } from '../../apps/api/server.ts';
import { ApiKeyAuthenticator } from '../../apps/auth/keys.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { createHarness, type Harness } from '../helpers/harness.ts';
import { redisPeer } from '../helpers/redis.ts';

const URL = '/v2/assets';
describe('RATE_LIMITS', () => {
  it('reads default=N, address=N and ACCOUNT_ID=N, requests per minute; `off` is no limit', () => {
    expect(parseRateLimits('off')).toBeUndefined();
    const r = parseRateLimits('default=600, acme=6000,k2=1,address=50')!;
    expect(r.perMinute).toBe(600);
    expect(r.perAddress).toBe(50);
    expect([...r.perAccount]).toEqual([
      ['acme', 6000],
      ['k2', 1],
    ]);
    expect(parseRateLimits('k1=5')!.perMinute).toBeUndefined();
  });

  it('issue 24: unset, limits are on: 600 requests per minute per account and 6000 per address', () => {
    for (const unset of [undefined, '', '  ']) {
      const r = parseRateLimits(unset)!;
      expect(r.perMinute).toBe(600);
      expect(r.perAddress).toBe(6000);
    }
  });

  it('refuses anything else, saying what is wrong', () => {
    for (const bad of ['default=0', 'default', 'default=-1', 'k1=1.5', 'k1=ten', '=5', 'k 1=5', 'default=1e3']) {
      expect(() => parseRateLimits(bad), bad).toThrow(/RATE_LIMITS: .* is not NAME=N/);
    }
  });
});

describe('per-account rate limits (in process)', () => {
  const perAccount = new Map<string, number>();
  const limits: RateLimits = { perMinute: 3, perAccount };
  let h: Harness;
  let unlimited: Harness;
  let a: string;
  let b: string;
  beforeAll(async () => {
    h = await createHarness({ rateLimits: limits });
    unlimited = await createHarness();
    a = await h.key({ account: { id: 'acct-a' } });
    b = await h.key({ account: { id: 'acct-b' } });
    perAccount.set('acct-b', 5);
  }, 60_000);
  afterAll(async () => {
    await h?.close();
    await unlimited?.close();
  });

  it('answers a key within its limit with the RateLimit headers, then 429 RATE_LIMITED with Retry-After in the error envelope', async () => {
    for (let i = 1; i <= 3; i++) {
      const r = await h.get(URL, a);
      expect(r.status).toBe(200);
      expect(r.headers['ratelimit-limit']).toBe('3');
      expect(r.headers['ratelimit-remaining']).toBe(String(3 - i));
      expect(Number(r.headers['ratelimit-reset'])).toBeGreaterThan(0);
    }
    const over = await h.get(URL, a);
    expect(over.status).toBe(429);
    expect(over.body).toMatchObject({ success: false, error: { code: 'RATE_LIMITED', details: { limit: 3 } } });
    const retry = Number(over.headers['retry-after']);
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(60);
    expect(over.body.error.details.retryAfterSeconds).toBe(retry);
    expect(over.body.requestId).toBe(over.headers['x-request-id']);
    expect((await h.get('/v2/events', a)).status).toBe(429); // one count per account, whatever the read
  });

  it('issue 24: counts per account: another key of the same account is refused too', async () => {
    const a2 = await h.key({ account: { id: 'acct-a' } });
    expect((await h.get(URL, a2)).status).toBe(429);
  });

  it('counts each account on its own, with its own limit', async () => {
    for (let i = 1; i <= 5; i++) expect((await h.get(URL, b)).status).toBe(200);
    expect((await h.get(URL, b)).status).toBe(429);
  });

  it('does not count, and never rate-limits, a request whose key is refused', async () => {
    for (let i = 0; i < 6; i++) {
      expect((await h.get(URL)).status).toBe(401);
      expect((await h.get(URL, 'sb_nope_nope')).status).toBe(401);
    }
  });

  it('does not limit health, the descriptions or the docs', async () => {
    for (let i = 0; i < 6; i++) for (const url of ['/healthz', '/v2/openapi.json']) expect((await h.get(url, a)).status).toBe(200);
  });

  it('without RATE_LIMITS, no key is limited and no RateLimit header is sent', async () => {
    const key = await unlimited.key();
    for (let i = 0; i < 10; i++) {
      const r = await unlimited.get(URL, key);
      expect(r.status).toBe(200);
      expect(r.headers['ratelimit-limit']).toBeUndefined();
    }
  });
});

const peer = await redisPeer();
if ('skip' in peer) console.warn(`skipping the shared rate-limit test: ${peer.skip}`);

describe.skipIf('skip' in peer)('per-account rate limits shared by two API replicas (Redis)', () => {
  let h: Harness;
  let redis: Redis;
  afterAll(async () => {
    redis?.disconnect();
    await h?.close();
    if (!('skip' in peer)) await peer.stop();
  });

  it('a key that spent its limit on one replica is refused by the other', async () => {
    redis = new Redis((peer as { url: string }).url);
    const limits: RateLimits = { perMinute: 4, perAccount: new Map(), redis };
    h = await createHarness({ rateLimits: limits });
    const other = buildApi({
      store: h.store,
      auth: new ApiKeyAuthenticator(h.store, new MemoryCache()),
      dataVersion: () => 0,
      rateLimits: limits,
    });
    await other.ready();
    try {
      const key = await h.key({ account: { id: `shared-${process.pid}-${Date.now()}` } });
      const via = async (app: typeof other) => (await app.inject({ method: 'GET', url: URL, headers: { 'x-api-key': key } })).statusCode;
      expect([await via(h.app), await via(other), await via(h.app), await via(other)]).toEqual([200, 200, 200, 200]);
      expect(await via(h.app)).toBe(429);
      expect(await via(other)).toBe(429);
      // Another deployment on the same Redis (its own key prefix) counts its accounts apart, the same account ids included.
      const elsewhere = buildApi({
        store: h.store,
        auth: new ApiKeyAuthenticator(h.store, new MemoryCache()),
        dataVersion: () => 0,
        rateLimits: { ...limits, redisPrefix: `elsewhere-${process.pid}` },
      });
      await elsewhere.ready();
      try {
        expect(await via(elsewhere)).toBe(200);
      } finally {
        await elsewhere.close();
      }
    } finally {
      await other.close();
    }
  });
});

describe('issue 24: rate limits fail open when Redis does not answer', () => {
  it('answers at once without counting, logs once, and counts the fail-open', async () => {
    const { RateLimiter } = await import('../../apps/api/rate-limit.ts');
    // A Redis that is not there: nothing listens on port 1.
    const redis = new Redis({ port: 1, host: '127.0.0.1', lazyConnect: false, maxRetriesPerRequest: 0, retryStrategy: () => 1000 });
    redis.on('error', () => {});
    const lines: string[] = [];
    let counted = 0;
    const limiter = new RateLimiter(
      { perMinute: 1, perAccount: new Map(), redis },
      (l) => lines.push(l),
      () => counted++,
    );
    try {
      for (let i = 0; i < 5; i++) {
        const t0 = performance.now();
        const d = await limiter.account('acme');
        expect(d.limited).toBe(false); // over its limit of 1, yet answered: the counts are not there to say no
        expect(performance.now() - t0).toBeLessThan(500);
      }
      expect(counted).toBe(5);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/did not answer/);
    } finally {
      redis.disconnect();
    }
  });
});
