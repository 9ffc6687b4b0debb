import { createRemoteJWKSet, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from 'jose';
import { ApiError } from '../../schemas/api/errors.ts';
import { SCOPES, type Scope } from '../../schemas/topics/index.ts';
import type { Store } from '../../storage/port.ts';
import { accountAnswer, accountById, type CachedAnswer } from '../auth/keys.ts';
import type { Cache } from '../cache/port.ts';
import type { Principal } from '../reads/principal.ts';

/** Where the MCP endpoint lives (the tokens' audience) and who issues its tokens. */
export interface AuthUrls {
  mcpUrl: string;
  issuer: string;
}

/** The protected-resource metadata address of an MCP URL (RFC 9728: the well-known path is inserted before the URL's path). */
export function resourceMetadataUrl(mcpUrl: string): string {
  const u = new URL(mcpUrl);
  return `${u.origin}/.well-known/oauth-protected-resource${u.pathname === '/' ? '' : u.pathname}`;
}

/**
 * A refusal on the MCP surface, answered in OAuth's terms (RFC 6750 section 3): the status, the
 * `error` of the WWW-Authenticate challenge (none when no credential was sent) and, for
 * `insufficient_scope`, the scopes that would do.
 */
export class BearerError extends Error {
  constructor(
    readonly status: 401 | 403 | 503,
    readonly error: 'invalid_token' | 'insufficient_scope' | 'temporarily_unavailable' | null,
    message: string,
    readonly scope?: string,
  ) {
    super(message);
  }
}

const KNOWN = new Set<string>(SCOPES);

/** The token's scopes we know: `scope` (RFC 9068, space-separated) or `scp` (a list, as some servers write it). */
export function tokenScopes(payload: JWTPayload): Scope[] {
  const raw = typeof payload.scope === 'string' ? payload.scope.split(' ') : Array.isArray(payload.scp) ? payload.scp : [];
  return [...new Set(raw.filter((s): s is Scope => typeof s === 'string' && KNOWN.has(s)))];
}

async function metadata(issuer: string): Promise<{ jwks_uri?: string; issuer?: string }> {
  const u = new URL(issuer);
  const path = u.pathname === '/' ? '' : u.pathname;
  // RFC 8414 first, then OpenID Connect discovery (what most production servers publish).
  for (const url of [
    `${u.origin}/.well-known/oauth-authorization-server${path}`,
    `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`,
  ]) {
    const res = await fetch(url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(5000) }).catch(() => null);
    if (res?.ok) return (await res.json()) as { jwks_uri?: string };
  }
  throw new Error(`no authorization server metadata at ${issuer}`);
}

/**
 * The resource side of MCP auth (DESIGN 7): a bearer JWT verified with jose against the issuer's
 * JWKS (fetched once, kept, and fetched again when a token names an unknown `kid`), for the
 * audience MCP_URL; then its owner account (`sub`) must exist, be active and verified at each
 * call, and gives the policy. Account answers are cached under `auth:` for `ttlMs`, and cleared
 * with the API keys' answers on every projector commit.
 */
export class TokenVerifier {
  private keys?: Promise<JWTVerifyGetKey>;

  constructor(
    private readonly opts: {
      store: Store;
      cache: Cache;
      urls: () => AuthUrls;
      /** The issuer's keys; discovered from its metadata when omitted. */
      jwks?: JWTVerifyGetKey;
      /** Least time between two JWKS fetches for unknown `kid`s (jose's cooldown, 30 s by default). */
      jwksCooldownMs?: number;
      ttlMs?: number;
      clock?: () => number;
    },
  ) {}

  private keySet(): Promise<JWTVerifyGetKey> {
    if (this.opts.jwks) return Promise.resolve(this.opts.jwks);
    this.keys ??= (async () => {
      const { issuer } = this.opts.urls();
      const meta = await metadata(issuer);
      if (!meta.jwks_uri) throw new Error(`the authorization server ${issuer} publishes no jwks_uri`);
      return createRemoteJWKSet(new URL(meta.jwks_uri), { cooldownDuration: this.opts.jwksCooldownMs ?? 30_000, timeoutDuration: 5000 });
    })();
    this.keys.catch(() => {
      this.keys = undefined;
    }); // an issuer down now is asked again on the next call
    return this.keys;
  }

  /** The principal of an `Authorization: Bearer` header; throws BearerError. */
  async verify(authorization: string | undefined, apiKey: string | undefined): Promise<Principal> {
    if (!authorization) {
      throw new BearerError(
        401,
        apiKey === undefined ? null : 'invalid_token',
        apiKey === undefined
          ? 'Missing bearer token: sign in with OAuth (see the resource_metadata of the WWW-Authenticate header)'
          : 'API keys are not accepted by the MCP endpoint: sign in with OAuth (see the resource_metadata of the WWW-Authenticate header)',
      );
    }
    const m = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i.exec(authorization);
    if (!m) throw new BearerError(401, 'invalid_token', 'The Authorization header must be "Bearer <access token>"');
    const token = m[1]!;
    if (token.startsWith('sb_'))
      throw new BearerError(401, 'invalid_token', 'API keys are not accepted by the MCP endpoint: sign in with OAuth');
    const { mcpUrl, issuer } = this.opts.urls();
    let payload: JWTPayload;
    let keys: JWTVerifyGetKey;
    try {
      keys = await this.keySet();
    } catch (err) {
      throw new BearerError(503, 'temporarily_unavailable', `The authorization server's keys cannot be fetched: ${(err as Error).message}`);
    }
    try {
      ({ payload } = await jwtVerify(token, keys, {
        // RFC 9068 2.1: an access token says so in its header, so an ID token or another JWT of the issuer is not taken for one.
        issuer,
        audience: mcpUrl,
        typ: 'at+jwt',
        algorithms: ['ES256', 'ES384', 'RS256', 'PS256', 'EdDSA'],
        currentDate: new Date((this.opts.clock ?? Date.now)()),
        requiredClaims: ['sub', 'exp'],
      }));
    } catch (err) {
      const code = (err as { code?: string }).code ?? '';
      // No answer from the JWKS (a timeout, a failed fetch, a non-200) is not the token's fault.
      if (code === 'ERR_JWKS_TIMEOUT' || code === 'ERR_JOSE_GENERIC' || code === '') {
        throw new BearerError(503, 'temporarily_unavailable', "The authorization server's keys cannot be fetched; retry shortly");
      }
      throw new BearerError(401, 'invalid_token', `Invalid access token: ${describe(code, err as Error)}`);
    }
    // jose accepts an `aud` list that names MCP_URL among others; a token for several resources
    // could be replayed by any of them here (RFC 8707 2, RFC 9068 4), so it must name this one alone.
    const audiences = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
    if (audiences.length !== 1)
      throw new BearerError(401, 'invalid_token', `Invalid access token: its audience must be ${mcpUrl} alone, not a list of resources`);
    const scopes = tokenScopes(payload);
    const accountId = payload.sub!;
    const answer = await this.account(accountId, `token:${String(payload.client_id ?? payload.azp ?? payload.jti ?? 'unknown')}`, scopes);
    if ('error' in answer) throw new BearerError(401, 'invalid_token', answer.message);
    return { ...answer.principal, scopes: new Set(answer.principal.scopes) };
  }

  private async account(accountId: string, keyId: string, scopes: Scope[]): Promise<CachedAnswer> {
    const key = `auth:account:${accountId}`;
    const hit = await this.opts.cache.get(key);
    let state: { row: Awaited<ReturnType<typeof accountById>> };
    if (hit) state = JSON.parse(hit);
    else {
      try {
        state = { row: await accountById(this.opts.store, accountId) };
      } catch (err) {
        throw new BearerError(
          503,
          'temporarily_unavailable',
          err instanceof ApiError ? err.message : 'Authentication is temporarily unavailable',
        );
      }
      await this.opts.cache.set(key, JSON.stringify(state), this.opts.ttlMs ?? 5000);
    }
    if (!state.row) return { error: 'UNAUTHORIZED', message: 'The account this token was issued to does not exist' };
    return accountAnswer(state.row, keyId, scopes, 'token');
  }
}

function describe(code: string, err: Error): string {
  switch (code) {
    case 'ERR_JWT_EXPIRED':
      return 'the token has expired; refresh it';
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      if ((err as { claim?: string }).claim === 'typ') return 'its header "typ" must be "at+jwt" (an OAuth access token, RFC 9068)';
      return `claim ${(err as { claim?: string }).claim ?? ''} is not valid for this server (${err.message})`;
    case 'ERR_JWKS_NO_MATCHING_KEY':
      return 'it is signed with a key the authorization server does not publish';
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return 'bad signature';
    default:
      return 'not a JWT this server accepts';
  }
}
