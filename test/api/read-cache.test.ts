import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

/** DESIGN 9: answers are reused only while they cannot differ from a fresh read. */
let h: Harness;
let key: string;
const HOUR = 3600e3;
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
const start = ago(48 * HOUR);

beforeAll(async () => {
  h = await createHarness();
  await h.given([
    build.source('src-1'),
    build.trader(1),
    build.source('src-2'),
    build.trader(2, { source: { platform: 'TELEGRAM', sourceIdentityId: 'src-2' } }),
    build.asset(1),
    ...Array.from({ length: 10 }, (_, i) => build.event(i + 1, { traderId: (i % 2) + 1, timeOfEvent: ago((i + 1) * HOUR) })),
  ]);
  key = await h.key();
});
afterAll(async () => {
  await h?.close();
});

const queries = () => vi.spyOn(h.store, 'query');

describe('read cache', () => {
  it('serves a pinned read again without a query, with a fresh requestId and serverTime', async () => {
    const url = `/v2/events?startTime=${start}&limit=4`;
    const first = await h.get(url, key);
    const spy = queries();
    await new Promise((r) => setTimeout(r, 5));
    const second = await h.get(url, key);
    expect(spy).not.toHaveBeenCalled();
    spy.mockRestore();
    expect(second.body.data.results).toEqual(first.body.data.results);
    expect(second.body.data.meta).toEqual({ ...first.body.data.meta, serverTime: second.body.data.meta.serverTime });
    expect(second.body.data.meta.serverTime > first.body.data.meta.serverTime).toBe(true);
    expect(second.body.requestId).not.toBe(first.body.requestId);
    expect(second.headers['x-request-id']).toBe(second.body.requestId);
    expect(Object.keys(second.body.data.meta)).toEqual(['hasMore', 'nextCursor', 'serverTime', 'appliedTimeRange']);
  });

  it('cursor pages are cached too, and new data is visible at once after a projector commit', async () => {
    const url = `/v2/events?startTime=${start}&limit=4`;
    const page2 = `/v2/events?startTime=${start}&limit=4&cursor=${(await h.get(url, key)).body.data.meta.nextCursor}`;
    await h.get(page2, key);
    const spy = queries();
    await h.get(page2, key);
    expect(spy).not.toHaveBeenCalled();
    spy.mockRestore();
    await h.given([build.event(100, { timeOfEvent: ago(HOUR / 2) })]);
    expect((await h.get(url, key)).body.data.results[0].id).toBe(100);
  });

  it("serves a default-window first page from the cache, its window ending at each answer's serverTime (the expiry: read-cache-clock.test.ts)", async () => {
    const first = await h.get('/v2/events?limit=3', key);
    const spy = queries();
    await new Promise((r) => setTimeout(r, 5));
    const res = await h.get('/v2/events?limit=3', key);
    expect(spy).not.toHaveBeenCalled();
    spy.mockRestore();
    expect(res.body.data.results).toEqual(first.body.data.results);
    const { serverTime, appliedTimeRange } = res.body.data.meta;
    expect(serverTime > first.body.data.meta.serverTime).toBe(true);
    expect(appliedTimeRange).toEqual({ startTime: new Date(Date.parse(serverTime) - 90 * 24 * HOUR).toISOString(), endTime: serverTime });
  });

  it('keeps accounts with different policies apart', async () => {
    const onlyTrader2 = await h.key({ account: { signalVisibility: { mode: 'traders', traderIds: [2] } } });
    const url = `/v2/events?startTime=${start}&limit=200`;
    const all = (await h.get(url, key)).body.data.results.map((e: any) => e.traderId);
    const some = (await h.get(url, onlyTrader2)).body.data.results.map((e: any) => e.traderId);
    expect(new Set(all)).toEqual(new Set([1, 2]));
    expect(new Set(some)).toEqual(new Set([2]));
  });

  it('a cached position page is served until, and not after, its too_young window comes of age (injected clock)', async () => {
    let now = Date.now();
    const timed = await createHarness({ clock: () => now });
    try {
      const evalAt = now + 10 * 60_000; // the 1D window of position 900 ends 10 minutes from "now"
      const openAt = evalAt - 24 * HOUR;
      await timed.given([
        build.source('src-1'),
        build.trader(1),
        build.asset(9, { symbol: 'NINE' }),
        build.event(900, { positionId: 900, assetId: 9, price: 100, timeOfEvent: new Date(openAt).toISOString() }),
        build.price(9, new Date(evalAt + 1000).toISOString(), 110), // the forward sample, already known
      ]);
      const k = await timed.key();
      const read = async () => {
        const spy = vi.spyOn(timed.store, 'query');
        const res = await timed.get('/v2/positions?positionIds=900', k);
        const queried = spy.mock.calls.length > 0;
        spy.mockRestore();
        return { perf: res.body.data.results[0].timeBasedPerformances['1D'], serverTime: res.body.data.meta.serverTime, queried };
      };
      expect(await read()).toMatchObject({ perf: { status: 'too_young' }, queried: true });
      now = evalAt - 1;
      expect(await read()).toEqual({
        perf: { window: '1D', status: 'too_young', returnPercentage: null },
        serverTime: new Date(evalAt - 1).toISOString(),
        queried: false,
      });
      now = evalAt;
      expect(await read()).toEqual({
        perf: { window: '1D', status: 'ready', returnPercentage: expect.closeTo(10, 9) },
        serverTime: new Date(evalAt).toISOString(),
        queried: true,
      });
    } finally {
      await timed.close();
    }
  });
});
