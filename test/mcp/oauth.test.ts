import { auth, UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import { connect, rawMcp, signIn, TestOAuthProvider } from '../helpers/mcp-client.ts';

/**
 * Issue 9: a real MCP client (the SDK's Client over HTTP) connects by URL alone: it discovers the
 * protected-resource and authorization-server metadata, registers itself, the user signs in and
 * approves scopes on the consent page, the client exchanges the code (PKCE) and calls tools;
 * refresh tokens rotate. Expectations come from the OAuth RFCs and the contract (section 5).
 */

// Every scope and the contract's section 4 tool names (one per REST read).
const ALL_SCOPES = ['events.read', 'messages.read', 'feed.read', 'summaries.read', 'positions.read', 'directory.read', 'stats.read'];
const CONTRACT_TOOLS = [
  'list_trader_directory',
  'list_trader_activity',
  'list_traders',
  'list_assets',
  'list_feed',
  'list_events',
  'list_messages',
  'list_channel_summaries',
  'list_aggregate_summaries',
  'list_positions',
  'list_open_positions',
  'list_trader_stats',
  'list_asset_stats',
  'rank_traders',
  'summarize_message_activity',
];
/** Arguments each tool needs at least (its required parameters, contract 4). */
const MINIMAL: Record<string, Record<string, unknown>> = { list_trader_stats: { traderIds: [1] }, list_asset_stats: { assetIds: [1] } };

let h: Harness;
let origin: string;
let mcpUrl: string;

beforeAll(async () => {
  h = await createHarness({ mcp: true });
  await h.given([
    build.trader(1),
    build.source('src-1'),
    build.asset(1),
    build.event(1, { timeOfEvent: new Date(Date.now() - 3 * 86_400_000).toISOString() }),
    build.message('tg-1', 'src-1', new Date(Date.now() - 3 * 86_400_000).toISOString()),
  ]);
  await h.key({ account: { id: 'alice' } });
  await h.key({ account: { id: 'bob', status: 'blocked' } });
  await h.password('alice', 'alice-password-1');
  await h.password('bob', 'bob-password-1');
  await h.key({ account: { id: 'hank' } });
  await h.password('hank', 'hank-password-1');
  origin = await h.listen();
  mcpUrl = h.urls().mcpUrl;
});
afterAll(async () => {
  await h.close();
});

/** Starts the flow as a client application does: connect, get 401, discover, register, and be sent to the authorization URL. */
async function startFlow(provider = new TestOAuthProvider()) {
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  const client = new Client({ name: 'flow', version: '1' });
  await expect(client.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.authorizationUrl).toBeDefined();
  return { provider, transport, url: provider.authorizationUrl! };
}

async function tokenRequest(params: Record<string, string>) {
  const res = await fetch(`${origin}/token`, { method: 'POST', body: new URLSearchParams(params) });
  return { status: res.status, body: (await res.json()) as any };
}

describe('the whole OAuth flow with the SDK client', () => {
  it('discovery, registration, PKCE, consent, token, every tool, refresh with rotation', async () => {
    const { provider, transport, url } = await startFlow();
    const reg = provider.client as Record<string, any>;
    expect(reg.client_id).toEqual(expect.any(String));
    // The authorization request: PKCE S256 and the MCP URL as resource (RFC 8707).
    expect(url.origin).toBe(origin);
    expect(url.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url.searchParams.get('resource')).toBe(mcpUrl);

    const answer = await signIn(url, { account: 'alice', password: 'alice-password-1' });
    expect(answer.offered?.sort()).toEqual([...ALL_SCOPES].sort());
    expect(answer.status).toBe(302);
    const back = new URL(answer.location!);
    expect(`${back.origin}${back.pathname}`).toBe(provider.redirectUrl);
    expect(back.searchParams.get('state')).toBe('state-123');
    expect(back.searchParams.get('iss')).toBe(origin);
    await transport.finishAuth(back.searchParams.get('code')!);

    const tokens = provider.saved!;
    expect(tokens.token_type.toLowerCase()).toBe('bearer');
    expect(tokens.refresh_token).toEqual(expect.any(String));
    const claims = decodeJwt(tokens.access_token);
    expect(claims).toMatchObject({ iss: origin, aud: mcpUrl, sub: 'alice' });
    expect(String(claims.scope).split(' ').sort()).toEqual([...ALL_SCOPES].sort());

    const client = await connect(mcpUrl, { provider });
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([...CONTRACT_TOOLS].sort());
    for (const t of tools) {
      const r = await client.callTool({ name: t.name, arguments: MINIMAL[t.name] ?? {} });
      expect(r.isError, `${t.name}: ${JSON.stringify(r.content)}`).toBeFalsy();
      expect(r.structuredContent).toEqual(expect.objectContaining({ results: expect.any(Array) }));
    }
    await client.close();

    // Refresh (the SDK's own refresh): a new access token and a new refresh token; the old one is spent.
    const before = provider.saved!;
    expect(await auth(provider, { serverUrl: mcpUrl })).toBe('AUTHORIZED');
    const after = provider.saved!;
    expect(after.refresh_token).not.toBe(before.refresh_token);
    expect(after.access_token).not.toBe(before.access_token);
    const clientId = String(reg.client_id);
    const reuse = await tokenRequest({ grant_type: 'refresh_token', refresh_token: before.refresh_token!, client_id: clientId });
    expect(reuse).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    // Reuse of a spent token revokes its family: the newest refresh token stops working too.
    const next = await tokenRequest({ grant_type: 'refresh_token', refresh_token: after.refresh_token!, client_id: clientId });
    expect(next).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
  });

  it('approving fewer scopes gives a token with just those: tools/list shows only their tools, and calling another is 403 insufficient_scope', async () => {
    const { provider, transport, url } = await startFlow();
    const answer = await signIn(url, { account: 'alice', password: 'alice-password-1', scopes: ['events.read', 'directory.read'] });
    await transport.finishAuth(new URL(answer.location!).searchParams.get('code')!);
    expect(provider.saved!.scope!.split(' ').sort()).toEqual(['directory.read', 'events.read']);
    const client = await connect(mcpUrl, { provider });
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
      'list_assets',
      'list_events',
      'list_trader_directory',
      'list_traders',
    ]);
    await client.close();
    const r = await rawMcp(
      mcpUrl,
      { authorization: `Bearer ${provider.saved!.access_token}` },
      { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'rank_traders', arguments: {} } },
    );
    expect(r.status).toBe(403);
    const challenge = r.headers.get('www-authenticate')!;
    expect(challenge).toContain('error="insufficient_scope"');
    expect(challenge).toContain(`resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp"`);
    expect(/scope="([^"]*)"/.exec(challenge)![1]!.split(' ')).toContain('stats.read');
  });
});

describe('the authorization server refuses', () => {
  it('a wrong password (the page again, 401, no code), and a blocked account (403)', async () => {
    const { url } = await startFlow();
    const wrong = await signIn(url, { account: 'alice', password: 'not-her-password' });
    expect(wrong.status).toBe(401);
    expect(wrong.location).toBeNull();
    expect(wrong.html).toContain('Wrong account or password');
    const unknown = await signIn((await startFlow()).url, { account: 'nobody', password: 'whatever-1' });
    expect(unknown.status).toBe(401);
    const blocked = await signIn((await startFlow()).url, { account: 'bob', password: 'bob-password-1' });
    expect(blocked.status).toBe(403);
    expect(blocked.html).toContain('blocked');
  });

  it('deny: back to the client with error=access_denied and the state', async () => {
    const { url } = await startFlow();
    const denied = await signIn(url, { account: 'alice', password: 'alice-password-1', action: 'deny' });
    expect(denied.status).toBe(302);
    const back = new URL(denied.location!);
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('state')).toBe('state-123');
    expect(back.searchParams.get('code')).toBeNull();
  });

  it('PKCE: a wrong code_verifier, a reused code; plain challenges; another resource', async () => {
    const { provider, url } = await startFlow();
    const answer = await signIn(url, { account: 'alice', password: 'alice-password-1' });
    const code = new URL(answer.location!).searchParams.get('code')!;
    const clientId = String(provider.client!.client_id);
    const base = { grant_type: 'authorization_code', code, client_id: clientId, redirect_uri: provider.redirectUrl };
    expect(await tokenRequest({ ...base, code_verifier: 'x'.repeat(43) })).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
    const ok = await tokenRequest({ ...base, code_verifier: provider.verifier });
    expect(ok.status).toBe(200);
    expect(await tokenRequest({ ...base, code_verifier: provider.verifier })).toMatchObject({
      status: 400,
      body: { error: 'invalid_grant' },
    });

    const plain = new URL(url);
    plain.searchParams.set('code_challenge_method', 'plain');
    const p = await fetch(plain, { redirect: 'manual' });
    expect(p.status).toBe(302);
    expect(new URL(p.headers.get('location')!).searchParams.get('error')).toBe('invalid_request');

    const other = new URL(url);
    other.searchParams.set('resource', 'https://elsewhere.example/mcp');
    const o = await fetch(other, { redirect: 'manual' });
    expect(o.status).toBe(302);
    expect(new URL(o.headers.get('location')!).searchParams.get('error')).toBe('invalid_target');
  });

  it('an unregistered redirect_uri (no redirect to it) and an unknown client', async () => {
    const { url } = await startFlow();
    const evil = new URL(url);
    evil.searchParams.set('redirect_uri', 'https://evil.example/cb');
    const e = await fetch(evil, { redirect: 'manual' });
    expect(e.status).toBe(400);
    expect(e.headers.get('location')).toBeNull();
    const unknown = new URL(url);
    unknown.searchParams.set('client_id', 'no-such-client');
    expect((await fetch(unknown, { redirect: 'manual' })).status).toBe(400);
  });

  it('a refresh for an account blocked since the sign-in: invalid_grant', async () => {
    const { provider, transport, url } = await startFlow();
    const answer = await signIn(url, { account: 'hank', password: 'hank-password-1' });
    await transport.finishAuth(new URL(answer.location!).searchParams.get('code')!);
    await h.key({ account: { id: 'hank', status: 'blocked' } });
    const r = await tokenRequest({
      grant_type: 'refresh_token',
      refresh_token: provider.saved!.refresh_token!,
      client_id: String(provider.client!.client_id),
    });
    expect(r).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });
  });

  it('a consent form for a sign-in that does not exist', async () => {
    const res = await fetch(`${origin}/consent`, {
      method: 'POST',
      body: new URLSearchParams({
        request: 'forged',
        account: 'alice',
        password: 'alice-password-1',
        scope: 'events.read',
        action: 'approve',
      }),
      redirect: 'manual',
    });
    expect(res.status).toBe(400);
    expect(res.headers.get('location')).toBeNull();
  });

  it('registration (RFC 7591) answers the client management address (RFC 7592), readable with its token only', async () => {
    const res = await fetch(`${origin}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'raw', redirect_uris: ['http://127.0.0.1:9/cb'], token_endpoint_auth_method: 'none' }),
    });
    expect(res.status).toBe(201);
    const reg = (await res.json()) as any;
    expect(reg.registration_client_uri).toBe(`${origin}/clients/${reg.client_id}`);
    expect(reg.registration_access_token).toEqual(expect.any(String));
    const read = await fetch(reg.registration_client_uri, { headers: { authorization: `Bearer ${reg.registration_access_token}` } });
    expect(read.status).toBe(200);
    expect(await read.json()).toMatchObject({ client_id: reg.client_id, redirect_uris: ['http://127.0.0.1:9/cb'], client_name: 'raw' });
    expect((await fetch(reg.registration_client_uri, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    // A redirect URI that is not http(s) is refused at registration.
    const bad = await fetch(`${origin}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: ['javascript:alert(1)'] }),
    });
    expect(bad.status).toBe(400);
  });

  it('publishes RFC 8414 metadata with S256 only, registration, and a JWKS with the signing key', async () => {
    const meta = (await (await fetch(`${origin}/.well-known/oauth-authorization-server`)).json()) as any;
    expect(meta).toMatchObject({
      issuer: origin,
      authorization_endpoint: `${origin}/authorize`,
      token_endpoint: `${origin}/token`,
      registration_endpoint: `${origin}/register`,
      code_challenge_methods_supported: ['S256'],
    });
    const jwks = (await (await fetch(meta.jwks_uri)).json()) as any;
    expect(jwks.keys).toHaveLength(1);
    expect(jwks.keys[0]).toMatchObject({ kty: 'EC', alg: 'ES256', kid: expect.any(String) });
    expect(jwks.keys[0].d).toBeUndefined(); // never the private part
  });
});
