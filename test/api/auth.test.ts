import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, putAccount, revokeKey } from '../../apps/admin.ts';
import { OPERATIONS, type Operation } from '../../apps/registry.ts';
import { SCOPES, type AccountRecord, type Scope, type VisibilityPolicy } from '../../schemas/topics/index.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

/**
 * Authentication and access policy (contract sections 1, 5, 7; DESIGN 6 and 7).
 * The scope matrix is generated from OPERATIONS, so a new operation is covered automatically.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NOW = Date.now();
const ago = (ms: number) => new Date(NOW - ms).toISOString();

type Res = Awaited<ReturnType<Harness['get']>>;

function expectError(res: Res, status: number, code: string): void {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body.success).toBe(false);
  expect(res.body.error.code).toBe(code);
  expect(typeof res.body.error.message).toBe('string');
  expect(res.body.error.message.length).toBeGreaterThan(0);
  expect(res.body.error).toHaveProperty('details');
  expect(typeof res.body.requestId).toBe('string');
  expect(res.body.requestId.length).toBeGreaterThan(0);
  expect(res.headers['x-request-id']).toBe(res.body.requestId);
  expect(res.body).not.toHaveProperty('data');
}

function expectOk(res: Res): void {
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(res.body.success).toBe(true);
  expect(Array.isArray(res.body.data.results)).toBe(true);
  expect(typeof res.body.requestId).toBe('string');
  expect(res.headers['x-request-id']).toBe(res.body.requestId);
}

/**
 * A valid query for an operation: its required parameters (none today) filled with a sample value
 * derived from their schema, so an operation added later with required parameters is still covered.
 */
function minimalQuery(op: Operation): string {
  const schema = op.query as any;
  const params = new URLSearchParams();
  for (const name of (schema.required ?? []) as string[]) {
    const p = schema.properties[name];
    const list = p['x-list'];
    let v: string;
    if (list?.enum) v = list.enum[0];
    else if (list?.type === 'integer') v = '1';
    else if (p.enum) v = String(p.enum[0]);
    else if (p.anyOf?.[0]?.const !== undefined) v = String(p.anyOf[0].const);
    else if (p.const !== undefined) v = String(p.const);
    else if (p.type === 'integer' || p.type === 'number') v = String(p.minimum ?? 1);
    else if (p.type === 'boolean') v = 'false';
    else if (p.format === 'date-time') v = new Date(NOW - DAY).toISOString();
    else v = 'x';
    params.set(name, v);
  }
  const q = params.toString();
  return q ? `?${q}` : '';
}

/** Every (version, operation) route the registry serves, with a valid query. */
const ROUTES = OPERATIONS.flatMap((op) => op.versions.map((version) => ({ op, version, url: `/${version}${op.path}${minimalQuery(op)}` })));
const withParams = (url: string, extra: string) => `${url}${url.includes('?') ? '&' : '?'}${extra}`;

// ---- Data: 3 traders (1 TELEGRAM, 2 X, 3 TELEGRAM), 2 assets, messages, events, positions, prices. ----
const T1 = 1; const T2 = 2; const T3 = 3;
const DATA = [
  build.source('tg-1', { platform: 'TELEGRAM' }),
  build.source('x-2', { platform: 'X', profileUrl: 'https://x.com/x-2' }),
  build.source('tg-3', { platform: 'TELEGRAM' }),
  build.trader(T1, { name: 'Alice', source: { platform: 'TELEGRAM', sourceIdentityId: 'tg-1' } }),
  build.trader(T2, { name: 'Bob', source: { platform: 'X', sourceIdentityId: 'x-2' } }),
  build.trader(T3, { name: 'Carol', source: { platform: 'TELEGRAM', sourceIdentityId: 'tg-3' } }),
  build.asset(1),
  build.asset(2),
  build.price(1, ago(2 * DAY), 100),
  build.price(1, ago(30 * 60_000), 110),
  build.price(2, ago(2 * DAY), 50),
  build.price(2, ago(30 * 60_000), 45),
  // messages: id, source, time
  build.message('m1a', 'tg-1', ago(1 * HOUR)),
  build.message('m1old', 'tg-1', ago(20 * DAY)),
  build.message('m2a', 'x-2', ago(2 * HOUR), { platform: 'X' }),
  build.message('m2b', 'x-2', ago(5 * HOUR), { platform: 'X' }),
  build.message('m3a', 'tg-3', ago(3 * HOUR)),
  // trader 1: open position 101 (asset 1), closed position 102 (asset 2), old open position 111 (20 days ago)
  build.event(1011, { positionId: 101, traderId: T1, assetId: 1, price: 100, timeOfEvent: ago(2 * HOUR), messageId: 'm1a' }),
  build.event(1021, { positionId: 102, traderId: T1, assetId: 2, price: 50, timeOfEvent: ago(6 * HOUR) }),
  build.event(1022, { positionId: 102, traderId: T1, assetId: 2, price: 48, type: 'close', timeOfEvent: ago(4 * HOUR) }),
  build.event(1111, { positionId: 111, traderId: T1, assetId: 1, price: 90, timeOfEvent: ago(20 * DAY) }),
  // trader 2: open short position 201 (asset 2)
  build.event(2011, { positionId: 201, traderId: T2, assetId: 2, direction: 'short', price: 50, timeOfEvent: ago(3 * HOUR), messageId: 'm2a' }),
  // trader 3: open position 301 (asset 1)
  build.event(3011, { positionId: 301, traderId: T3, assetId: 1, price: 105, timeOfEvent: ago(4 * HOUR) }),
];
const ALL_EVENT_IDS = [1011, 1021, 1022, 1111, 2011, 3011];
const ALL_MESSAGE_IDS = ['m1a', 'm1old', 'm2a', 'm2b', 'm3a'];
const MSG_TRADER: Record<string, number> = { m1a: T1, m1old: T1, m2a: T2, m2b: T2, m3a: T3 };
const EVENT_TRADER: Record<number, number> = { 1011: T1, 1021: T1, 1022: T1, 1111: T1, 2011: T2, 3011: T3 };

let h: Harness;
/** A key per scope, each holding only that scope, on an account with every visibility. */
const scopeKeys = new Map<Scope, string>();
let allKey: string;

const ids = (res: Res) => res.body.data.results.map((r: any) => r.id);
const sorted = <T>(xs: T[]) => [...xs].sort();

async function accountKey(account: Partial<Omit<AccountRecord, 'version'>>, scopes: readonly Scope[] = SCOPES): Promise<string> {
  return h.key({ scopes, account });
}
const vis = (mode: VisibilityPolicy['mode'], extra: Partial<VisibilityPolicy> = {}): VisibilityPolicy => ({ mode, ...extra });

beforeAll(async () => {
  h = await createHarness();
  await h.given(DATA as any);
  for (const scope of SCOPES) scopeKeys.set(scope, await h.key({ scopes: [scope] }));
  allKey = await h.key();
});
afterAll(async () => { await h?.close(); });

describe('test data sanity', () => {
  it('an all-visibility key sees every event, message, position and trader', async () => {
    const ev = await h.get('/v2/events?limit=200', allKey);
    expectOk(ev);
    expect(sorted(ids(ev))).toEqual(sorted(ALL_EVENT_IDS));
    const msg = await h.get('/v2/messages?limit=200', allKey);
    expectOk(msg);
    expect(sorted(ids(msg))).toEqual(sorted(ALL_MESSAGE_IDS));
    const pos = await h.get('/v2/positions?limit=200', allKey);
    expect(sorted(ids(pos))).toEqual([101, 102, 111, 201, 301]);
    const open = await h.get('/v2/positions/open?limit=200', allKey);
    expect(sorted(ids(open))).toEqual([101, 111, 201, 301]);
    const dir = await h.get('/v2/traders?limit=200', allKey);
    expect(sorted(ids(dir))).toEqual([T1, T2, T3]);
  });
});

describe('scope matrix (generated from OPERATIONS x versions x SCOPES)', () => {
  it('covers every operation of the registry', () => {
    expect(ROUTES.length).toBeGreaterThanOrEqual(OPERATIONS.length);
    for (const op of OPERATIONS) expect(SCOPES).toContain(op.scope);
  });

  for (const { op, url } of ROUTES) {
    describe(`GET ${url} (scope ${op.scope}, visibility ${op.visibility ?? 'none needed'})`, () => {
      for (const scope of SCOPES) {
        const allowed = scope === op.scope;
        it(`a key holding only ${scope} -> ${allowed ? '200' : '403 FORBIDDEN'}`, async () => {
          const res = await h.get(url, scopeKeys.get(scope)!);
          if (allowed) expectOk(res);
          else expectError(res, 403, 'FORBIDDEN');
        });
      }

      it('no key -> 401 UNAUTHORIZED', async () => {
        expectError(await h.get(url), 401, 'UNAUTHORIZED');
      });

      it('an unknown but well-formed key -> 401 UNAUTHORIZED', async () => {
        expectError(await h.get(url, `sb_0123456789abcdef_${'A'.repeat(43)}`), 401, 'UNAUTHORIZED');
      });

      it('401 wins over parameter validation (bad params, no key or an unknown key)', async () => {
        expectError(await h.get(withParams(url, 'limit=0&noSuchParam=1&cursor=')), 401, 'UNAUTHORIZED');
        expectError(await h.get(withParams(url, 'limit=abc'), 'not-a-key'), 401, 'UNAUTHORIZED');
        // and with a valid key the same parameters are a validation error
        expectError(await h.get(withParams(url, 'limit=0&noSuchParam=1'), allKey), 400, 'VALIDATION_ERROR');
      });
    });
  }

  it('a key holding several scopes may use each of them', async () => {
    const key = await h.key({ scopes: ['events.read', 'messages.read'] });
    expectOk(await h.get('/v2/events', key));
    expectOk(await h.get('/v2/messages', key));
    expectError(await h.get('/v2/positions', key), 403, 'FORBIDDEN');
  });

  it('an x-request-id sent by the caller is echoed on errors', async () => {
    const res = await h.app.inject({ method: 'GET', url: '/v2/events', headers: { 'x-request-id': 'my-req-1' } });
    expect(res.statusCode).toBe(401);
    expect(res.headers['x-request-id']).toBe('my-req-1');
    expect(res.json().requestId).toBe('my-req-1');
  });
});

describe('key and account lifecycle', () => {
  it('a revoked key -> 401', async () => {
    putAccount(h.log, { id: 'revoker', status: 'active', emailVerified: true, messageVisibility: vis('all'), signalVisibility: vis('all'), historyWindowDays: null });
    const { key, record } = createKey(h.log, 'revoker', ['events.read']);
    await h.settle();
    expectOk(await h.get('/v2/events', key)); // also warms the auth cache
    revokeKey(h.log, record.id);
    await h.settle();
    expectError(await h.get('/v2/events', key), 401, 'UNAUTHORIZED');
    expectError(await h.get('/v1/events', key), 401, 'UNAUTHORIZED');
  });

  it('a blocked account -> 403 on the next request after settle; active again -> 200', async () => {
    const account = { id: 'blockme', status: 'active' as const, emailVerified: true, messageVisibility: vis('all'), signalVisibility: vis('all'), historyWindowDays: null };
    const key = await accountKey(account);
    expectOk(await h.get('/v2/events', key)); // cached as allowed
    putAccount(h.log, { ...account, status: 'blocked' });
    await h.settle();
    expectError(await h.get('/v2/events', key), 403, 'FORBIDDEN');
    expectError(await h.get('/v2/messages', key), 403, 'FORBIDDEN');
    putAccount(h.log, { ...account, status: 'active' });
    await h.settle();
    expectOk(await h.get('/v2/events', key));
  });

  it('an account whose email is not verified -> 403', async () => {
    const account = { id: 'unverified', status: 'active' as const, emailVerified: true, messageVisibility: vis('all'), signalVisibility: vis('all'), historyWindowDays: null };
    const key = await accountKey(account);
    expectOk(await h.get('/v2/events', key));
    putAccount(h.log, { ...account, emailVerified: false });
    await h.settle();
    expectError(await h.get('/v2/events', key), 403, 'FORBIDDEN');
    // a key created for an account that is unverified from the start is refused too
    const key2 = await accountKey({ id: 'unverified2', emailVerified: false });
    expectError(await h.get('/v2/events', key2), 403, 'FORBIDDEN');
  });

  it('a blocked account is refused even before it made a request', async () => {
    const key = await accountKey({ id: 'blocked-from-start', status: 'blocked' });
    expectError(await h.get('/v2/traders', key), 403, 'FORBIDDEN');
  });
});

describe('visibility policies', () => {
  it('message visibility platforms [X] returns only X messages', async () => {
    const key = await accountKey({ messageVisibility: vis('platforms', { platforms: ['X'] }) });
    for (const v of ['v1', 'v2']) {
      const res = await h.get(`/${v}/messages?limit=200`, key);
      expectOk(res);
      expect(sorted(ids(res))).toEqual(['m2a', 'm2b']);
      for (const m of res.body.data.results) expect(m.source.platform).toBe('X');
    }
    // TELEGRAM traders' messages stay hidden even when asked for by traderIds or ids
    const byTrader = await h.get(`/v2/messages?traderIds=${T1},${T3}`, key);
    expectOk(byTrader);
    expect(ids(byTrader)).toEqual([]);
    const byId = await h.get('/v2/messages?ids=m1a,m2a', key);
    expect(ids(byId)).toEqual(['m2a']);
    // signal visibility is untouched: every event is visible
    expect(sorted(ids(await h.get('/v2/events?limit=200', key)))).toEqual(sorted(ALL_EVENT_IDS));
  });

  it('message visibility traders [1] returns only trader 1 messages', async () => {
    const key = await accountKey({ messageVisibility: vis('traders', { traderIds: [T1] }) });
    const res = await h.get('/v2/messages?limit=200', key);
    expectOk(res);
    expect(sorted(ids(res))).toEqual(['m1a', 'm1old']);
    for (const m of res.body.data.results) expect(m.traderId).toBe(T1);
    // trader 3 shares trader 1's platform but is outside the policy
    expect(ids(await h.get(`/v2/messages?traderIds=${T3}`, key))).toEqual([]);
  });

  it('signal visibility traders [1] restricts events, positions, open positions and directory rows', async () => {
    const key = await accountKey({ messageVisibility: vis('none'), signalVisibility: vis('traders', { traderIds: [T1] }) });
    for (const v of ['v1', 'v2']) {
      const ev = await h.get(`/${v}/events?limit=200`, key);
      expectOk(ev);
      expect(sorted(ids(ev))).toEqual(sorted(ALL_EVENT_IDS.filter((id) => EVENT_TRADER[id] === T1)));
      const pos = await h.get(`/${v}/positions?limit=200`, key);
      expectOk(pos);
      expect(sorted(ids(pos))).toEqual([101, 102, 111]);
      const open = await h.get(`/${v}/positions/open?limit=200`, key);
      expectOk(open);
      expect(sorted(ids(open))).toEqual([101, 111]);
    }
    // asking for an invisible trader yields nothing, not an error
    const other = await h.get(`/v2/events?traderIds=${T2}`, key);
    expectOk(other);
    expect(ids(other)).toEqual([]);
    expect(ids(await h.get(`/v2/positions?positionIds=201,301`, key))).toEqual([]);
    const dir = await h.get('/v2/traders?limit=200', key);
    expectOk(dir);
    expect(ids(dir)).toEqual([T1]);
    // message visibility none: messages are forbidden for this account
    expectError(await h.get('/v2/messages', key), 403, 'FORBIDDEN');
  });

  it('signal visibility platforms [X] restricts events and positions to X traders', async () => {
    const key = await accountKey({ signalVisibility: vis('platforms', { platforms: ['X'] }) });
    expect(ids(await h.get('/v2/events?limit=200', key))).toEqual([2011]);
    expect(ids(await h.get('/v2/positions?limit=200', key))).toEqual([201]);
    expect(ids(await h.get('/v2/positions/open?limit=200', key))).toEqual([201]);
  });

  it('the directory shows a trader when either visibility permits', async () => {
    const key = await accountKey({ messageVisibility: vis('platforms', { platforms: ['X'] }), signalVisibility: vis('traders', { traderIds: [T1] }) });
    const dir = await h.get('/v2/traders?limit=200', key);
    expectOk(dir);
    expect(sorted(ids(dir))).toEqual([T1, T2]);
  });

  it('signal none + message all: events/positions 403, messages 200, traderIds selects that trader\'s messages', async () => {
    const key = await accountKey({ messageVisibility: vis('all'), signalVisibility: vis('none') });
    for (const v of ['v1', 'v2']) {
      expectError(await h.get(`/${v}/events`, key), 403, 'FORBIDDEN');
      expectError(await h.get(`/${v}/positions`, key), 403, 'FORBIDDEN');
      expectError(await h.get(`/${v}/positions/open`, key), 403, 'FORBIDDEN');
      const msg = await h.get(`/${v}/messages?limit=200`, key);
      expectOk(msg);
      expect(sorted(ids(msg))).toEqual(sorted(ALL_MESSAGE_IDS));
    }
    const t1 = await h.get(`/v2/messages?traderIds=${T1}`, key);
    expectOk(t1);
    expect(sorted(ids(t1))).toEqual(['m1a', 'm1old']);
    for (const m of t1.body.data.results) expect(m.traderId).toBe(T1);
    const t2 = await h.get(`/v2/messages?traderIds=${T2}`, key);
    expect(sorted(ids(t2))).toEqual(['m2a', 'm2b']);
    // directory: message visibility permits every trader
    expect(sorted(ids(await h.get('/v2/traders?limit=200', key)))).toEqual([T1, T2, T3]);
  });

  it('messages traderIds is independent of a restrictive signal visibility', async () => {
    const key = await accountKey({ signalVisibility: vis('traders', { traderIds: [T2] }) });
    const res = await h.get(`/v2/messages?traderIds=${T3}`, key);
    expectOk(res);
    expect(ids(res)).toEqual(['m3a']);
  });

  it('both visibilities none: the directory is 403', async () => {
    const key = await accountKey({ messageVisibility: vis('none'), signalVisibility: vis('none') });
    expectError(await h.get('/v2/traders', key), 403, 'FORBIDDEN');
    expectError(await h.get('/v2/events', key), 403, 'FORBIDDEN');
    expectError(await h.get('/v2/messages', key), 403, 'FORBIDDEN');
  });

  it('visibility changes apply on the next request after settle', async () => {
    const account = { id: 'changing', status: 'active' as const, emailVerified: true, messageVisibility: vis('all'), signalVisibility: vis('all'), historyWindowDays: null };
    const key = await accountKey(account);
    expect(sorted(ids(await h.get('/v2/events?limit=200', key)))).toEqual(sorted(ALL_EVENT_IDS));
    putAccount(h.log, { ...account, signalVisibility: vis('traders', { traderIds: [T3] }) });
    await h.settle();
    expect(ids(await h.get('/v2/events?limit=200', key))).toEqual([3011]);
    putAccount(h.log, { ...account, signalVisibility: vis('none') });
    await h.settle();
    expectError(await h.get('/v2/events', key), 403, 'FORBIDDEN');
  });
});

describe('account history window (historyWindowDays: 10)', () => {
  let key: string;
  beforeAll(async () => { key = await accountKey({ historyWindowDays: 10 }); });

  const floorOf = (res: Res) => Date.parse(res.body.data.meta.serverTime) - 10 * DAY;

  for (const path of ['/v2/events', '/v2/messages', '/v2/positions', '/v1/events']) {
    it(`${path}: no startTime -> clamped to serverTime - 10 d, older rows omitted`, async () => {
      const res = await h.get(`${path}?limit=200`, key);
      expectOk(res);
      const applied = Date.parse(res.body.data.meta.appliedTimeRange.startTime);
      expect(Math.abs(applied - floorOf(res))).toBeLessThanOrEqual(1000);
      const got = ids(res);
      expect(got.length).toBeGreaterThan(0);
      for (const old of [1111, 111, 'm1old']) expect(got).not.toContain(old);
    });
  }

  it('an explicit older startTime is clamped forward', async () => {
    const start = ago(30 * DAY);
    const res = await h.get(`/v2/events?limit=200&startTime=${encodeURIComponent(start)}`, key);
    expectOk(res);
    const applied = Date.parse(res.body.data.meta.appliedTimeRange.startTime);
    expect(Math.abs(applied - floorOf(res))).toBeLessThanOrEqual(1000);
    expect(ids(res)).not.toContain(1111);
    expect(sorted(ids(res))).toEqual(sorted(ALL_EVENT_IDS.filter((id) => id !== 1111)));
    // an account without a history window sees the old event with the same query
    const unlimited = await h.get(`/v2/events?limit=200&startTime=${encodeURIComponent(start)}`, allKey);
    expect(unlimited.body.data.meta.appliedTimeRange.startTime).toBe(start);
    expect(ids(unlimited)).toContain(1111);
  });

  it('hydration by ids / positionIds (no default window) is still held to the history window', async () => {
    const msg = await h.get('/v2/messages?ids=m1a,m1old', key);
    expectOk(msg);
    expect(ids(msg)).toEqual(['m1a']);
    expect(Math.abs(Date.parse(msg.body.data.meta.appliedTimeRange.startTime) - floorOf(msg))).toBeLessThanOrEqual(1000);
    const pos = await h.get('/v2/positions?positionIds=101,111', key);
    expectOk(pos);
    expect(ids(pos)).toEqual([101]);
    // without a history window the same hydration returns both
    expect(sorted(ids(await h.get('/v2/messages?ids=m1a,m1old', allKey)))).toEqual(['m1a', 'm1old']);
  });

  it('an explicit startTime newer than the floor is kept', async () => {
    const start = new Date(NOW - 5 * HOUR).toISOString();
    const res = await h.get(`/v2/events?limit=200&startTime=${encodeURIComponent(start)}`, key);
    expectOk(res);
    expect(res.body.data.meta.appliedTimeRange.startTime).toBe(start);
    // events at -2h, -3h, -4h and the close at -4h; the open of 102 at -6h is before the start
    expect(sorted(ids(res))).toEqual(sorted([1011, 1022, 2011, 3011]));
  });
});
