import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, putAccount, revokeKey } from '../../apps/admin.ts';
import { type AccountRecord, SCOPES, type Scope, type VisibilityPolicy } from '../../schemas/topics/index.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

/**
 * Authentication and access policy (contract sections 1, 4, 5, 7; DESIGN 6 and 7).
 *
 * The expected scope and visibility of every route are the contract's, written out below; nothing
 * here reads them from the code under test (apps/registry.ts). The server is asked only which GET
 * routes it mounts, and every one of them must have a row in the tables below: a new route without
 * a contract row fails this file.
 */

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NOW = Date.now();
const ago = (ms: number) => new Date(NOW - ms).toISOString();

// ---- The contract's tables, literally ----

/** Contract section 5, rule 1: each read family needs its read scope. */
const SECTION_5_SCOPES: Record<string, string> = {
  'events.read': 'events',
  'messages.read': 'messages',
  'feed.read': 'partner feed',
  'summaries.read': 'channel and aggregate summaries',
  'positions.read': 'position history and open positions',
  'directory.read': 'trader and asset discovery',
  'stats.read': 'trader stats, asset stats, trader activity, rankings, activity summaries',
};
const CONTRACT_SCOPES = Object.keys(SECTION_5_SCOPES) as Scope[];

/**
 * Contract section 4 (path -> scope) for the routes served today, with the versions that serve them
 * (section 9: /traders is the v2 directory; the v1 legacy /traders is not served yet) and the
 * visibility each needs at all (sections 2 and 4, DESIGN 7): messages need message visibility
 * ("Requires messages.read and message visibility"); events, positions and open positions are
 * signal content and need signal visibility; directory rows need either ("Requires scope
 * directory.read and message or signal visibility"); asset discovery carries no trader content and
 * needs none. `family` is the section 5 family the scope is for.
 */
interface ContractRoute {
  path: string;
  versions: readonly ('v1' | 'v2')[];
  scope: Scope;
  family: string;
  visibility: 'message' | 'signal' | 'either' | 'both' | null;
  /** A valid query (with the read's required parameters). */
  query: string;
}
const SECTION_4: readonly ContractRoute[] = [
  { path: '/traders', versions: ['v2'], scope: 'directory.read', family: 'trader and asset discovery', visibility: 'either', query: '' },
  // The v1 legacy trader discovery: a directory row needs either visibility (tradeCount counts under signal visibility only).
  { path: '/traders', versions: ['v1'], scope: 'directory.read', family: 'trader and asset discovery', visibility: 'either', query: '' },
  { path: '/assets', versions: ['v1', 'v2'], scope: 'directory.read', family: 'trader and asset discovery', visibility: null, query: '' },
  { path: '/events', versions: ['v1', 'v2'], scope: 'events.read', family: 'events', visibility: 'signal', query: '' },
  { path: '/messages', versions: ['v1', 'v2'], scope: 'messages.read', family: 'messages', visibility: 'message', query: '' },
  {
    path: '/positions',
    versions: ['v1', 'v2'],
    scope: 'positions.read',
    family: 'position history and open positions',
    visibility: 'signal',
    query: '',
  },
  {
    path: '/positions/open',
    versions: ['v1', 'v2'],
    scope: 'positions.read',
    family: 'position history and open positions',
    visibility: 'signal',
    query: '',
  },
  // A feed group shows a message's text and its trade events: both visibilities.
  { path: '/feed', versions: ['v1', 'v2'], scope: 'feed.read', family: 'partner feed', visibility: 'both', query: '' },
  // A channel summary describes one trader's channel: message visibility; aggregate summaries name no trader or channel.
  {
    path: '/channel-summaries',
    versions: ['v1', 'v2'],
    scope: 'summaries.read',
    family: 'channel and aggregate summaries',
    visibility: 'message',
    query: '',
  },
  {
    path: '/aggregate-summaries',
    versions: ['v1', 'v2'],
    scope: 'summaries.read',
    family: 'channel and aggregate summaries',
    visibility: null,
    query: '',
  },
  // Stats reads (README "Analytics reads"): position and event figures need signal visibility; activity
  // summaries count messages under message visibility and events under signal visibility, so either.
  {
    path: '/traders/activity',
    versions: ['v2'],
    scope: 'stats.read',
    family: 'trader stats, asset stats, trader activity, rankings, activity summaries',
    visibility: 'signal',
    query: '',
  },
  {
    path: '/traders/stats',
    versions: ['v1', 'v2'],
    scope: 'stats.read',
    family: 'trader stats, asset stats, trader activity, rankings, activity summaries',
    visibility: 'signal',
    query: '?traderIds=1',
  },
  {
    path: '/assets/stats',
    versions: ['v1', 'v2'],
    scope: 'stats.read',
    family: 'trader stats, asset stats, trader activity, rankings, activity summaries',
    visibility: 'signal',
    query: '?assetIds=1',
  },
  {
    path: '/traders/rankings',
    versions: ['v1', 'v2'],
    scope: 'stats.read',
    family: 'trader stats, asset stats, trader activity, rankings, activity summaries',
    visibility: 'signal',
    query: '',
  },
  {
    path: '/activity-summaries',
    versions: ['v1', 'v2'],
    scope: 'stats.read',
    family: 'trader stats, asset stats, trader activity, rankings, activity summaries',
    visibility: 'either',
    query: '',
  },
  // Exports (issue 28, DESIGN 6): each under the scope and visibility of the list read it streams.
  { path: '/exports/events', versions: ['v2'], scope: 'events.read', family: 'events', visibility: 'signal', query: '' },
  { path: '/exports/messages', versions: ['v2'], scope: 'messages.read', family: 'messages', visibility: 'message', query: '' },
  {
    path: '/exports/positions',
    versions: ['v2'],
    scope: 'positions.read',
    family: 'position history and open positions',
    visibility: 'signal',
    query: '',
  },
  { path: '/exports/feed', versions: ['v2'], scope: 'feed.read', family: 'partner feed', visibility: 'both', query: '' },
];
/** Operational routes of section 4 (no scope shown): not part of the matrix. */
const OPERATIONAL = /^\/v[12]\/(healthz|openapi\.json|docs)(\/.*)?$/;

/** Every (version, path) of the table above, with its valid query. */
const ROUTES = SECTION_4.flatMap((r) => r.versions.map((version) => ({ ...r, version, url: `/${version}${r.path}${r.query}` })));
const withParams = (url: string, extra: string) => `${url}${url.includes('?') ? '&' : '?'}${extra}`;

/**
 * The GET routes the server has mounted, from fastify's own route tree (`printRoutes`): lines like
 * `├── /v2/positions (GET)` with children such as `│   └── /open (GET)` indented 4 characters a level.
 */
function mountedGetRoutes(app: FastifyInstance): string[] {
  const tree = app.printRoutes({ commonPrefix: false, method: 'GET' });
  const stack: string[] = [];
  const out: string[] = [];
  for (const line of tree.split('\n')) {
    const m = /^((?:│ {3}| {4})*)(?:├── |└── )(\S+)(?: \(([^)]*)\))?/.exec(line);
    if (!m) continue;
    const depth = m[1]!.length / 4;
    const path = (depth > 0 ? stack[depth - 1]! : '') + m[2]!;
    stack.length = depth;
    stack.push(path);
    if (
      m[3] !== undefined &&
      m[3]
        .split(',')
        .map((x) => x.trim())
        .includes('GET')
    )
      out.push(path);
  }
  return out;
}

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
  // An export (issue 28): rows, not an envelope.
  if (String(res.headers['content-type']).startsWith('application/x-ndjson')) return;
  expect(res.body.success).toBe(true);
  expect(Array.isArray(res.body.data.results)).toBe(true);
  expect(typeof res.body.requestId).toBe('string');
  expect(res.headers['x-request-id']).toBe(res.body.requestId);
}

// ---- Data: 3 traders (1 TELEGRAM, 2 X, 3 TELEGRAM), 2 assets, messages, events, positions, prices. ----
const T1 = 1;
const T2 = 2;
const T3 = 3;
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
  build.event(2011, {
    positionId: 201,
    traderId: T2,
    assetId: 2,
    direction: 'short',
    price: 50,
    timeOfEvent: ago(3 * HOUR),
    messageId: 'm2a',
  }),
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
/** A key per scope holding every other scope of the contract, on an account with every visibility. */
const allButKeys = new Map<Scope, string>();
/** Keys holding every scope, on accounts with message and/or signal visibility none or restricted. */
const visibilityKeys = new Map<string, string>();
let allKey: string;

const ids = (res: Res) => res.body.data.results.map((r: any) => r.id);
const sorted = <T>(xs: T[]) => [...xs].sort();

async function accountKey(account: Partial<Omit<AccountRecord, 'version'>>, scopes: readonly Scope[] = CONTRACT_SCOPES): Promise<string> {
  return h.key({ scopes, account });
}
const vis = (mode: VisibilityPolicy['mode'], extra: Partial<VisibilityPolicy> = {}): VisibilityPolicy => ({ mode, ...extra });

beforeAll(async () => {
  h = await createHarness();
  await h.given(DATA as any);
  for (const scope of CONTRACT_SCOPES) {
    scopeKeys.set(scope, await h.key({ scopes: [scope] }));
    allButKeys.set(scope, await h.key({ scopes: CONTRACT_SCOPES.filter((s) => s !== scope) }));
  }
  const none = vis('none');
  const all = vis('all');
  visibilityKeys.set('message only', await h.key({ scopes: CONTRACT_SCOPES, account: { messageVisibility: all, signalVisibility: none } }));
  visibilityKeys.set('signal only', await h.key({ scopes: CONTRACT_SCOPES, account: { messageVisibility: none, signalVisibility: all } }));
  visibilityKeys.set('neither', await h.key({ scopes: CONTRACT_SCOPES, account: { messageVisibility: none, signalVisibility: none } }));
  visibilityKeys.set(
    'restricted both',
    await h.key({
      scopes: CONTRACT_SCOPES,
      account: {
        messageVisibility: vis('platforms', { platforms: ['X'] }),
        signalVisibility: vis('traders', { traderIds: [T1] }),
      },
    }),
  );
  allKey = await h.key({ scopes: CONTRACT_SCOPES });
});
afterAll(async () => {
  await h?.close();
});

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

describe('scope matrix (contract sections 4 and 5, written out above)', () => {
  it("the two contract tables agree, and the service knows exactly the contract's scopes", () => {
    for (const r of SECTION_4) expect(SECTION_5_SCOPES[r.scope], r.path).toBe(r.family);
    expect([...SCOPES].sort()).toEqual([...CONTRACT_SCOPES].sort());
  });

  it('every GET route mounted under /v1 and /v2 (other than healthz, openapi.json, docs) has a contract row, and every row is mounted', () => {
    const mounted = mountedGetRoutes(h.app);
    // the parse found the operational routes too (it reads the whole tree)
    expect(mounted).toEqual(expect.arrayContaining(['/v1/healthz', '/v2/healthz', '/v2/openapi.json']));
    const reads = mounted.filter((p) => /^\/v[12]\//.test(p) && !OPERATIONAL.test(p)).sort();
    const contract = ROUTES.map((r) => `/${r.version}${r.path}`).sort();
    const withoutRow = reads.filter((p) => !contract.includes(p));
    expect(withoutRow, 'mounted read routes without a contract row in this test').toEqual([]);
    expect(reads).toEqual(contract);
  });

  for (const route of ROUTES) {
    const { url } = route;
    describe(`GET ${url} (contract scope ${route.scope}, visibility ${route.visibility ?? 'none needed'})`, () => {
      for (const scope of CONTRACT_SCOPES) {
        const allowed = scope === route.scope;
        it(`a key holding only ${scope} -> ${allowed ? '200' : '403 FORBIDDEN'}`, async () => {
          const res = await h.get(url, scopeKeys.get(scope)!);
          if (allowed) expectOk(res);
          else expectError(res, 403, 'FORBIDDEN');
        });
      }

      it('a key holding every scope but its own -> 403 FORBIDDEN', async () => {
        expectError(await h.get(url, allButKeys.get(route.scope)!), 403, 'FORBIDDEN');
      });

      it(`visibility: ${route.visibility === null ? 'needs none' : `needs ${route.visibility} visibility`} (403 FORBIDDEN without it)`, async () => {
        const needs = (msg: boolean, sig: boolean): boolean => {
          switch (route.visibility) {
            case 'message':
              return msg;
            case 'signal':
              return sig;
            case 'either':
              return msg || sig;
            case 'both':
              return msg && sig;
            case null:
              return true;
          }
        };
        for (const [name, msg, sig] of [
          ['message only', true, false],
          ['signal only', false, true],
          ['neither', false, false],
          ['restricted both', true, true],
        ] as const) {
          const res = await h.get(url, visibilityKeys.get(name)!);
          if (needs(msg, sig)) expectOk(res);
          else expectError(res, 403, 'FORBIDDEN');
        }
      });

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
    putAccount(h.log, {
      id: 'revoker',
      status: 'active',
      emailVerified: true,
      messageVisibility: vis('all'),
      signalVisibility: vis('all'),
      historyWindowDays: null,
    });
    const { key, record } = createKey(h.log, 'revoker', ['events.read']);
    await h.settle();
    expectOk(await h.get('/v2/events', key)); // also warms the auth cache
    revokeKey(h.log, record.id);
    await h.settle();
    expectError(await h.get('/v2/events', key), 401, 'UNAUTHORIZED');
    expectError(await h.get('/v1/events', key), 401, 'UNAUTHORIZED');
  });

  it('a blocked account -> 403 on the next request after settle; active again -> 200', async () => {
    const account = {
      id: 'blockme',
      status: 'active' as const,
      emailVerified: true,
      messageVisibility: vis('all'),
      signalVisibility: vis('all'),
      historyWindowDays: null,
    };
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
    const account = {
      id: 'unverified',
      status: 'active' as const,
      emailVerified: true,
      messageVisibility: vis('all'),
      signalVisibility: vis('all'),
      historyWindowDays: null,
    };
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
    const key = await accountKey({
      messageVisibility: vis('platforms', { platforms: ['X'] }),
      signalVisibility: vis('traders', { traderIds: [T1] }),
    });
    const dir = await h.get('/v2/traders?limit=200', key);
    expectOk(dir);
    expect(sorted(ids(dir))).toEqual([T1, T2]);
  });

  it("signal none + message all: events/positions 403, messages 200, traderIds selects that trader's messages", async () => {
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
    const account = {
      id: 'changing',
      status: 'active' as const,
      emailVerified: true,
      messageVisibility: vis('all'),
      signalVisibility: vis('all'),
      historyWindowDays: null,
    };
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
  beforeAll(async () => {
    key = await accountKey({ historyWindowDays: 10 });
  });

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
