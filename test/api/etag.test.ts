// Conditional requests (issue 8, DESIGN 9): every read answers with a weak ETag derived from the
// operation, the answer's content and the caller's account (issue 24: not from requestId,
// serverTime or the moment a cache entry was filled, and never one tag for two accounts);
// If-None-Match naming the current tag answers 304 with no body, and for a read the cache holds,
// without a query. A change of the data, or of the clock that changes a clock-relative answer,
// gives a new tag.

import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReadCache } from '../../apps/api/read-cache.ts';
import { buildApi } from '../../apps/api/server.ts';
import { ApiKeyAuthenticator } from '../../apps/auth/keys.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import type { Store } from '../../storage/port.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NOW = Date.parse('2026-06-15T12:00:00.000Z');
const iso = (t: number) => new Date(t).toISOString();

let h: Harness;
let app: FastifyInstance;
let key: string;
let now = NOW;
let queries = 0;

async function get(url: string, headers: Record<string, string> = {}, k = key) {
  const res = await app.inject({ method: 'GET', url, headers: { 'x-api-key': k, ...headers } });
  return { status: res.statusCode, etag: res.headers.etag as string | undefined, body: res.body, requestId: res.headers['x-request-id'] };
}

beforeAll(async () => {
  h = await createHarness({ clock: () => now });
  await h.given([
    build.source('src-1'),
    build.trader(1),
    build.asset(1),
    build.message('m1', 'src-1', iso(NOW - DAY)),
    // Position 1 opened 20 hours ago: its 1D window comes of age in 4 hours (a clock-relative answer).
    build.event(1, { positionId: 1, messageId: 'm1', timeOfEvent: iso(NOW - 20 * HOUR) }),
    build.price(1, iso(NOW - 21 * HOUR), 100),
    build.price(1, iso(NOW + 5 * HOUR), 110),
  ]);
  key = await h.key();
  // The app under test reads through a store that counts its queries.
  const counting: Store = new Proxy(h.store, {
    get(target, prop, recv) {
      const v = Reflect.get(target, prop, recv);
      if (prop === 'query' || prop === 'exec')
        return (...args: unknown[]) => {
          queries++;
          return (v as Function).apply(target, args);
        };
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  app = buildApi({
    store: counting,
    auth: new ApiKeyAuthenticator(h.store, new MemoryCache()),
    readCache: new ReadCache(new MemoryCache(undefined, undefined, () => now), () => now),
    dataVersion: () => h.dataVersion(),
    clock: () => now,
  });
  await app.ready();
});
afterAll(async () => {
  await app?.close();
  await h?.close();
});

describe('ETag and If-None-Match', () => {
  it('a cached read: a weak ETag, the same on the next answer; If-None-Match with it -> 304, no body, no query', async () => {
    const a = await get('/v2/events');
    expect(a.status).toBe(200);
    expect(a.etag).toMatch(/^W\/"[^"]+"$/);
    now += 1000;
    const b = await get('/v2/events');
    expect(b.etag).toBe(a.etag);
    expect(b.requestId).not.toBe(a.requestId);
    const before = queries;
    const c = await get('/v2/events', { 'if-none-match': a.etag! });
    expect(c.status).toBe(304);
    expect(c.body).toBe('');
    expect(c.etag).toBe(a.etag);
    expect(queries).toBe(before);
    // A list of tags, one of them current; and a tag that is not current.
    expect((await get('/v2/events', { 'if-none-match': `W/"nope", ${a.etag}` })).status).toBe(304);
    expect((await get('/v2/events', { 'if-none-match': 'W/"nope"' })).status).toBe(200);
  });

  it('other parameters that give another answer, or another policy, give another tag', async () => {
    const a = await get('/v2/events');
    const b = await get('/v2/events?types=close');
    expect(JSON.parse(b.body).data.results).toEqual([]);
    expect(b.etag).not.toBe(a.etag);
    const restricted = await h.key({ account: { signalVisibility: { mode: 'traders', traderIds: [1] } } });
    const c = await get('/v2/events', {}, restricted);
    expect(c.etag).not.toBe(a.etag);
  });

  it('new data gives a new tag: the old one answers 200', async () => {
    const a = await get('/v2/positions');
    await h.given([build.event(2, { positionId: 2, timeOfEvent: iso(NOW - HOUR) })]);
    const b = await get('/v2/positions', { 'if-none-match': a.etag! });
    expect(b.status).toBe(200);
    expect(b.etag).not.toBe(a.etag);
  });

  it('a clock-relative answer: once a too_young window comes of age, the old tag no longer matches', async () => {
    const a = await get('/v2/positions');
    expect(JSON.parse(a.body).data.results.find((p: any) => p.id === 1).timeBasedPerformances['1D'].status).toBe('too_young');
    now = NOW + 4 * HOUR + 1;
    const b = await get('/v2/positions', { 'if-none-match': a.etag! });
    expect(b.status).toBe(200);
    expect(JSON.parse(b.body).data.results.find((p: any) => p.id === 1).timeBasedPerformances['1D'].status).not.toBe('too_young');
    expect(b.etag).not.toBe(a.etag);
    now = NOW;
  });

  it('a read the cache does not hold (analytics): a tag of its content, 304 when unchanged', async () => {
    const url = `/v2/traders/stats?traderIds=1&startTime=${iso(NOW - 10 * DAY)}&endTime=${iso(NOW - HOUR)}`;
    const a = await get(url);
    expect(a.status).toBe(200);
    now += 5000; // serverTime differs, the content does not
    const b = await get(url, { 'if-none-match': a.etag! });
    expect(b.status).toBe(304);
    expect(b.etag).toBe(a.etag);
    now = NOW;
  });

  it('a feed since-poll with nothing new: 304 for the tag of the last poll, with no query', async () => {
    const first = await get('/v2/feed?since=0');
    const since = JSON.parse(first.body).data.meta.nextCursor;
    const poll = await get(`/v2/feed?since=${since}`);
    expect(JSON.parse(poll.body).data.results).toEqual([]);
    const before = queries;
    const again = await get(`/v2/feed?since=${since}`, { 'if-none-match': poll.etag! });
    expect(again.status).toBe(304);
    expect(queries).toBe(before);
  });
});

describe('issue 24: ETags are per caller and carry no moment of another account', () => {
  it("two accounts of one policy share a cache entry but never a tag; one's tag is not current for the other", async () => {
    const a = await h.key({ account: { id: 'tenant-a' } });
    const b = await h.key({ account: { id: 'tenant-b' } });
    const ra = await get('/v2/assets', {}, a);
    const before = queries;
    const rb = await get('/v2/assets', {}, b);
    expect(queries, 'the second account is served from the shared entry').toBe(before);
    expect(JSON.parse(rb.body).data.results).toEqual(JSON.parse(ra.body).data.results);
    expect(rb.etag).not.toBe(ra.etag);
    expect((await get('/v2/assets', { 'if-none-match': ra.etag! }, b)).status).toBe(200);
    expect((await get('/v2/assets', { 'if-none-match': ra.etag! }, a)).status).toBe(304);
  });

  it('a tag does not depend on who filled the entry, nor when: the same content gives the same tag', async () => {
    const a = await h.key({ account: { id: 'tenant-c' } });
    const b = await h.key({ account: { id: 'tenant-d' } });
    now = NOW + 20 * 60_000; // every entry of earlier tests has expired (10 minutes at most)
    await get('/v2/traders', {}, b); // b fills the entry
    now += 1000;
    const first = await get('/v2/traders', {}, a);
    now += 11 * 60_000; // expired: a fills it itself, later
    const before = queries;
    const second = await get('/v2/traders', {}, a);
    expect(queries, 'read again from the store').toBeGreaterThan(before);
    expect(second.etag).toBe(first.etag);
    // The tag is opaque: no fill time rides on it (the old tags ended in `.<fill time in base 36>`).
    expect(first.etag).toMatch(/^W\/"[A-Za-z0-9_-]{22}"$/);
    now = NOW;
  });

  it('an answer the cache does not hold: the same content gives each account its own tag', async () => {
    const a = await h.key({ account: { id: 'tenant-e' } });
    const b = await h.key({ account: { id: 'tenant-f' } });
    const url = `/v2/traders/stats?traderIds=1&startTime=${iso(NOW - 10 * DAY)}&endTime=${iso(NOW - HOUR)}`;
    const ra = await get(url, {}, a);
    const rb = await get(url, {}, b);
    expect(ra.status).toBe(200);
    expect(rb.etag).not.toBe(ra.etag);
    expect((await get(url, { 'if-none-match': ra.etag! }, a)).status).toBe(304);
    expect((await get(url, { 'if-none-match': ra.etag! }, b)).status).toBe(200);
  });
});
