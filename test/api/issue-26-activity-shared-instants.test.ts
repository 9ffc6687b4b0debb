import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { cachedAndFresh } from '../helpers/cached-and-fresh.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import { specStart } from '../helpers/spec-clock.ts';

/**
 * Issue 26: under live ingest every commit ends the activity summaries, and each one kept reads
 * what the commit wrote by instant. The summaries of every groupBy and interval read the same
 * instants: after a commit the first of them reads them, and the others are made from that read,
 * each equal to a fresh read at the same serverTime.
 */

const MIN = 60_000;
const HOUR = 60 * MIN;
// Five minutes into an hour: the hourly summaries' default start moves at the hour, and a clock
// moved from :58 to :00 read their body again (the test failed in the hour's 58th minute).
const T0 = Math.floor(specStart() / HOUR) * HOUR + 5 * MIN;
const iso = (ms: number) => new Date(ms).toISOString();
const SUMMARIES = [
  'groupBy=trader&interval=hour',
  'groupBy=trader&interval=day',
  'groupBy=none&interval=hour',
  'groupBy=none&interval=day',
];

let h: Harness;
let key: string;
const clock = { now: T0 };

beforeAll(async () => {
  h = await createHarness({ clock: () => clock.now });
  await h.given([
    build.source('src-1'),
    build.trader(1),
    build.trader(2),
    build.asset(1),
    build.price(1, iso(T0 - 3 * 24 * HOUR), 100),
    build.event(1, { traderId: 1, assetId: 1, price: 100, timeOfEvent: iso(T0 - 2 * HOUR) }),
    build.event(2, { traderId: 2, assetId: 1, price: 100, timeOfEvent: iso(T0 - 30 * MIN) }),
    build.message('m-1', 'src-1', iso(T0 - HOUR)),
  ]);
  key = await h.key();
});
afterAll(async () => {
  await h?.close();
});

it('regression (issue 26): after a commit, the activity summaries of every groupBy and interval share one read of what it wrote', async () => {
  const { cached, fresh, close } = await cachedAndFresh(h, clock);
  const get = async (app: typeof cached, url: string) => {
    const res = await app.inject({ method: 'GET', url, headers: { 'x-api-key': key, 'x-request-id': 'same-request' } });
    expect(res.statusCode, res.body).toBe(200);
    return { body: res.json(), cache: res.headers['x-cache'] };
  };
  /** The cached app's answer to each summary, whether it queried the store, against a fresh read. */
  const readAll = async () => {
    const out: { queried: boolean; cache: unknown; totalEvents: number }[] = [];
    for (const q of SUMMARIES) {
      const url = `/v2/activity-summaries?${q}`;
      const spy = vi.spyOn(h.store, 'query');
      const a = await get(cached, url);
      const queried = spy.mock.calls.some(([sql]) => !String(sql).includes('api_keys'));
      spy.mockRestore();
      expect(a.body, url).toEqual((await get(fresh, url)).body);
      out.push({ queried, cache: a.cache, totalEvents: a.body.data.meta.totalEvents });
    }
    return out;
  };
  try {
    clock.now = T0 + MIN;
    const before = await readAll();
    expect(before.map((r) => r.totalEvents)).toEqual([2, 2, 2, 2]);

    // Live records: an event and a message dated now, in one commit each.
    clock.now = T0 + 2 * MIN;
    await h.given([
      build.event(3, { traderId: 1, assetId: 1, price: 101, timeOfEvent: iso(T0 + 2 * MIN - 500) }),
      build.message('m-2', 'src-1', iso(T0 + 2 * MIN - 400)),
    ]);
    clock.now = T0 + 2 * MIN + 10;
    const after = await readAll();
    expect(after.map((r) => r.totalEvents)).toEqual([3, 3, 3, 3]);
    // Every answer ended (none served from the cache). The first read what the commits wrote, for
    // all four. The daily ones' default 7 days trail the clock, so they also read the rows about to
    // leave their start, once for both (the hourly ones start at the 168th hour back, fixed until the hour).
    expect(after.map((r) => r.cache)).toEqual(['miss', 'miss', 'miss', 'miss']);
    expect(after.map((r) => r.queried)).toEqual([true, true, false, false]);
  } finally {
    await close();
  }
});
