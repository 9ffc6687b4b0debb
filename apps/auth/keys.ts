import { createHash, randomBytes } from 'node:crypto';
import { ApiError } from '../../schemas/api/errors.ts';
import type { Scope, VisibilityPolicy } from '../../schemas/topics/index.ts';
import { remember } from '../../storage/bounded.ts';
import type { Store } from '../../storage/port.ts';
import { ACCOUNTS_TABLE, API_KEYS_TABLE } from '../../storage/tables/access.ts';
import type { Cache } from '../cache/port.ts';
import type { Principal } from '../reads/principal.ts';

/** Keys are `sb_<16 hex id>_<43 chars of 32 random bytes>`; only the SHA-256 of the whole key is stored. */
export function generateApiKey(): { key: string; id: string; keyHash: string } {
  const id = randomBytes(8).toString('hex');
  const key = `sb_${id}_${randomBytes(32).toString('base64url')}`;
  return { key, id, keyHash: hashApiKey(key) };
}

/** What `generateApiKey` makes. */
const KEY_SHAPE = /^sb_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/;

export const hashApiKey = (key: string): string => createHash('sha256').update(key).digest('hex');

/** What the cache holds per credential: the principal (scopes as an array) or the refusal. */
export type CachedAnswer =
  | { principal: Omit<Principal, 'scopes'> & { scopes: Scope[] } }
  | { error: 'UNAUTHORIZED' | 'FORBIDDEN'; message: string };

/** The owner account's columns, as every credential's look-up (a key's, a token's) reads them from `accounts AS a`. */
export const ACCOUNT_COLUMNS = `a.id != '' AS hasAccount, a.status AS status, a.emailVerified AS emailVerified, a.msgMode AS msgMode,
  a.msgPlatforms AS msgPlatforms, a.msgTraderIds AS msgTraderIds, a.sigMode AS sigMode, a.sigPlatforms AS sigPlatforms,
  a.sigTraderIds AS sigTraderIds, a.historyWindowDays AS historyWindowDays, a.scopes AS accountScopes`;

export interface AccountRow {
  accountId: string;
  hasAccount: number;
  status: string;
  emailVerified: number;
  msgMode: VisibilityPolicy['mode'];
  msgPlatforms: ('TELEGRAM' | 'X')[];
  msgTraderIds: number[];
  sigMode: VisibilityPolicy['mode'];
  sigPlatforms: ('TELEGRAM' | 'X')[];
  sigTraderIds: number[];
  historyWindowDays: number | null;
  /** The scopes the account may hold. */
  accountScopes: Scope[];
}
interface KeyRow extends AccountRow {
  keyId: string;
  scopes: Scope[];
  revoked: number;
}

/**
 * A credential of an existing account, answered by the account's state (contract 5.4): refused
 * when the account is blocked or unverified, else the principal with the account's policy. Its
 * scopes are the credential's that the account still holds (DESIGN 6 "Account scopes"): narrowing
 * an account takes effect on the keys and tokens it already has.
 */
export function accountAnswer(r: AccountRow, keyId: string, scopes: Scope[], credential = 'key'): CachedAnswer {
  if (r.status !== 'active') return { error: 'FORBIDDEN', message: `The account that owns this ${credential} is blocked` };
  if (r.emailVerified !== 1) return { error: 'FORBIDDEN', message: `The account that owns this ${credential} has no verified email` };
  return {
    principal: {
      accountId: r.accountId,
      keyId,
      scopes: scopes.filter((s) => r.accountScopes.includes(s)),
      messageVisibility: { mode: r.msgMode, platforms: r.msgPlatforms, traderIds: r.msgTraderIds },
      signalVisibility: { mode: r.sigMode, platforms: r.sigPlatforms, traderIds: r.sigTraderIds },
      historyWindowDays: r.historyWindowDays,
    },
  };
}

/**
 * Resolves `x-api-key` to a Principal. Answers (refusals too) are cached by key hash for at most
 * `ttlMs` (14 s) and dropped whenever the projector commits a change of accounts or keys, so a
 * revoked key or a blocked/unverified account is refused at once, and within 30 s (2 x 14 s) when
 * no commit is heard (Redis away); a new key works as soon as it is projected. Each active key
 * costs a store look-up per `ttlMs` (issue 26: a join of keys and accounts, slow under load).
 *
 * This process also keeps the decoded answers it used, by key, for at most `ttlMs` from when it
 * took them from the shared cache (so an answer is at most 2 x `ttlMs` old), dropped with the
 * shared ones on every commit: a request with a key seen a moment ago hashes, parses and builds
 * nothing (`known`). Keys are held in this process's memory only, for seconds, as a request holds
 * them; the shared cache and the store see hashes only.
 */
export class ApiKeyAuthenticator {
  private readonly decoded = new Map<string, { answer: Principal | ApiError; expires: number }>();
  /** Bumped by `invalidate`: a lookup that started before a commit does not keep its answer. */
  private generation = 0;
  private readonly pending = new Map<string, Promise<Principal | ApiError>>();

  constructor(
    private readonly store: Store,
    private readonly cache: Cache,
    private readonly ttlMs = 14_000,
    private readonly clock: () => number = Date.now,
    private readonly maxDecoded = 10_000,
  ) {}

  /** Forgets every cached answer (called on each projector commit). */
  invalidate(): Promise<void> {
    this.forgetDecoded();
    return this.cache.clear('auth:');
  }

  /** Forgets this process's decoded answers only (the shared cache was cleared by whoever committed: an API replica in distributed mode). */
  forgetDecoded(): void {
    this.generation++;
    this.decoded.clear();
    this.pending.clear(); // a look-up under way may have read the store before the commit
  }

  /** The answer for a key used a moment ago, without waiting: a principal, a thrown refusal, or undefined (not known: call `authenticate`). */
  known(key: string | undefined): Principal | undefined {
    if (key === undefined) return undefined;
    const known = this.decoded.get(key);
    if (known === undefined) return undefined;
    if (known.expires <= this.clock()) {
      this.decoded.delete(key);
      return undefined;
    }
    if (known.answer instanceof ApiError) throw known.answer;
    return known.answer;
  }

  async authenticate(key: string | undefined): Promise<Principal> {
    if (!key) throw new ApiError('UNAUTHORIZED', 'Missing API key: send it in the x-api-key header');
    // Not the key format: refused without a store look-up (issue 24: a junk key must cost nothing).
    if (!KEY_SHAPE.test(key)) throw new ApiError('UNAUTHORIZED', 'Malformed API key: keys look like sb_<16 hex>_<43 base64url characters>');
    const known = this.known(key);
    if (known) return known;
    const generation = this.generation;
    // Concurrent requests with one key (a burst, or many clients when an answer expires) share one look-up.
    let pending = this.pending.get(key);
    if (!pending) {
      const started: Promise<Principal | ApiError> = this.resolve(key).finally(() => {
        if (this.pending.get(key) === started) this.pending.delete(key);
      });
      this.pending.set(key, (pending = started));
    }
    const decoded = await pending;
    // Only what looks like a key is kept (a flood of junk keys would only evict real ones).
    if (generation === this.generation && KEY_SHAPE.test(key)) {
      remember(this.decoded, key, { answer: decoded, expires: this.clock() + this.ttlMs }, this.maxDecoded);
    }
    if (decoded instanceof ApiError) throw decoded;
    return decoded;
  }

  private async resolve(key: string): Promise<Principal | ApiError> {
    const cacheKey = `auth:${hashApiKey(key)}`;
    const hit = await this.cache.get(cacheKey);
    const answer: CachedAnswer = hit ? JSON.parse(hit) : await this.lookup(cacheKey.slice(5));
    if (!hit) await this.cache.set(cacheKey, JSON.stringify(answer), this.ttlMs);
    return 'error' in answer
      ? new ApiError(answer.error, answer.message)
      : { ...answer.principal, scopes: new Set(answer.principal.scopes) };
  }

  private async lookup(hash: string): Promise<CachedAnswer> {
    let rows: KeyRow[];
    try {
      rows = await this.store.query<KeyRow>(
        `
        SELECT k.id AS keyId, k.scopes AS scopes, k.revoked AS revoked, k.accountId AS accountId, ${ACCOUNT_COLUMNS}
        FROM (SELECT * FROM ${API_KEYS_TABLE} FINAL WHERE keyHash = {hash:String} AND deleted = 0) AS k
        LEFT JOIN (SELECT * FROM ${ACCOUNTS_TABLE} FINAL WHERE deleted = 0) AS a ON a.id = k.accountId
        LIMIT 1`,
        { hash },
      );
    } catch {
      throw new ApiError('AUTHENTICATION_UNAVAILABLE', 'Authentication is temporarily unavailable; retry shortly');
    }
    const r = rows[0];
    if (!r || r.revoked === 1 || r.hasAccount !== 1) return { error: 'UNAUTHORIZED', message: 'Invalid or revoked API key' };
    return accountAnswer(r, r.keyId, r.scopes);
  }
}

/** The account `id` as a credential's look-up sees it (null: no such account, or deleted). Throws AUTHENTICATION_UNAVAILABLE when the store does not answer. */
export async function accountById(store: Store, id: string): Promise<AccountRow | null> {
  try {
    const rows = await store.query<AccountRow>(
      `
      SELECT a.id AS accountId, ${ACCOUNT_COLUMNS}
      FROM (SELECT * FROM ${ACCOUNTS_TABLE} FINAL WHERE id = {id:String} AND deleted = 0) AS a LIMIT 1`,
      { id },
    );
    return rows[0] ?? null;
  } catch {
    throw new ApiError('AUTHENTICATION_UNAVAILABLE', 'Authentication is temporarily unavailable; retry shortly');
  }
}
