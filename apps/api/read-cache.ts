import { createHash } from 'node:crypto';
import type { Cache } from '../cache/port.ts';
import type { Principal } from '../reads/context.ts';
import type { ListMeta } from '../reads/list.ts';
import type { Operation } from '../registry.ts';

/**
 * The read cache of DESIGN 9: a read is a function of (operation, normalized parameters, the
 * caller's visibility policy, data version), and the data version changes only when the
 * projector commits, so an entry keyed by all four is never stale. Reads that depend on the
 * clock are cached only when their answer cannot move with it: a historical list whose window
 * is pinned (by a cursor, an explicit bound or id hydration, and no sliding history window), and
 * positions only until the next `too_young` window of the page comes of age.
 */
export interface CacheRule {
  /** `always`: the answer depends on no clock. `pinned-window`: only when the time window cannot slide. */
  when: 'always' | 'pinned-window';
  /** Parameters that select rows by id and lift the default window (so the window is pinned). */
  hydrationParams?: readonly string[];
  /** A shorter lifetime computed from the answer (ms from `now`); 0 means do not cache it. */
  ttlMs?: (data: { results: any[] }, now: number) => number;
}

export const MAX_TTL_MS = 10 * 60_000;

interface Entry { results: string; metaHead: string; metaTail: string }

export function isCacheable(rule: CacheRule | undefined, query: Record<string, unknown>, p: Principal): boolean {
  if (!rule) return false;
  if (rule.when === 'always') return true;
  // The account's history window slides with the clock, and is re-applied to every cursor page.
  if (p.historyWindowDays != null) return false;
  if (query.cursor !== undefined) return true; // the cursor carries the window its first page resolved
  return query.startTime !== undefined || query.endTime !== undefined || (rule.hydrationParams ?? []).some((k) => query[k] !== undefined);
}

export function cacheKey(op: Operation, query: Record<string, unknown>, p: Principal, dataVersion: number): string {
  // Accounts with the same policy share answers, but a cursor is bound to its account: a cursor
  // answer is keyed by account too, so another account replaying it reaches the cursor check.
  const policy = [p.messageVisibility, p.signalVisibility, p.historyWindowDays, query.cursor !== undefined ? p.accountId : null];
  const params = Object.keys(query).sort().map((k) => [k, query[k]]);
  return `read:${dataVersion}:${op.tool}:${createHash('sha256').update(JSON.stringify([policy, params])).digest('base64url')}`;
}

/** Splits `meta` around `serverTime`, which every response carries fresh. */
function encode(data: { results: unknown[]; meta: ListMeta }): Entry {
  const { serverTime: _fresh, appliedTimeRange, ...head } = data.meta;
  return {
    results: JSON.stringify(data.results),
    metaHead: JSON.stringify(head).slice(1, -1),
    metaTail: appliedTimeRange ? `,"appliedTimeRange":${JSON.stringify(appliedTimeRange)}` : '',
  };
}

export function envelope(e: Entry, serverTime: string, requestId: string): string {
  return `{"success":true,"data":{"results":${e.results},"meta":{${e.metaHead},"serverTime":${JSON.stringify(serverTime)}${e.metaTail}}},"requestId":${JSON.stringify(requestId)}}`;
}

export class ReadCache {
  constructor(private readonly cache: Cache, private readonly clock: () => number = Date.now) {}

  async get(key: string): Promise<Entry | undefined> {
    const hit = await this.cache.get(key);
    return hit === undefined ? undefined : JSON.parse(hit);
  }

  /** Stores an answer and returns its encoding, so a miss is serialized only once. */
  async put(key: string, rule: CacheRule, data: { results: unknown[]; meta: ListMeta }, now: number): Promise<Entry> {
    const entry = encode(data);
    // `ttlMs` counts from the request's clock; the read took time since, and that time is gone.
    const ttl = Math.min(MAX_TTL_MS, rule.ttlMs ? rule.ttlMs(data as { results: any[] }, now) - (this.clock() - now) : MAX_TTL_MS);
    if (ttl > 0) await this.cache.set(key, JSON.stringify(entry), ttl);
    return entry;
  }
}
