import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ReadCache } from '../../apps/api/read-cache.ts';
import { buildApi } from '../../apps/api/server.ts';
import { ApiKeyAuthenticator } from '../../apps/auth/keys.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { CursorCodec } from '../../apps/reads/cursor.ts';
import { build, createHarness, type Harness, type TopicRecord } from '../helpers/harness.ts';
import { specStart } from '../helpers/spec-clock.ts';

/**
 * DESIGN 9: reads that depend on the clock (default windows ending at serverTime, live marks)
 * are served from the read cache only until the moment their answer could change, and every
 * answer carries its own serverTime, appliedTimeRange and nextCursor. The server's clock is
 * injected; each case runs two apps on one store, with one clock and one cursor key: one with the
 * read cache, one without (the reference answer). Expected instants follow from the contract:
 * a default window is the last 90 days ending at serverTime, both bounds inclusive (DESIGN 6);
 * an account's history window clamps the start to serverTime minus its days; an open position's
 * mark is its asset's latest price sample at or before serverTime.
 */

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const WINDOW = 90 * DAY;
/** A whole minute near today, so that every instant below is exact. */
const T0 = specStart();
const iso = (ms: number) => new Date(ms).toISOString();

interface Pair {
  clock: { now: number };
  /** The answer of the app with the read cache, whether it ran a read query, and the same request on the app without. */
  read(url: string, key: string): Promise<{ body: any; queried: boolean; fresh: any }>;
  close(): Promise<void>;
}

/** Both apps on the harness's store; `h.given` goes through the projector, so the data version is bumped by the caller. */
async function pair(h: Harness, start: number, version: () => number): Promise<Pair> {
  const clock = { now: start };
  const deps = {
    store: h.store,
    auth: new ApiKeyAuthenticator(h.store, new MemoryCache()),
    dataVersion: version,
    clock: () => clock.now,
    cursors: CursorCodec.random(),
  };
  const cached: FastifyInstance = buildApi({
    ...deps,
    readCache: new ReadCache(new MemoryCache(undefined, undefined, deps.clock), deps.clock),
  });
  const plain: FastifyInstance = buildApi(deps);
  await Promise.all([cached.ready(), plain.ready()]);
  const get = async (app: FastifyInstance, url: string, key: string) => {
    const res = await app.inject({ method: 'GET', url, headers: { 'x-api-key': key, 'x-request-id': 'same-request' } });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };
  return {
    clock,
    async read(url, key) {
      const spy = vi.spyOn(h.store, 'query');
      const body = await get(cached, url, key);
      // Authentication queries the keys table; only the read's own queries count.
      const queried = spy.mock.calls.some(([sql]) => !String(sql).includes('api_keys'));
      spy.mockRestore();
      return { body, queried, fresh: await get(plain, url, key) };
    },
    async close() {
      await Promise.all([cached.close(), plain.close()]);
    },
  };
}

/** The default window at `now`: the last 90 days ending at serverTime. */
const defaultRange = (now: number) => ({ startTime: iso(now - WINDOW), endTime: iso(now) });

describe('default-window first pages (injected clock)', () => {
  let h: Harness;
  let key: string;
  let version = 0;
  const given = async (records: readonly TopicRecord[]) => {
    await h.given(records);
    version++;
  };
  // Three rows an hour apart below T0, one far back, and one dated five minutes after T0.
  const PAST = [1, 2, 3].map((n) => T0 - n * HOUR);
  const OLD = T0 - 89 * DAY;
  const FUTURE = T0 + 5 * MIN;
  const TIMES = [...PAST, OLD, FUTURE];

  beforeAll(async () => {
    h = await createHarness();
    await given([
      build.source('src-1'),
      build.trader(1),
      build.asset(1),
      ...TIMES.map((t, i) => build.event(i + 1, { timeOfEvent: iso(t) })),
      ...TIMES.map((t, i) => build.message(`m${i + 1}`, 'src-1', iso(t))),
    ]);
    key = await h.key();
  });
  afterAll(async () => {
    await h?.close();
  });

  /** Row times of a page, per read. */
  const READS = [
    { path: '/v2/events', time: (r: any) => r.timeOfEvent },
    { path: '/v2/messages', time: (r: any) => r.source.preview.writtenAt },
    { path: '/v2/positions', time: (r: any) => r.openAt },
  ];

  for (const read of READS) {
    it(`${read.path}: cached with a fresh serverTime, appliedTimeRange and nextCursor until a future-dated row enters, at which instant it is recomputed`, async () => {
      const p = await pair(h, T0, () => version);
      try {
        const url = `${read.path}?limit=3`;
        const first = await p.read(url, key);
        expect(first.queried).toBe(true);
        expect(first.body.data.results.map(read.time)).toEqual(PAST.map(iso));
        expect(first.body.data.meta).toMatchObject({ hasMore: true, serverTime: iso(T0), appliedTimeRange: defaultRange(T0) });

        // One ms before the future row's time: still the cached page, with this request's meta.
        p.clock.now = FUTURE - 1;
        const hit = await p.read(url, key);
        expect(hit.queried).toBe(false);
        expect(hit.body).toEqual(hit.fresh);
        expect(hit.body.data.meta.serverTime).toBe(iso(FUTURE - 1));
        expect(hit.body.data.meta.appliedTimeRange).toEqual(defaultRange(FUTURE - 1));
        expect(hit.body.data.meta.nextCursor).not.toBe(first.body.data.meta.nextCursor); // it carries this request's window
        expect(Object.keys(hit.body.data.meta)).toEqual(['hasMore', 'nextCursor', 'serverTime', 'appliedTimeRange']);

        // The cursor of the cached page walks the rest of this request's window: the row far back.
        const next = await p.read(`${url}&cursor=${hit.body.data.meta.nextCursor}`, key);
        expect(next.body).toEqual(next.fresh);
        expect(next.body.data.results.map(read.time)).toEqual([iso(OLD)]);
        expect(next.body.data.meta).toMatchObject({ hasMore: false, nextCursor: null, appliedTimeRange: defaultRange(FUTURE - 1) });

        // At the future row's time it is inside the window: the page is read again and shows it first.
        p.clock.now = FUTURE;
        const entered = await p.read(url, key);
        expect(entered.queried).toBe(true);
        expect(entered.body).toEqual(entered.fresh);
        expect(entered.body.data.results.map(read.time)).toEqual([FUTURE, ...PAST.slice(0, 2)].map(iso));
      } finally {
        await p.close();
      }
    });

    it(`${read.path}: cached until the oldest row it fetched leaves the window, at which instant it is recomputed`, async () => {
      // The page holds FUTURE and the first two past rows; the third past row decides hasMore.
      const leaves = PAST[2]! + WINDOW + 1; // the first instant whose window starts after it
      const p = await pair(h, leaves - 5 * MIN, () => version);
      try {
        const url = `${read.path}?limit=3`;
        const first = await p.read(url, key);
        expect(first.queried).toBe(true);
        expect(first.body.data.results.map(read.time)).toEqual([FUTURE, ...PAST.slice(0, 2)].map(iso));
        expect(first.body.data.meta.hasMore).toBe(true);

        p.clock.now = leaves - 1;
        const hit = await p.read(url, key);
        expect(hit.queried).toBe(false);
        expect(hit.body).toEqual(hit.fresh);
        expect(hit.body.data.meta).toMatchObject({
          hasMore: true,
          serverTime: iso(leaves - 1),
          appliedTimeRange: defaultRange(leaves - 1),
        });
        expect(hit.body.data.meta.appliedTimeRange.startTime).toBe(iso(PAST[2]!)); // still inside, at the window's first ms

        p.clock.now = leaves;
        const gone = await p.read(url, key);
        expect(gone.queried).toBe(true);
        expect(gone.body).toEqual(gone.fresh);
        expect(gone.body.data.results.map(read.time)).toEqual([FUTURE, ...PAST.slice(0, 2)].map(iso));
        expect(gone.body.data.meta).toMatchObject({ hasMore: false, nextCursor: null, appliedTimeRange: defaultRange(leaves) });
      } finally {
        await p.close();
      }
    });
  }

  it('an account history window slides the same way: first pages and cursor pages end when their oldest fetched row leaves it', async () => {
    const days = 30;
    const short = await h.key({ account: { id: 'thirty-days', historyWindowDays: days } });
    const range = (now: number) => ({ startTime: iso(now - days * DAY), endTime: iso(now) });
    // limit=1: page 1 shows FUTURE and fetches PAST[0] for hasMore; page 2 shows PAST[0] and fetches PAST[1].
    const leaves = PAST[1]! + days * DAY + 1; // the first instant whose window starts after PAST[1]
    const start = leaves - 5 * MIN;
    const p = await pair(h, start, () => version);
    try {
      const first = await p.read('/v2/events?limit=1', short);
      expect(first.body.data.results.map((r: any) => r.timeOfEvent)).toEqual([iso(FUTURE)]);
      expect(first.body.data.meta.appliedTimeRange).toEqual(range(start));
      const url = `/v2/events?limit=1&cursor=${first.body.data.meta.nextCursor}`;
      const page2 = await p.read(url, short);
      expect(page2.queried).toBe(true);
      expect(page2.body.data.results.map((r: any) => r.timeOfEvent)).toEqual([iso(PAST[0]!)]);
      expect(page2.body.data.meta.hasMore).toBe(true);

      p.clock.now = leaves - 1;
      const firstHit = await p.read('/v2/events?limit=1', short);
      const page2Hit = await p.read(url, short);
      expect([firstHit.queried, page2Hit.queried]).toEqual([false, false]);
      expect(firstHit.body).toEqual(firstHit.fresh);
      expect(firstHit.body.data.meta.appliedTimeRange).toEqual(range(leaves - 1));
      expect(page2Hit.body).toEqual(page2Hit.fresh);
      // A cursor page keeps the end its first page resolved; the start is the history window's at this request.
      expect(page2Hit.body.data.meta.appliedTimeRange).toEqual({ startTime: iso(leaves - 1 - days * DAY), endTime: iso(start) });

      // PAST[1] leaves: page 2 changes (no next page any more); page 1 fetched nothing that left.
      p.clock.now = leaves;
      const changed = await p.read(url, short);
      expect(changed.queried).toBe(true);
      expect(changed.body).toEqual(changed.fresh);
      expect(changed.body.data.results.map((r: any) => r.timeOfEvent)).toEqual([iso(PAST[0]!)]);
      expect(changed.body.data.meta).toMatchObject({ hasMore: false, nextCursor: null });
      const firstAgain = await p.read('/v2/events?limit=1', short);
      expect(firstAgain.queried).toBe(false);
      expect(firstAgain.body).toEqual(firstAgain.fresh);
    } finally {
      await p.close();
    }
  });

  it('a cached first page shared by two accounts of one policy gives each a cursor of its own', async () => {
    const [a, b] = [await h.key({ account: { id: 'twin-a' } }), await h.key({ account: { id: 'twin-b' } })];
    const p = await pair(h, T0 + HOUR, () => version);
    try {
      const fromA = await p.read('/v2/events?limit=2', a);
      const fromB = await p.read('/v2/events?limit=2', b);
      expect(fromB.queried).toBe(false);
      expect(fromB.body).toEqual(fromB.fresh);
      expect(fromB.body.data.meta.nextCursor).not.toBe(fromA.body.data.meta.nextCursor);
      const page2 = await p.read(`/v2/events?limit=2&cursor=${fromB.body.data.meta.nextCursor}`, b);
      expect(page2.body).toEqual(page2.fresh);
      expect(page2.body.data.results.map((r: any) => r.timeOfEvent)).toEqual([PAST[1]!, PAST[2]!].map(iso));
    } finally {
      await p.close();
    }
  });
});

describe('open positions (injected clock)', () => {
  let h: Harness;
  let key: string;
  let version = 0;

  beforeAll(async () => {
    h = await createHarness();
    await h.given([
      build.source('src-1'),
      build.trader(1),
      build.asset(7, { symbol: 'SEVEN' }),
      build.asset(8, { symbol: 'EIGHT' }),
      build.event(70, { positionId: 70, assetId: 7, price: 100, timeOfEvent: iso(T0 - 2 * HOUR) }),
      build.event(80, { positionId: 80, assetId: 8, price: 50, timeOfEvent: iso(T0 - HOUR) }),
      build.price(7, iso(T0 - HOUR), 110),
      build.price(7, iso(T0 + 4 * MIN), 120), // comes into force four minutes after T0
      build.price(8, iso(T0 + 2 * MIN), 60), // asset 8's first sample: position 80 has no mark before it
    ]);
    version++;
    key = await h.key();
  });
  afterAll(async () => {
    await h?.close();
  });

  it('are cached until the next price sample comes into force, whichever asset it is for, and recomputed at that instant', async () => {
    const p = await pair(h, T0, () => version);
    try {
      const marks = (body: any) => body.data.results.map((r: any) => [r.id, r.currentPrice]);
      const first = await p.read('/v2/positions/open', key);
      expect(first.queried).toBe(true);
      expect(marks(first.body)).toEqual([[70, 110]]); // 80 cannot be marked yet: omitted

      p.clock.now = T0 + 2 * MIN - 1;
      const hit = await p.read('/v2/positions/open', key);
      expect(hit.queried).toBe(false);
      expect(hit.body).toEqual(hit.fresh);
      expect(hit.body.data.meta).toEqual({ hasMore: false, nextCursor: null, serverTime: iso(T0 + 2 * MIN - 1) });

      p.clock.now = T0 + 2 * MIN;
      const eight = await p.read('/v2/positions/open', key);
      expect(eight.queried).toBe(true);
      expect(eight.body).toEqual(eight.fresh);
      expect(marks(eight.body)).toEqual([
        [80, 60],
        [70, 110],
      ]);

      p.clock.now = T0 + 4 * MIN - 1;
      expect((await p.read('/v2/positions/open', key)).queried).toBe(false);
      p.clock.now = T0 + 4 * MIN;
      const seven = await p.read('/v2/positions/open', key);
      expect(seven.queried).toBe(true);
      expect(seven.body).toEqual(seven.fresh);
      expect(marks(seven.body)).toEqual([
        [80, 60],
        [70, 120],
      ]);
    } finally {
      await p.close();
    }
  });
});
