// The analytics reads' contract rules over HTTP (contract sections 2, 4, 7, 8; README "Analytics
// reads"): required and capped id lists, echoes and defaults, the two 422 codes with their
// details, tags, missing ids, scope and visibility; every 200 validates against the response
// schema. The figures themselves are compared with the oracle in analytics-oracle.test.ts.
import { Compile } from 'typebox/compile';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ActivitySummariesResponse,
  AssetStatsResponse,
  RankingsResponse,
  TraderActivityResponse,
  TraderStatsResponse,
  WindowNotElapsedDetails,
} from '../../schemas/api/analytics.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NOW = Date.parse('2026-06-15T12:34:56.789Z');
const iso = (t: number) => new Date(t).toISOString();
const ids = (n: number, from = 1) => Array.from({ length: n }, (_, i) => from + i).join(',');

let h: Harness;
let key: string;

const schemas = {
  '/v2/traders/stats': Compile(TraderStatsResponse),
  '/v2/assets/stats': Compile(AssetStatsResponse),
  '/v2/traders/rankings': Compile(RankingsResponse),
  '/v2/activity-summaries': Compile(ActivitySummariesResponse),
  '/v2/traders/activity': Compile(TraderActivityResponse),
} as const;

/** GET with the default key; a 200 must validate against the read's response schema. */
async function get(url: string, k = key) {
  const res = await h.get(url, k);
  if (res.status === 200) {
    const path = url.split('?')[0] as keyof typeof schemas;
    expect(schemas[path].Check(res.body), `${url}: ${JSON.stringify([...schemas[path].Errors(res.body)].slice(0, 3))}`).toBe(true);
  }
  return res;
}

beforeAll(async () => {
  h = await createHarness({ clock: () => NOW });
  const open = (id: number, traderId: number, assetId: number, at: number, direction = 'long') =>
    build.event(id, { positionId: id, traderId, assetId, direction, price: 100, timeOfEvent: iso(at) });
  await h.given([
    build.source('src-1'),
    build.trader(1, { name: 'Alice' }),
    build.source('src-2', { platform: 'X' }),
    build.trader(2, { name: 'Bob', source: { platform: 'X', sourceIdentityId: 'src-2' } }),
    build.trader(3, { name: 'Carol', source: null }),
    build.trader(4, { name: 'Dave', source: null }),
    {
      topic: 'trader-tags',
      value: {
        traderId: 1,
        tags: [
          { category: 'style', name: 'swing' },
          { category: 'thematic', name: 'bitcoin' },
          { category: 'thematic', name: 'ai' },
        ],
        version: 1,
      },
    },
    build.asset(1),
    build.asset(2),
    build.asset(3, { markets: [{ quoteSymbol: 'USD', active: false, preferred: true }] }),
    // Trader 1: three long positions on asset 1, one short on asset 2; trader 2: one short on asset 1, opened recently.
    open(11, 1, 1, NOW - 40 * DAY),
    open(12, 1, 1, NOW - 20 * DAY),
    open(13, 1, 1, NOW - 10 * DAY),
    open(14, 1, 2, NOW - 5 * DAY, 'short'),
    open(21, 2, 1, NOW - 2 * HOUR, 'short'),
    open(31, 3, 3, NOW - DAY),
    build.event(15, { positionId: 11, traderId: 1, assetId: 1, type: 'close', price: 120, timeOfEvent: iso(NOW - 30 * DAY) }),
    build.message('m1', 'src-1', iso(NOW - 3 * HOUR)),
    build.message('m2', 'src-2', iso(NOW - 2 * DAY), { platform: 'X' }),
    ...Array.from({ length: 60 }, (_, i) => build.price(1, iso(NOW - 45 * DAY + i * DAY), 100 + i)),
  ]);
  await h.given([build.trader(4, { name: 'Dave', source: null, version: 2, deleted: true })]);
  key = await h.key();
});
afterAll(async () => {
  await h?.close();
});

describe('GET /traders/stats', () => {
  it('requires traderIds, at most 200', async () => {
    expect((await get('/v2/traders/stats')).body.error.code).toBe('VALIDATION_ERROR');
    expect((await get(`/v2/traders/stats?traderIds=${ids(201)}`)).status).toBe(400);
    expect((await get(`/v2/traders/stats?traderIds=${ids(200)}`)).status).toBe(200);
  });

  it('one row per accessible requested trader in request order; deleted and unknown ids are missing', async () => {
    const { body } = await get('/v2/traders/stats?traderIds=3,4,1,999,2');
    expect(body.data.results.map((r: any) => r.traderId)).toEqual([3, 1, 2]);
    expect(body.data.meta.missingTraderIds).toEqual([4, 999]);
    expect(body.data.meta.serverTime).toBe(iso(NOW));
    expect(body.data.meta.appliedTimeRange).toEqual({ startTime: null, endTime: null });
  });

  it('tags are lowercase with the thematic category first, empty when untagged; one source identity or null', async () => {
    const { body } = await get('/v2/traders/stats?traderIds=1,3');
    const [alice, carol] = body.data.results;
    expect(alice.tags).toEqual([
      { category: 'thematic', name: 'ai' },
      { category: 'thematic', name: 'bitcoin' },
      { category: 'style', name: 'swing' },
    ]);
    expect(alice.source).toMatchObject({ platform: 'TELEGRAM', sourceIdentityId: 'src-1' });
    expect(carol.tags).toEqual([]);
    expect(carol.source).toBeNull();
  });

  it('an empty sample gives null metrics with positionsCount 0 and coverage of nothing', async () => {
    // Carol's only position is on an asset without an active market.
    const { body } = await get('/v2/traders/stats?traderIds=3');
    const s = body.data.results[0].summary;
    expect(s.positionCount).toBe(0);
    expect(s.directionBias).toEqual({ label: 'none', longCount: 0, shortCount: 0, longPercentage: 0, shortPercentage: 0 });
    for (const w of ['1D', '7D', '30D']) {
      expect(s.timeBasedPerformances[w]).toEqual({
        window: w,
        averageReturnPercentage: null,
        medianReturnPercentage: null,
        winRatePercentage: null,
        sharpeRatio: null,
        positionsCount: 0,
        coverage: { sampledPositionsCount: 0, scoredPositionsCount: 0, ratio: null },
      });
    }
  });

  it('bounds are inclusive on openAt, and an account history window clamps the start (echoed)', async () => {
    const at = iso(NOW - 10 * DAY);
    const exact = (await get(`/v2/traders/stats?traderIds=1&startTime=${at}&endTime=${at}`)).body.data.results[0].summary;
    expect(exact.positionCount).toBe(1);
    const windowed = await h.key({ account: { historyWindowDays: 15 } });
    const { body } = await get('/v2/traders/stats?traderIds=1&startTime=2020-01-01T00:00:00Z', windowed);
    expect(body.data.meta.appliedTimeRange.startTime).toBe(iso(NOW - 15 * DAY));
    expect(body.data.results[0].summary.positionCount).toBe(2); // opened 10 and 5 days ago
  });

  it('sourcePlatforms and signal visibility decide which traders are found', async () => {
    expect((await get('/v2/traders/stats?traderIds=1,2&sourcePlatforms=X')).body.data.meta.missingTraderIds).toEqual([1]);
    const tgOnly = await h.key({ account: { signalVisibility: { mode: 'platforms', platforms: ['TELEGRAM'] } } });
    expect((await get('/v2/traders/stats?traderIds=1,2', tgOnly)).body.data.meta.missingTraderIds).toEqual([2]);
  });
});

describe('GET /assets/stats', () => {
  it('requires assetIds, at most 200', async () => {
    expect((await get('/v2/assets/stats')).status).toBe(400);
    expect((await get(`/v2/assets/stats?assetIds=${ids(201)}`)).status).toBe(400);
  });

  it('echoes requested and missing assets and the filters applied', async () => {
    const { body } = await get('/v2/assets/stats?assetIds=2,3,1,2,77&direction=long&traderIds=1');
    expect(body.data.meta.requestedAssetIds).toEqual([2, 3, 1, 77]);
    expect(body.data.meta.missingAssetIds).toEqual([3, 77]);
    expect(body.data.results.map((r: any) => r.assetId)).toEqual([2, 1]);
    expect(body.data.filtersApplied).toEqual({ traderIds: [1], direction: 'long', appliedTimeRange: { startTime: null, endTime: null } });
  });

  it('market positioning and top traders per direction', async () => {
    const { body } = await get('/v2/assets/stats?assetIds=1');
    expect(body.data.results[0].summary).toEqual({
      marketPositioning: { label: 'long', longCount: 3, shortCount: 1, longPercentage: 75, shortPercentage: 25 },
      topTraderIds: { long: [1], short: [2] },
    });
  });
});

describe('GET /traders/rankings', () => {
  it("defaults: event_count, limit 10, startTime 1 January of the applied endTime's year, endTime serverTime", async () => {
    const { body } = await get('/v2/traders/rankings');
    expect(body.data.filtersApplied).toEqual({
      metric: 'event_count',
      assetIds: [],
      direction: null,
      timeBasedPerformanceWindow: '30D',
      minPositions: 3,
      windowEvaluability: 'not_applicable',
      appliedTimeRange: { startTime: '2026-01-01T00:00:00.000Z', endTime: iso(NOW) },
    });
    expect(body.data.results.map((r: any) => [r.traderId, r.rank, r.metricValue])).toEqual([
      [1, 1, 5],
      [2, 2, 1],
    ]);
    expect(body.data.meta.totalCandidates).toBe(2);
    const lastYear = (await get('/v2/traders/rankings?endTime=2025-03-01T00:00:00Z')).body.data.filtersApplied.appliedTimeRange;
    expect(lastYear).toEqual({ startTime: '2025-01-01T00:00:00.000Z', endTime: '2025-03-01T00:00:00.000Z' });
  });

  it('an explicit bound is never altered, also under a history window', async () => {
    const windowed = await h.key({ account: { historyWindowDays: 7 } });
    const { body } = await get('/v2/traders/rankings?metric=position_count&startTime=2026-02-01T00:00:00Z', windowed);
    expect(body.data.filtersApplied.appliedTimeRange).toEqual({ startTime: '2026-02-01T00:00:00.000Z', endTime: iso(NOW) });
    // ...while the sample leaves out positions older than the window.
    expect(body.data.results.map((r: any) => [r.traderId, r.positionCount])).toEqual([
      [1, 1],
      [2, 1],
    ]);
  });

  it('limit is 1 to 50; minPositions is an integer >= 0; no cursor', async () => {
    expect((await get('/v2/traders/rankings?limit=51')).status).toBe(400);
    expect((await get('/v2/traders/rankings?limit=0')).status).toBe(400);
    expect((await get('/v2/traders/rankings?minPositions=-1')).status).toBe(400);
    expect((await get('/v2/traders/rankings?cursor=abc')).status).toBe(400);
    expect((await get('/v2/traders/rankings?limit=1')).body.data.results).toHaveLength(1);
  });

  it('performance metrics carry timeBasedPerformance with coverage and report windowEvaluability', async () => {
    const { body } = await get('/v2/traders/rankings?metric=avg_return&timeBasedPerformanceWindow=1D&minPositions=0');
    expect(body.data.filtersApplied.windowEvaluability).toBe('partial');
    expect(body.data.filtersApplied.timeBasedPerformanceWindow).toBe('1D');
    for (const r of body.data.results) expect(r.timeBasedPerformance).toMatchObject({ window: '1D', coverage: expect.any(Object) });
    const full = await get('/v2/traders/rankings?metric=win_rate&endTime=2026-05-01T00:00:00Z&minPositions=0');
    expect(full.body.data.filtersApplied.windowEvaluability).toBe('full');
  });

  it('PERFORMANCE_WINDOW_NOT_ELAPSED (422) with requested, resolved and both alternatives', async () => {
    const start = iso(NOW - 3 * DAY);
    const res = await get(`/v2/traders/rankings?metric=median_return&startTime=${start}`);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('PERFORMANCE_WINDOW_NOT_ELAPSED');
    expect(Compile(WindowNotElapsedDetails).Check(res.body.error.details)).toBe(true);
    const resolved = { startTime: start, endTime: iso(NOW), timeBasedPerformanceWindow: '30D' };
    expect(res.body.error.details).toEqual({
      requested: { startTime: start, endTime: null, timeBasedPerformanceWindow: null },
      resolved,
      alternatives: [
        { strategy: 'preserve_sample', ...resolved, timeBasedPerformanceWindow: '1D' },
        { strategy: 'preserve_evaluation', startTime: iso(NOW - 30 * DAY - 3 * DAY), endTime: iso(NOW), timeBasedPerformanceWindow: '30D' },
      ],
    });
    // No shorter window has elapsed since a start 2 hours ago: preserve_sample is left out.
    const young = await get(`/v2/traders/rankings?metric=sharpe_ratio&timeBasedPerformanceWindow=7D&startTime=${iso(NOW - 2 * HOUR)}`);
    expect(young.body.error.details.alternatives.map((a: any) => a.strategy)).toEqual(['preserve_evaluation']);
    // Activity metrics never raise it.
    expect((await get(`/v2/traders/rankings?metric=event_count&startTime=${start}`)).status).toBe(200);
  });
});

describe('GET /activity-summaries', () => {
  it('defaults: by trader, daily buckets, the 7 days before serverTime; empty buckets omitted; totals over all groups', async () => {
    const { body } = await get('/v2/activity-summaries?limit=1');
    expect(body.data.filtersApplied).toEqual({
      groupBy: 'trader',
      interval: 'day',
      eventTypes: ['open', 'close', 'increase', 'decrease'],
      traderIds: [],
      appliedTimeRange: { startTime: iso(NOW - 7 * DAY), endTime: iso(NOW) },
    });
    // Trader 1: a message 3 hours ago and the short opened 5 days ago; trader 2: an open 2 hours ago and a message 2 days ago.
    expect(body.data.results).toHaveLength(1);
    expect(body.data.meta).toMatchObject({ totalMessages: 2, totalEvents: 2 });
    for (const b of body.data.results[0].buckets) {
      expect(Date.parse(b.end) - Date.parse(b.start)).toBe(DAY);
      expect(b.messageCount + b.eventCount).toBeGreaterThan(0);
    }
  });

  it('groupBy none: one group without traderId; weeks start on Monday 00:00 UTC', async () => {
    const { body } = await get('/v2/activity-summaries?groupBy=none&interval=week&startTime=2026-04-01T00:00:00Z');
    expect(body.data.results).toHaveLength(1);
    expect(body.data.results[0].traderId).toBeUndefined();
    for (const b of body.data.results[0].buckets) {
      expect(new Date(b.start).getUTCDay()).toBe(1);
      expect(b.start.endsWith('T00:00:00.000Z')).toBe(true);
    }
  });

  it('hourly buckets by default reach back to the 168th hour (an unaligned 7 days meets 169)', async () => {
    const { status, body } = await get('/v2/activity-summaries?interval=hour&groupBy=none');
    expect(status).toBe(200);
    expect(body.data.filtersApplied.appliedTimeRange).toEqual({
      startTime: iso(Math.floor(NOW / HOUR) * HOUR - 167 * HOUR),
      endTime: iso(NOW),
    });
  });

  it('168 aligned buckets pass, 169 are BUCKET_LIMIT_EXCEEDED (422)', async () => {
    const t0 = Date.parse('2026-06-01T00:00:00.000Z');
    expect(
      (await get(`/v2/activity-summaries?interval=hour&startTime=${iso(t0)}&endTime=${iso(t0 + 167 * HOUR + 59 * 60_000)}`)).status,
    ).toBe(200);
    const over = await get(`/v2/activity-summaries?interval=hour&startTime=${iso(t0 + 30 * 60_000)}&endTime=${iso(t0 + 168 * HOUR)}`);
    expect(over.status).toBe(422);
    expect(over.body.error.code).toBe('BUCKET_LIMIT_EXCEEDED');
  });

  it('eventTypes restricts event counts only; limit is 1 to 50', async () => {
    const { body } = await get('/v2/activity-summaries?groupBy=none&eventTypes=close&startTime=2026-01-01T00:00:00Z&interval=week');
    expect(body.data.meta).toMatchObject({ totalEvents: 1, totalMessages: 2 });
    expect((await get('/v2/activity-summaries?limit=51')).status).toBe(400);
  });
});

describe('GET /traders/activity', () => {
  it('minPositionCount defaults to 3; 0 includes traders without positions unless assetIds is given; alphabetical', async () => {
    expect((await get('/v2/traders/activity')).body.data.results).toEqual([{ traderId: 1, positionCount: 4 }]);
    expect((await get('/v2/traders/activity?minPositionCount=0')).body.data.results.map((r: any) => r.traderId)).toEqual([1, 2, 3]);
    expect((await get('/v2/traders/activity?minPositionCount=0&assetIds=2')).body.data.results).toEqual([
      { traderId: 1, positionCount: 1 },
    ]);
  });

  it('pages with keyset cursors', async () => {
    const first = (await get('/v2/traders/activity?minPositionCount=0&limit=2')).body.data;
    expect(first.meta.hasMore).toBe(true);
    const second = (await get(`/v2/traders/activity?minPositionCount=0&limit=2&cursor=${first.meta.nextCursor}`)).body.data;
    expect([...first.results, ...second.results].map((r: any) => r.traderId)).toEqual([1, 2, 3]);
    expect(second.meta.hasMore).toBe(false);
  });
});

describe('scope and visibility', () => {
  it('needs stats.read; a caller without signal visibility is refused, activity summaries need either visibility', async () => {
    const noStats = await h.key({ scopes: ['events.read'] });
    expect((await get('/v2/traders/rankings', noStats)).status).toBe(403);
    const msgOnly = await h.key({ account: { signalVisibility: { mode: 'none' } } });
    expect((await get('/v2/traders/rankings', msgOnly)).status).toBe(403);
    const { body } = await get('/v2/activity-summaries?groupBy=none', msgOnly);
    expect(body.data.meta).toEqual({ totalMessages: 2, totalEvents: 0, serverTime: iso(NOW) });
  });
});

describe('merged tables', () => {
  it('events and messages each in one merged part are read without FINAL, with the same answers', async () => {
    const urls = [
      '/v2/traders/rankings',
      '/v2/traders/rankings?assetIds=1&metric=position_count',
      '/v2/traders/rankings?assetIds=2,3',
      '/v2/traders/rankings?assetIds=3', // counts nothing: the empty pinned answer is read again with FINAL
      '/v2/activity-summaries?startTime=2026-04-01T00:00:00Z&interval=week',
      '/v2/activity-summaries?groupBy=none&eventTypes=increase',
    ];
    const before = await Promise.all(urls.map(async (u) => (await get(u)).body.data));
    for (const t of ['events', 'messages']) await h.store.exec(`OPTIMIZE TABLE $db.${t} FINAL`);
    await h.compacted(['events', 'messages']); // as the server says after a compaction: reads look at the parts again
    const parts = await h.store.query<{ table: string; n: number; level: number }>(
      `SELECT table, count() AS n, max(level) AS level FROM system.parts
      WHERE database = {db:String} AND table IN ('events', 'messages') AND active GROUP BY table ORDER BY table`,
      { db: h.store.database },
    );
    expect(parts.map((p) => [p.table, Number(p.n), Number(p.level) > 0])).toEqual([
      ['events', 1, true],
      ['messages', 1, true],
    ]);
    const sqls: string[] = [];
    const query = h.store.query.bind(h.store);
    h.store.query = (async (sql: string, params?: Record<string, unknown>) => {
      sqls.push(sql);
      return query(sql, params);
    }) as typeof h.store.query;
    const merged: boolean[] = [];
    try {
      const after = [];
      for (const u of urls) {
        const from = sqls.length;
        after.push((await get(u)).body.data);
        merged.push(sqls.slice(from).some((s) => s.includes('._part = ')));
      }
      expect(after).toEqual(before);
    } finally {
      h.store.query = query;
    }
    // Each read of statements goes to the merged part (the weekly summary's reads find their rows rolled up).
    expect(merged).toEqual(urls.map((u) => !u.includes('interval=week')));
    expect(sqls.some((s) => s.includes('AS e FINAL'))).toBe(true);
    expect(before[2].results.length).toBeGreaterThan(0);
  });
});
