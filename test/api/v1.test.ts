// The v1 surface (contract sections 4 and 9, issue 8): the legacy trader discovery with tradeCount and
// minTrades, served from the same registry as v2; v2-only reads answer 404 under /v1; each version
// has its own OpenAPI and the host root serves v1's. Expected rows are written out from the data below.
import { Compile } from 'typebox/compile';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ListEnvelope } from '../../schemas/api/envelope.ts';
import { LegacyTraderRow } from '../../schemas/api/resources.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NOW = Date.parse('2026-06-15T12:00:00.000Z');
const iso = (t: number) => new Date(t).toISOString();
const schema = Compile(ListEnvelope(LegacyTraderRow, true));

let h: Harness;
let key: string;

async function traders(query = '', k = key) {
  const res = await h.get(`/v1/traders${query}`, k);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(schema.Check(res.body), JSON.stringify([...schema.Errors(res.body)].slice(0, 3))).toBe(true);
  return res.body.data as { results: any[]; meta: any };
}
const counts = (rows: any[]) => rows.map((r) => [r.name, r.tradeCount]);

beforeAll(async () => {
  h = await createHarness({ clock: () => NOW });
  const open = (id: number, traderId: number, assetId: number, at: number, over: Record<string, unknown> = {}) =>
    build.event(id, { positionId: id, traderId, assetId, timeOfEvent: iso(at), ...over });
  await h.given([
    build.source('src-1'),
    build.trader(1, { name: 'Alice' }),
    build.source('src-2', { platform: 'X' }),
    build.trader(2, { name: 'Bob', source: { platform: 'X', sourceIdentityId: 'src-2' } }),
    build.trader(3, { name: 'Carol', source: null }),
    build.trader(4, { name: 'Dave', source: null }),
    build.trader(5, { name: 'Erin', source: null }),
    build.asset(1),
    build.asset(2),
    build.asset(3, { markets: [{ quoteSymbol: 'USD', active: false, preferred: true }] }),
    // Alice: four positions on eligible assets, opened 40, 20, 10 and 5 days ago.
    open(11, 1, 1, NOW - 40 * DAY),
    open(12, 1, 1, NOW - 20 * DAY),
    open(13, 1, 2, NOW - 10 * DAY),
    open(14, 1, 2, NOW - 5 * DAY, { direction: 'short' }),
    // Bob: three positions, one of them deleted (its only event is a tombstone).
    open(21, 2, 1, NOW - 3 * DAY),
    open(22, 2, 1, NOW - 2 * DAY),
    open(23, 2, 2, NOW - DAY),
    // Carol: three positions, all on an asset without an active market.
    open(31, 3, 3, NOW - 3 * DAY),
    open(32, 3, 3, NOW - 2 * DAY),
    open(33, 3, 3, NOW - DAY),
    // Dave: three positions, then deleted as a trader.
    open(41, 4, 1, NOW - 3 * DAY),
    open(42, 4, 1, NOW - 2 * DAY),
    open(43, 4, 1, NOW - DAY),
  ]);
  await h.given([
    build.event(23, { positionId: 23, traderId: 2, assetId: 2, timeOfEvent: iso(NOW - DAY), version: 2, deleted: true }),
    build.trader(4, { name: 'Dave', source: null, version: 2, deleted: true }),
  ]);
  key = await h.key();
});
afterAll(async () => {
  await h?.close();
});

describe('GET /v1/traders (legacy trader discovery)', () => {
  it('minTrades defaults to 3: only traders with at least 3 eligible positions, with the directory fields and tradeCount', async () => {
    const { results, meta } = await traders();
    expect(counts(results)).toEqual([['Alice', 4]]);
    expect(results[0]).toEqual({
      id: 1,
      name: 'Alice',
      slug: 'trader-1',
      avatarUrl: null,
      tradeCount: 4,
      source: {
        platform: 'TELEGRAM',
        sourceIdentityId: 'src-1',
        displayName: 'Source src-1',
        handle: 'src-1',
        avatarUrl: null,
        profileUrl: 'https://t.me/src-1',
        audienceCount: 100,
      },
    });
    expect(meta).toMatchObject({ hasMore: false, nextCursor: null, appliedTimeRange: { startTime: null, endTime: null } });
  });

  it('minTrades=0 gives the whole visible directory (deleted traders left out), alphabetical', async () => {
    const { results } = await traders('?minTrades=0');
    // Bob's deleted position and Carol's positions on an asset without an active market are not counted.
    expect(counts(results)).toEqual([
      ['Alice', 4],
      ['Bob', 2],
      ['Carol', 0],
      ['Erin', 0],
    ]);
  });

  it('startTime and endTime scope tradeCount and minTrades by position open time (inclusive)', async () => {
    const { results, meta } = await traders(`?minTrades=2&startTime=${iso(NOW - 20 * DAY)}&endTime=${iso(NOW - 10 * DAY)}`);
    expect(counts(results)).toEqual([['Alice', 2]]);
    expect(meta.appliedTimeRange).toEqual({ startTime: iso(NOW - 20 * DAY), endTime: iso(NOW - 10 * DAY) });
    expect(counts((await traders(`?minTrades=1&startTime=${iso(NOW - 5 * DAY)}`)).results)).toEqual([
      ['Alice', 1],
      ['Bob', 2],
    ]);
  });

  it('pages with keyset cursors in name order, the filters kept', async () => {
    const seen: string[] = [];
    let cursor = '';
    for (let i = 0; i < 10; i++) {
      const { results, meta } = await traders(`?minTrades=0&limit=1${cursor}`);
      seen.push(...results.map((r) => r.name));
      if (!meta.hasMore) break;
      cursor = `&cursor=${meta.nextCursor}`;
    }
    expect(seen).toEqual(['Alice', 'Bob', 'Carol', 'Erin']);
    const first = await traders('?minTrades=0&limit=1');
    const other = await h.get(`/v1/traders?minTrades=1&limit=1&cursor=${first.meta.nextCursor}`, key);
    expect(other.status).toBe(400);
    expect(other.body.error.code).toBe('INVALID_CURSOR');
  });

  it('search and sourcePlatforms filter as on the directory', async () => {
    expect(counts((await traders('?minTrades=0&search=ali')).results)).toEqual([['Alice', 4]]);
    expect(counts((await traders('?minTrades=0&sourcePlatforms=X')).results)).toEqual([['Bob', 2]]);
  });

  it('tradeCount counts only what signal visibility shows; message visibility alone lists the directory with 0', async () => {
    const messageOnly = await h.key({ account: { messageVisibility: { mode: 'all' }, signalVisibility: { mode: 'none' } } });
    expect(counts((await traders('?minTrades=0', messageOnly)).results)).toEqual([
      ['Alice', 0],
      ['Bob', 0],
      ['Carol', 0],
      ['Erin', 0],
    ]);
    expect((await traders('', messageOnly)).results).toEqual([]);
    const onlyBob = await h.key({ account: { messageVisibility: { mode: 'all' }, signalVisibility: { mode: 'traders', traderIds: [2] } } });
    expect(counts((await traders('?minTrades=0', onlyBob)).results)).toEqual([
      ['Alice', 0],
      ['Bob', 2],
      ['Carol', 0],
      ['Erin', 0],
    ]);
  });

  it('rejects minTrades that is not a non-negative integer', async () => {
    for (const bad of ['-1', '1.5', 'x', '']) {
      const res = await h.get(`/v1/traders?minTrades=${bad}`, key);
      expect(res.status, bad).toBe(400);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
    }
  });

  it('v2 /traders stays the directory: no tradeCount, no minTrades', async () => {
    const res = await h.get('/v2/traders', key);
    expect(res.status).toBe(200);
    expect(res.body.data.results.map((r: any) => r.name)).toEqual(['Alice', 'Bob', 'Carol', 'Erin']);
    for (const r of res.body.data.results) expect(r).not.toHaveProperty('tradeCount');
    expect((await h.get('/v2/traders?minTrades=0', key)).status).toBe(400);
  });
});

describe('the v1 surface', () => {
  // Contract 9.2: version 2 adds the pure trader directory and the separate trader activity read.
  it('v2-only reads answer 404 NOT_FOUND under /v1', async () => {
    for (const path of ['/traders/activity', '/traders/activity?minPositionCount=0']) {
      const res = await h.get(`/v1${path}`, key);
      expect(res.status, path).toBe(404);
      expect(res.body.error.code).toBe('NOT_FOUND');
    }
  });

  it('the reads with a v1 form answer the same rows under /v1 as under /v2', async () => {
    for (const path of [
      '/assets',
      '/events',
      '/positions',
      '/positions/open',
      '/messages',
      '/traders/stats?traderIds=1,2',
      '/assets/stats?assetIds=1,2',
      '/traders/rankings',
      '/traders/rankings?metric=win_rate&timeBasedPerformanceWindow=1D',
      '/activity-summaries?groupBy=trader',
    ]) {
      const [a, b] = await Promise.all([h.get(`/v1${path}`, key), h.get(`/v2${path}`, key)]);
      expect(a.status, path).toBe(200);
      expect(a.body.data.results, path).toEqual(b.body.data.results);
    }
  });

  it('/v1/openapi.json describes the legacy /traders; the host-root /openapi.json is v1', async () => {
    const v1 = (await h.get('/v1/openapi.json')).body;
    expect((await h.get('/openapi.json')).body).toEqual(v1);
    const params = v1.paths['/traders'].get.parameters.map((p: any) => p.name);
    expect(params).toEqual(expect.arrayContaining(['minTrades', 'startTime', 'endTime', 'limit', 'cursor']));
    expect(v1.paths['/traders/stats']).toBeDefined();
    expect(v1.paths['/traders/activity']).toBeUndefined();
  });
});
