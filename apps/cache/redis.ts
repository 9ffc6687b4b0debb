import type { Redis, RedisOptions } from 'ioredis';
import {
  ChangeLog,
  type ChangeSet,
  type Changes,
  type Dependencies,
  decodeChangeSet,
  encodeChangeSet,
  polledWaitFor,
  type TableGraph,
} from '../../storage/changes.ts';
import type { Cache, Watermarks } from './port.ts';

/**
 * Redis adapters of the shared cache and watermarks (DESIGN 2, distributed mode): every API
 * replica and projector instance sees the same entries and marks.
 *
 * Keys live under `namespace`. A key's first segment (up to its first `:`, e.g. `auth:`) has a
 * generation: entries are stored under `<namespace><segment>#<generation>:<rest>`, and
 * `clear('auth:')` starts a new generation in one INCR, where deleting the entries one by one
 * would scan the whole key space on every projector commit. Entries of an old generation are left
 * to their TTL. Any other prefix is cleared by a SCAN that deletes its entries. `get` and `set`
 * are one round trip each (a Lua script reads the generation and the entry together).
 */
export class RedisCache implements Cache {
  constructor(
    private readonly redis: Redis,
    private readonly namespace = 'signalbase:cache:',
  ) {}

  /** [generation key, entry key without its generation]: the script joins them as `<segment>#<generation>:<rest>`. */
  private parts(key: string): [string, string, string] {
    const i = key.indexOf(':');
    const segment = i === -1 ? '' : key.slice(0, i);
    return [`${this.namespace}gen:${segment}`, `${this.namespace}${segment}#`, i === -1 ? `:${key}` : key.slice(i)];
  }

  async get(key: string): Promise<string | undefined> {
    const [gen, head, rest] = this.parts(key);
    const v = (await this.redis.eval(GET_SCRIPT, 1, gen, head, rest)) as string | null;
    return v ?? undefined;
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    const [gen, head, rest] = this.parts(key);
    await this.redis.eval(SET_SCRIPT, 1, gen, head, rest, value, String(Math.max(1, Math.ceil(ttlMs))));
  }

  async clear(prefix: string): Promise<void> {
    const i = prefix.indexOf(':');
    if (i !== -1 && i === prefix.length - 1) {
      // A whole segment: a new generation (never deleted, so an old generation's entries never come back).
      await this.redis.incr(this.parts(prefix)[0]);
      return;
    }
    // Any other prefix: the matching entries of every generation, one by one.
    const ns = this.namespace;
    const pattern = i === -1 ? `${escapeGlob(ns)}*` : `${escapeGlob(`${ns}${prefix.slice(0, i)}#`)}*`;
    let cursor = '0';
    do {
      const [next, keys] = await this.redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      const drop = keys.filter((k) => {
        if (k.startsWith(`${ns}gen:`)) return false;
        const hash = k.indexOf('#', ns.length);
        const colon = hash === -1 ? -1 : k.indexOf(':', hash);
        if (colon === -1) return false;
        const segment = k.slice(ns.length, hash);
        const original = segment ? segment + k.slice(colon) : k.slice(colon + 1);
        return original.startsWith(prefix);
      });
      if (drop.length) await this.redis.unlink(...drop);
      cursor = next;
    } while (cursor !== '0');
  }
}

// KEYS[1]: the segment's generation; ARGV: key head (`<namespace><segment>#`), rest (`:<rest>`), [value, ttl ms].
const GET_SCRIPT = `local g = redis.call('GET', KEYS[1]) or '0'
return redis.call('GET', ARGV[1] .. g .. ARGV[2])`;
const SET_SCRIPT = `local g = redis.call('GET', KEYS[1]) or '0'
redis.call('SET', ARGV[1] .. g .. ARGV[2], ARGV[3], 'PX', ARGV[4])
return 1`;

/** A literal for a SCAN MATCH pattern (glob metacharacters escaped). */
const escapeGlob = (s: string) => s.replace(/[*?[\]\\]/g, (c) => `\\${c}`);

/**
 * Watermarks in Redis: `advance` raises a mark atomically (a Lua script compares and sets), so
 * instances advancing the same mark concurrently never move it back.
 */
export class RedisWatermarks implements Watermarks {
  constructor(
    private readonly redis: Redis,
    private readonly namespace = 'signalbase:watermark:',
  ) {}

  async get(name: string): Promise<number> {
    return Number((await this.redis.get(this.namespace + name)) ?? 0);
  }

  /** The mark, or undefined when Redis holds none (never set, or Redis restarted without its data). */
  async find(name: string): Promise<number | undefined> {
    const v = await this.redis.get(this.namespace + name);
    return v === null ? undefined : Number(v);
  }

  /**
   * Moves a counter up by one, to at least `floor` + 1: a counter kept above the clock (`floor` in
   * microseconds) never comes back to a value it had before, even after Redis lost its data.
   */
  async bump(name: string, floor: number): Promise<number> {
    return Number(await this.redis.eval(BUMP_SCRIPT, 1, this.namespace + name, String(floor)));
  }

  async advance(name: string, value: number): Promise<number> {
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`a watermark is a non-negative safe integer, got ${value}`);
    return Number(await this.redis.eval(ADVANCE_SCRIPT, 1, this.namespace + name, String(value)));
  }
}

// Compared as decimal strings (a longer one is larger): Lua numbers are doubles, and a reply
// converted from one lost the last unit at 2^53 - 1.
const ADVANCE_SCRIPT = `local c = redis.call('GET', KEYS[1]) or '0'
local v = ARGV[1]
if #v > #c or (#v == #c and v > c) then redis.call('SET', KEYS[1], v) return v end
return c`;

const BUMP_SCRIPT = `local floor = tonumber(ARGV[1])
if tonumber(redis.call('GET', KEYS[1]) or '0') < floor then redis.call('SET', KEYS[1], ARGV[1]) end
return redis.call('INCR', KEYS[1])`;

/**
 * The projector group's position on each partition, kept in one Redis hash for the processes
 * that have no Kafka client (the API replicas' /healthz and /metrics): `topic/partition` ->
 * `committed:end`. Both only ever rise (a Lua script keeps the larger of the stored and the
 * reported), so a figure read earlier and reported late never undoes a fresher one. A rebuild,
 * which sends the offsets back to the start, clears it. Kept while projectors report (30 s).
 */
export class RedisLagBoard {
  constructor(
    private readonly redis: Redis,
    private readonly key: string,
    private readonly ttlMs = 30_000,
  ) {}

  async record(positions: readonly { topic: string; partition: number; committed: bigint; end: bigint }[]): Promise<void> {
    if (!positions.length) return;
    const args = positions.flatMap((p) => [`${p.topic}/${p.partition}`, String(p.committed < 0n ? 0n : p.committed), String(p.end)]);
    await this.redis.eval(MERGE_POSITIONS_SCRIPT, 1, this.key, String(this.ttlMs), ...args);
  }

  /** Records not yet projected, per partition. */
  async partitions(): Promise<{ topic: string; partition: number; lag: number }[]> {
    const all = await this.redis.hgetall(this.key);
    return Object.entries(all).map(([field, v]) => {
      const slash = field.lastIndexOf('/');
      const [committed, end] = v.split(':').map(Number) as [number, number];
      return { topic: field.slice(0, slash), partition: Number(field.slice(slash + 1)), lag: Math.max(0, end - committed) };
    });
  }

  async total(): Promise<number> {
    return (await this.partitions()).reduce((n, p) => n + p.lag, 0);
  }

  async clear(): Promise<void> {
    await this.redis.del(this.key);
  }
}

// ARGV: ttl, then (field, committed, end) triples. Offsets stay far below 2^53 (doubles are exact).
const MERGE_POSITIONS_SCRIPT = `for i = 2, #ARGV, 3 do
  local c = tonumber(ARGV[i + 1])
  local e = tonumber(ARGV[i + 2])
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if cur then
    local sep = string.find(cur, ':', 1, true)
    c = math.max(c, tonumber(string.sub(cur, 1, sep - 1)))
    e = math.max(e, tonumber(string.sub(cur, sep + 1)))
  end
  redis.call('HSET', KEYS[1], ARGV[i], string.format('%d:%d', c, e))
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1`;

/** Longest a Redis command may take before it fails (ms): the bound a request waits on Redis. */
export const REDIS_COMMAND_TIMEOUT_MS = 250;

/**
 * Client options of every distributed process: a command fails instead of waiting when Redis does
 * not answer (no offline queue, no retry of a command sent before the connection broke, a timeout
 * per command), and the client reconnects by itself with a backoff capped at 2 s, forever.
 */
export function redisClientOptions(commandTimeoutMs = REDIS_COMMAND_TIMEOUT_MS): RedisOptions {
  return {
    commandTimeout: commandTimeoutMs,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 1_000,
    retryStrategy: (times) => Math.min(100 * 2 ** Math.min(times, 5), 2_000),
  };
}

export interface RedisFallbackOptions {
  /** One line when Redis fails, at most one per `logEveryMs` while it stays down, one when it is back. */
  say: (line: string) => void;
  /** Counts each operation that failed or was skipped for Redis (signalbase_redis_errors_total). */
  onError?: (operation: string) => void;
  /** After a failure, Redis is not asked again for this long (ms): a request pays at most one timeout. */
  cooldownMs?: number;
  logEveryMs?: number;
  clock?: () => number;
}

/**
 * How a read replica uses Redis: fail fast and open. An operation runs only while the client is
 * connected and no failure happened in the last `cooldownMs`; otherwise, or when it fails, the
 * caller gets its fallback (a cache miss, an unknown data version, the last lag known) and the
 * answer comes from the store. Redis coming back needs nothing: the client reconnects and the next
 * operation after the cooldown uses it again.
 */
export class RedisFallback {
  private downSince: number | undefined;
  private retryAt = 0;
  private lastLog = 0;
  private suppressed = 0;
  private readonly clock: () => number;

  constructor(
    private readonly redis: Redis,
    private readonly opts: RedisFallbackOptions,
  ) {
    this.clock = opts.clock ?? Date.now;
    // Without a listener ioredis prints every failed reconnection attempt.
    redis.on('error', (err: Error) => {
      opts.onError?.('connection');
      this.failed('connection', err);
    });
  }

  /** Whether the last operation found Redis answering. */
  get available(): boolean {
    return this.downSince === undefined;
  }

  async run<T>(operation: string, fn: () => Promise<T>, fallback: T): Promise<T> {
    if (this.redis.status !== 'ready' || this.clock() < this.retryAt) {
      this.opts.onError?.(operation);
      this.failed(operation, new Error(`not connected (${this.redis.status})`), false);
      return fallback;
    }
    try {
      const v = await fn();
      if (this.downSince !== undefined) {
        this.opts.say(
          `Redis is back after ${Math.round((this.clock() - this.downSince) / 1000)} s (${this.suppressed} more failed or skipped operations since the last line): shared cache, data version and lag board in use again`,
        );
        this.downSince = undefined;
        this.suppressed = 0;
      }
      return v;
    } catch (err) {
      this.opts.onError?.(operation);
      this.retryAt = this.clock() + (this.opts.cooldownMs ?? 1_000);
      this.failed(operation, err as Error);
      return fallback;
    }
  }

  private failed(operation: string, err: Error, real = true): void {
    const now = this.clock();
    if (this.downSince === undefined) {
      if (!real) return; // not connected yet at start, or skipped before any failure: nothing to say
      this.downSince = now;
      this.lastLog = now;
      this.opts.say(`Redis unavailable (${operation}: ${err.message}): answering from the store, uncached, until it is back`);
      return;
    }
    if (now - this.lastLog >= (this.opts.logEveryMs ?? 30_000)) {
      this.opts.say(
        `Redis still unavailable for ${Math.round((now - this.downSince) / 1000)} s (${this.suppressed + 1} operations failed or skipped since the last line; last: ${operation}: ${err.message})`,
      );
      this.lastLog = now;
      this.suppressed = 0;
    } else {
      this.suppressed++;
    }
  }
}

/** A cache through RedisFallback: a miss, and nothing stored, while Redis does not answer. */
export class FailOpenCache implements Cache {
  constructor(
    private readonly cache: Cache,
    private readonly fallback: RedisFallback,
  ) {}
  get(key: string): Promise<string | undefined> {
    return this.fallback.run('cache_get', () => this.cache.get(key), undefined);
  }
  set(key: string, value: string, ttlMs: number): Promise<void> {
    return this.fallback.run('cache_set', () => this.cache.set(key, value, ttlMs), undefined);
  }
  clear(prefix: string): Promise<void> {
    return this.fallback.run('cache_clear', () => this.cache.clear(prefix), undefined);
  }
}

/**
 * The commits' change sets shared through Redis (issue 26): the projector publishes each commit's
 * changes and moves the data version in one script, so a replica that sees a version can always
 * read what changed up to it. Each entry names the version before it: a replica that finds the chain
 * broken (Redis lost its data, or the entries it needed were trimmed) counts everything as changed.
 * Entries are kept for `keepMs` (no cached answer lives longer than the read cache's MAX_TTL_MS).
 */
export class RedisChangeLog {
  constructor(
    private readonly redis: Redis,
    private readonly versionKey: string,
    private readonly changesKey: string,
    private readonly keepMs = 15 * 60_000,
  ) {}

  /** Publishes a commit's changes; returns its version (above `floor`, microseconds of the clock, and above every earlier one). */
  async publish(set: ChangeSet, floor: number): Promise<number> {
    return Number(
      await this.redis.eval(
        PUBLISH_SCRIPT,
        2,
        this.versionKey,
        this.changesKey,
        String(floor),
        encodeChangeSet(set),
        String(this.keepMs * 1000),
      ),
    );
  }

  /** The commits after `version`, oldest first, each with the version before it. */
  async after(version: number): Promise<{ seq: number; prev: number; set: ChangeSet }[]> {
    const raw = await this.redis.zrangebyscore(this.changesKey, `(${version}`, '+inf');
    return raw.map((m) => {
      const [seq, prev] = m.split(' ', 2) as [string, string];
      return { seq: Number(seq), prev: Number(prev), set: decodeChangeSet(m.slice(seq.length + prev.length + 2)) };
    });
  }
}

// KEYS: version, changes. ARGV: floor (µs), change set JSON, what to keep (µs). A member is `<version> <previous> <json>`.
const PUBLISH_SCRIPT = `local prev = tonumber(redis.call('GET', KEYS[1]) or '0')
local floor = tonumber(ARGV[1])
if prev < floor then redis.call('SET', KEYS[1], ARGV[1]) end
local v = redis.call('INCR', KEYS[1])
redis.call('ZADD', KEYS[2], v, string.format('%d', v) .. ' ' .. string.format('%d', prev) .. ' ' .. ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. string.format('%d', v - tonumber(ARGV[3])))
return v`;

/**
 * A replica's view of the shared change log: it learns the commits up to the current version
 * before a read takes it, and counts everything before the first version it saw (or a break in the
 * chain) as changed.
 */
export class SharedChanges implements Changes {
  private readonly log = new ChangeLog(Number.NEGATIVE_INFINITY);
  private synced = false;
  private syncing: Promise<void> | undefined;

  constructor(
    private readonly version: () => Promise<number>,
    /** RedisChangeLog.after (through the replica's fallback: it throws when Redis does not answer). */
    private readonly after: RedisChangeLog['after'],
    readonly graph: TableGraph,
  ) {}

  async current(): Promise<number> {
    const v = await this.version();
    if (!Number.isFinite(v)) return Number.NaN;
    while (v > this.log.seq) {
      this.syncing ??= this.sync(v).finally(() => {
        this.syncing = undefined;
      });
      try {
        await this.syncing;
      } catch {
        return Number.NaN; // Redis did not answer: nothing read now is kept
      }
    }
    return v;
  }

  private async sync(v: number): Promise<void> {
    if (!this.synced) {
      this.synced = true;
      this.log.reset(v);
      return;
    }
    let at = this.log.seq;
    for (const c of await this.after(at)) {
      if (c.prev !== at) break;
      this.log.add(c.seq, c.set);
      at = c.seq;
    }
    // A break in the chain (trimmed, or Redis lost its data): what was read before is not known to hold.
    if (this.log.seq < v) this.log.reset(v);
  }

  changedSince(deps: Dependencies, seq: number, upTo?: number): boolean {
    return this.log.changedSince(deps, seq, upTo);
  }

  since(seq: number): readonly ChangeSet[] | null {
    return this.log.since(seq);
  }

  /** Other processes' commits are learnt by asking Redis: every CHANGE_POLL_MS while a long-poll waits. */
  readonly waitFor = polledWaitFor(this);
}
