import { createHash } from 'node:crypto';
import { splitIds } from '../../schemas/api/common-params.ts';
import type { Changes, Dependencies } from '../../storage/changes.ts';
import type { Store } from '../../storage/port.ts';
import type { Cache } from '../cache/port.ts';
import type { CacheRule } from '../reads/cache-rule.ts';
import { firstAfter } from '../reads/clock.ts';
import type { Seen } from '../reads/context.ts';
import type { CursorCodec, Key } from '../reads/cursor.ts';
import { type ListMeta, PAGE_FACTS, type PageFacts } from '../reads/list.ts';
import type { Principal } from '../reads/principal.ts';
import { leavesAt, slides, type WindowRule, windowAt } from '../reads/window.ts';
import type { Operation } from '../registry.ts';

/**
 * The read cache of DESIGN 9: a read is a function of (operation, parameters, the caller's
 * visibility policy, data version), and the data version changes only when the projector
 * commits, so an entry keyed by all four never holds another version's answer. Reads
 * that depend on the clock are kept only while their answer cannot move with it, and each answer
 * carries its own fresh `serverTime`, `appliedTimeRange` and `nextCursor`:
 *
 * - a historical list's window is kept as a rule over the clock (apps/reads/window.ts). When its
 *   end is serverTime (the default window), a row dated after the request's `now` enters the
 *   window when the clock reaches its time: the entry ends at the first such time in the read's
 *   table (every row of the table counts, whatever its filters or liveness: that only ends the
 *   entry earlier). When its start trails serverTime (the default 90 days, or the account's
 *   history window), rows leave oldest first, and the first one whose leaving changes the page is
 *   the oldest row the page fetched (the limit+1-th when there is one, which decides `hasMore`);
 *   the entry ends when it leaves. Nothing else moves a window;
 * - `inForce`: rows of another table that come into force when the clock reaches one of their
 *   times (price samples for live marks) end the entry at the first such time after `now`;
 * - `ttlMs`: a lifetime the answer itself says (positions: until a `too_young` window comes of age);
 * - the page's own `until` (PageFacts): reads that the account's history window bounds without a
 *   window of their own (open positions, `/assets?traderIds=`) end when their oldest row leaves it;
 * - the answer's `later` (PageFacts): instants that queries of the read's own find, run only when
 *   the answer is kept (the analytics reads: a `ready` window coming of age, the first row entering
 *   or leaving a default range). An analytics answer (`saysUntil`) holds `filtersApplied` too, and
 *   its `appliedTimeRange` (in `filtersApplied` or `meta`) is made for each answer from its rule;
 * - and never more than MAX_TTL_MS.
 */

export const MAX_TTL_MS = 10 * 60_000;

/** Every read with a rule may be cached: the rule says how long each answer lives. */
export function isCacheable(rule: CacheRule | undefined, _query: Record<string, unknown>, _p: Principal): boolean {
  return rule !== undefined;
}

/**
 * The entry's identity, unhashed (the shared cache gets its SHA-256): the request target (which
 * determines the parsed parameters; two spellings of one query are two entries, which is only
 * less sharing) and the caller's policy. Accounts with the same policy share answers (a next-page
 * cursor is signed for each caller, a feed answer's `dataComputedAt` is each caller's own, and
 * nothing else in a shared answer says when or for whom it was read), but a cursor page (and a
 * since-poll) is keyed by account too, so another account replaying a cursor reaches the cursor
 * check. `shared`: what makes a since-poll one question whoever asks it (LongPoll.share, made from
 * its cursor once that decoded for this caller), so that the partners of one policy at one
 * watermark share one read per commit.
 */
export function cacheKey(op: Operation, url: string, query: Record<string, unknown>, p: Principal, shared?: string): string {
  if (shared !== undefined) return `read:${op.tool}:*${shared}`;
  let policy = policies.get(p);
  if (policy === undefined) {
    const common = [p.messageVisibility, p.signalVisibility, p.historyWindowDays];
    policy = [JSON.stringify([...common, null]), JSON.stringify([...common, p.accountId])];
    policies.set(p, policy);
  }
  // A cursor page, and a feed since-poll (whose nextCursor is a watermark signed for its caller), by account.
  const own = query.cursor !== undefined || query.since !== undefined;
  return `read:${op.tool}:${policy[own ? 1 : 0]}${url}`;
}

/**
 * What a read's answer depends on (issue 26): the tables it read (ReadContext.reads), narrowed to
 * the traders and assets of the parameters its rule names (CacheRule.narrows).
 */
export function dependenciesOf(
  rule: CacheRule,
  query: Record<string, unknown>,
  tables: ReadonlySet<string>,
  sources?: readonly string[],
): Dependencies {
  const ids = (param: string | undefined): readonly number[] | null => {
    const v = param === undefined ? undefined : query[param];
    const list = typeof v === 'string' ? splitIds(v) : undefined;
    return list?.length && list.every(Number.isSafeInteger) ? list : null;
  };
  return { tables, traders: ids(rule.narrows?.traders), assets: ids(rule.narrows?.assets), ...(sources ? { sources } : {}) };
}

/** The policy part of keys by principal (principals are reused while their key's answer is, apps/auth/keys.ts). */
const policies = new WeakMap<Principal, [string, string]>();

/** What an entry holds besides the JSON of `results` and the stable part of `meta`. */
interface Header {
  /** The commit the answer was read at, and what it was read from: a later commit that touches those ends it. */
  seq: number;
  deps: { t: string[]; tr: readonly number[] | null; as: readonly number[] | null; src?: readonly string[] };
  /**
   * The answer holds for requests whose clock is in [from, expires): it was read at `from`, and
   * `expires` is the first instant it may differ (ms, on the cache's clock).
   */
  from: number;
  expires: number;
  /** The window as a rule over the clock: each answer gets the window of its own `now`. */
  window?: WindowRule;
  /** The next page's sort key and the filters' fingerprint: each answer signs a cursor for its caller. */
  next?: { k: Key; fp: string; windowless?: boolean };
  /**
   * The answer says when it was computed (the feed's `dataComputedAt`): each caller is told its own
   * first answer's moment, never another account's (issue 24); `by` read it at `at` (ms).
   */
  computed?: { by: string; at: number };
  /** A `nextCursor` or `appliedTimeRange` that a read without page facts returned, served as it is. */
  cursor?: string | null;
  range?: string;
  /**
   * An answer that is not a list page (the analytics reads): its meta has no `nextCursor`. `filters`:
   * its `appliedTimeRange` is the last member of `filtersApplied`, where `head` ends, and `meta` (the
   * stable part of meta, as JSON members with a trailing comma, or '') follows it; else the range
   * (if any) is meta's, after `serverTime`, and the stable part of meta ends `head`.
   */
  form?: { filters: boolean; meta: string };
}

/** A decoded entry: the response's first bytes, up to `"nextCursor":` (or what Header.form says), and what the rest is made of. */
export interface Entry extends Header {
  head: Buffer;
  dependencies: Dependencies;
  /** The newest seq no commit up to which touches the entry (checked once per seq). */
  checked: number;
  /** `appliedTimeRange` JSON when the window does not move. */
  fixedRange?: string;
  /** With `computed`: when each account was first answered from this entry (ms), COMPUTED_ACCOUNTS at most. */
  computedFor?: Map<string, number>;
  /** The last meta made from this entry, and for what: answers within one ms to one policy share it. */
  meta?: { now: number; print: string; json: string };
  /** The last cursor signed from this entry, and for what (policy and window): a window that does not move needs it once per policy. */
  signed?: { print: string; start: number | null; end: number | null; json: string };
  /**
   * Response buffers that already hold `head`, free for the next answer: an answer writes only its
   * tail into one, and gives it back when the response is finished. A hot entry thus allocates
   * nothing per answer (a fresh buffer of a response's size per request is what costs most: the
   * garbage collector runs for it).
   */
  slabs: Buffer[];
  /** Evicted or expired: its slabs are not kept any more. */
  gone?: boolean;
  /** The SHA-256 of `head` (etagOf), and the last tag made from it, for one account. */
  contentHash?: string;
  etag?: { accountId: string; tag: string };
}

/**
 * The weak ETag of a cached answer for one caller: the operation, the answer's content (`head`:
 * results and the stable part of meta) and the caller's account. Content, not the moment the entry
 * was filled: an answer read again after the clock or the data moved gets a new tag only when it
 * differs, and a tag says nothing of when, or whether, another account read the entry; per
 * account, so two tenants never hold one tag.
 */
export function etagOf(tool: string, e: Entry, accountId: string): string {
  if (e.etag?.accountId === accountId) return e.etag.tag;
  e.contentHash ??= createHash('sha256')
    .update(tool)
    .update('\n')
    .update(e.head)
    .update(e.form?.filters ? e.form.meta : '')
    .digest('base64url');
  const tag = callerTag(e.contentHash, accountId);
  e.etag = { accountId, tag };
  return tag;
}

/** The weak ETag of an answer that is not cached: its content, without what each response has afresh, for this caller. */
export function contentEtag(tool: string, data: unknown, accountId: string): string {
  // The polls one commit wakes answer the same object to many callers: its content is hashed once.
  const known = data && typeof data === 'object' ? contentHashes.get(data) : undefined;
  if (known?.tool === tool) return callerTag(known.hash, accountId);
  const hash = contentHash(tool, data);
  if (data && typeof data === 'object') contentHashes.set(data, { tool, hash });
  return callerTag(hash, accountId);
}
const contentHashes = new WeakMap<object, { tool: string; hash: string }>();

function contentHash(tool: string, data: unknown): string {
  // A read's answer is { results, meta }: the per-request fields are meta's, so only meta is copied
  // without them (a replacer function over a large answer cost the event loop tens of ms).
  const d = data as { results?: unknown; meta?: Record<string, unknown> } | null;
  let json: string;
  if (d && typeof d === 'object' && 'results' in d && d.meta && typeof d.meta === 'object') {
    const { serverTime: _s, dataComputedAt: _d, ...meta } = d.meta;
    json = `${JSON.stringify(d.results)}\n${JSON.stringify(meta)}`;
  } else {
    json = JSON.stringify(data, (k, v) => (k === 'serverTime' || k === 'dataComputedAt' ? undefined : v));
  }
  return createHash('sha256').update(tool).update('\n').update(json).digest('base64url');
}

const callerTag = (contentHash: string, accountId: string): string =>
  `W/"${createHash('sha256').update(contentHash).update('\n').update(accountId).digest('base64url').slice(0, 22)}"`;

/** Whether an If-None-Match header names this tag (weak comparison; `*` names any). */
export function matchesTag(header: string, tag: string): boolean {
  const opaque = tag.replace(/^W\//, '');
  return header.split(',').some((t) => {
    const x = t.trim();
    return x === '*' || x.replace(/^W\//, '') === opaque;
  });
}

/** Room a slab keeps after `head` for the rest of the response (meta and requestId, a few hundred bytes). */
const TAIL_ROOM = 1024;
/** Free slabs kept per entry (more answers in flight at once allocate, and theirs are dropped). */
const SLABS_PER_ENTRY = 16;

const rangeJson = (w: { start: number | null; end: number | null }): string =>
  `{"startTime":${w.start === null ? 'null' : `"${new Date(w.start).toISOString()}"`},"endTime":${w.end === null ? 'null' : `"${new Date(w.end).toISOString()}"`}}`;

function decode(header: Header, head: string): Entry {
  const dependencies = {
    tables: new Set(header.deps.t),
    traders: header.deps.tr,
    assets: header.deps.as,
    ...(header.deps.src ? { sources: header.deps.src } : {}),
  };
  const e: Entry = { ...header, head: Buffer.from(head), dependencies, checked: header.seq, slabs: [] };
  if (e.window && !slides(e.window)) e.fixedRange = rangeJson(windowAt(e.window, 0));
  if (e.computed) e.computedFor = new Map([[e.computed.by, e.computed.at]]);
  return e;
}

/**
 * Accounts an entry remembers the first answer of: past them, a caller's answer says its own
 * request's moment (as true: the entry equals a read then). Small, as the entries are bounded in
 * number and bytes, and these moments are not counted in their bytes.
 */
const COMPUTED_ACCOUNTS = 100;

/**
 * When `accountId`'s answer from this entry was computed: the moment the entry first answered it
 * (the filler's is its read's start). The entry equals a fresh read from then on, so that moment is
 * the start of a read that produced the page, and one account never learns when another read it.
 */
function computedAt(e: Entry, accountId: string, now: number): number {
  const map = (e.computedFor ??= new Map());
  let at = map.get(accountId);
  if (at === undefined) {
    at = now;
    if (map.size < COMPUTED_ACCOUNTS) map.set(accountId, at);
  }
  return at;
}

export class ReadCache {
  /**
   * Decoded entries by unhashed key, so that a hit parses nothing: entries never change (the key
   * holds the data version), and each keeps its own expiry. Bounded in entries and in bytes (heads
   * and free slabs); the least recently used go first.
   */
  private readonly decoded = new Map<string, Entry>();
  private decodedBytes = 0;
  private readonly filling = new Map<string, Promise<Entry>>();

  constructor(
    private readonly cache: Cache,
    private readonly clock: () => number = Date.now,
    private readonly limits = { entries: 2_000, bytes: 64 << 20 },
  ) {}

  private forget(key: string, e: Entry): void {
    this.decodedBytes -= key.length + e.head.length + e.slabs.length * (e.head.length + TAIL_ROOM);
    e.slabs.length = 0;
    e.gone = true;
    this.decoded.delete(key);
  }

  /** Keeps a decoded entry in this process (an entry not kept keeps no slabs either). */
  private remember(key: string, e: Entry): void {
    const old = this.decoded.get(key);
    if (old) this.forget(key, old);
    if (e.head.length > this.limits.bytes / 4) {
      e.gone = true;
      return;
    }
    const size = key.length + e.head.length;
    while (this.decoded.size && (this.decoded.size >= this.limits.entries || this.decodedBytes + size > this.limits.bytes)) {
      const [k, first] = this.decoded.entries().next().value!;
      this.forget(k, first);
    }
    this.decoded.set(key, e);
    this.decodedBytes += size;
  }

  /**
   * Whether an entry still answers a request that reads at `seq`: not expired by the clock, and no
   * commit up to `seq` touched what it was read from (callers check it was read no earlier than the request started).
   * Commits after `seq` do not count: they landed while the request was under way (a read it waited
   * for), where its own read could have seen them or not (issue 26: under live ingest, requests that
   * had waited for a read read again because of a commit newer than themselves).
   */
  private holds(e: Entry, seq: number, changes: Changes): boolean {
    if (e.expires <= this.clock()) return false;
    if (e.checked < seq) {
      if (changes.changedSince(e.dependencies, e.checked, seq)) return false;
      e.checked = seq;
    }
    return true;
  }

  /** A live entry in this process for a request at `now` reading at `seq`, without touching the shared cache (the hot path). */
  local(key: string, now: number, seq: number, changes: Changes): Entry | undefined {
    const e = this.decoded.get(key);
    if (e === undefined) return undefined;
    if (!this.holds(e, seq, changes)) {
      this.forget(key, e);
      return undefined;
    }
    // Used: to the back of the eviction order (an answer asked again outlives those asked once).
    this.decoded.delete(key);
    this.decoded.set(key, e);
    // A request that started before the answer was read (and got here later) cannot use it.
    return e.from <= now ? e : undefined;
  }

  /** The entry from this process, or else from the shared cache (decoded once, then kept here). */
  async get(key: string, now: number, seq: number, changes: Changes): Promise<Entry | undefined> {
    if (this.decoded.has(key)) return this.local(key, now, seq, changes); // the shared copy is the same answer
    if (!Number.isFinite(seq)) return undefined;
    const hit = await this.cache.get(sharedKey(key));
    if (hit === undefined) return undefined;
    const nl = hit.indexOf('\n');
    const e = decode(JSON.parse(hit.slice(0, nl)) as Header, hit.slice(nl + 1));
    if (!this.holds(e, seq, changes)) return undefined;
    this.remember(key, e);
    return e.from <= now ? e : undefined;
  }

  /**
   * The entry `make` stores, made once for concurrent requests of one key: when an entry expires
   * under load, one request reads the store and the others wait for its answer, which each uses
   * if it holds at its own `now`. Those it does not hold for (a commit touched it while it was
   * read: under live ingest, most of them) wait for one read again, not one each (`waited`: the
   * read they waited for, which may not have left `filling` yet).
   */
  async fill(key: string, now: number, seq: number, changes: Changes, make: () => Promise<Entry>, waited?: Promise<Entry>): Promise<Entry> {
    const pending = this.filling.get(key);
    if (pending && pending !== waited) {
      const e = await pending.catch(() => undefined);
      if (e && e.from <= now && this.holds(e, seq, changes)) return e;
      return waited ? make() : this.fill(key, now, seq, changes, make, pending);
    }
    const made = make();
    this.filling.set(key, made);
    try {
      return await made;
    } finally {
      // A waiter may have started the next read of the key already.
      if (this.filling.get(key) === made) this.filling.delete(key);
    }
  }

  /**
   * Stores an answer for as long as it cannot change (see CacheRule), and returns its entry, so a
   * miss is serialized only once. `now` is the request's clock; `store` answers what enters next.
   */
  async put(
    key: string,
    rule: CacheRule,
    data: { results: unknown[]; meta: ListMeta | Record<string, unknown>; filtersApplied?: Record<string, unknown> },
    read: { now: number; seq: number; deps: Dependencies; changes?: Changes; accountId?: string },
    store: Store,
  ): Promise<Entry> {
    const { now, seq } = read;
    const facts = (data as { [PAGE_FACTS]?: PageFacts })[PAGE_FACTS];
    const {
      serverTime: _fresh,
      appliedTimeRange,
      nextCursor,
      dataComputedAt,
      ...stable
    } = data.meta as ListMeta & {
      dataComputedAt?: string;
    };
    const { appliedTimeRange: filtersRange, ...filters } = data.filtersApplied ?? {};
    const list = 'nextCursor' in data.meta;
    // What the entry's bytes are made of: a list page's envelope, or an analytics answer's (Header.form).
    const range = data.filtersApplied ? filtersRange : appliedTimeRange;
    const unknownMembers = Object.keys(data).some((k) => k !== 'results' && k !== 'meta' && k !== 'filtersApplied');
    // Read while the seq was unknown (NaN: Redis did not answer in distributed mode): never kept.
    const known = Number.isFinite(seq);
    const header: Header = {
      seq: known ? seq : 0,
      deps: {
        t: [...read.deps.tables],
        tr: read.deps.traders,
        as: read.deps.assets,
        ...(read.deps.sources ? { src: read.deps.sources } : {}),
      },
      from: now,
      // An answer of a shape the entry cannot hold (a list page with filtersApplied, members it does not know): not kept.
      expires:
        known && !unknownMembers && (list ? !data.filtersApplied : true)
          ? await this.until(rule, data, facts, now, store, read.changes && { changes: read.changes, seq })
          : now,
    };
    if (facts?.window) header.window = facts.window;
    else if (range) header.range = JSON.stringify(range);
    if (dataComputedAt !== undefined) header.computed = { by: read.accountId ?? '', at: Date.parse(dataComputedAt) };
    const stableJson = JSON.stringify(stable).slice(1, -1);
    const stableMembers = `${stableJson}${stableJson ? ',' : ''}`;
    const results = `{"success":true,"data":{"results":${JSON.stringify(data.results)}`;
    let head: string;
    if (list) {
      if (facts?.next) header.next = facts.next;
      else header.cursor = nextCursor;
      head = `${results},"meta":{${stableMembers}"nextCursor":`;
    } else if (data.filtersApplied && filtersRange !== undefined) {
      header.form = { filters: true, meta: stableMembers };
      const f = JSON.stringify(filters).slice(1, -1);
      head = `${results},"filtersApplied":{${f}${f ? ',' : ''}"appliedTimeRange":`;
    } else {
      header.form = { filters: false, meta: '' };
      const f = data.filtersApplied ? `,"filtersApplied":${JSON.stringify(data.filtersApplied)}` : '';
      head = `${results}${f},"meta":{${stableMembers}`;
    }
    const entry = decode(header, head);
    const ttl = header.expires - this.clock();
    if (ttl > 0) {
      this.remember(key, entry);
      await this.cache.set(sharedKey(key), `${JSON.stringify(header)}\n${head}`, ttl);
    } else {
      entry.gone = true;
    }
    return entry;
  }

  /** When an answer computed at `now` may first differ from a fresh read (ms, on the request's clock). */
  private async until(
    rule: CacheRule,
    data: { results: unknown[] },
    facts: PageFacts | undefined,
    now: number,
    store: Store,
    seen: Seen | undefined,
  ): Promise<number> {
    let until = now + MAX_TTL_MS;
    if (rule.ttlMs) until = Math.min(until, now + rule.ttlMs(data as { results: any[] }, now));
    const w = facts?.window;
    if (rule.window && !w) return now; // a historical read that did not say its window: not cached
    if (rule.saysUntil && !facts) return now; // a read that says its clock did not: not cached
    if (w && facts!.oldest !== undefined) until = Math.min(until, leavesAt(w, facts!.oldest));
    // A read bounded by the account's history window without a window of its own (open positions, assets by trader).
    if (facts?.until !== undefined) until = Math.min(until, facts.until);
    // Instants found by queries of the read's own (analytics: rows coming of age, entering or leaving a default range).
    if (facts?.later && until > now) until = Math.min(until, await facts.later(store, now, seen));
    for (const at of [w?.endAtNow ? rule.window : undefined, rule.inForce]) {
      if (!at || until <= now) continue;
      const next = await firstAfter(store, at, now, seen);
      if (next !== null) until = Math.min(until, next);
    }
    return until;
  }

  /**
   * The response body of an entry at `now` for this caller (fresh serverTime, window, cursor and
   * requestId), in a buffer of the entry's: pass `slab` to `release` once the response is finished.
   */
  body(e: Entry, now: number, principal: Principal, cursors: CursorCodec, requestId: string): { bytes: Buffer; slab: Buffer | null } {
    // The print names the account as well as the policy: a cursor, and dataComputedAt, are the caller's own.
    const print = e.next || e.computed ? cursors.policyPrint(principal) : '';
    let meta = e.meta;
    // Callers of one policy (one account, for the above) within one ms get the same meta: it is made once.
    if (meta === undefined || meta.now !== now || meta.print !== print) {
      const computed = e.computed ? computedAt(e, principal.accountId, now) : undefined;
      e.meta = meta = { now, print, json: metaJson(e, now, print, cursors, computed) };
    }
    const tail = `${meta.json}"requestId":${JSON.stringify(requestId)}}`;
    const size = e.head.length + Buffer.byteLength(tail);
    let slab: Buffer | null = e.slabs.pop() ?? null;
    if (slab) this.decodedBytes -= slab.length;
    else if (size - e.head.length <= TAIL_ROOM && !e.gone) {
      slab = Buffer.allocUnsafe(e.head.length + TAIL_ROOM);
      e.head.copy(slab, 0);
    }
    const out = slab ?? Buffer.allocUnsafe(size);
    if (!slab) e.head.copy(out, 0);
    out.write(tail, e.head.length);
    return { bytes: slab ? slab.subarray(0, size) : out, slab };
  }

  /** Takes back a slab from `body` once its response is finished (it is not read any more). */
  release(e: Entry, slab: Buffer): void {
    if (e.gone || e.slabs.length >= SLABS_PER_ENTRY || this.decodedBytes + slab.length > this.limits.bytes) return;
    e.slabs.push(slab);
    this.decodedBytes += slab.length;
  }
}

/**
 * The rest of `meta` at `now`, from `nextCursor`'s value on (`head` ends with `"nextCursor":`), and the
 * envelope up to `requestId`; for an analytics answer (Header.form), from its range or serverTime on.
 */
function metaJson(e: Entry, now: number, print: string, cursors: CursorCodec, computed: number | undefined): string {
  const w = e.window ? windowAt(e.window, now) : undefined;
  const serverTime = `"serverTime":"${new Date(now).toISOString()}"`;
  if (e.form) {
    const range = w ? (e.fixedRange ?? rangeJson(w)) : e.range;
    if (e.form.filters) return `${range ?? 'null'}},"meta":{${e.form.meta}${serverTime}}},`;
    return `${serverTime}${range !== undefined ? `,"appliedTimeRange":${range}` : ''}}},`;
  }
  let cursor = 'null';
  if (e.next) {
    // A since-poll's watermark is a position in the stamps, not in a window.
    const [start, end] = w && !e.next.windowless ? [w.start, w.end] : [null, null];
    const s = e.signed;
    if (s && s.print === print && s.start === start && s.end === end) cursor = s.json;
    else {
      cursor = `"${cursors.encode(w && !e.next.windowless ? { k: e.next.k, w: [start, end] } : { k: e.next.k }, e.next.fp, print)}"`;
      e.signed = { print, start, end, json: cursor };
    }
  } else if (e.cursor != null) {
    cursor = JSON.stringify(e.cursor);
  }
  const range = w ? `,"appliedTimeRange":${e.fixedRange ?? rangeJson(w)}` : e.range !== undefined ? `,"appliedTimeRange":${e.range}` : '';
  const at = computed === undefined ? '' : `,"dataComputedAt":"${new Date(computed).toISOString()}"`;
  return `${cursor},${serverTime}${range}${at}}},`;
}

const sharedKey = (key: string): string => {
  const i = key.indexOf(':', 5); // `read:<tool>:` stays readable
  return `${key.slice(0, i + 1)}${createHash('sha256')
    .update(key.slice(i + 1))
    .digest('base64url')}`;
};
