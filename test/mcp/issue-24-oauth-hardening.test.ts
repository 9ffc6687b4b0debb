import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Fastify from 'fastify';
import { decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApi } from '../../apps/api/server.ts';
import { DevAuthorizationServer } from '../../apps/auth/dev-server.ts';
import { Journal } from '../../apps/auth/journal.ts';
import { ApiKeyAuthenticator } from '../../apps/auth/keys.ts';
import { checkPassword, MAX_CONCURRENT_PASSWORD_CHECKS, PasswordCheckBusy, setPassword } from '../../apps/auth/passwords.ts';
import { loadSigningKey } from '../../apps/auth/signing.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { loadConfig } from '../../apps/config.ts';
import { type AuthUrls, TokenVerifier } from '../../apps/mcp/bearer.ts';
import { SCOPES } from '../../schemas/topics/index.ts';
import { sleep } from '../helpers/cli.ts';
import { createHarness, type Harness } from '../helpers/harness.ts';
import { parseConsentPage, rawMcp, startTestIssuer } from '../helpers/mcp-client.ts';

/**
 * Issue 24 item 6, OAuth and MCP hardening. Expectations from the RFCs and the MCP transport:
 * RFC 9700 (OAuth security BCP) 2.1 and 4.11.2, RFC 8252 7.3 and 8.3 (loopback redirects), RFC 7591
 * 3.2.2 (registration errors), RFC 9068 2.1 and 4 (`typ: at+jwt`, audience), RFC 8707 (one
 * resource), the MCP Streamable HTTP transport (Origin against DNS rebinding).
 */

let h: Harness;
let origin: string;
let mcpUrl: string;
const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'signalbase-oauth24-'));
  dirs.push(d);
  return d;
};

beforeAll(async () => {
  h = await createHarness({ mcp: true });
  await h.key({ account: { id: 'alice' } });
  await h.key({ account: { id: 'bob' } });
  await h.key({ account: { id: 'carol' } });
  await h.password('alice', 'alice-password-1');
  await h.password('bob', 'bob-password-1');
  origin = await h.listen();
  mcpUrl = h.urls().mcpUrl;
});
afterAll(async () => {
  await h.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const json = { 'content-type': 'application/json' };
const register = (base: string, body: unknown) =>
  fetch(`${base}/register`, { method: 'POST', headers: json, body: typeof body === 'string' ? body : JSON.stringify(body) });
const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};
function authorizeUrl(
  base: string,
  clientId: string,
  redirectUri: string,
  challenge = pkce().challenge,
  extra: Record<string, string> = {},
): string {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: 'st',
    ...extra,
  });
  return `${base}/authorize?${q}`;
}
const getManual = (url: string) => fetch(url, { redirect: 'manual' });

/** A dev authorization server of its own (own limits, clock and DATA_DIR), mounted on a bare app, over the harness's store. */
async function devServer(
  o: { dataDir?: string; clock?: () => number } & Pick<
    ConstructorParameters<typeof DevAuthorizationServer>[0],
    'clientLimits' | 'signInBackoff'
  > = {},
) {
  const dataDir = o.dataDir ?? tempDir();
  const app = Fastify();
  let urls: AuthUrls | undefined;
  const dev = new DevAuthorizationServer({ dataDir, store: h.store, urls: () => urls!, ...o });
  dev.routes(app);
  const base = await app.listen({ port: 0, host: '127.0.0.1' });
  urls = { mcpUrl: `${base}/mcp`, issuer: base };
  return { base, dataDir, close: () => app.close() };
}

/** Registers a public client with one loopback redirect URI; its id. */
async function client(base: string, redirectUri = 'http://127.0.0.1:9/cb'): Promise<string> {
  const res = await register(base, { client_name: 'c', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' });
  expect(res.status).toBe(201);
  return String(((await res.json()) as any).client_id);
}

/** Opens the sign-in page; its form's request id. */
async function signInRequest(base: string, clientId: string, challenge?: string): Promise<string> {
  const page = await getManual(authorizeUrl(base, clientId, 'http://127.0.0.1:9/cb', challenge));
  expect(page.status).toBe(200);
  return parseConsentPage(await page.text()).request;
}
async function consent(base: string, request: string, account: string, password: string) {
  const body = new URLSearchParams({ request, account, password, action: 'approve' });
  for (const s of SCOPES) body.append('scope', s);
  const res = await fetch(`${base}/consent`, { method: 'POST', body, redirect: 'manual' });
  return { status: res.status, location: res.headers.get('location'), retryAfter: res.headers.get('retry-after'), html: await res.text() };
}

describe('issue 24: redirect URIs are https or loopback http, and errors never go to an unvalidated one', () => {
  it('registration refuses http on a non-loopback host, other schemes and fragments with invalid_redirect_uri', async () => {
    const refused = [
      'http://example.com/cb',
      'http://192.168.1.5:8080/cb',
      'http://10.0.0.1/cb',
      'http://localhost.evil.example/cb',
      'http://127.0.0.1.evil.example/cb',
      'com.example.app:/cb',
      'ftp://127.0.0.1/cb',
      'https://app.example/cb#fragment',
    ];
    for (const uri of refused) {
      const res = await register(origin, { redirect_uris: [uri], token_endpoint_auth_method: 'none' });
      expect(res.status, uri).toBe(400);
      expect(await res.json(), uri).toMatchObject({ error: 'invalid_redirect_uri' });
      expect(res.headers.get('access-control-allow-origin'), uri).toBe('*'); // a browser-based client can read why
    }
    // One bad URI among good ones refuses the registration.
    const mixed = await register(origin, { redirect_uris: ['https://app.example/cb', 'http://example.com/cb'] });
    expect(mixed.status).toBe(400);
  });

  it('registration accepts https anywhere and http on 127.0.0.0/8, [::1] and localhost (any port)', async () => {
    const res = await register(origin, {
      redirect_uris: [
        'https://app.example/cb',
        'http://127.0.0.1:8000/cb',
        'http://127.1.2.3/cb',
        'http://[::1]:9/cb',
        'http://localhost:3000/cb',
      ],
      token_endpoint_auth_method: 'none',
    });
    expect(res.status).toBe(201);
  });

  it('an unknown client or an unregistered redirect_uri: an answer of its own (400), never a redirect, whatever else is wrong', async () => {
    const id = await client(origin);
    const cases = {
      'unknown client': authorizeUrl(origin, 'no-such-client', 'http://127.0.0.1:9/cb'),
      'unknown client, plain PKCE': authorizeUrl(origin, 'no-such-client', 'https://evil.example/cb', undefined, {
        code_challenge_method: 'plain',
      }),
      'unregistered redirect_uri': authorizeUrl(origin, id, 'https://evil.example/cb'),
      'unregistered redirect_uri, bad resource': authorizeUrl(origin, id, 'https://evil.example/cb', undefined, {
        resource: 'https://elsewhere.example/mcp',
      }),
      'unregistered redirect_uri, no PKCE': `${origin}/authorize?${new URLSearchParams({ response_type: 'code', client_id: id, redirect_uri: 'http://example.com/cb' })}`,
    };
    for (const [name, url] of Object.entries(cases)) {
      const res = await getManual(url);
      expect(res.status, name).toBe(400);
      expect(res.headers.get('location'), name).toBeNull();
      expect(((await res.json()) as any).error, name).toMatch(/^invalid_(client|request)$/);
    }
    // The validated client and URI: other errors go back to it (RFC 6749 4.1.2.1).
    const back = await getManual(authorizeUrl(origin, id, 'http://127.0.0.1:9/cb', undefined, { code_challenge_method: 'plain' }));
    expect(back.status).toBe(302);
    expect(back.headers.get('location')).toMatch(/^http:\/\/127\.0\.0\.1:9\/cb\?error=invalid_request/);
  });

  it('a client registered before the rule, with a redirect URI it now refuses, is not a validated client: no redirect', async () => {
    const dataDir = tempDir();
    mkdirSync(join(dataDir, 'auth'), { recursive: true });
    const issued = Math.floor(Date.now() / 1000);
    const legacy = (id: string, uri: string) => ({
      client_id: id,
      client_id_issued_at: issued,
      redirect_uris: [uri],
      token_endpoint_auth_method: 'none',
      client_name: id,
    });
    writeFileSync(
      join(dataDir, 'auth', 'clients.json'),
      JSON.stringify({ ok: legacy('ok', 'http://127.0.0.1:9/cb'), bad: legacy('bad', 'http://evil.example/cb') }),
    );
    const dev = await devServer({ dataDir });
    try {
      expect((await getManual(authorizeUrl(dev.base, 'ok', 'http://127.0.0.1:9/cb'))).status).toBe(200);
      const bad = await getManual(authorizeUrl(dev.base, 'bad', 'http://evil.example/cb', undefined, { code_challenge_method: 'plain' }));
      expect(bad.status).toBe(400);
      expect(bad.headers.get('location')).toBeNull();
      // The former whole-file store was imported into the journal and removed.
      expect(existsSync(join(dataDir, 'auth', 'clients.json'))).toBe(false);
      expect(readFileSync(join(dataDir, 'auth', 'clients.ndjson'), 'utf8')).toContain('"ok"');
    } finally {
      await dev.close();
    }
  });
});

describe('issue 24: registrations are bounded in number and size, expire unused, and are journaled', () => {
  it('metadata size: body, number and length of redirect URIs, client_name, other members', async () => {
    const dev = await devServer();
    try {
      const uri = 'http://127.0.0.1:9/cb';
      const huge = await register(dev.base, { redirect_uris: [uri], client_name: 'x', software_statement: 'y'.repeat(20_000) });
      expect(huge.status).toBe(413);
      expect(await huge.json()).toMatchObject({ error: 'invalid_client_metadata' });
      const many = await register(dev.base, { redirect_uris: Array.from({ length: 11 }, (_, i) => `http://127.0.0.1:${9000 + i}/cb`) });
      expect(many.status).toBe(400);
      expect(await many.json()).toMatchObject({ error: 'invalid_redirect_uri' });
      const none = await register(dev.base, { redirect_uris: [] });
      expect(await none.json()).toMatchObject({ error: 'invalid_redirect_uri' });
      const long = await register(dev.base, { redirect_uris: [`https://app.example/${'a'.repeat(2100)}`] });
      expect(long.status).toBe(400);
      expect(await long.json()).toMatchObject({ error: 'invalid_redirect_uri' });
      const name = await register(dev.base, { redirect_uris: [uri], client_name: 'n'.repeat(201) });
      expect(name.status).toBe(400);
      expect(await name.json()).toMatchObject({ error: 'invalid_client_metadata' });
      const contacts = await register(dev.base, {
        redirect_uris: [uri],
        contacts: Array.from({ length: 50 }, (_, i) => `a${i}@example.com`),
      });
      expect(await contacts.json()).toMatchObject({ error: 'invalid_client_metadata' });
      const notJson = await register(dev.base, '{"redirect_uris": [');
      expect(notJson.status).toBe(400);
      expect(await notJson.json()).toMatchObject({ error: 'invalid_client_metadata' });
      // Within the bounds: registered.
      expect((await register(dev.base, { redirect_uris: [uri], client_name: 'n'.repeat(200) })).status).toBe(201);
    } finally {
      await dev.close();
    }
  });

  it('at the cap a registration is refused (503, Retry-After); registrations unused for 30 days are forgotten, used ones kept', async () => {
    let now = Date.now();
    const dev = await devServer({ clock: () => now, clientLimits: { maxClients: 3 } });
    try {
      const [a, b, c] = [await client(dev.base), await client(dev.base), await client(dev.base)];
      const full = await register(dev.base, { redirect_uris: ['http://127.0.0.1:9/cb'] });
      expect(full.status).toBe(503);
      expect(full.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(await full.json()).toMatchObject({ error: 'temporarily_unavailable' });
      now += 20 * 86_400_000;
      expect((await getManual(authorizeUrl(dev.base, a, 'http://127.0.0.1:9/cb'))).status).toBe(200); // a is used
      now += 15 * 86_400_000; // b and c: 35 days unused; a: 15 days
      const d = await client(dev.base); // room again: b and c were forgotten
      expect(d).toEqual(expect.any(String));
      expect((await getManual(authorizeUrl(dev.base, a, 'http://127.0.0.1:9/cb'))).status).toBe(200);
      for (const gone of [b, c]) {
        const res = await getManual(authorizeUrl(dev.base, gone, 'http://127.0.0.1:9/cb'));
        expect(res.status).toBe(400);
        expect(res.headers.get('location')).toBeNull();
      }
    } finally {
      await dev.close();
    }
  });

  it('a registration appends to the clients journal (the file is not rewritten), mode 0600', async () => {
    const dev = await devServer();
    try {
      await client(dev.base);
      const file = join(dev.dataDir, 'auth', 'clients.ndjson');
      const before = readFileSync(file, 'utf8');
      await client(dev.base);
      const after = readFileSync(file, 'utf8');
      expect(after.startsWith(before)).toBe(true);
      expect(after.slice(before.length).trim().split('\n')).toHaveLength(1);
      expect(statSync(file).mode & 0o777).toBe(0o600);
    } finally {
      await dev.close();
    }
  });

  it('clients and refresh tokens survive restarts: a refresh after a restart rotates, and reuse after another revokes the family', async () => {
    const dataDir = tempDir();
    await setPassword(dataDir, 'alice', 'alice-password-1');
    const first = await devServer({ dataDir });
    const id = await client(first.base);
    const { verifier, challenge } = pkce();
    const signedIn = await consent(first.base, await signInRequest(first.base, id, challenge), 'alice', 'alice-password-1');
    expect(signedIn.status).toBe(302);
    const code = new URL(signedIn.location!).searchParams.get('code')!;
    const token = async (base: string, params: Record<string, string>) => {
      const res = await fetch(`${base}/token`, { method: 'POST', body: new URLSearchParams({ client_id: id, ...params }) });
      return { status: res.status, body: (await res.json()) as any };
    };
    const issued = await token(first.base, {
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      redirect_uri: 'http://127.0.0.1:9/cb',
    });
    expect(issued.status).toBe(200);
    await first.close();

    const second = await devServer({ dataDir });
    const rotated = await token(second.base, { grant_type: 'refresh_token', refresh_token: issued.body.refresh_token });
    expect(rotated.status).toBe(200);
    expect(rotated.body.refresh_token).not.toBe(issued.body.refresh_token);
    await second.close();

    const third = await devServer({ dataDir });
    try {
      expect((await getManual(authorizeUrl(third.base, id, 'http://127.0.0.1:9/cb'))).status).toBe(200);
      expect(await token(third.base, { grant_type: 'refresh_token', refresh_token: issued.body.refresh_token })).toMatchObject({
        status: 400,
        body: { error: 'invalid_grant' },
      });
      // The reuse revoked the family: the newest one is gone too.
      expect(await token(third.base, { grant_type: 'refresh_token', refresh_token: rotated.body.refresh_token })).toMatchObject({
        status: 400,
        body: { error: 'invalid_grant' },
      });
      expect(existsSync(join(dataDir, 'auth', 'refresh-tokens.json'))).toBe(false);
      expect(statSync(join(dataDir, 'auth', 'refresh-tokens.ndjson')).mode & 0o777).toBe(0o600);
    } finally {
      await third.close();
    }
  });

  it('the journal: replays sets and deletes, skips a torn last line, and compacts to the live records', () => {
    const file = join(tempDir(), 'records.ndjson');
    const j = new Journal<{ n: number }>(file, { compactFactor: 4, minLines: 16 });
    for (let n = 0; n < 100; n++) j.set('hot', { n });
    j.set('cold', { n: -1 });
    j.set('gone', { n: 0 });
    j.delete('gone');
    // 103 changes, 2 live records: compacted along the way, never more than max(16, 4 x live) lines.
    expect(j.journalLines).toBeLessThan(16);
    expect(readFileSync(file, 'utf8').trim().split('\n').length).toBe(j.journalLines);
    writeFileSync(file, readFileSync(file, 'utf8') + '{"k":"hot","v":{"n":'); // a crash mid-append
    const again = new Journal<{ n: number }>(file);
    expect(again.get('hot')).toEqual({ n: 99 });
    expect(again.get('cold')).toEqual({ n: -1 });
    expect(again.get('gone')).toBeUndefined();
    again.set('new', { n: 1 });
    expect(new Journal<{ n: number }>(file).entries().sort()).toEqual([
      ['cold', { n: -1 }],
      ['hot', { n: 99 }],
      ['new', { n: 1 }],
    ]);
  });
});

describe('issue 24: per-account sign-in backoff and a bound on concurrent password hashing', () => {
  it('failed sign-ins of one account lock it (429 with Retry-After, before any hashing), whichever address tries; other accounts are not affected', async () => {
    const id = await client(origin);
    const request = await signInRequest(origin, id);
    for (let i = 1; i <= 5; i++) {
      const r = await consent(origin, request, 'alice', `wrong-password-${i}`);
      expect(r.status, `attempt ${i}`).toBe(401);
      expect(r.html).toContain('Wrong account or password.');
      expect(r.html).not.toContain('Too many failed sign-ins');
    }
    const sixth = await consent(origin, request, 'alice', 'wrong-password-6');
    expect(sixth.status).toBe(401);
    expect(sixth.html).toContain('Too many failed sign-ins for this account');
    expect(Number(sixth.retryAfter)).toBe(60);
    // Locked: even the right password is refused, without a code.
    const locked = await consent(origin, request, 'alice', 'alice-password-1');
    expect(locked.status).toBe(429);
    expect(locked.location).toBeNull();
    expect(Number(locked.retryAfter)).toBeGreaterThan(0);
    expect(Number(locked.retryAfter)).toBeLessThanOrEqual(60);
    expect(locked.html).toMatch(/try again in \d+ seconds/);
    // Another account signs in.
    const bob = await consent(origin, request, 'bob', 'bob-password-1');
    expect(bob.status).toBe(302);
    expect(new URL(bob.location!).searchParams.get('code')).toEqual(expect.any(String));
  });

  it('locks grow with each further failure, a success resets them, and an unknown account is locked alike', async () => {
    const dataDir = tempDir();
    await setPassword(dataDir, 'alice', 'alice-password-1');
    const dev = await devServer({ dataDir, signInBackoff: { freeFailures: 2, firstLockSeconds: 1, maxLockSeconds: 2 } });
    try {
      const id = await client(dev.base);
      let request = await signInRequest(dev.base, id);
      expect((await consent(dev.base, request, 'alice', 'wrong-1')).status).toBe(401);
      expect((await consent(dev.base, request, 'alice', 'wrong-2')).status).toBe(401);
      const third = await consent(dev.base, request, 'alice', 'wrong-3');
      expect([third.status, third.retryAfter]).toEqual([401, '1']);
      expect(third.html).toContain('try again in 1 second');
      expect((await consent(dev.base, request, 'alice', 'alice-password-1')).status).toBe(429);
      await sleep(1100);
      const fourth = await consent(dev.base, request, 'alice', 'wrong-4'); // the lock doubles
      expect([fourth.status, fourth.retryAfter]).toEqual([401, '2']);
      await sleep(1100);
      expect((await consent(dev.base, request, 'alice', 'alice-password-1')).status).toBe(429);
      await sleep(1100);
      expect((await consent(dev.base, request, 'alice', 'alice-password-1')).status).toBe(302);
      // After a success the count starts again.
      request = await signInRequest(dev.base, id);
      const fresh = await consent(dev.base, request, 'alice', 'wrong-5');
      expect([fresh.status, fresh.retryAfter]).toEqual([401, null]);
      // An account that does not exist is counted the same way: a lock does not tell which accounts exist.
      await consent(dev.base, request, 'nobody', 'wrong-1');
      await consent(dev.base, request, 'nobody', 'wrong-2');
      const ghost = await consent(dev.base, request, 'nobody', 'wrong-3');
      expect([ghost.status, ghost.retryAfter]).toEqual([401, '1']);
      expect(ghost.html).toContain('Too many failed sign-ins for this account');
    } finally {
      await dev.close();
    }
  });

  it(`at most ${MAX_CONCURRENT_PASSWORD_CHECKS} password checks hash at once; more are refused at once, and the sign-in page answers 503 with Retry-After`, async () => {
    const running = Array.from({ length: MAX_CONCURRENT_PASSWORD_CHECKS }, () => checkPassword(h.dataDir, 'carol', 'whatever-password'));
    await expect(checkPassword(h.dataDir, 'carol', 'whatever-password')).rejects.toBeInstanceOf(PasswordCheckBusy);
    const request = await signInRequest(origin, await client(origin));
    const busy = await consent(origin, request, 'carol', 'whatever-password');
    await Promise.all(running);
    expect(busy.status).toBe(503);
    expect(busy.retryAfter).toMatch(/^\d+$/);
    expect(busy.html).toContain('Too many sign-ins are being checked just now');
    // Once they are done, sign-ins are checked again.
    expect((await consent(origin, request, 'carol', 'whatever-password')).status).toBe(401);
  });

  it('account names that are Object.prototype members are just unknown accounts (no 500)', async () => {
    for (const name of ['__proto__', 'constructor', 'toString'])
      expect(await checkPassword(h.dataDir, name, 'whatever-password')).toBe(false);
  });
});

describe('issue 24: bearer tokens must be at+jwt access tokens for MCP_URL alone', () => {
  const status = async (token: string) => {
    const r = await rawMcp(mcpUrl, { authorization: `Bearer ${token}` });
    return { status: r.status, challenge: r.headers.get('www-authenticate') ?? '', description: String(r.json?.error_description ?? '') };
  };
  const devToken = async (header: Record<string, unknown>, aud: string | string[] = mcpUrl) => {
    const key = await loadSigningKey(h.dataDir);
    return new SignJWT({ scope: 'events.read' })
      .setProtectedHeader({ alg: 'ES256', kid: key.kid, ...header })
      .setIssuer(origin)
      .setAudience(aud)
      .setSubject('alice')
      .setIssuedAt()
      .setExpirationTime('5m')
      .sign(key.privateKey);
  };

  it('the dev issuer mints at+jwt tokens with MCP_URL as audience, and they are accepted', async () => {
    const token = await h.token({ account: 'alice' });
    expect(decodeProtectedHeader(token).typ).toBe('at+jwt');
    expect((await status(token)).status).toBe(200);
    expect((await status(await devToken({ typ: 'at+jwt' }, [mcpUrl]))).status).toBe(200); // a list of one is that one
  });

  it('another typ, or none, is 401 invalid_token', async () => {
    for (const header of [{ typ: 'JWT' }, {}, { typ: 'id_token+jwt' }]) {
      const r = await status(await devToken(header));
      expect(r.status, JSON.stringify(header)).toBe(401);
      expect(r.challenge).toContain('error="invalid_token"');
      expect(r.description).toContain('at+jwt');
    }
  });

  it('an audience naming other resources too is 401 invalid_token', async () => {
    const r = await status(await devToken({ typ: 'at+jwt' }, [mcpUrl, 'https://other.example/api']));
    expect(r.status).toBe(401);
    expect(r.challenge).toContain('error="invalid_token"');
    expect(r.description).toMatch(/audience/);
  });

  it('the same rules for tokens of an external AUTH_ISSUER', async () => {
    const key = await generateKeyPair('ES256');
    const jwk = { ...(await exportJWK(key.publicKey)), kid: 'ext-1', alg: 'ES256' };
    const issuer = await startTestIssuer(() => [jwk]);
    const other = await createHarness({ mcp: { issuer: issuer.issuer } });
    try {
      await other.key({ account: { id: 'gina' } });
      await other.listen();
      const url = other.urls().mcpUrl;
      const sign = (header: Record<string, unknown>, aud: string | string[] = url) =>
        new SignJWT({ scope: 'stats.read' })
          .setProtectedHeader({ alg: 'ES256', kid: 'ext-1', ...header })
          .setIssuer(issuer.issuer)
          .setAudience(aud)
          .setSubject('gina')
          .setIssuedAt()
          .setExpirationTime('5m')
          .sign(key.privateKey);
      const call = async (token: string) => (await rawMcp(url, { authorization: `Bearer ${token}` })).status;
      expect(await call(await sign({ typ: 'at+jwt' }))).toBe(200);
      expect(await call(await sign({ typ: 'application/at+jwt' }))).toBe(200); // RFC 9068 2.1: the full media type is the same type
      expect(await call(await sign({}))).toBe(401);
      expect(await call(await sign({ typ: 'JWT' }))).toBe(401);
      expect(await call(await sign({ typ: 'at+jwt' }, [url, 'https://api.example']))).toBe(401);
    } finally {
      await other.close();
      await issuer.close();
    }
  });
});

describe('issue 24: Origin is checked on /mcp (DNS rebinding)', () => {
  const tools = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };

  it("no Origin or the MCP URL's own origin: served; another origin: 403 with a JSON-RPC error, before the token is looked at", async () => {
    const token = await h.token({ account: 'alice' });
    expect((await rawMcp(mcpUrl, { authorization: `Bearer ${token}` }, tools)).status).toBe(200);
    expect((await rawMcp(mcpUrl, { authorization: `Bearer ${token}`, origin }, tools)).status).toBe(200);
    for (const o of ['https://evil.example', 'http://127.0.0.1:1', 'null', 'not a url']) {
      for (const auth of [{ authorization: `Bearer ${token}` }, {}] as Record<string, string>[]) {
        const r = await rawMcp(mcpUrl, { ...auth, origin: o }, tools);
        expect(r.status, o).toBe(403);
        expect(r.json).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32000, message: expect.stringContaining('Origin') } });
        expect(r.headers.get('www-authenticate')).toBeNull();
      }
    }
    for (const method of ['GET', 'DELETE']) {
      expect(
        (await fetch(mcpUrl, { method, headers: { origin: 'https://evil.example', authorization: `Bearer ${token}` } })).status,
        method,
      ).toBe(403);
    }
  });

  it('the CORS preflight still answers the allowed origin, and refuses another', async () => {
    const preflight = (o: string) =>
      fetch(mcpUrl, {
        method: 'OPTIONS',
        headers: { origin: o, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
      });
    const ok = await preflight(origin);
    expect(ok.status).toBe(204);
    expect(ok.headers.get('access-control-allow-methods')).toContain('POST');
    expect(ok.headers.get('access-control-allow-headers')).toContain('authorization');
    expect((await preflight('https://evil.example')).status).toBe(403);
  });

  it('MCP_ALLOWED_ORIGINS adds origins (parsed from the environment; anything but an origin refused)', async () => {
    expect(loadConfig({ MCP_ALLOWED_ORIGINS: 'https://app.example, http://localhost:3000/' }).mcpAllowedOrigins).toEqual([
      'https://app.example',
      'http://localhost:3000',
    ]);
    expect(() => loadConfig({ MCP_ALLOWED_ORIGINS: 'https://app.example/path' })).toThrow(/MCP_ALLOWED_ORIGINS/);
    expect(() => loadConfig({ MCP_ALLOWED_ORIGINS: 'app.example' })).toThrow(/MCP_ALLOWED_ORIGINS/);
    const cache = new MemoryCache();
    let urls: AuthUrls | undefined;
    const app = buildApi({
      store: h.store,
      auth: new ApiKeyAuthenticator(h.store, cache),
      dataVersion: () => 0,
      rest: false,
      mcp: {
        verifier: new TokenVerifier({ store: h.store, cache, urls: () => urls! }),
        urls: () => urls!,
        allowedOrigins: loadConfig({ MCP_ALLOWED_ORIGINS: 'https://app.example' }).mcpAllowedOrigins,
      },
    });
    try {
      const base = await app.listen({ port: 0, host: '127.0.0.1' });
      // Tokens of the harness's dev issuer, for this app's MCP URL.
      urls = { mcpUrl: `${base}/mcp`, issuer: origin };
      const token = await h.token({ account: 'alice', audience: urls.mcpUrl });
      expect((await rawMcp(urls.mcpUrl, { authorization: `Bearer ${token}`, origin: 'https://app.example' }, tools)).status).toBe(200);
      expect((await rawMcp(urls.mcpUrl, { authorization: `Bearer ${token}`, origin: 'https://APP.example:443' }, tools)).status).toBe(200);
      expect((await rawMcp(urls.mcpUrl, { authorization: `Bearer ${token}`, origin: 'https://other.example' }, tools)).status).toBe(403);
      expect((await rawMcp(urls.mcpUrl, { authorization: `Bearer ${token}`, origin: base }, tools)).status).toBe(200);
    } finally {
      await app.close();
    }
  });
});
