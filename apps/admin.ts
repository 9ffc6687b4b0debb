import type { EmbeddedLog } from '../projectors/log/embedded.ts';
import { type AccountRecord, type ApiKeyRecord, SCOPES, type Scope, TOPIC_NAMES, type VisibilityPolicy } from '../schemas/topics/index.ts';
import { generateApiKey } from './auth/keys.ts';

/**
 * Accounts and API keys are written as records to the log (never straight into tables), so the
 * CLI can manage them while `start` runs on the same DATA_DIR; reads of them fold the log.
 */
function latest<T extends { version: number }>(log: EmbeddedLog, topic: 'accounts' | 'api-keys'): Map<string, T> {
  const out = new Map<string, T>();
  for (const { key, value } of log.readAll(topic)) {
    const prev = out.get(key);
    const v = value as T;
    if (!prev || v.version >= prev.version) out.set(key, v);
  }
  return out;
}

export const listAccounts = (log: EmbeddedLog) => [...latest<AccountRecord>(log, 'accounts').values()].filter((a) => !a.deleted);
export const listKeys = (log: EmbeddedLog) => [...latest<ApiKeyRecord>(log, 'api-keys').values()].filter((k) => !k.deleted);

export const ALL: VisibilityPolicy = { mode: 'all' };
/** The account `start` creates on first run; `keys create` uses it when no --account is given. */
export const DEMO_ACCOUNT = 'demo';

export function putAccount(log: EmbeddedLog, a: Omit<AccountRecord, 'version'>): AccountRecord {
  const prev = latest<AccountRecord>(log, 'accounts').get(a.id);
  const rec: AccountRecord = { ...a, version: (prev?.version ?? 0) + 1 };
  log.appendSync('accounts', [{ key: rec.id, value: rec }]);
  return rec;
}

/** The scopes an account may hold (DESIGN 6 "Account scopes"): a record without them holds all seven. */
export const accountScopes = (a: Pick<AccountRecord, 'scopes'>): Scope[] => [...(a.scopes ?? SCOPES)];

/** Scopes of `wanted` that the account does not hold, with the error that names them (null: none). */
export function scopesBeyond(a: AccountRecord, wanted: readonly Scope[], what: string): Error | null {
  const held = accountScopes(a);
  const beyond = wanted.filter((s) => !held.includes(s));
  return beyond.length
    ? new Error(
        `account ${a.id} does not hold ${beyond.join(', ')}: ${what} may have only the account's scopes (${held.join(', ') || 'none'}); widen them first with \`signalbase accounts set ${a.id} --scopes ...\``,
      )
    : null;
}

/** A new key of the account; `scopes` (default: every scope the account holds) must be among the account's. */
export function createKey(log: EmbeddedLog, accountId: string, scopes?: readonly Scope[]): { key: string; record: ApiKeyRecord } {
  const account = latest<AccountRecord>(log, 'accounts').get(accountId);
  if (!account || account.deleted)
    throw new Error(`no account "${accountId}": create it first with \`signalbase accounts create ${accountId}\``);
  const wanted = scopes ?? accountScopes(account);
  const beyond = scopesBeyond(account, wanted, 'its keys');
  if (beyond) throw beyond;
  if (!wanted.length) throw new Error(`account ${accountId} holds no scopes: a key would read nothing`);
  const { key, id, keyHash } = generateApiKey();
  const record: ApiKeyRecord = {
    id,
    keyHash,
    accountId,
    scopes: [...new Set(wanted)],
    revoked: false,
    createdAt: new Date().toISOString(),
    version: 1,
  };
  log.appendSync('api-keys', [{ key: id, value: record }]);
  return { key, record };
}

export function revokeKey(log: EmbeddedLog, id: string): ApiKeyRecord {
  const prev = latest<ApiKeyRecord>(log, 'api-keys').get(id);
  if (!prev) throw new Error(`no API key with id ${id} (see \`signalbase keys list\`)`);
  const record = { ...prev, revoked: true, version: prev.version + 1 };
  log.appendSync('api-keys', [{ key: id, value: record }]);
  return record;
}

export function parseScopes(s: string): Scope[] {
  const list = s
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  const bad = list.filter((x) => !(SCOPES as readonly string[]).includes(x));
  if (bad.length || !list.length) throw new Error(`--scopes takes a comma-separated list of: ${SCOPES.join(', ')} (got ${s})`);
  return list as Scope[];
}

/** `all`, `none`, `platforms:TELEGRAM,X` or `traders:1,2,3`. */
export function parseVisibility(s: string): VisibilityPolicy {
  if (s === 'all' || s === 'none') return { mode: s };
  const m = /^(platforms|traders):(.+)$/.exec(s);
  if (m?.[1] === 'platforms') {
    const platforms = m[2]!.split(',');
    if (platforms.every((p) => p === 'TELEGRAM' || p === 'X')) return { mode: 'platforms', platforms: platforms as ('TELEGRAM' | 'X')[] };
  }
  if (m?.[1] === 'traders') {
    const ids = m[2]!.split(',').map(Number);
    if (ids.every((n) => Number.isInteger(n) && n > 0)) return { mode: 'traders', traderIds: ids };
  }
  throw new Error(`a visibility is all, none, platforms:TELEGRAM,X or traders:1,2 (got ${s})`);
}

export { TOPIC_NAMES };
