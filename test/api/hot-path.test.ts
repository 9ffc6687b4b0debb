import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ALL, createKey, putAccount, revokeKey } from '../../apps/admin.ts';
import { ReadCache } from '../../apps/api/read-cache.ts';
import { buildApi } from '../../apps/api/server.ts';
import { ApiKeyAuthenticator } from '../../apps/auth/keys.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

/**
 * What the hot path keeps between requests, and the limits it keeps to: concurrent requests
 * that find no answer read the store once (DESIGN 9: a read is a function of its key, so one
 * read serves them all), an answer never serves a request whose clock is before the answer was
 * read, and an authenticator that is not told of commits (another process's) still refuses a
 * blocked account or a revoked key well within 30 s (DESIGN 7).
 */

const HOUR = 3_600_000;
let h: Harness;
let key: string;
const NOW = Math.floor(Date.now() / 60_000) * 60_000;
const iso = (ms: number) => new Date(ms).toISOString();

beforeAll(async () => {
  h = await createHarness();
  await h.given([
    build.source('src-1'),
    build.trader(1),
    build.asset(1),
    ...Array.from({ length: 8 }, (_, i) => build.event(i + 1, { timeOfEvent: iso(NOW - (i + 1) * HOUR) })),
  ]);
  key = await h.key();
});
afterAll(async () => {
  await h?.close();
});

/** Store queries during `f`, apart from key look-ups. */
async function readQueries(f: () => Promise<unknown>): Promise<number> {
  const spy = vi.spyOn(h.store, 'query');
  try {
    await f();
    return spy.mock.calls.filter(([sql]) => !String(sql).includes('api_keys')).length;
  } finally {
    spy.mockRestore();
  }
}

/** The API with a read cache, both on the given clock; `get` sends the test key. */
function cachedApp(clock: { now: number }) {
  const app = buildApi({
    store: h.store,
    auth: new ApiKeyAuthenticator(h.store, new MemoryCache()),
    dataVersion: () => 1,
    clock: () => clock.now,
    readCache: new ReadCache(new MemoryCache(undefined, undefined, () => clock.now), () => clock.now),
  });
  return { app, get: (url: string) => app.inject({ method: 'GET', url, headers: { 'x-api-key': key } }) };
}

describe('hot path', () => {
  it('concurrent requests for an answer not yet cached read the store once', async () => {
    const clock = { now: NOW };
    const { app, get } = cachedApp(clock);
    try {
      expect((await get('/v2/assets')).statusCode).toBe(200); // the key is known from here on
      expect((await get('/v2/events?limit=2')).statusCode).toBe(200); // and the facts of the data version (apps/reads/facts.ts)
      const one = await readQueries(() => get('/v2/events?limit=3'));
      expect(one).toBeGreaterThan(0);
      let answers: any[] = [];
      const many = await readQueries(async () => {
        answers = await Promise.all(Array.from({ length: 20 }, () => get('/v2/events?limit=4')));
      });
      expect(many).toBe(one);
      const bodies = answers.map((a) => a.json());
      expect(new Set(bodies.map((b) => b.requestId)).size).toBe(20);
      for (const b of bodies) expect(b.data.results.map((r: any) => r.id)).toEqual([1, 2, 3, 4]);
    } finally {
      await app.close();
    }
  });

  it('an answer does not serve a request whose clock is before the answer was read', async () => {
    const clock = { now: NOW };
    const { app, get } = cachedApp(clock);
    try {
      expect(await readQueries(() => get('/v2/events?limit=3'))).toBeGreaterThan(0);
      expect(await readQueries(() => get('/v2/events?limit=3'))).toBe(0);
      // A request that started a moment earlier (and reached the cache later) is read for itself:
      // the default window ending a ms earlier is another answer.
      clock.now = NOW - 1;
      let res: any;
      expect(
        await readQueries(async () => {
          res = await get('/v2/events?limit=3');
        }),
      ).toBeGreaterThan(0);
      expect(res.json().data.meta.appliedTimeRange.endTime).toBe(iso(NOW - 1));
    } finally {
      await app.close();
    }
  });
});

describe('authentication answers kept in the process', () => {
  it('concurrent requests with one key look it up once', async () => {
    const auth = new ApiKeyAuthenticator(h.store, new MemoryCache());
    const spy = vi.spyOn(h.store, 'query');
    try {
      const principals = await Promise.all(Array.from({ length: 20 }, () => auth.authenticate(key)));
      expect(spy.mock.calls.filter(([sql]) => String(sql).includes('api_keys')).length).toBe(1);
      expect(new Set(principals.map((p) => p.accountId)).size).toBe(1);
    } finally {
      spy.mockRestore();
    }
  });

  it('an authenticator not told of commits refuses a blocked account and a revoked key within 30 s', async () => {
    const account = {
      id: 'elsewhere',
      status: 'active' as const,
      emailVerified: true,
      messageVisibility: ALL,
      signalVisibility: ALL,
      historyWindowDays: null,
    };
    putAccount(h.log, account);
    const blocked = createKey(h.log, account.id, ['events.read']).key;
    putAccount(h.log, { ...account, id: 'elsewhere-2' });
    const revoked = createKey(h.log, 'elsewhere-2', ['events.read']);
    await h.settle();
    let now = NOW;
    // Another process's authenticator: its own shared cache and memo, and no invalidate() on commits.
    const auth = new ApiKeyAuthenticator(h.store, new MemoryCache(undefined, undefined, () => now), 5000, () => now);
    expect((await auth.authenticate(blocked)).accountId).toBe('elsewhere');
    expect((await auth.authenticate(revoked.key)).accountId).toBe('elsewhere-2');
    putAccount(h.log, { ...account, status: 'blocked' });
    revokeKey(h.log, revoked.record.id);
    await h.settle();
    now += 30_000;
    await expect(auth.authenticate(blocked)).rejects.toMatchObject({ code: 'FORBIDDEN' });
    await expect(auth.authenticate(revoked.key)).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });
});
