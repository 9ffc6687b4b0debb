import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL, putAccount } from '../../apps/admin.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { TokenVerifier } from '../../apps/mcp/bearer.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import { connect, rawMcp, startTestIssuer } from '../helpers/mcp-client.ts';

/**
 * The resource side of MCP auth (issue 9 item 2; contract 5.4-5.5; RFC 6750, RFC 9728): every
 * refusal on /mcp answers a WWW-Authenticate challenge naming the protected-resource metadata,
 * with `invalid_token` or `insufficient_scope` where it applies; API keys are refused.
 */

let h: Harness;
let origin: string;
let mcpUrl: string;
const metadataUrl = () => `${origin}/.well-known/oauth-protected-resource/mcp`;

beforeAll(async () => {
  h = await createHarness({ mcp: true });
  await h.given([
    build.trader(1),
    build.source('src-1'),
    build.asset(1),
    build.event(1, { timeOfEvent: new Date(Date.now() - 86_400_000).toISOString() }),
  ]);
  await h.key({ account: { id: 'carol' } });
  await h.key({ account: { id: 'dave' } });
  await h.key({ account: { id: 'quiet', signalVisibility: { mode: 'none' } } });
  origin = await h.listen();
  mcpUrl = h.urls().mcpUrl;
});
afterAll(async () => {
  await h.close();
});

const list = (headers: Record<string, string>) => rawMcp(mcpUrl, headers);

function challengeOf(r: { headers: Headers }): Record<string, string> {
  const v = r.headers.get('www-authenticate') ?? '';
  expect(v.startsWith('Bearer ')).toBe(true);
  return Object.fromEntries([...v.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
}

describe('refusals on /mcp', () => {
  it('no credential: 401 naming the resource metadata, without an error code (RFC 6750 3.1)', async () => {
    const r = await list({});
    expect(r.status).toBe(401);
    const c = challengeOf(r);
    expect(c.resource_metadata).toBe(metadataUrl());
    expect(c.error).toBeUndefined();
  });

  it('an API key, as x-api-key or as a bearer token, is refused (contract 5)', async () => {
    const key = await h.key({ account: { id: 'carol' } });
    const asHeader = await list({ 'x-api-key': key });
    expect(asHeader.status).toBe(401);
    expect(challengeOf(asHeader).resource_metadata).toBe(metadataUrl());
    expect(asHeader.json.error_description).toMatch(/API keys are not accepted/);
    const asBearer = await list({ authorization: `Bearer ${key}` });
    expect(asBearer.status).toBe(401);
    expect(challengeOf(asBearer).error).toBe('invalid_token');
  });

  it('a malformed, expired, wrong-audience or wrong-issuer token: 401 invalid_token', async () => {
    const cases = {
      malformed: 'not.a.jwt',
      expired: await h.token({ account: 'carol', ttlSeconds: -60 }),
      audience: await h.token({ account: 'carol', audience: 'https://other.example/mcp' }),
      issuer: await h.token({ account: 'carol', issuer: 'https://issuer.example' }),
    };
    for (const [name, token] of Object.entries(cases)) {
      const r = await list({ authorization: `Bearer ${token}` });
      expect(r.status, name).toBe(401);
      const c = challengeOf(r);
      expect(c.error, name).toBe('invalid_token');
      expect(c.resource_metadata, name).toBe(metadataUrl());
    }
  });

  it('a token signed by a key the issuer does not publish: 401 invalid_token', async () => {
    const { privateKey } = await generateKeyPair('ES256');
    const forged = await new SignJWT({ scope: 'events.read' })
      .setProtectedHeader({ alg: 'ES256', kid: 'forged', typ: 'at+jwt' })
      .setIssuer(origin)
      .setAudience(mcpUrl)
      .setSubject('carol')
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(privateKey);
    const r = await list({ authorization: `Bearer ${forged}` });
    expect(r.status).toBe(401);
    expect(challengeOf(r).error).toBe('invalid_token');
  });

  it("a token with none of the server's scopes: 403 insufficient_scope listing them", async () => {
    const r = await list({ authorization: `Bearer ${await h.token({ account: 'carol', scopes: [] })}` });
    expect(r.status).toBe(403);
    const c = challengeOf(r);
    expect(c.error).toBe('insufficient_scope');
    expect(c.scope!.split(' ')).toContain('stats.read');
  });

  it('the owner account is checked at each call: blocked, then unverified, then active again', async () => {
    const token = await h.token({ account: 'dave' });
    expect((await list({ authorization: `Bearer ${token}` })).status).toBe(200);
    const set = async (over: Record<string, unknown>) => {
      putAccount(h.log, {
        id: 'dave',
        status: 'active',
        emailVerified: true,
        messageVisibility: ALL,
        signalVisibility: ALL,
        historyWindowDays: null,
        ...over,
      });
      await h.settle();
    };
    await set({ status: 'blocked' });
    const blocked = await list({ authorization: `Bearer ${token}` });
    expect(blocked.status).toBe(401);
    expect(challengeOf(blocked).error).toBe('invalid_token');
    expect(blocked.json.error_description).toMatch(/blocked/);
    await set({ emailVerified: false });
    const unverified = await list({ authorization: `Bearer ${token}` });
    expect(unverified.status).toBe(401);
    expect(unverified.json.error_description).toMatch(/verified/);
    await set({});
    expect((await list({ authorization: `Bearer ${token}` })).status).toBe(200);
  });

  it('a token of an account that does not exist: 401 invalid_token', async () => {
    const r = await list({ authorization: `Bearer ${await h.token({ account: 'ghost' })}` });
    expect(r.status).toBe(401);
    expect(challengeOf(r).error).toBe('invalid_token');
  });
});

describe('scopes and visibility of tools', () => {
  it('tools/list lists what the token may call; calling another is 403 insufficient_scope naming its scope', async () => {
    const token = await h.token({ account: 'carol', scopes: ['messages.read'] });
    const client = await connect(mcpUrl, { token });
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['list_messages']);
    await client.close();
    const r = await rawMcp(
      mcpUrl,
      { authorization: `Bearer ${token}` },
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_events', arguments: {} } },
    );
    expect(r.status).toBe(403);
    const c = challengeOf(r);
    expect(c.error).toBe('insufficient_scope');
    expect(c.scope!.split(' ').sort()).toEqual(['events.read', 'messages.read']);
  });

  it('an account without signal visibility: the signal tools are not listed, and a call is a FORBIDDEN tool error', async () => {
    const client = await connect(mcpUrl, { token: await h.token({ account: 'quiet' }) });
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).not.toContain('list_events');
    expect(names).toContain('list_messages');
    const r = await client.callTool({ name: 'list_events', arguments: {} });
    expect(r.isError).toBe(true);
    expect(JSON.parse((r.content as any)[0].text).error.code).toBe('FORBIDDEN');
    await client.close();
  });
});

describe('protected-resource metadata (RFC 9728)', () => {
  it('at the path form and the root form: the MCP URL as resource, the issuer, the scopes', async () => {
    for (const url of [metadataUrl(), `${origin}/.well-known/oauth-protected-resource`]) {
      const res = await fetch(url);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({
        resource: mcpUrl,
        authorization_servers: [origin],
        bearer_methods_supported: ['header'],
        scopes_supported: expect.arrayContaining(['events.read', 'stats.read']),
      });
    }
  });
});

describe("the issuer's JWKS", () => {
  let served: object[] = [];
  let test: Awaited<ReturnType<typeof startTestIssuer>>;
  let issuer: string;
  beforeAll(async () => {
    test = await startTestIssuer(() => served);
    issuer = test.issuer;
  });
  afterAll(() => test.close());

  const keyPair = async (kid: string) => {
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256' } };
  };
  const sign = (k: { kid: string; privateKey: CryptoKey }) =>
    new SignJWT({ scope: 'events.read' })
      .setProtectedHeader({ alg: 'ES256', kid: k.kid, typ: 'at+jwt' })
      .setIssuer(issuer)
      .setAudience(mcpUrl)
      .setSubject('carol')
      .setIssuedAt()
      .setExpirationTime('10m')
      .sign(k.privateKey);

  it('is fetched once and kept, and fetched again when a token names a new kid (key rotation)', async () => {
    const verifier = new TokenVerifier({ store: h.store, cache: new MemoryCache(), urls: () => ({ mcpUrl, issuer }), jwksCooldownMs: 0 });
    const a = await keyPair('a');
    served = [a.jwk];
    for (let i = 0; i < 3; i++) expect((await verifier.verify(`Bearer ${await sign(a)}`, undefined)).accountId).toBe('carol');
    expect(test.fetches).toBe(1);
    const b = await keyPair('b');
    served = [a.jwk, b.jwk];
    for (let i = 0; i < 3; i++)
      expect((await verifier.verify(`Bearer ${await sign(b)}`, undefined)).scopes).toEqual(new Set(['events.read']));
    expect(test.fetches).toBe(2);
    // A kid that is still unknown after a fresh fetch is refused.
    const c = await keyPair('c');
    await expect(verifier.verify(`Bearer ${await sign(c)}`, undefined)).rejects.toMatchObject({ status: 401, error: 'invalid_token' });
  });
});

describe('AUTH_ISSUER: tokens of a real authorization server, no dev one', () => {
  let other: Harness;
  let prod: Awaited<ReturnType<typeof startTestIssuer>>;
  let issuer: string;
  const key = generateKeyPair('ES256');
  beforeAll(async () => {
    const jwk = { ...(await exportJWK((await key).publicKey)), kid: 'prod-1', alg: 'ES256' };
    prod = await startTestIssuer(() => [jwk], { openid: true });
    issuer = prod.issuer;
    other = await createHarness({ mcp: { issuer } });
    await other.key({ account: { id: 'gina' } });
    await other.listen();
  });
  afterAll(async () => {
    await other.close();
    await prod.close();
  });

  it('the metadata names that server; its tokens (OpenID discovery, `scp` list) are accepted; the dev issuer is not mounted', async () => {
    const origin2 = new URL(other.urls().mcpUrl).origin;
    expect(((await (await fetch(`${origin2}/.well-known/oauth-protected-resource/mcp`)).json()) as any).authorization_servers).toEqual([
      issuer,
    ]);
    expect((await fetch(`${origin2}/.well-known/oauth-authorization-server`)).status).toBe(404);
    expect((await fetch(`${origin2}/authorize`)).status).toBe(404);
    const token = await new SignJWT({ scp: ['stats.read'] })
      .setProtectedHeader({ alg: 'ES256', kid: 'prod-1', typ: 'at+jwt' })
      .setIssuer(issuer)
      .setAudience(other.urls().mcpUrl)
      .setSubject('gina')
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign((await key).privateKey);
    const client = await connect(other.urls().mcpUrl, { token });
    expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual([
      'list_asset_stats',
      'list_trader_activity',
      'list_trader_stats',
      'rank_traders',
      'summarize_message_activity',
    ]);
    await client.close();
  });
});
