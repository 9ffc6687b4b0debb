import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { OAuthRegisteredClientsStore } from '@modelcontextprotocol/sdk/server/auth/clients.js';
import {
  InvalidGrantError,
  InvalidScopeError,
  InvalidTargetError,
  InvalidTokenError,
  TemporarilyUnavailableError,
} from '@modelcontextprotocol/sdk/server/auth/errors.js';
import { authorizationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/authorize.js';
import { clientRegistrationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/register.js';
import { revocationHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/revoke.js';
import { tokenHandler } from '@modelcontextprotocol/sdk/server/auth/handlers/token.js';
import type { AuthorizationParams, OAuthServerProvider } from '@modelcontextprotocol/sdk/server/auth/provider.js';
import type { AuthInfo } from '@modelcontextprotocol/sdk/server/auth/types.js';
import type { OAuthClientInformationFull, OAuthTokenRevocationRequest, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';
import { escapeAttribute, escapeText } from 'entities';
import express, { type Request, type Response } from 'express';
import { rateLimit } from 'express-rate-limit';
import type { FastifyInstance } from 'fastify';
import { jwtVerify } from 'jose';
import { SCOPES, type Scope } from '../../schemas/topics/index.ts';
import type { Store } from '../../storage/port.ts';
import type { AuthUrls } from '../mcp/bearer.ts';
import { Journal } from './journal.ts';
import { accountAnswer, accountById } from './keys.ts';
import { checkPassword, PasswordCheckBusy } from './passwords.ts';
import { type BackoffLimits, SignInBackoff, waitText } from './sign-in-backoff.ts';
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

/**
 * Bounds of dynamic client registration (anyone may register): how many registrations are kept,
 * how long one unused is kept, and the size of its metadata.
 */
export const CLIENT_LIMITS = {
  maxClients: 1000,
  /** A registration not used (authorize, token, revoke) for this long is forgotten. */
  idleMs: 30 * 86_400_000,
  maxRedirectUris: 10,
  /** Longest URI, and longest string of any other metadata member. */
  maxUriLength: 2048,
  maxClientNameLength: 200,
  /** Longest list of any other metadata member (grant_types, contacts, ...). */
  maxListLength: 10,
  maxBodyBytes: 16 * 1024,
};
export type ClientLimits = typeof CLIENT_LIMITS;

/** A client's last use is written at most this often (a use is frequent; the idle limit is days). */
const TOUCH_MS = 3600_000;

/**
 * Redirect URIs a client may register (RFC 9700 2.1, RFC 8252 7.3 and 8.3): https, or http on a
 * loopback host (a native client's local listener); nothing else, and no fragment (RFC 6749 3.1.2).
 */
export function allowedRedirectUri(uri: unknown): boolean {
  if (typeof uri !== 'string') return false;
  let u: URL;
  try {
    u = new URL(uri);
  } catch {
    return false;
  }
  if (u.hash || uri.includes('#')) return false;
  if (u.protocol === 'https:') return true;
  return (
    u.protocol === 'http:' && (u.hostname === 'localhost' || u.hostname === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(u.hostname))
  );
}

/** What is wrong with a registration request's metadata (RFC 7591 3.2.2 error codes), or null. */
function registrationProblem(
  body: unknown,
  limits: ClientLimits,
): { error: 'invalid_redirect_uri' | 'invalid_client_metadata'; error_description: string } | null {
  if (!body || typeof body !== 'object' || Array.isArray(body))
    return { error: 'invalid_client_metadata', error_description: 'The registration must be a JSON object' };
  const meta = body as Record<string, unknown>;
  const uris = meta.redirect_uris;
  if (!Array.isArray(uris) || uris.length < 1 || uris.length > limits.maxRedirectUris) {
    return { error: 'invalid_redirect_uri', error_description: `redirect_uris must list 1 to ${limits.maxRedirectUris} URIs` };
  }
  for (const uri of uris) {
    if (typeof uri === 'string' && uri.length > limits.maxUriLength)
      return { error: 'invalid_redirect_uri', error_description: `A redirect URI is at most ${limits.maxUriLength} characters` };
    if (!allowedRedirectUri(uri)) {
      return {
        error: 'invalid_redirect_uri',
        error_description: `Redirect URIs must be https, or http on a loopback host (127.0.0.1, [::1], localhost), without a fragment: ${String(uri).slice(0, 100)}`,
      };
    }
  }
  if (meta.client_name !== undefined && (typeof meta.client_name !== 'string' || meta.client_name.length > limits.maxClientNameLength)) {
    return {
      error: 'invalid_client_metadata',
      error_description: `client_name is a string of at most ${limits.maxClientNameLength} characters`,
    };
  }
  for (const [k, v] of Object.entries(meta)) {
    if (typeof v === 'string' && v.length > limits.maxUriLength)
      return { error: 'invalid_client_metadata', error_description: `${k.slice(0, 64)} is longer than ${limits.maxUriLength} characters` };
    if (Array.isArray(v) && k !== 'redirect_uris' && v.length > limits.maxListLength)
      return { error: 'invalid_client_metadata', error_description: `${k.slice(0, 64)} lists more than ${limits.maxListLength} values` };
  }
  return null;
}

interface StoredClient extends OAuthClientInformationFull {
  registration_access_token_hash?: string;
  /** Last use (ms): registration, authorize, token or revoke requests; the idle limit counts from it. */
  last_used_at?: number;
}
interface Grant {
  clientId: string;
  accountId: string;
  scopes: Scope[];
  resource: string;
  expiresAt: number;
}
interface RefreshRecord extends Grant {
  family: string;
  used: boolean;
}
interface CodeRecord extends Grant {
  codeChallenge: string;
  redirectUri: string;
}
interface SignIn {
  clientId: string;
  clientName: string;
  redirectUri: string;
  codeChallenge: string;
  state?: string;
  scopes: Scope[];
  resource: string;
  expiresAt: number;
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
  const scopes = s.scopes
    .map(
      (sc) =>
        `<label><input type="checkbox" name="scope" value="${escapeAttribute(sc)}" checked> <code>${escapeText(sc)}</code>: ${escapeText(SCOPE_TEXT[sc])}</label>`,
    )
    .join('\n');
  return page(
    'Sign in to signalbase',
    `<h1>Sign in to signalbase</h1>
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
</form>`,
  );
}

export class DevAuthorizationServer implements OAuthServerProvider {
  private readonly clients: Journal<StoredClient>;
  private readonly refreshTokens: Journal<RefreshRecord>;
  private readonly codes = new Map<string, CodeRecord>();
  private readonly signIns = new Map<string, SignIn>();
  private readonly limits: ClientLimits;
  private readonly backoff: SignInBackoff;
  private key?: Promise<SigningKey>;

  constructor(
    private readonly opts: {
      dataDir: string;
      store: Store;
      urls: () => AuthUrls;
      clock?: () => number;
      /** CLIENT_LIMITS unless given (tests use small ones). */
      clientLimits?: Partial<ClientLimits>;
      /** The sign-in page's per-account backoff (SIGN_IN_BACKOFF unless given). */
      signInBackoff?: Partial<BackoffLimits>;
    },
  ) {
    const dir = join(opts.dataDir, 'auth');
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.limits = { ...CLIENT_LIMITS, ...opts.clientLimits };
    this.backoff = new SignInBackoff(opts.signInBackoff);
    this.clients = new Journal(join(dir, 'clients.ndjson'), { legacyJson: join(dir, 'clients.json') });
    this.refreshTokens = new Journal(join(dir, 'refresh-tokens.ndjson'), { legacyJson: join(dir, 'refresh-tokens.json') });
  }

  private now = () => (this.opts.clock ?? Date.now)();
  signingKey(): Promise<SigningKey> {
    return (this.key ??= loadSigningKey(this.opts.dataDir));
  }

  get clientsStore(): OAuthRegisteredClientsStore {
    return {
      getClient: (id) => {
        const c = this.liveClient(id);
        // A registration from before redirect URIs were checked, with one that would now be refused, is not a validated client.
        if (!c || !Array.isArray(c.redirect_uris) || !c.redirect_uris.every(allowedRedirectUri)) return undefined;
        if (c.last_used_at === undefined || this.now() - c.last_used_at > TOUCH_MS)
          this.clients.set(id, { ...c, last_used_at: this.now() });
        const { registration_access_token_hash: _h, last_used_at: _u, ...client } = c;
        return client;
      },
      registerClient: (client) => {
        const id = (client as OAuthClientInformationFull).client_id;
        const token = random();
        const full = { ...client, client_id: id, registration_client_uri: `${this.opts.urls().issuer}/clients/${encodeURIComponent(id)}` };
        this.clients.set(id, { ...full, registration_access_token_hash: sha256(token), last_used_at: this.now() });
        return { ...full, registration_access_token: token } as OAuthClientInformationFull;
      },
    };
  }

  /** A registration, unless it has been idle past the limit (then it is forgotten now, with its refresh tokens). */
  private liveClient(id: string): StoredClient | undefined {
    const c = this.clients.get(id);
    if (c && this.now() - (c.last_used_at ?? (c.client_id_issued_at ?? 0) * 1000) > this.limits.idleMs) {
      this.forgetClient(id);
      return undefined;
    }
    return c;
  }

  private forgetClient(id: string): void {
    this.clients.delete(id);
    this.refreshTokens.delete(
      ...this.refreshTokens
        .entries()
        .filter(([, v]) => v.clientId === id)
        .map(([k]) => k),
    );
  }

  /** Live registrations, after forgetting the idle ones. */
  private liveClientCount(): number {
    for (const [id] of this.clients.entries()) this.liveClient(id);
    return this.clients.size;
  }

  /** The resource a grant is for: the MCP URL, whether named (RFC 8707) or not; another one is refused. */
  private resourceOf(resource: URL | undefined): string {
    const { mcpUrl } = this.opts.urls();
    if (resource && resource.href.replace(/\/$/, '') !== mcpUrl.replace(/\/$/, ''))
      throw new InvalidTargetError(`This server issues tokens for ${mcpUrl} only`);
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
      clientId: client.client_id,
      clientName: client.client_name ?? client.client_id,
      redirectUri: params.redirectUri,
      codeChallenge: params.codeChallenge,
      scopes,
      resource,
      expiresAt: this.now() + SIGN_IN_SECONDS * 1000,
      ...(params.state !== undefined ? { state: params.state } : {}),
    });
    res
      .status(200)
      .set(PAGE_HEADERS)
      .send(consentPage(id, this.signIns.get(id)!));
  }

  /** POST /consent: the sign-in and consent form. */
  private async consent(req: Request, res: Response): Promise<void> {
    const body = (req.body ?? {}) as Record<string, string | string[]>;
    const one = (k: string) => (typeof body[k] === 'string' ? (body[k] as string) : '');
    const id = one('request');
    const s = this.signIns.get(id);
    if (!s || s.expiresAt < this.now()) {
      this.signIns.delete(id);
      res
        .status(400)
        .set(PAGE_HEADERS)
        .send(page('Sign-in expired', '<h1>This sign-in has expired</h1><p>Start again from your MCP client.</p>'));
      return;
    }
    const back = (params: Record<string, string>) => {
      const u = new URL(s.redirectUri);
      for (const [k, v] of Object.entries({
        ...params,
        ...(s.state !== undefined ? { state: s.state } : {}),
        iss: this.opts.urls().issuer,
      }))
        u.searchParams.set(k, v);
      res.redirect(302, u.href);
    };
    if (one('action') === 'deny') {
      this.signIns.delete(id);
      return back({ error: 'access_denied', error_description: 'The user denied the request' });
    }
    const account = one('account');
    const again = (status: number, message: string) =>
      void res
        .status(status)
        .set(PAGE_HEADERS)
        .send(consentPage(id, s, message, account));
    if (!account) return again(401, 'Wrong account or password.');
    // A locked account is refused before its password is hashed.
    const locked = await this.backoff.lockedFor(account);
    if (locked) {
      res.set('retry-after', String(Math.ceil(locked / 1000)));
      return again(429, `Too many failed sign-ins for this account: try again in ${waitText(locked)}.`);
    }
    let passwordOk: boolean;
    try {
      passwordOk = await checkPassword(this.opts.dataDir, account, one('password'));
    } catch (err) {
      if (!(err instanceof PasswordCheckBusy)) throw err;
      res.set('retry-after', '2');
      return again(503, `${err.message}.`);
    }
    if (!passwordOk) {
      const lock = await this.backoff.failed(account);
      if (lock) res.set('retry-after', String(Math.ceil(lock / 1000)));
      return again(
        401,
        lock
          ? `Wrong account or password. Too many failed sign-ins for this account: try again in ${waitText(lock)}.`
          : 'Wrong account or password.',
      );
    }
    await this.backoff.succeeded(account);
    const row = await accountById(this.opts.store, account).catch(() => undefined);
    if (row === undefined) return again(503, 'Sign-in is unavailable just now; try again in a moment.');
    if (!row) return again(401, 'Wrong account or password.');
    if (row.status !== 'active') return again(403, 'This account is blocked: MCP access needs an active account with a verified email.');
    if (row.emailVerified !== 1)
      return again(403, 'This account has no verified email: MCP access needs an active account with a verified email.');
    const checked = new Set(Array.isArray(body.scope) ? body.scope : body.scope ? [body.scope] : []);
    // An account grants only scopes it holds (DESIGN 6 "Account scopes").
    const ticked = s.scopes.filter((sc) => checked.has(sc));
    const scopes = ticked.filter((sc) => row.accountScopes.includes(sc));
    if (!ticked.length) return again(400, 'Allow at least one kind of data, or deny the request.');
    if (!scopes.length)
      return again(403, `This account may not share ${ticked.join(', ')}; it may share ${row.accountScopes.join(', ') || 'nothing'}.`);
    this.signIns.delete(id);
    const code = random();
    this.codes.set(code, {
      clientId: s.clientId,
      accountId: account,
      scopes,
      resource: s.resource,
      codeChallenge: s.codeChallenge,
      redirectUri: s.redirectUri,
      expiresAt: this.now() + CODE_SECONDS * 1000,
    });
    back({ code });
  }

  private codeOf(client: OAuthClientInformationFull, code: string): CodeRecord {
    const c = this.codes.get(code);
    if (!c || c.clientId !== client.client_id || c.expiresAt < this.now())
      throw new InvalidGrantError('Invalid or expired authorization code');
    return c;
  }

  async challengeForAuthorizationCode(client: OAuthClientInformationFull, code: string): Promise<string> {
    return this.codeOf(client, code).codeChallenge;
  }

  async exchangeAuthorizationCode(
    client: OAuthClientInformationFull,
    code: string,
    _verifier?: string,
    redirectUri?: string,
    resource?: URL,
  ): Promise<OAuthTokens> {
    const c = this.codeOf(client, code);
    this.codes.delete(code); // single use
    if (redirectUri !== undefined && redirectUri !== c.redirectUri)
      throw new InvalidGrantError("redirect_uri differs from the authorization request's");
    if (resource) this.resourceOf(resource);
    return this.issue(c, random());
  }

  async exchangeRefreshToken(
    client: OAuthClientInformationFull,
    refreshToken: string,
    scopes?: string[],
    resource?: URL,
  ): Promise<OAuthTokens> {
    const hash = sha256(refreshToken);
    const r = this.refreshTokens.get(hash);
    if (!r || r.clientId !== client.client_id) throw new InvalidGrantError('Invalid refresh token');
    if (r.used) {
      // A rotated token used again: someone holds a copy. The whole family is revoked (RFC 9700 4.14.2).
      this.refreshTokens.delete(
        ...this.refreshTokens
          .entries()
          .filter(([, v]) => v.family === r.family)
          .map(([k]) => k),
      );
      throw new InvalidGrantError('Refresh token already used; sign in again');
    }
    if (r.expiresAt < this.now()) throw new InvalidGrantError('Refresh token expired; sign in again');
    if (resource) this.resourceOf(resource);
    const narrowed = scopes?.length ? scopes : r.scopes;
    if (narrowed.some((s) => !r.scopes.includes(s as Scope)))
      throw new InvalidScopeError('A refresh cannot add scopes; sign in again to approve them');
    this.refreshTokens.set(hash, { ...r, used: true });
    return this.issue({ ...r, scopes: narrowed as Scope[] }, r.family);
  }

  /** Tokens for a grant, if its account may still sign in (active, verified). */
  private async issue(g: Grant, family: string): Promise<OAuthTokens> {
    let row: Awaited<ReturnType<typeof accountById>>;
    try {
      row = await accountById(this.opts.store, g.accountId);
    } catch {
      throw new TemporarilyUnavailableError('The account cannot be checked just now; retry shortly');
    }
    if (!row || 'error' in accountAnswer(row, '', [], 'grant')) throw new InvalidGrantError('The account is blocked, unverified or gone');
    // A grant keeps only the scopes its account still holds (a refresh after the account was narrowed).
    const held = g.scopes.filter((sc) => row.accountScopes.includes(sc));
    if (!held.length) throw new InvalidScopeError('The account no longer holds any of the scopes granted; sign in again');
    g = { ...g, scopes: held };
    const { issuer } = this.opts.urls();
    const now = this.now();
    const access = await mintAccessToken(await this.signingKey(), {
      issuer,
      audience: g.resource,
      accountId: g.accountId,
      scopes: g.scopes,
      clientId: g.clientId,
      ttlSeconds: ACCESS_TOKEN_SECONDS,
      now,
    });
    const refresh = random();
    this.refreshTokens.set(sha256(refresh), {
      clientId: g.clientId,
      accountId: g.accountId,
      scopes: g.scopes,
      resource: g.resource,
      family,
      used: false,
      expiresAt: now + REFRESH_TOKEN_SECONDS * 1000,
    });
    return {
      access_token: access,
      token_type: 'Bearer',
      expires_in: ACCESS_TOKEN_SECONDS,
      refresh_token: refresh,
      scope: g.scopes.join(' '),
    };
  }

  async verifyAccessToken(token: string): Promise<AuthInfo> {
    const key = await this.signingKey();
    try {
      const { payload } = await jwtVerify(token, key.privateKey, {
        issuer: this.opts.urls().issuer,
        typ: 'at+jwt',
        currentDate: new Date(this.now()),
      });
      return {
        token,
        clientId: String(payload.client_id),
        scopes: String(payload.scope ?? '')
          .split(' ')
          .filter(Boolean),
        expiresAt: payload.exp,
      };
    } catch {
      throw new InvalidTokenError('Invalid access token');
    }
  }

  /** RFC 7009: a refresh token ends its family; access tokens are short-lived JWTs and simply expire. */
  async revokeToken(client: OAuthClientInformationFull, request: OAuthTokenRevocationRequest): Promise<void> {
    const r = this.refreshTokens.get(sha256(request.token));
    if (!r || r.clientId !== client.client_id) return;
    this.refreshTokens.delete(
      ...this.refreshTokens
        .entries()
        .filter(([, v]) => v.family === r.family)
        .map(([k]) => k),
    );
  }

  /** Drops expired sign-ins, codes and refresh tokens. */
  private sweep(): void {
    const now = this.now();
    for (const [k, v] of this.signIns) if (v.expiresAt < now) this.signIns.delete(k);
    for (const [k, v] of this.codes) if (v.expiresAt < now) this.codes.delete(k);
    const expired = this.refreshTokens
      .entries()
      .filter(([, v]) => v.expiresAt < now)
      .map(([k]) => k);
    if (expired.length) this.refreshTokens.delete(...expired);
  }

  /** RFC 7592: GET reads the registration, DELETE ends it, with the registration access token. */
  private manage(req: Request, res: Response): void {
    const id = String(req.params.id);
    const c = this.liveClient(id);
    const m = /^Bearer (.+)$/.exec(req.headers.authorization ?? '');
    const given = m ? Buffer.from(sha256(m[1]!)) : null;
    if (!c?.registration_access_token_hash || !given || !timingSafeEqual(given, Buffer.from(c.registration_access_token_hash))) {
      res
        .status(401)
        .set('www-authenticate', 'Bearer error="invalid_token"')
        .json({ error: 'invalid_token', error_description: 'Unknown client or wrong registration access token' });
      return;
    }
    if (req.method === 'DELETE') {
      this.forgetClient(id);
      res.status(204).end();
      return;
    }
    const { registration_access_token_hash: _h, last_used_at: _u, ...client } = c;
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
    const registrationBody = express.json({ limit: this.limits.maxBodyBytes });
    app.use(
      '/register',
      (req, res, next) => this.admitRegistration(registrationBody, req, res, next),
      clientRegistrationHandler({ clientsStore: this.clientsStore }),
    );
    app.use('/revoke', revocationHandler({ provider: this }));
    app.post('/consent', signInLimit, express.urlencoded({ extended: false, limit: '16kb' }), (req, res, next) => {
      this.consent(req, res).catch(next);
    });
    app.all('/consent', (_req, res) => {
      res.status(405).set('allow', 'POST').end();
    });
    app.get('/clients/:id', (req, res) => this.manage(req, res));
    app.delete('/clients/:id', (req, res) => this.manage(req, res));
    app.use((err: Error & { status?: number }, _req: Request, res: Response, _next: unknown) => {
      res.status(err.status && err.status < 500 ? err.status : 500).json({
        error: err.status && err.status < 500 ? 'invalid_request' : 'server_error',
        error_description: err.status && err.status < 500 ? err.message : 'Internal error',
      });
    });
    return app;
  }

  /**
   * Before the SDK's registration handler: a bounded body (RFC 7591 errors for what is too large
   * or not allowed), and room under the cap on registrations.
   */
  private admitRegistration(parse: express.RequestHandler, req: Request, res: Response, next: (err?: unknown) => void): void {
    if (req.method !== 'POST') {
      next();
      return;
    } // the SDK answers CORS preflights and 405
    // As the SDK's handler answers (cors()): a browser-based client can read why it was refused.
    const refuse = (status: number, error: string, description: string) =>
      void res
        .status(status)
        .set({ 'cache-control': 'no-store', 'access-control-allow-origin': '*' })
        .json({ error, error_description: description });
    void parse(req, res, (err?: unknown) => {
      if (err) {
        const tooLarge = (err as { type?: string }).type === 'entity.too.large';
        return refuse(
          tooLarge ? 413 : 400,
          'invalid_client_metadata',
          tooLarge ? `A registration is at most ${this.limits.maxBodyBytes} bytes` : 'The registration is not valid JSON',
        );
      }
      const problem = registrationProblem(req.body, this.limits);
      if (problem) return refuse(400, problem.error, problem.error_description);
      if (this.liveClientCount() >= this.limits.maxClients) {
        res.set('retry-after', '3600');
        return refuse(
          503,
          'temporarily_unavailable',
          `This server holds its maximum of ${this.limits.maxClients} client registrations; unused ones expire, so retry later`,
        );
      }
      next();
    });
  }

  /** Mounts the authorization server on the fastify app (embedded mode: the same port as REST and MCP). */
  routes(app: FastifyInstance): void {
    const handle = this.expressApp();
    app.register(async (scope) => {
      // The express handlers read their own bodies: fastify leaves the request stream unread here.
      scope.removeAllContentTypeParsers();
      scope.addContentTypeParser('*', (_req, _payload, done) => done(null, undefined));
      const pass = async (
        req: { raw: import('node:http').IncomingMessage },
        reply: { hijack(): void; raw: import('node:http').ServerResponse },
      ) => {
        reply.hijack();
        handle(req.raw as never, reply.raw as never);
      };
      for (const url of ['/authorize', '/token', '/register', '/revoke', '/consent', '/clients/:id']) scope.all(url, pass);
      scope.get('/.well-known/oauth-authorization-server', async (_req, reply) => {
        reply.header('access-control-allow-origin', '*');
        return this.metadata();
      });
      scope.get('/.well-known/jwks.json', async (_req, reply) => {
        reply.header('access-control-allow-origin', '*').header('cache-control', 'public, max-age=300');
        return { keys: [(await this.signingKey()).publicJwk] };
      });
    });
  }
}
