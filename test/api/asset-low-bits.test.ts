// Issue 7 regression: the sample tests asset sets on the low 16 bits of assetId (position_samples.
// assetLow) only where that is exact. Assets whose ids share their low 16 bits (5 and 65541, 7 and
// 65543) must never stand in for each other, whether one of them is ineligible (no active market)
// or both are asked for by name. Expected figures are the contract's: a trader's positions on
// eligible assets, and with assetIds those on the eligible ones named.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

const DAY = 86_400_000;
const NOW = Date.parse('2026-06-15T12:00:00.000Z');
const iso = (t: number) => new Date(t).toISOString();
const LOW = 65_536;

let h: Harness;
let key: string;

beforeAll(async () => {
  h = await createHarness({ clock: () => NOW });
  const open = (id: number, assetId: number) =>
    build.event(id, { positionId: id, traderId: 1, assetId, direction: 'long', price: 100, timeOfEvent: iso(NOW - id * DAY) });
  await h.given([
    build.trader(1),
    build.asset(5),
    build.asset(LOW + 5, { markets: [{ quoteSymbol: 'USD', active: false, preferred: true }] }),
    build.asset(7),
    build.asset(LOW + 7),
    open(1, 5),
    open(2, 5),
    open(3, LOW + 5),
    open(4, 7),
    open(5, LOW + 7),
    open(6, LOW + 7),
  ]);
  key = await h.key();
});
afterAll(async () => {
  await h?.close();
});

const rank = async (assetIds: string) => {
  const res = await h.get(`/v2/traders/rankings?metric=position_count&startTime=2026-01-01T00:00:00.000Z&assetIds=${assetIds}`, key);
  expect(res.status).toBe(200);
  return res.body.data.results.map((r: { traderId: number; positionCount: number }) => [r.traderId, r.positionCount]);
};

describe('asset sets on their low 16 bits only where exact', () => {
  it('trader stats leave out only the ineligible asset, not the eligible one that shares its low bits', async () => {
    const res = await h.get('/v2/traders/stats?traderIds=1', key);
    expect(res.status).toBe(200);
    expect(res.body.data.results[0].summary.positionCount).toBe(5); // 2 on asset 5, 1 on 7, 2 on 65543
  });

  it('rankings with assetIds count the named assets alone', async () => {
    expect(await rank('5')).toEqual([[1, 2]]);
    expect(await rank(String(LOW + 5))).toEqual([]); // ineligible
    expect(await rank('7')).toEqual([[1, 1]]);
    expect(await rank(String(LOW + 7))).toEqual([[1, 2]]);
    expect(await rank(`7,${LOW + 7}`)).toEqual([[1, 3]]);
  });

  it('asset stats and trader activity agree', async () => {
    const stats = await h.get(`/v2/assets/stats?assetIds=7,${LOW + 7},5`, key);
    expect(stats.status).toBe(200);
    const longs = (id: number) =>
      stats.body.data.results.find((r: { assetId: number }) => r.assetId === id)?.summary.marketPositioning.longCount;
    expect([longs(7), longs(LOW + 7), longs(5)]).toEqual([1, 2, 2]);
    const activity = await h.get(`/v2/traders/activity?minPositionCount=0&assetIds=${LOW + 7}`, key);
    expect(activity.status).toBe(200);
    expect(activity.body.data.results.map((r: { traderId: number; positionCount: number }) => [r.traderId, r.positionCount])).toEqual([
      [1, 2],
    ]);
    const all = await h.get('/v2/traders/activity?minPositionCount=0', key);
    expect(all.body.data.results.map((r: { traderId: number; positionCount: number }) => [r.traderId, r.positionCount])).toEqual([[1, 5]]);
  });
});
