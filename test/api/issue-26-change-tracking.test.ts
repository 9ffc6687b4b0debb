import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { cachedAndFresh } from '../helpers/cached-and-fresh.ts';
import { build, createHarness, type Harness, type TopicRecord } from '../helpers/harness.ts';
import { prng, type Rng } from '../helpers/prng.ts';
import { specStart } from '../helpers/spec-clock.ts';

/**
 * Issue 26: a commit ends exactly the cached answers that it touches, and a cached answer is never
 * one that a fresh read would not give. Two apps on one store, one clock and one cursor key: one
 * with the read cache and the harness's change log (what each projector commit changed), one
 * without (the fresh read). Under random interleavings of commits (new events, events moved to
 * another trader, asset and time, deletions, price samples, messages, trader and asset changes)
 * and reads (filtered and not), every answer of the cached app equals the fresh one; the clock
 * moves too, so the clock rules of DESIGN 9 are exercised on the way.
 */

const MIN = 60_000;
const HOUR = 60 * MIN;
const T0 = specStart();
const iso = (ms: number) => new Date(ms).toISOString();
const TRADERS = [1, 2, 3, 4];
const ASSETS = [1, 2, 3];

let h: Harness;
let key: string;
let cached: FastifyInstance;
let fresh: FastifyInstance;
let close: () => Promise<void>;
const clock = { now: T0 };

beforeAll(async () => {
  h = await createHarness({ clock: () => clock.now });
  await h.given([
    ...TRADERS.flatMap((t) => [build.source(`src-${t}`), build.trader(t)]),
    ...ASSETS.map((a) => build.asset(a)),
    ...ASSETS.map((a) => build.price(a, iso(T0 - 10 * HOUR), 100 + a)),
  ]);
  key = await h.key();
  ({ cached, fresh, close } = await cachedAndFresh(h, clock));
});
afterAll(async () => {
  await close?.();
  await h?.close();
});

const list = (xs: readonly number[]) => xs.join(',');

/** A read as users make them: the default first page, or narrowed to some traders or assets, sometimes with an older window. */
function randomUrl(rng: Rng): string {
  const filters: string[] = [];
  if (rng.chance(0.6)) filters.push(`traderIds=${list(rng.subset(TRADERS, 1, 2))}`);
  if (rng.chance(0.4)) filters.push(`assetIds=${list(rng.subset(ASSETS, 1, 2))}`);
  if (rng.chance(0.2)) filters.push(`startTime=${iso(T0 - 30 * HOUR)}&endTime=${iso(T0 - 5 * HOUR)}`);
  const path = rng.pick(['/v2/events', '/v2/positions', '/v2/positions/open', '/v2/events', '/v2/messages', '/v2/feed']);
  // Open positions and the feed take no window; messages no assetIds.
  const own = filters.filter(
    (f) => !(path === '/v2/positions/open' && f.startsWith('startTime')) && !(path === '/v2/messages' && f.startsWith('assetIds')),
  );
  return `${path}?limit=${rng.int(2, 5)}${own.length ? `&${own.join('&')}` : ''}`;
}

let nextEvent = 1;
let nextMessage = 1;
const events = new Map<number, { traderId: number; assetId: number; version: number; positionId: number }>();

/** A commit's records: what live ingest brings, and the rarer moves that test the change sets' old owners. */
function randomCommit(rng: Rng): TopicRecord[] {
  const out: TopicRecord[] = [];
  for (let i = rng.int(1, 3); i > 0; i--) {
    const kind = rng.next();
    const at = iso(clock.now - rng.int(0, 40) * HOUR - rng.int(0, 59) * MIN);
    if (kind < 0.35 || events.size === 0) {
      const id = nextEvent++;
      const e = { traderId: rng.pick(TRADERS), assetId: rng.pick(ASSETS), version: 1, positionId: id };
      events.set(id, e);
      out.push(build.event(id, { ...e, timeOfEvent: at }));
    } else if (kind < 0.5) {
      // The event moves to another trader, asset and time (its position with it): both owners' answers change.
      const id = rng.pick([...events.keys()]);
      const e = events.get(id)!;
      Object.assign(e, { traderId: rng.pick(TRADERS), assetId: rng.pick(ASSETS), version: e.version + 1 });
      out.push(build.event(id, { ...e, timeOfEvent: at }));
    } else if (kind < 0.58) {
      // A close of an open position, or a deletion.
      const id = rng.pick([...events.keys()]);
      const e = events.get(id)!;
      if (rng.chance(0.5)) out.push(build.event(nextEvent++, { ...e, version: 1, type: 'close', timeOfEvent: iso(clock.now - MIN) }));
      else {
        e.version++;
        out.push(build.event(id, { ...e, deleted: true, timeOfEvent: at }));
      }
    } else if (kind < 0.78) {
      out.push(build.price(rng.pick(ASSETS), rng.chance(0.8) ? at : iso(clock.now + rng.int(1, 30) * MIN), rng.int(50, 150)));
    } else if (kind < 0.95) {
      out.push(build.message(`m-${nextMessage++}`, `src-${rng.pick(TRADERS)}`, at));
    } else if (rng.chance(0.5)) {
      // Renamed, sometimes holding another trader's source (whose messages become its own).
      const source = { platform: 'TELEGRAM', sourceIdentityId: `src-${rng.pick(TRADERS)}` };
      out.push(build.trader(rng.pick(TRADERS), { name: `Renamed ${rng.int(1, 1e6)}`, source, version: 1 + rng.int(1, 1e6) }));
    } else {
      const a = rng.pick(ASSETS);
      out.push(
        build.asset(a, { version: 1 + rng.int(1, 1e6), markets: [{ quoteSymbol: 'USD', active: rng.chance(0.8), preferred: true }] }),
      );
    }
  }
  return out;
}

async function get(app: FastifyInstance, url: string): Promise<any> {
  const res = await app.inject({ method: 'GET', url, headers: { 'x-api-key': key, 'x-request-id': 'same' } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

/** An answer without what each response has afresh (the cursor is signed by each app's own key). */
const comparable = (body: any) => {
  const { serverTime: _s, nextCursor, dataComputedAt: _d, ...meta } = body.data.meta;
  return { results: body.data.results, meta, more: nextCursor != null };
};

describe('issue 26: change tracking', () => {
  it('under random interleavings of commits and reads, every cached answer equals a fresh read', async () => {
    const rng = prng(20261126);
    // Messages of some traders too (whose answers a commit of other sources' messages leaves).
    const urls = [
      ...Array.from({ length: 24 }, () => randomUrl(rng)),
      '/v2/messages?limit=3&traderIds=1',
      '/v2/messages?limit=2&traderIds=2,3',
    ];
    let reads = 0;
    let hits = 0;
    // What one global data version could serve again: a read of the same URL since the last commit.
    let sinceCommit = new Set<string>();
    let again = 0;
    for (let step = 0; step < 220; step++) {
      const r = rng.next();
      if (r < 0.15) {
        await h.given(randomCommit(rng));
        sinceCommit = new Set();
      } else if (r < 0.2) clock.now += rng.int(1, 20) * MIN;
      else {
        const url = rng.pick(urls);
        if (sinceCommit.has(url)) again++;
        sinceCommit.add(url);
        const spy = vi.spyOn(h.store, 'query');
        const a = await get(cached, url);
        const queried = spy.mock.calls.length > 0;
        spy.mockRestore();
        const b = await get(fresh, url);
        expect(comparable(a), `step ${step}: ${url}`).toEqual(comparable(b));
        reads++;
        if (!queried) hits++;
      }
    }
    console.log(
      `change tracking property: ${reads} reads, ${hits} served from the cache without a query (${again} repeated since the last commit)`,
    );
    // The point of tracking: answers that a commit did not touch are served again (a global version ends them all).
    expect(hits).toBeGreaterThan(again);
  });

  it("a commit of one trader's event keeps another trader's cached page, and ends the first trader's", async () => {
    const t1 = `/v2/events?traderIds=1&limit=3`;
    const t2 = `/v2/events?traderIds=2&limit=3`;
    await get(cached, t1);
    await get(cached, t2);
    await h.given([build.event(nextEvent++, { traderId: 1, assetId: 1, timeOfEvent: iso(clock.now - MIN) })]);
    const spy = vi.spyOn(h.store, 'query');
    const again2 = await get(cached, t2);
    expect(spy).not.toHaveBeenCalled();
    const again1 = await get(cached, t1);
    expect(spy).toHaveBeenCalled();
    spy.mockRestore();
    expect(comparable(again2)).toEqual(comparable(await get(fresh, t2)));
    expect(comparable(again1)).toEqual(comparable(await get(fresh, t1)));
  });

  it("a message of one trader's source keeps another trader's cached messages, and ends the first trader's; a trader that takes a source ends its page", async () => {
    // Traders 5 and 6 (of their own, away from the property's moves) hold sources src-5 and src-6.
    await h.given([build.source('src-5'), build.source('src-6'), build.trader(5), build.trader(6)]);
    const t5 = '/v2/messages?traderIds=5&limit=3';
    const t6 = '/v2/messages?traderIds=6&limit=3';
    await get(cached, t5);
    await get(cached, t6);
    await h.given([build.message(`m-${nextMessage++}`, 'src-5', iso(clock.now - MIN))]);
    const spy = vi.spyOn(h.store, 'query');
    const again6 = await get(cached, t6);
    expect(spy).not.toHaveBeenCalled();
    const again5 = await get(cached, t5);
    expect(spy).toHaveBeenCalled();
    spy.mockRestore();
    expect(again5.data.results).toHaveLength(1);
    expect(comparable(again5)).toEqual(comparable(await get(fresh, t5)));
    expect(comparable(again6)).toEqual(comparable(await get(fresh, t6)));
    // No message is written, but src-5 passes from trader 5 to trader 6: both pages change.
    const tg = (id: string) => ({ platform: 'TELEGRAM', sourceIdentityId: id });
    await h.given([
      build.source('src-7'),
      build.trader(5, { source: tg('src-7'), version: 2 }),
      build.trader(6, { source: tg('src-5'), version: 2 }),
    ]);
    expect((await get(cached, t5)).data.results).toEqual([]);
    expect((await get(cached, t6)).data.results.map((m: any) => [m.id, m.traderId])).toEqual([[again5.data.results[0].id, 6]]);
    expect(comparable(await get(cached, t6))).toEqual(comparable(await get(fresh, t6)));
  });

  it('an event moved from trader 3 to trader 4 ends the cached pages of both', async () => {
    const id = nextEvent++;
    await h.given([build.event(id, { traderId: 3, assetId: 2, timeOfEvent: iso(clock.now - 2 * MIN) })]);
    const t3 = `/v2/events?traderIds=3&limit=3`;
    const t4 = `/v2/events?traderIds=4&limit=3`;
    expect((await get(cached, t3)).data.results.map((e: any) => e.id)).toContain(id);
    const before4 = await get(cached, t4);
    expect(before4.data.results.map((e: any) => e.id)).not.toContain(id);
    await h.given([build.event(id, { traderId: 4, assetId: 2, version: 2, timeOfEvent: iso(clock.now - 2 * MIN) })]);
    expect((await get(cached, t3)).data.results.map((e: any) => e.id)).not.toContain(id);
    expect((await get(cached, t4)).data.results.map((e: any) => e.id)).toContain(id);
  });

  it("a forward price that evaluates one trader's position keeps another trader's cached positions, and ends the first trader's", async () => {
    // Trader 1's position on asset 1 reaches its 1D evaluation time 10 minutes ago, without a forward price yet.
    const [p1, p2] = [nextEvent++, nextEvent++];
    await h.given([
      build.event(p1, { traderId: 1, assetId: 1, price: 100, timeOfEvent: iso(clock.now - 24 * HOUR - 10 * MIN) }),
      build.event(p2, { traderId: 2, assetId: 2, price: 100, timeOfEvent: iso(clock.now - 24 * HOUR - 10 * MIN) }),
    ]);
    const t1 = '/v2/positions?traderIds=1&limit=50';
    const t2 = '/v2/positions?traderIds=2&limit=50';
    const returnOf = (body: any, id: number) =>
      body.data.results.find((p: any) => p.id === id)?.timeBasedPerformances?.['1D']?.returnPercentage ?? null;
    expect(returnOf(await get(cached, t1), p1)).toBeNull();
    await get(cached, t2);
    // Its forward price: position_performances gets trader 1's rows only.
    await h.given([build.price(1, iso(clock.now - 5 * MIN), 110)]);
    const spy = vi.spyOn(h.store, 'query');
    const again2 = await get(cached, t2);
    expect(spy).not.toHaveBeenCalled();
    const again1 = await get(cached, t1);
    expect(spy).toHaveBeenCalled();
    spy.mockRestore();
    expect(returnOf(again1, p1)).toBeCloseTo(10);
    expect(comparable(again1)).toEqual(comparable(await get(fresh, t1)));
    expect(comparable(again2)).toEqual(comparable(await get(fresh, t2)));
  });

  it("a price of one asset keeps the cached open positions of another asset, and moves the first asset's marks at once", async () => {
    const [p1, p2] = [nextEvent++, nextEvent++];
    await h.given([
      build.event(p1, { traderId: 1, assetId: 1, price: 100, timeOfEvent: iso(clock.now - 3 * MIN) }),
      build.event(p2, { traderId: 1, assetId: 2, price: 100, timeOfEvent: iso(clock.now - 3 * MIN) }),
      build.price(1, iso(clock.now - 2 * MIN), 110),
      build.price(2, iso(clock.now - 2 * MIN), 120),
    ]);
    const a1 = '/v2/positions/open?assetIds=1&limit=50';
    const a2 = '/v2/positions/open?assetIds=2&limit=50';
    const priceOf = (body: any, id: number) => body.data.results.find((p: any) => p.id === id)?.currentPrice;
    expect(priceOf(await get(cached, a1), p1)).toBe(110);
    expect(priceOf(await get(cached, a2), p2)).toBe(120);
    await h.given([build.price(2, iso(clock.now - MIN), 130)]);
    const spy = vi.spyOn(h.store, 'query');
    expect(priceOf(await get(cached, a1), p1)).toBe(110);
    expect(spy).not.toHaveBeenCalled();
    spy.mockRestore();
    expect(priceOf(await get(cached, a2), p2)).toBe(130);
    expect(comparable(await get(cached, a2))).toEqual(comparable(await get(fresh, a2)));
  });

  it('events on eligible assets keep the held events of an ineligible asset; an event on it ends them', async () => {
    // Asset 9 has no active market: the activity counts take its events back, held in memory. They
    // are taken back from the rolled-up rows of whole hours: the events lie hours back, not in the
    // current hour, which is read from the statements (eligible assets only) when a commit lands in it.
    await h.given([
      build.asset(9, { markets: [{ quoteSymbol: 'USD', active: false, preferred: true }] }),
      build.event(nextEvent++, { traderId: 1, assetId: 9, timeOfEvent: iso(clock.now - 3 * HOUR - 5 * MIN) }),
      build.event(nextEvent++, { traderId: 2, assetId: 9, timeOfEvent: iso(clock.now - 3 * HOUR - 4 * MIN) }),
    ]);
    const url = '/v2/activity-summaries?groupBy=trader&interval=hour';
    const heldRead = (spy: { mock: { calls: unknown[][] } }) =>
      spy.mock.calls.some(([, params]) => ((params as { excludedAssets?: number[] } | undefined)?.excludedAssets ?? []).includes(9));
    expect(comparable(await get(cached, url))).toEqual(comparable(await get(fresh, url)));

    await h.given([build.event(nextEvent++, { traderId: 2, assetId: 1, timeOfEvent: iso(clock.now - 3 * HOUR - 3 * MIN) })]);
    let spy = vi.spyOn(h.store, 'query');
    const afterEligible = await get(cached, url);
    expect(spy).toHaveBeenCalled(); // the answer was read again: a commit changed its events
    expect(heldRead(spy)).toBe(false);
    spy.mockRestore();
    expect(comparable(afterEligible)).toEqual(comparable(await get(fresh, url)));

    await h.given([build.event(nextEvent++, { traderId: 1, assetId: 9, timeOfEvent: iso(clock.now - 3 * HOUR - 2 * MIN) })]);
    spy = vi.spyOn(h.store, 'query');
    const afterIneligible = await get(cached, url);
    expect(heldRead(spy)).toBe(true);
    spy.mockRestore();
    expect(comparable(afterIneligible)).toEqual(comparable(await get(fresh, url)));
  });

  it('answers stored between commits ask once when a row next enters their default window; only a commit of a row dated after that asks again', async () => {
    const asksEntering = (spy: { mock: { calls: unknown[][] } }) =>
      spy.mock.calls.filter(([sql]) => /FROM \S*events\s+WHERE timeOfEvent > /.test(String(sql))).length;
    // A row dated ahead: what an earlier test found is no longer the first after now.
    await h.given([build.event(nextEvent++, { traderId: 1, assetId: 2, timeOfEvent: iso(clock.now + 60 * MIN) })]);
    let spy = vi.spyOn(h.store, 'query');
    await get(cached, '/v2/events?traderIds=1&limit=2');
    await get(cached, '/v2/events?traderIds=2&limit=2');
    await get(cached, '/v2/events?assetIds=3&limit=2');
    expect(asksEntering(spy)).toBe(1);
    spy.mockRestore();

    // Live rows are dated before the clock: trader 3's new event ends its page, not what enters next.
    const past = nextEvent++;
    await h.given([build.event(past, { traderId: 3, assetId: 1, timeOfEvent: iso(clock.now - MIN) })]);
    spy = vi.spyOn(h.store, 'query');
    expect((await get(cached, '/v2/events?traderIds=3&limit=2')).data.results.map((e: any) => e.id)).toContain(past);
    expect(asksEntering(spy)).toBe(0);
    spy.mockRestore();

    // An event of trader 3 dated 10 minutes ahead: trader 3's page must take it in when the clock gets there.
    const ahead = nextEvent++;
    await h.given([build.event(ahead, { traderId: 3, assetId: 1, timeOfEvent: iso(clock.now + 10 * MIN) })]);
    spy = vi.spyOn(h.store, 'query');
    const before = await get(cached, '/v2/events?traderIds=3&limit=2');
    expect(asksEntering(spy)).toBe(1);
    spy.mockRestore();
    expect(before.data.results.map((e: any) => e.id)).not.toContain(ahead);
    clock.now += 10 * MIN;
    const after = await get(cached, '/v2/events?traderIds=3&limit=2');
    expect(after.data.results.map((e: any) => e.id)).toContain(ahead);
    expect(comparable(after)).toEqual(comparable(await get(fresh, '/v2/events?traderIds=3&limit=2')));
  });
});
