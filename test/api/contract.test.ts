import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

/** The contract's common response and query rules (section 1) and DESIGN section 6 decisions, over in-process HTTP. */
let h: Harness;
let key: string;
const HOUR = 3600e3;
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

beforeAll(async () => {
  h = await createHarness();
  await h.given([
    build.source('src-1'),
    build.trader(1, { name: 'Alice' }),
    build.source('src-2', { platform: 'X' }),
    build.trader(2, { name: 'Bob', source: { platform: 'X', sourceIdentityId: 'src-2' } }),
    build.trader(3, { name: 'Deleted Dave', source: null }),
    build.asset(1, {
      symbol: 'BTC',
      markets: [
        { quoteSymbol: 'USDT', active: true, preferred: true },
        { quoteSymbol: 'USD', active: true, preferred: false },
      ],
    }),
    build.asset(2, { symbol: 'SPX', assetClass: 'equities', category: 'Indices' }),
    build.asset(3, { symbol: 'AAPL', assetClass: 'equities', category: 'Technology' }),
    build.asset(4, { symbol: 'BND', assetClass: 'bonds' }),
    build.asset(5, { symbol: 'DEAD', markets: [{ quoteSymbol: 'USD', active: false, preferred: true }] }),
    // 60 events on trader 1 / asset 1, an hour apart, alternating open/close types
    ...Array.from({ length: 60 }, (_, i) => build.event(1000 + i, { positionId: 1000 + i, timeOfEvent: ago((i + 1) * HOUR) })),
    build.event(2000, { positionId: 2000, traderId: 2, assetId: 2, timeOfEvent: ago(2 * HOUR) }),
    build.event(2001, { positionId: 2000, traderId: 2, assetId: 2, type: 'close', timeOfEvent: ago(HOUR) }),
    build.event(3000, { positionId: 3000, traderId: 3, assetId: 1, timeOfEvent: ago(HOUR) }),
    build.event(5000, { positionId: 5000, traderId: 1, assetId: 5, timeOfEvent: ago(HOUR) }),
    build.event(6000, { positionId: 6000, traderId: 1, assetId: 3, timeOfEvent: ago(200 * 24 * HOUR) }),
    build.price(1, ago(HOUR / 2), 110),
  ]);
  await h.given([build.trader(3, { name: 'Deleted Dave', source: null, version: 2, deleted: true })]);
  key = await h.key();
});
afterAll(async () => {
  await h?.close();
});

describe('envelopes and request ids', () => {
  it('success envelope with requestId echoed in x-request-id', async () => {
    const res = await h.get('/v2/events?limit=1', key);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      success: true,
      data: { results: expect.any(Array), meta: { hasMore: true, nextCursor: expect.any(String) } },
    });
    expect(typeof res.body.requestId).toBe('string');
    expect(res.headers['x-request-id']).toBe(res.body.requestId);
  });

  it('echoes a caller-supplied x-request-id', async () => {
    const res = await h.app.inject({ url: '/v2/assets', headers: { 'x-api-key': key, 'x-request-id': 'trace-123' } });
    expect(res.json().requestId).toBe('trace-123');
    expect(res.headers['x-request-id']).toBe('trace-123');
  });

  it('error envelope on errors, with requestId', async () => {
    const res = await h.get('/v2/nope', key);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({
      success: false,
      error: { code: 'NOT_FOUND', message: expect.any(String), details: null },
      requestId: res.headers['x-request-id'],
    });
  });
});

describe('serverTime and appliedTimeRange', () => {
  it('default window is the last 90 days ending at serverTime', async () => {
    const before = Date.now();
    const { body } = await h.get('/v2/events', key);
    const { serverTime, appliedTimeRange } = body.data.meta;
    expect(Date.parse(serverTime)).toBeGreaterThanOrEqual(before - 5);
    expect(Math.abs(Date.parse(appliedTimeRange.endTime) - Date.parse(serverTime))).toBeLessThan(50);
    expect(Date.parse(appliedTimeRange.endTime) - Date.parse(appliedTimeRange.startTime)).toBe(90 * 24 * HOUR);
    expect(body.data.results.map((e: any) => e.id)).not.toContain(6000); // 200 days old: outside the default window
  });

  it('one explicit bound leaves the other open', async () => {
    const start = ago(365 * 24 * HOUR);
    const { body } = await h.get(`/v2/events?startTime=${start}&limit=200`, key);
    expect(body.data.meta.appliedTimeRange).toEqual({ startTime: start, endTime: null });
    expect(body.data.results.map((e: any) => e.id)).toContain(6000);
  });

  it('is on historical lists and absent on open positions and directories', async () => {
    for (const p of ['/v2/events', '/v2/messages', '/v2/positions'])
      expect((await h.get(p, key)).body.data.meta.appliedTimeRange).toBeDefined();
    for (const p of ['/v2/positions/open', '/v2/traders', '/v2/assets']) {
      const meta = (await h.get(p, key)).body.data.meta;
      expect(meta.appliedTimeRange).toBeUndefined();
      expect(meta).toEqual({
        hasMore: expect.any(Boolean),
        nextCursor: meta.hasMore ? expect.any(String) : null,
        serverTime: expect.any(String),
      });
    }
  });

  it('rejects startTime after endTime', async () => {
    const res = await h.get(`/v2/events?startTime=${ago(HOUR)}&endTime=${ago(2 * HOUR)}`, key);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
  });
});

describe('limits and validation', () => {
  it('defaults to 50 rows and accepts 1..200', async () => {
    expect((await h.get('/v2/events', key)).body.data.results).toHaveLength(50);
    expect((await h.get('/v2/events?limit=200', key)).body.data.results.length).toBe(62); // 60 + position 2000's two events
    for (const bad of ['0', '201', 'x', '1.5']) {
      const res = await h.get(`/v2/events?limit=${bad}`, key);
      expect(res.status).toBe(400);
      expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [expect.objectContaining({ param: 'limit' })] });
    }
  });

  it('rejects unknown parameters with details', async () => {
    const res = await h.get('/v2/events?traderId=1', key);
    expect(res.status).toBe(400);
    expect(res.body.error.details).toContainEqual({ param: 'traderId', message: 'unknown parameter' });
  });

  it('takes comma-separated lists and rejects bad members', async () => {
    const { body } = await h.get('/v2/events?types=close,increase&limit=200', key);
    expect(body.data.results.map((e: any) => e.id)).toEqual([2001]);
    const { body: two } = await h.get('/v2/events?traderIds=1,2&assetIds=1,2&limit=200', key);
    expect(new Set(two.data.results.map((e: any) => e.traderId))).toEqual(new Set([1, 2]));
    const bad = await h.get('/v2/events?types=open,bogus', key);
    expect(bad.status).toBe(400);
    expect(bad.body.error.details[0]).toEqual({ param: 'types', message: expect.stringContaining('open, close, increase, decrease') });
    expect((await h.get('/v2/events?traderIds=1,,2', key)).status).toBe(400);
    const repeated = await h.get('/v2/events?types=open&types=close', key);
    expect(repeated.body.error.details).toEqual([
      { param: 'types', message: 'given more than once; pass it once (lists are comma-separated)' },
    ]);
    expect((await h.get('/v2/events?startTime=yesterday', key)).body.error.details[0].param).toBe('startTime');
  });

  it('caps id lists', async () => {
    const ids = Array.from({ length: 201 }, (_, i) => i + 1).join(',');
    const res = await h.get(`/v2/positions?positionIds=${ids}`, key);
    expect(res.status).toBe(400);
    expect(res.body.error.details).toEqual([{ param: 'positionIds', message: 'must have at most 200 values' }]);
  });
});

describe('assetClass', () => {
  const symbols = async (q: string) => (await h.get(`/v2/assets${q}`, key)).body.data.results.map((a: any) => a.symbol);
  it('matches resolved classes; empty or omitted means all, including other', async () => {
    expect(await symbols('?assetClass=indices')).toEqual(['SPX']);
    expect(await symbols('?assetClass=stocks,indices')).toEqual(['AAPL', 'SPX']);
    expect(await symbols('?assetClass=')).toEqual(['AAPL', 'BND', 'BTC', 'SPX']);
    expect(await symbols('')).toEqual(['AAPL', 'BND', 'BTC', 'SPX']);
    expect(await symbols('?assetClass=crypto&search=bt')).toEqual(['BTC']);
  });
  it.each(['all', 'equities', 'other', 'crypto,other'])('rejects assetClass=%s', async (v) => {
    const res = await h.get(`/v2/assets?assetClass=${v}`, key);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'VALIDATION_ERROR', details: [{ param: 'assetClass' }] });
  });
});

describe('cursors', () => {
  it('rejects a malformed cursor', async () => {
    for (const c of ['zzz', '!!', Buffer.from('{"k":"x"}').toString('base64url')]) {
      const res = await h.get(`/v2/events?cursor=${c}`, key);
      expect(res.status).toBe(400);
      expect(res.body.error).toEqual({ code: 'INVALID_CURSOR', message: 'Malformed cursor', details: null });
    }
    expect((await h.get('/v2/events?cursor=', key)).status).toBe(400);
  });
  it('rejects a cursor used with other filters', async () => {
    const first = await h.get('/v2/events?limit=5&types=open', key);
    const res = await h.get(`/v2/events?limit=5&types=close&cursor=${first.body.data.meta.nextCursor}`, key);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('INVALID_CURSOR');
    expect((await h.get(`/v2/events?limit=7&types=open&cursor=${first.body.data.meta.nextCursor}`, key)).status).toBe(200);
  });
});

describe('eligibility and quoteSymbol', () => {
  it('omits rows of deleted traders and of assets without an active market', async () => {
    const ids = (await h.get('/v2/events?limit=200', key)).body.data.results.map((e: any) => e.id);
    expect(ids).not.toContain(3000);
    expect(ids).not.toContain(5000);
    const assets = (await h.get('/v2/assets', key)).body.data.results.map((a: any) => a.symbol);
    expect(assets).not.toContain('DEAD');
    const traders = (await h.get('/v2/traders', key)).body.data.results.map((t: any) => t.name);
    expect(traders).toEqual(['Alice', 'Bob']);
  });

  it('resolves quoteSymbol from the preferred active market at read time', async () => {
    const q = async () => (await h.get('/v2/events?assetIds=1&limit=1', key)).body.data.results[0].quoteSymbol;
    expect(await q()).toBe('USDT');
    await h.given([
      build.asset(1, {
        symbol: 'BTC',
        version: 2,
        markets: [
          { quoteSymbol: 'USDT', active: false, preferred: true },
          { quoteSymbol: 'USD', active: true, preferred: false },
        ],
      }),
    ]);
    expect(await q()).toBe('USD');
    const pos = (await h.get('/v2/positions?assetIds=1&limit=1', key)).body.data.results[0];
    expect(pos.quoteSymbol).toBe('USD');
  });

  it('marks open positions from the latest price', async () => {
    const { body } = await h.get('/v2/positions/open?assetIds=1&limit=200', key);
    expect(body.data.results.length).toBeGreaterThan(0);
    for (const p of body.data.results) {
      expect(p.currentPrice).toBe(110);
      expect(p.currentReturnPercentage).toBeCloseTo(10, 9); // long from 100 to 110
    }
  });
});

describe('operational routes', () => {
  it('healthz needs no key and answers in the success envelope on the root and both versions (DESIGN 6 Health)', async () => {
    for (const path of ['/healthz', '/v1/healthz', '/v2/healthz']) {
      const res = await h.get(path);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        success: true,
        data: { results: [{ status: 'ok', dataVersion: expect.any(Number), projectorLag: 0 }], meta: { serverTime: expect.any(String) } },
        requestId: res.headers['x-request-id'],
      });
      expect(res.body.data.results[0].dataVersion).toBeGreaterThan(0);
    }
  });
  it('each version has its own OpenAPI; the host root serves v1', async () => {
    const v1 = (await h.get('/v1/openapi.json')).body;
    const v2 = (await h.get('/v2/openapi.json')).body;
    expect((await h.get('/openapi.json')).body).toEqual(v1);
    expect(Object.keys(v2.paths)).toEqual(
      expect.arrayContaining(['/traders', '/assets', '/events', '/messages', '/positions', '/positions/open', '/healthz']),
    );
    expect(v2.paths['/events'].get.parameters.map((p: any) => p.name)).toEqual([
      'traderIds',
      'assetIds',
      'directions',
      'types',
      'startTime',
      'endTime',
      'limit',
      'cursor',
    ]);
    // v1's /traders is the legacy discovery (tradeCount, minTrades), not the v2 directory
    expect(v1.paths['/traders'].get.parameters.map((p: any) => p.name)).toContain('minTrades');
    expect(v2.paths['/traders'].get.parameters.map((p: any) => p.name)).not.toContain('minTrades');
  });
  it('serves the docs page', async () => {
    const res = await h.app.inject({ url: '/docs' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect((await h.app.inject({ url: '/docs/assets/swagger-ui-bundle.js' })).statusCode).toBe(200);
  });
});
