// Issue 24 item 5, DESIGN 6 "Account scopes": an account holds a set of scopes (default all seven);
// its keys and OAuth grants are limited to it. Expectations from the contract (section 5.1: "one
// key or account may hold several scopes"; a credential without the read's scope is 403) and
// DESIGN 6: a key or grant beyond the account's scopes is refused where it is made, and a
// credential made before the account was narrowed reads only what the account still holds.

import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL, createKey, putAccount } from '../../../apps/admin.ts';
import { type AccountRecord, SCOPES, type Scope } from '../../../schemas/topics/index.ts';
import { build, createHarness, type Harness } from '../../helpers/harness.ts';
import { connect, rawMcp, signIn, TestOAuthProvider } from '../../helpers/mcp-client.ts';

const DAY = 86_400_000;
let h: Harness;
let origin: string;
let mcpUrl: string;

const account = (id: string, scopes?: Scope[]): Omit<AccountRecord, 'version'> => ({
  id,
  status: 'active',
  emailVerified: true,
  messageVisibility: ALL,
  signalVisibility: ALL,
  historyWindowDays: null,
  ...(scopes ? { scopes } : {}),
});

beforeAll(async () => {
  h = await createHarness({ mcp: true });
  const t = new Date(Date.now() - 3 * DAY).toISOString();
  await h.given([
    build.trader(1),
    build.source('src-1'),
    build.asset(1),
    build.event(1, { timeOfEvent: t }),
    build.message('tg-1', 'src-1', t),
  ]);
  origin = await h.listen();
  mcpUrl = h.urls().mcpUrl;
});
afterAll(async () => {
  await h?.close();
});

describe('issue 24: accounts carry the scopes they may hold (DESIGN 6 "Account scopes")', () => {
  it('the accounts read model carries them; a record without scopes (from before they existed) holds all seven', async () => {
    putAccount(h.log, account('legacy'));
    putAccount(h.log, account('narrow', ['events.read', 'stats.read']));
    await h.settle();
    const rows = await h.store.query<{ id: string; scopes: string[] }>(
      "SELECT id, scopes FROM $db.accounts FINAL WHERE id IN ('legacy', 'narrow') ORDER BY id",
    );
    expect(rows.map((r) => [r.id, [...r.scopes].sort()])).toEqual([
      ['legacy', [...SCOPES].sort()],
      ['narrow', ['events.read', 'stats.read']],
    ]);
  });

  it("a key beyond the account's scopes is refused with a clear error; by default a key gets the account's scopes", () => {
    expect(() => createKey(h.log, 'narrow', ['events.read', 'messages.read'])).toThrow(/account narrow does not hold messages\.read/);
    expect(createKey(h.log, 'narrow').record.scopes).toEqual(['events.read', 'stats.read']);
    expect(createKey(h.log, 'narrow', ['stats.read']).record.scopes).toEqual(['stats.read']);
    expect(createKey(h.log, 'legacy').record.scopes).toEqual([...SCOPES]);
  });

  it("narrowing an account takes effect on its existing keys (the key's scopes intersected with the account's), and widening it back too", async () => {
    const key = await h.key({ account: { id: 'shrinks' } }); // a key with every scope
    expect((await h.get('/v2/messages', key)).status).toBe(200);
    putAccount(h.log, account('shrinks', ['events.read', 'feed.read']));
    await h.settle();
    const refused = await h.get('/v2/messages', key);
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('FORBIDDEN');
    expect((await h.get('/v2/positions', key)).status).toBe(403);
    expect((await h.get('/v2/events', key)).status).toBe(200);
    putAccount(h.log, account('shrinks'));
    await h.settle();
    expect((await h.get('/v2/messages', key)).status).toBe(200);
    // A key never gains what it was not given: the account's scopes only narrow.
    const eventsOnly = await h.key({ account: { id: 'wide' }, scopes: ['events.read'] });
    expect((await h.get('/v2/messages', eventsOnly)).status).toBe(403);
  });

  it("MCP: a token is limited to its account's scopes (tools/list; a call of another scope is 403 insufficient_scope)", async () => {
    putAccount(h.log, account('mcp-narrow', ['events.read', 'stats.read']));
    await h.settle();
    const token = await h.token({ account: 'mcp-narrow', scopes: SCOPES }); // minted with every scope
    const client = await connect(mcpUrl, { token });
    const tools = (await client.listTools()).tools.map((t) => t.name).sort();
    await client.close();
    expect(tools).toContain('list_events');
    expect(tools).toContain('list_trader_stats');
    expect(tools).not.toContain('list_messages');
    expect(tools).not.toContain('list_positions');
    const call = await rawMcp(
      mcpUrl,
      { authorization: `Bearer ${token}`, origin },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_messages', arguments: {} } },
    );
    expect(call.status).toBe(403);
    expect(call.headers.get('www-authenticate')).toMatch(/insufficient_scope/);
  });

  it("the sign-in page grants only the account's scopes; a refresh after the account is narrowed keeps only what it still holds", async () => {
    putAccount(h.log, account('oauth-narrow', ['events.read', 'positions.read']));
    await h.settle();
    await h.password('oauth-narrow', 'oauth-narrow-password');
    const provider = new TestOAuthProvider();
    await auth(provider, { serverUrl: mcpUrl });
    // Every scope is offered and ticked; the grant holds the account's only.
    const answer = await signIn(provider.authorizationUrl!, { account: 'oauth-narrow', password: 'oauth-narrow-password' });
    expect(answer.offered?.length).toBe(SCOPES.length);
    expect(answer.status).toBe(302);
    const code = new URL(answer.location!).searchParams.get('code')!;
    expect(await auth(provider, { serverUrl: mcpUrl, authorizationCode: code })).toBe('AUTHORIZED');
    expect(String(decodeJwt(provider.saved!.access_token).scope).split(' ').sort()).toEqual(['events.read', 'positions.read']);
    expect(provider.saved!.scope!.split(' ').sort()).toEqual(['events.read', 'positions.read']);

    // Ticking only scopes the account does not hold: refused on the page, with the reason.
    const other = new TestOAuthProvider();
    await auth(other, { serverUrl: mcpUrl });
    const refused = await signIn(other.authorizationUrl!, {
      account: 'oauth-narrow',
      password: 'oauth-narrow-password',
      scopes: ['messages.read', 'feed.read'],
    });
    expect(refused.status).toBe(403);
    expect(refused.html).toMatch(/may not share messages\.read, feed\.read/);

    // The account narrowed: the next refresh grants what it still holds.
    putAccount(h.log, account('oauth-narrow', ['events.read']));
    await h.settle();
    const res = await fetch(`${origin}/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: provider.saved!.refresh_token!,
        client_id: String(provider.client!.client_id),
      }),
    });
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body.scope).toBe('events.read');
    expect(decodeJwt(body.access_token).scope).toBe('events.read');
  });
});
