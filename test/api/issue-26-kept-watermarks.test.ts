import { describe, expect, it, vi } from 'vitest';
import { cachedPair } from '../helpers/cached-and-fresh.ts';
import { build } from '../helpers/harness.ts';
import { specStart } from '../helpers/spec-clock.ts';

/**
 * Issue 26 ("facts maintained incrementally"): after every commit the API read the feed's
 * watermark (`max(fseq)`), the latest price sample time (`max(at)`) and the first feed group dated
 * after serverTime from the store again, a statement per commit each under live ingest. Each commit
 * now says the highest watermark, and the range of sample and group times, it wrote, and the API
 * carries those facts forward from them. What a user sees must
 * not change: every answer equals a fresh read (an app without the change log) at the same clock.
 */

const MIN = 60_000;
const DAY = 24 * 60 * MIN;
const T0 = specStart();
const iso = (ms: number) => new Date(ms).toISOString();

const WATERMARK = /FROM \S*feed_watermark/;
const LATEST_PRICE = /max\(toUnixTimestamp64Milli\(at\)\)[\s\S]*prices/;
/** The first group after serverTime (when one enters a page whose range ends at serverTime). */
const FIRST_GROUP_AFTER = /toUnixTimestamp64Milli\(writtenAt\) AS t FROM \S*feed_groups\s+WHERE writtenAt >/;

/** A message of trader 1's source and its open event on asset 1. */
const group = (n: number) => [
  build.message(`m-${n}`, 'src-1', iso(T0 - DAY + n * MIN)),
  build.event(100 + n, { traderId: 1, assetId: 1, messageId: `m-${n}`, price: 100, timeOfEvent: iso(T0 - DAY + n * MIN) }),
];

describe('the feed watermark and the latest price time follow the commits (issue 26)', () => {
  const p = cachedPair(T0, () => [
    build.source('src-1'),
    build.trader(1),
    build.asset(1),
    build.price(1, iso(T0 - 40 * DAY), 90),
    ...group(0),
  ]);

  /** The cached app's answer to `url` (checked against a fresh read) and how many statements matched each pattern meanwhile. */
  async function read(url: string) {
    const headers = { 'x-api-key': p.key, 'x-request-id': 'r' };
    const spy = vi.spyOn(p.h.store, 'query');
    try {
      const res = await p.cached.inject({ method: 'GET', url, headers });
      const sqls = spy.mock.calls.map(([sql]) => String(sql));
      const fresh = await p.fresh.inject({ method: 'GET', url, headers });
      expect(res.statusCode, `${url}: ${res.body}`).toBe(200);
      expect(res.json(), url).toEqual(fresh.json());
      return {
        body: res.json() as any,
        watermarkReads: sqls.filter((s) => WATERMARK.test(s)).length,
        latestPriceReads: sqls.filter((s) => LATEST_PRICE.test(s)).length,
        firstGroupReads: sqls.filter((s) => FIRST_GROUP_AFTER.test(s)).length,
      };
    } finally {
      spy.mockRestore();
    }
  }

  it('a since-poll after feed commits brings their groups and reads no watermark', async () => {
    const head = await read('/v2/feed?since=now');
    expect(head.body.data.results).toEqual([]);
    const cursor = encodeURIComponent(head.body.data.meta.nextCursor);
    for (const n of [1, 2]) {
      await p.h.given(group(n));
      const next = await read(`/v2/feed?since=${cursor}&limit=${n}`);
      expect(next.body.data.results.map((g: any) => g.id)).toEqual(['m-1', 'm-2'].slice(0, n));
      expect(next.watermarkReads, `after commit ${n}`).toBe(0);
    }
    // Another poller from the head: the head is the watermark the commits carried.
    const again = await read('/v2/feed?since=now');
    expect(again.watermarkReads).toBe(0);
    const fromHead = await read(`/v2/feed?since=${encodeURIComponent(again.body.data.meta.nextCursor)}`);
    expect(fromHead.body.data.results).toEqual([]);
  });

  it('a feed page after a commit of groups dated before serverTime does not look for the first group after it again', async () => {
    const first = await read('/v2/feed?limit=2');
    expect(first.firstGroupReads).toBe(1);
    await p.h.given(group(3));
    const next = await read('/v2/feed?limit=3');
    expect(next.body.data.results[0].id).toBe('m-3');
    expect(next.firstGroupReads).toBe(0);
  });

  it('rankings after price commits, before and after serverTime, read no latest price time', async () => {
    const url = (n: number) => `/v2/traders/rankings?metric=avg_return&timeBasedPerformanceWindow=1D&minPositions=0&limit=${n}`;
    await read(url(10));
    // A price before the positions' 1D evaluation times (T0 and after): nothing is `ready` yet.
    await p.h.given([build.price(1, iso(T0 - 10 * MIN), 110)]);
    const before = await read(url(9));
    expect(before.latestPriceReads).toBe(0);
    expect(before.body.data.results[0].metricValue).toBeNull();
    // One dated after serverTime: every window is `ready` from it (+20 %), the first of age now, the
    // others as the clock reaches their evaluation times, which the rankings' expiry must know.
    await p.h.given([build.price(1, iso(T0 + 5 * MIN), 120)]);
    const after = await read(url(8));
    expect(after.latestPriceReads).toBe(0);
    expect(after.body.data.results[0].metricValue).toBeCloseTo(20, 6);
    expect(after.body.data.results[0].timeBasedPerformance.positionsCount).toBe(1);
    p.clock.now = T0 + 2 * MIN;
    const later = await read(url(8));
    expect(later.body.data.results[0].timeBasedPerformance.positionsCount).toBe(3);
  });
});
