import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import express, { type Request, type Response } from 'express';
import { rateLimit } from 'express-rate-limit';
import { escapeAttribute, escapeText } from 'entities';
import type { FastifyInstance } from 'fastify';
import { jwtVerify } from 'jose';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import { InvalidGrantError, InvalidScopeError, TemporarilyUnavailableError, InvalidTargetError, InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { authorizationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/authorize.js';
import { clientRegistrationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/register.js';
import { revocationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/revoke.js';
import { tokenHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/token.js';
import type { AuthorizationParams, OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { OAuthClientInformationFull, OAuthTokenRevocationRequest, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import type { Store } from '../../projectors/store/port.ts';
import { SCOPES, type Scope } from '../../schemas/topics/index.ts';
import type { AuthUrls } from '../mcp/bearer.ts';
import { accountAnswer, accountById } from './keys.ts';
import { checkPassword } from './passwords.ts';
import { loadSigningKey, mintAccessToken, type SigningKey } from './signing.ts';

/**
 * The dev authorization server of the embedded mode (issue 9, DESIGN 7): RFC 8414 metadata,
 * dynamic client registration (RFC 7591, with RFC 7592's client read and delete), authorization
 * code with PKCE S256, the `resource` parameter (RFC 8707), a sign-in and consent page, refresh
 * tokens rotated at each use, and ES256 JWT access tokens from a key kept in DATA_DIR. The OAuth
 * endpoints are the MCP SDK's handlers (request parsing, client authentication, PKCE check,
 * rate limits, error answers); this file is their provider: what is stored and what is issued.
 * Production points AUTH_ISSUER at a real authorization server and this is not mounted.
 */

export const ACCESS_TOKEN_SECONDS = 3600;
const REFRESH_TOKEN_SECONDS = 30 * 86_400;
const CODE_SECONDS = 60;
const SIGN_IN_SECONDS = 600;

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const random = () => randomBytes(32).toString('base64url');
const KNOWN = new Set<string>(SCOPES);

interface StoredClient extends OAuthClientInformationFull { registration_access_token_hash?: string }
interface Grant { clientId: string; accountId: string; scopes: Scope[]; resource: string; expiresAt: number }
interface RefreshRecord extends Grant { family: string; used: boolean }
interface CodeRecord extends Grant { codeChallenge: string; redirectUri: string }
interface SignIn { clientId: string; clientName: string; redirectUri: string; codeChallenge: string; state?: string; scopes: Scope[]; resource: string; expiresAt: number }

/** A JSON file of records under DATA_DIR/auth, rewritten whole (atomically) on each change: dev-sized state. */
class JsonFile<T> {
  private data: Record<string, T>;
  constructor(private readonly file: string) {
    this.data = existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : {};
  }
  get(k: string): T | undefined { return Object.hasOwn(this.data, k) ? this.data[k] : undefined; }
  entries(): [string, T][] { return Object.entries(this.data); }
  set(k: string, v: T): void { this.data[k] = v; this.save(); }
  delete(...ks: string[]): void { for (const k of ks) delete this.data[k]; this.save(); }
  private save(): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(this.data), { mode: 0o600 });
    renameSync(tmp, this.file);
  }
}

const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
};

const SCOPE_TEXT: Record<Scope, string> = {
  'events.read': 'trade events',
  'messages.read': 'source messages',
  'feed.read': 'the partner feed',
  'summaries.read': 'channel and aggregate narrative summaries',
  'positions.read': 'position history and open positions',
  'directory.read': 'the trader and asset directories',
  'stats.read': 'trader and asset stats, rankings and activity counts',
};

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeText(title)}</title><style>
body{font:16px/1.45 system-ui,sans-serif;max-width:30rem;margin:3rem auto;padding:0 1rem;color:#111}
fieldset{border:1px solid #ccc;border-radius:6px;margin:1rem 0}label{display:block;margin:.4rem 0}
input[type=text],input[type=password]{width:100%;padding:.4rem;box-sizing:border-box}
.error{color:#a00;font-weight:600}button{padding:.5rem 1rem;margin-right:.5rem}
</style></head><body>${body}</body></html>`;
}

function consentPage(id: string, s: SignIn, error?: string, account = ''): string {
  const scopes = s.scopes.map((sc) => `<label><input type="checkbox" name="scope" value="${escapeAttribute(sc)}" checked> <code>${escapeText(sc)}</code>: ${escapeText(SCOPE_TEXT[sc])}</label>`).join('\n');
  return page('Sign in to signalbase', `<h1>Sign in to signalbase</h1>
<p><strong>${escapeText(s.clientName)}</strong> asks to read signalbase data on your behalf (it will return to <code>${escapeText(new URL(s.redirectUri).origin)}</code>).</p>
${error ? `<p class="error" role="alert">${escapeText(error)}</p>` : ''}
<form method="post" action="/consent">
<input type="hidden" name="request" value="${escapeAttribute(id)}">
<label>Account <input type="text" name="account" autocomplete="username" required value="${escapeAttribute(account)}"></label>
<label>Password <input type="password" name="password" autocomplete="current-password" required></label>
<fieldset><legend>Allow it to read</legend>
${scopes}
</fieldset>
<button type="submit" name="action" value="approve">Approve</button>
<button type="submit" name="action" value="deny" formnovalidate>Deny</button>
</form>`);
}

export class DevAuthorizationServer implements OAuthServerProvider {
  private readonly clients: JsonFile<StoredClient>;
  private readonly refreshTokens: JsonFile<RefreshRecord>;
  private readonly codes = new Map<string, CodeRecord>();
  private readonly signIns = new Map<string, SignIn>();
  private key?: Promise<SigningKey>;

  constructor(private readonly opts: { dataDir: string; store: Store; urls: () => AuthUrls; clock?: () => number }) {
    mkdirSync(join(opts.dataDir, 'auth'), { recursive: true, mode: 0o700 });
    this.clients = new JsonFile(join(opts.dataDir, 'auth', 'clients.json'));
    this.refreshTokens = new JsonFile(join(opts.dataDir, 'auth', 'refresh-tokens.json'));
  }

  private now = () => (this.opts.clock ?? Date.now)();
  signingKey(): Promise<SigningKey> { return (this.key ??= loadSigningKey(this.opts.dataDir)); }

  get clientsStore(): OAuthRegisteredClientsStore {
    return {
      getClient: (id) => {
        const c = this.clients.get(id);
        if (!c) return undefined;
        const { registration_access_token_hash: _h, ...client } = c;
        return client;
      },
      registerClient: (client) => {
        const id = (client as OAuthClientInformationFull).client_id;
        const token = random();
        const full = { ...client, client_id: id, registration_client_uri: `${this.opts.urls().issuer}/clients/${encodeURIComponent(id)}` };
        this.clients.set(id, { ...full, registration_access_token_hash: sha256(token) });
        return { ...full, registration_access_token: token } as OAuthClientInformationFull;
      },
    };
  }

  /** The resource a grant is for: the MCP URL, whether named (RFC 8707) or not; another one is refused. */
  private resourceOf(resource: URL | undefined): string {
    const { mcpUrl } = this.opts.urls();
    if (resource && resource.href.replace(/\/$/, '') !== mcpUrl.replace(/\/$/, '')) throw new InvalidTargetError(`This server issues tokens for ${mcpUrl} only`);
    return mcpUrl;
  }

  async authorize(client: OAuthClientInformationFull, params: AuthorizationParams, res: Response): Promise<void> {
    const resource = this.resourceOf(params.resource);
    const requested = params.scopes?.filter(Boolean) ?? [];
    const scopes = (requested.length ? requested.filter((s) => KNOWN.has(s)) : [...SCOPES]) as Scope[];
    if (!scopes.length) throw new InvalidScopeError(`Request some of: ${SCOPES.join(' ')}`);
    this.sweep();
    const id = random();
    this.signIns.set(id, {
      clientId: client.client_id, clientName: client.client_name ?? client.client_id, redirectUri: params.redirectUri,
      codeChallenge: params.codeChallenge, scopes, resource, expiresAt: this.now() + SIGN_IN_SECONDS * 1000,
      ...(params.state !== undefined ? { state: params.state } : {}),
    });
    res.status(200).set(PAGE_HEADERS).send(consentPage(id, this.signIns.get(id)!));
  }

  /** POST /consent: the sign-in and consent form. */
  private async consent(req: Request, res: Response): Promise<void> {
    const body = (req.body ?? {}) as Record<string, string | string[]>;
    const one = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : '');
    const id = one('request');
    const s = this.signIns.get(id);
    if (!s || s.expiresAt < this.now()) {
      this.signIns.delete(id);
      res.status(400).set(PAGE_HEADERS).send(page('Sign-in expired', '<h1>This sign-in has expired</h1><p>Start again from your MCP client.</p>'));
      return;
    }
    const back = (params: Record<string, string>) => {
      const u = new URL(s.redirectUri);
      for (const [k, v] of Object.entries({ ...params, ...(s.state !== undefined ? { state: s.state } : {}), iss: this.opts.urls().issuer })) u.searchParams.set(k, v);
      res.redirect(302, u.href);
    };
    if (one('action') === 'deny') {
      this.signIns.delete(id);
      return back({ error: 'access_denied', error_description: 'The user denied the request' });
    }
    const account = one('account');
    const again = (status: number, message: string) => void res.status(status).set(PAGE_HEADERS).send(consentPage(id, s, message, account));
    if (!account || !(await checkPassword(this.opts.dataDir, account, one('password')))) return again(401, 'Wrong account or password.');
    const row = await accountById(this.opts.store, account).catch(() => undefined);
    if (row === undefined) return again(503, 'Sign-in is unavailable just now; try again in a moment.');
    if (!row) return again(401, 'Wrong account or password.');
    if (row.status !== 'active') return again(403, 'This account is blocked: MCP access needs an active account with a verified email.');
    if (row.emailVerified !== 1) return again(403, 'This account has no verified email: MCP access needs an active account with a verified email.');
    const checked = new Set(Array.isArray(body.scope) ? body.scope : body.scope ? [body.scope] : []);
    const scopes = s.scopes.filter((sc) => checked.has(sc));
    if (!scopes.length) return again(400, 'Allow at least one kind of data, or deny the request.');
    this.signIns.delete(id);
    const code = random();
    this.codes.set(code, {
      clientId: s.clientId, accountId: account, scopes, resource: s.resource, codeChallenge: s.codeChallenge, redirectUri: s.redirectUri,
      expiresAt: this.now() + CODE_SECONDS * 1000,
    });
    back({ code });
  }

  private codeOf(client: OAuthClientInformationFull, code: string): CodeRecord {
    const c = this.codes.get(code);
    if (!c || c.clientId !== client.client_id || c.expiresAt < this.now()) throw new InvalidGrantError('Invalid or expired authorization code');
    return c;
  }

  async challengeForAuthorizationCode(client: OAuthClientInformationFull, code: string): Promise<string> {
    return this.codeOf(client, code).codeChallenge;
  }

  async exchangeAuthorizationCode(client: OAuthClientInformationFull, code: string, _verifier?: string, redirectUri?: string, resource?: URL): Promise<OAuthTokens> {
    const c = this.codeOf(client, code);
    this.codes.delete(code); // single use
    if (redirectUri !== undefined && redirectUri !== c.redirectUri) throw new InvalidGrantError('redirect_uri differs from the authorization request\'s');
    if (resource) this.resourceOf(resource);
    return this.issue(c, random());
  }

  async exchangeRefreshToken(client: OAuthClientInformationFull, refreshToken: string, scopes?: string[], resource?: URL): Promise<OAuthTokens> {
    const hash = sha256(refreshToken);
    const r = this.refreshTokens.get(hash);
    if (!r || r.clientId !== client.client_id) throw new InvalidGrantError('Invalid refresh token');
    if (r.used) {
      // A rotated token used again: someone holds a copy. The whole family is revoked (RFC 9700 4.14.2).
      this.refreshTokens.delete(...this.refreshTokens.entries().filter(([, v]) => v.family === r.family).map(([k]) => k));
      throw new InvalidGrantError('Refresh token already used; sign in again');
    }
    if (r.expiresAt < this.now()) throw new InvalidGrantError('Refresh token expired; sign in again');
    if (resource) this.resourceOf(resource);
    const narrowed = scopes?.length ? scopes : r.scopes;
    if (narrowed.some((s) => !r.scopes.includes(s as Scope))) throw new InvalidScopeError('A refresh cannot add scopes; sign in again to approve them');
    this.refreshTokens.set(hash, { ...r, used: true });
    return this.issue({ ...r, scopes: narrowed as Scope[] }, r.family);
  }

  /** Tokens for a grant, if its account may still sign in (active, verified). */
  private async issue(g: Grant, family: string): Promise<OAuthTokens> {
    let row;
    try { row = await accountById(this.opts.store, g.accountId); } catch { throw new TemporarilyUnavailableError('The account cannot be checked just now; retry shortly'); }
    if (!row || 'error' in accountAnswer(row, '', [], 'grant')) throw new InvalidGrantError('The account is blocked, unverified or gone');
    const { issuer } = this.opts.urls();
    const now = this.now();
    const access = await mintAccessToken(await this.signingKey(), {
      issuer, audience: g.resource, accountId: g.accountId, scopes: g.scopes, clientId: g.clientId, ttlSeconds: ACCESS_TOKEN_SECONDS, now,
    });
    const refresh = random();
    this.refreshTokens.set(sha256(refresh), {
      clientId: g.clientId, accountId: g.accountId, scopes: g.scopes, resource: g.resource, family, used: false, expiresAt: now + REFRESH_TOKEN_SECONDS * 1000,
    });
    return { access_token: access, token_type: 'Bearer', expires_in: ACCESS_TOKEN_SECONDS, refresh_token: refresh, scope: g.scopes.join(' ') };
  }

  async verifyAccessToken(token: string): Promise<AuthInfo> {
    const key = await this.signingKey();
    try {
      const { payload } = await jwtVerify(token, key.privateKey, { issuer: this.opts.urls().issuer, currentDate: new Date(this.now()) });
      return { token, clientId: String(payload.client_id), scopes: String(payload.scope ?? '').split(' ').filter(Boolean), expiresAt: payload.exp };
    } catch { throw new InvalidTokenError('Invalid access token'); }
  }

  /** RFC 7009: a refresh token ends its family; access tokens are short-lived JWTs and simply expire. */
  async revokeToken(client: OAuthClientInformationFull, request: OAuthTokenRevocationRequest): Promise<void> {
    const r = this.refreshTokens.get(sha256(request.token));
    if (!r || r.clientId !== client.client_id) return;
    this.refreshTokens.delete(...this.refreshTokens.entries().filter(([, v]) => v.family === r.family).map(([k]) => k));
  }

  /** Drops expired sign-ins, codes and refresh tokens. */
  private sweep(): void {
    const now = this.now();
    for (const [k, v] of this.signIns) if (v.expiresAt < now) this.signIns.delete(k);
    for (const [k, v] of this.codes) if (v.expiresAt < now) this.codes.delete(k);
    const expired = this.refreshTokens.entries().filter(([, v]) => v.expiresAt < now).map(([k]) => k);
    if (expired.length) this.refreshTokens.delete(...expired);
  }

  /** RFC 7592: GET reads the registration, DELETE ends it, with the registration access token. */
  private manage(req: Request, res: Response): void {
    const id = String(req.params.id);
    const c = this.clients.get(id);
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    const given = m ? Buffer.from(sha256(m[1]!)) : null;
    if (!c?.registration_access_token_hash || !given || !timingSafeEqual(given, Buffer.from(c.registration_access_token_hash))) {
      res.status(401).set('www-authenticate', 'Bearer error="invalid_token"').json({ error: 'invalid_token', error_description: 'Unknown client or wrong registration access token' });
      return;
    }
    if (req.method === 'DELETE') {
      this.clients.delete(id);
      this.refreshTokens.delete(...this.refreshTokens.entries().filter(([, v]) => v.clientId === id).map(([k]) => k));
      res.status(204).end();
      return;
    }
    const { registration_access_token_hash: _h, ...client } = c;
    res.status(200).set('cache-control', 'no-store').json(client);
  }

  /** RFC 8414 metadata. */
  metadata(): Record<string, unknown> {
    const { issuer } = this.opts.urls();
    return {
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      registration_endpoint: `${issuer}/register`,
      revocation_endpoint: `${issuer}/revoke`,
      jwks_uri: `${issuer}/.well-known/jwks.json`,
      scopes_supported: [...SCOPES],
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['client_secret_post', 'none'],
      revocation_endpoint_auth_methods_supported: ['client_secret_post', 'none'],
      authorization_response_iss_parameter_supported: true,
      service_documentation: `${new URL(issuer).origin}/agent-guide.md`,
    };
  }

  /** The OAuth endpoints as an express app: the SDK's handlers, the consent form and client management. */
  private expressApp(): express.Express {
    const app = express();
    app.disable('x-powered-by');
    // Generous for one person signing in by hand, tight enough to stop password guessing.
    const signInLimit = rateLimit({ windowMs: 60_000, limit: 20, standardHeaders: 'draft-7', legacyHeaders: false });
    app.use('/authorize', authorizationHandler({ provider: this }));
    app.use('/token', tokenHandler({ provider: this }));
    app.use('/register', clientRegistrationHandler({ clientsStore: this.clientsStore }));
    app.use('/revoke', revocationHandler({ provider: this }));
    app.post('/consent', signInLimit, express.urlencoded({ extended: false, limit: '16kb' }), (req, res, next) => { this.consent(req, res).catch(next); });
    app.all('/consent', (_req, res) => { res.status(405).set('allow', 'POST').end(); });
    app.get('/clients/:id', (req, res) => this.manage(req, res));
    app.delete('/clients/:id', (req, res) => this.manage(req, res));
    app.use((err: Error & { status?: number }, _req: Request, res: Response, _next: unknown) => {
      res.status(err.status && err.status < 500 ? err.status : 500).json({ error: err.status && err.status < 500 ? 'invalid_request' : 'server_error', error_description: err.status && err.status < 500 ? err.message : 'Internal error' });
    });
    return app;
  }

  /** Mounts the authorization server on the fastify app (embedded mode: the same port as REST and MCP). */
  routes(app: FastifyInstance): void {
    const handle = this.expressApp();
    app.register(async (scope) => {
      // The express handlers read their own bodies: fastify leaves the request stream unread here.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
      const pass = async (req: { raw: import('node:http').IncomingMessage }, reply: { hijack(): void; raw: import('node:http').ServerResponse }) => {
        reply.hijack();
        handle(req.raw as never, reply.raw as never);
      };
      for (const url of ['/authorize', '/token', '/register', '/revoke', '/consent', '/clients/:id']) scope.all(url, pass);
      scope.get('/.well-known/oauth-authorization-server', async (_req, reply) => { reply.header('access-control-allow-origin', '*'); return this.metadata(); });
      scope.get('/.well-known/jwks.json', async (_req, reply) => {
        reply.header('access-control-allow-origin', '*').header('cache-control', 'public, max-age=300');
        return { keys: [(await this.signingKey()).publicJwk] };
      });
    });
  }
}
