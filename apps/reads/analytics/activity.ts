import { createHash } from 'node:crypto';
import type { ActivityGroup } from '../../../schemas/api/analytics.ts';
import { EVENT_TYPE_VALUES, splitIds, splitList } from '../../../schemas/api/common-params.ts';
import { ApiError } from '../../../schemas/api/errors.ts';
import { type ActivitySummariesQuery, MAX_BUCKETS } from '../../../schemas/api/queries.ts';
import { remember } from '../../../storage/bounded.ts';
import { MESSAGES_TABLE } from '../../../storage/tables/messages.ts';
import { EVENTS_TABLE } from '../../../storage/tables/trading.ts';
import { earliest, firstAfter, withFacts } from '../clock.ts';
import { keptUntilChanged, type ReadContext } from '../context.ts';
import { type Facts, factsOf, permits } from '../facts.ts';
import type { PageFacts } from '../list.ts';
import type { Principal } from '../principal.ts';
import { appliedTimeRange, DAY_MS, explicitBounds, type WindowRule, windowAt } from '../window.ts';
import { activityCounts, bucketStart, type Count, HOUR_MS, type Interval, latestActivity, WEEK_MS } from './activity-counts.ts';
import { keepBest } from './best.ts';
import { keptRange } from './kept-range.ts';
import { clampToHistory, traderEligible } from './sample.ts';

const SIZE = { hour: HOUR_MS, day: DAY_MS, week: WEEK_MS } as const;
// Buckets only for the groups returned (made when first needed: there are thousands of groups).
interface Counts {
  messages: number;
  events: number;
  buckets?: Map<number, [number, number]>;
}

/**
 * Activity summaries (README "Analytics reads"): counted messages and events per trader (or
 * overall) in UTC-aligned buckets, from the activity rolled up by day and hour and the partial
 * hours at the ends (activity-counts.ts): `groupBy=trader` the buckets of every group, then the top
 * groups; `none` the buckets of every row the caller may count. Each in one read, kept from one
 * request to the next (keptRange).
 */
export async function activitySummaries(ctx: ReadContext, q: ActivitySummariesQuery) {
  const range = activityRange(ctx, q);
  return withFacts(ctx, await summarize(ctx, q, range), activityClock(ctx, q, range), [EVENTS_TABLE, MESSAGES_TABLE]);
}

async function summarize(
  ctx: ReadContext,
  q: ActivitySummariesQuery,
  { start, end, empty }: { start: number; end: number; empty: boolean },
) {
  const eventTypes = splitList(q.eventTypes) ?? [...EVENT_TYPE_VALUES];
  const traderIds = splitIds(q.traderIds);
  const facts = await factsOf(ctx);
  const filtersApplied = {
    groupBy: q.groupBy,
    interval: q.interval,
    eventTypes,
    traderIds: traderIds ?? [],
    appliedTimeRange: appliedTimeRange({ start, end }),
  };
  const serverTime = ctx.now.toISOString();
  if (empty) {
    return {
      results: q.groupBy === 'none' ? [{ messageCount: 0, eventCount: 0, buckets: [] }] : [],
      filtersApplied,
      meta: { totalMessages: 0, totalEvents: 0, serverTime },
    };
  }
  const types = q.eventTypes !== undefined ? eventTypes : undefined;
  if (q.groupBy === 'none') {
    const overall = (await groupCounts(ctx, facts, q, { start, end, types, traderIds })).get(0) ?? { messages: 0, events: 0 };
    const meta = { totalMessages: overall.messages, totalEvents: overall.events, serverTime };
    return { results: [shapeGroup(overall, SIZE[q.interval])], filtersApplied, meta };
  }
  const groups = await groupCounts(ctx, facts, q, { start, end, types, traderIds });
  const { top, totalMessages, totalEvents } = topGroups(groups, q.limit);
  const meta = { totalMessages, totalEvents, serverTime };
  const results: ActivityGroup[] = top.map((id) => ({ traderId: id, ...shapeGroup(groups.get(id)!, SIZE[q.interval]) }));
  return { results, filtersApplied, meta };
}

/**
 * The range counted: the bounds given, by default the 7 days before the end, or for hourly
 * buckets the start of the 168th bucket back when that is later (an unaligned 7 days meets 169
 * hours), and not before 1970; clamped to the history window. `empty`: a start after the default
 * end, or a history window that ends the range before it starts. Too many buckets are a 422.
 */
function activityRange(ctx: ReadContext, q: ActivitySummariesQuery): { start: number; end: number; empty: boolean } {
  const now = ctx.now.getTime();
  const given = explicitBounds(q);
  const end = given.end ?? now;
  const size = SIZE[q.interval];
  const { start } = clampToHistory({ start: given.start ?? defaultStart(q.interval, end), end }, ctx.principal, now);
  const empty = start > end;
  const buckets = empty ? 0 : (bucketStart(q.interval, end) - bucketStart(q.interval, start)) / size + 1;
  if (buckets > MAX_BUCKETS) {
    throw new ApiError('BUCKET_LIMIT_EXCEEDED', `${buckets} ${q.interval} buckets per group; at most ${MAX_BUCKETS}`);
  }
  return { start, end, empty };
}

/**
 * When the clock may change an activity summary (DESIGN 9), for the read cache. The range as a rule
 * over the clock: an end that is serverTime, a start given or fixed by a given end, or the default 7
 * days trailing the end, each clamped to the account's history window. Hourly buckets by default
 * start at the 168th hour back, which moves at each whole hour: such an answer ends there. Rows move
 * the counts only by entering the range (the first event or message after serverTime, when the end
 * is serverTime) or leaving it (the first at or after the start, when the start trails serverTime);
 * an end that is serverTime after a given start reaches the bucket limit at the 169th bucket (a
 * 422 then). Events and messages of any trader or type count: an instant may only be too early.
 */
function activityClock(ctx: ReadContext, q: ActivitySummariesQuery, range: { start: number; end: number; empty: boolean }): PageFacts {
  const now = ctx.now.getTime();
  const given = explicitBounds(q);
  const size = SIZE[q.interval];
  const endAtNow = given.end === null;
  const history = ctx.principal.historyWindowDays == null ? null : ctx.principal.historyWindowDays * DAY_MS;
  let start: number | null = given.start;
  let lag = history;
  let until = Number.POSITIVE_INFINITY;
  if (start === null && !endAtNow) start = defaultStart(q.interval, given.end!);
  else if (start === null && q.interval === 'hour') {
    // The 168th hour back from serverTime's hour, fixed until the next hour.
    start = defaultStart(q.interval, now);
    until = bucketStart('hour', now) + HOUR_MS;
  } else if (start === null) lag = Math.min(7 * DAY_MS, history ?? Number.POSITIVE_INFINITY);
  const window: WindowRule = { start, end: given.end, endAtNow, startLagMs: lag };
  const w = windowAt(window, now);
  // The rule must give this answer's range (a default clamped at 1970 does not trail): else not kept.
  if (w.start !== range.start || w.end !== range.end) return { until: now };
  if (endAtNow) until = Math.min(until, bucketStart(q.interval, range.start) + MAX_BUCKETS * size);
  const times = [
    { table: EVENTS_TABLE, column: 'timeOfEvent' },
    { table: MESSAGES_TABLE, column: 'writtenAt' },
  ];
  return {
    window,
    until,
    async later(store, at, seen) {
      let next = Number.POSITIVE_INFINITY;
      for (const t of times) {
        if (endAtNow) next = earliest(next, await firstAfter(store, t, at, seen));
        if (lag !== null) {
          const oldest = await firstAfter(store, t, windowAt(window, at).start! - 1, seen);
          if (oldest !== null) next = Math.min(next, oldest + lag + 1);
        }
      }
      return next;
    },
  };
}

/** The default start of a range ending at `end`: 7 days before it, or for hourly buckets the start of the 168th bucket back when later, not before 1970. */
const defaultStart = (interval: keyof typeof SIZE, end: number): number =>
  Math.max(0, end - 7 * DAY_MS, bucketStart(interval, end) - (MAX_BUCKETS - 1) * SIZE[interval]);

/** What is counted: the range, the event types asked for (undefined: all) and the traders asked for. */
interface Counted {
  start: number;
  end: number;
  types: string[] | undefined;
  traderIds: number[] | undefined;
}

/**
 * The counts in buckets of every row the caller may count, in one read: events of live,
 * signal-visible traders; messages of a source whose trader (messageTrader) is live,
 * message-visible and asked for. Per trader (`groupBy=trader`: a source's messages count for its
 * trader), or all in group 0 (`none`). Which rows count is known from the facts, so no totals per
 * group are read first. Kept from one request to the next (keptRange): under live ingest a later
 * request reads the statements written since by instant (seconds of rows) and, now and then, the
 * rows about to leave its start, not its 7 days again.
 */
async function groupCounts(ctx: ReadContext, facts: Facts, q: ActivitySummariesQuery, c: Counted): Promise<Map<number, Counts>> {
  const { only, counts, sourceOf, sources, print } = countedGroups(facts, ctx.principal, c.traderIds);
  const byTrader = q.groupBy === 'trader';
  const read = async (start: number, end: number, byInstant: boolean): Promise<Map<number, Counts>> => {
    // By instant (seconds of statements), every group is read and those not counted are left here: a parameter of thousands of ids costs more than the rows.
    const range = byInstant ? undefined : bucketed(q, { ...c, start, end });
    const { events, messages } = range
      ? await activityCounts(
          ctx,
          facts,
          only.length ? { ...range, types: c.types, only } : null,
          sources.length ? { ...range, only: sources } : null,
        )
      : await instantsFrom(ctx, facts, start, end, c.types);
    const groups = new Map<number, Counts>();
    const add = (id: number, b: number, kind: 0 | 1, n: number) => {
      let g = groups.get(id);
      if (!g) groups.set(id, (g = { messages: 0, events: 0 }));
      bucketOf(g, b)[kind] += n;
      if (kind) g.events += n;
      else g.messages += n;
    };
    for (const r of events) if (counts.has(r.g)) add(byTrader ? r.g : 0, r.b, 1, r.n);
    for (const r of messages) {
      const id = sourceOf.get(r.g);
      if (id !== undefined) add(byTrader ? id : 0, r.b, 0, r.n);
    }
    return groups;
  };
  // What is counted besides the range: the same traders, sources, eligible assets, types and buckets count the same rows.
  const key = createHash('sha1')
    .update(JSON.stringify(['activity', q.groupBy, q.interval, c.types ?? null, print]))
    .digest('base64');
  return keptRange(ctx, {
    key,
    tables: [EVENTS_TABLE, MESSAGES_TABLE],
    start: c.start,
    end: c.end,
    read: (start, end) => read(start, end, false),
    readByInstant: (start, end) => read(start, end, true),
    empty: () => new Map(),
    latest: () => latestActivity(ctx),
    bucketed: (groups) => new Map([...groups].map(([id, g]) => [id, rebucketed(g, q.interval)])),
    add: (a, b, sign) => {
      const out = new Map(a);
      for (const [id, g] of b) out.set(id, addCounts(out.get(id) ?? { messages: 0, events: 0 }, g, sign));
      return out;
    },
    within: (groups, from, to) => new Map([...groups].map(([id, g]) => [id, countsWithin(g, from, to)])),
    bucketStart: (t) => bucketStart(q.interval, t),
  });
}

/**
 * The counted statements by instant from `start` to `end` (inclusive), of every group (the caller
 * keeps its own): read from `start` to the latest row stored, once per data version of the two
 * tables and facts, and cut at each caller's end. After a commit, every kept summary reads the
 * instants the commit wrote (keptRange), from the same first instant: the summaries of every
 * groupBy and interval share that one read (issue 26) instead of one statement each.
 */
async function instantsFrom(
  ctx: ReadContext,
  facts: Facts,
  start: number,
  end: number,
  types: string[] | undefined,
): Promise<{ events: Count<number>[]; messages: Count<string>[] }> {
  // No row is dated after `latest` within a data version: reading up to it (or a later end) reads every row from `start` on.
  const to = Math.max(end, await latestActivity(ctx));
  const key = `activity-instants:${factsId(facts)}:${start}:${JSON.stringify(types ?? null)}`;
  const all = await keptUntilChanged(ctx, key, { tables: INSTANT_TABLES, traders: null, assets: null }, () => {
    const range = { start, end: to, coarsest: 'none' as const, bucket: 'instant' as const };
    return activityCounts(ctx, facts, { ...range, types }, range);
  });
  return { events: all.events.filter((r) => r.b <= end), messages: all.messages.filter((r) => r.b <= end) };
}
const INSTANT_TABLES: ReadonlySet<string> = new Set([EVENTS_TABLE.name, MESSAGES_TABLE.name]);

/** A number per facts (which assets are eligible decides which events count). */
const factsIds = new WeakMap<Facts, number>();
let lastFactsId = 0;
const factsId = (facts: Facts): number => {
  let id = factsIds.get(facts);
  if (id === undefined) factsIds.set(facts, (id = ++lastFactsId));
  return id;
};

interface CountedGroups {
  /** The traders whose events count, and the sources whose messages count with their trader (frozen: query parameters). */
  only: readonly number[];
  counts: ReadonlySet<number>;
  sourceOf: ReadonlyMap<string, number>;
  sources: readonly string[];
  /** A digest of the three with the eligible assets (keptRange's key). */
  print: string;
}

/**
 * Per facts (a commit to traders, assets or sources makes new ones), the groups a policy counts
 * for the traders asked for: the same thousands of ids for every request of a policy, made and
 * hashed once, and frozen so that the store formats each parameter once (storage/chdb.ts).
 */
const counted = new WeakMap<Facts, Map<string, CountedGroups>>();
const COUNTED_POLICIES = 100;

function countedGroups(facts: Facts, p: Principal, traderIds: number[] | undefined): CountedGroups {
  let byPolicy = counted.get(facts);
  if (!byPolicy) counted.set(facts, (byPolicy = new Map()));
  const memo = JSON.stringify([p.signalVisibility, p.messageVisibility, traderIds ?? null]);
  const had = byPolicy.get(memo);
  if (had) return had;
  const traders: number[] = [];
  for (const id of traderIds ?? facts.traderPlatform.keys()) if (traderEligible(facts, p, id)) traders.push(id);
  const only = Object.freeze([...new Set(traders)]);
  const sourceOf = new Map<string, number>();
  for (const k of facts.sourceTrader.keys()) {
    const id = messageTrader(facts, p, k, traderIds);
    if (id !== null) sourceOf.set(k, id);
  }
  const sources = Object.freeze([...sourceOf.keys()]);
  const print = createHash('sha1')
    .update(JSON.stringify([only, [...sourceOf], facts.assetIds]))
    .digest('base64');
  const out = { only, counts: new Set(only), sourceOf, sources, print };
  remember(byPolicy, memo, out, COUNTED_POLICIES);
  return out;
}

/** `c`'s buckets that start in [from, to) (the totals are the buckets' sums). */
function countsWithin(c: Counts, from: number, to: number): Counts {
  const out: Counts = { messages: 0, events: 0, buckets: new Map() };
  for (const [b, [m, e]] of c.buckets ?? []) {
    if (b < from || b >= to) continue;
    out.buckets!.set(b, [m, e]);
    out.messages += m;
    out.events += e;
  }
  return out;
}

/** Counts by instant in the buckets of `interval`. */
function rebucketed(c: Counts, interval: Interval): Counts {
  const out: Counts = { messages: c.messages, events: c.events };
  for (const [t, [m, e]] of c.buckets ?? []) {
    const x = bucketOf(out, bucketStart(interval, t));
    x[0] += m;
    x[1] += e;
  }
  return out;
}

/** `a` plus `sign` times `b`, bucket by bucket. */
function addCounts(a: Counts, b: Counts, sign: 1 | -1): Counts {
  const out: Counts = { messages: a.messages + sign * b.messages, events: a.events + sign * b.events };
  if (a.buckets) out.buckets = new Map([...a.buckets].map(([k, [m, e]]) => [k, [m, e]]));
  for (const [k, [m, e]] of b.buckets ?? []) {
    const x = bucketOf(out, k);
    x[0] += sign * m;
    x[1] += sign * e;
  }
  return out;
}

/**
 * The top `limit` groups by combined activity, ties by id, and the totals over every group: one
 * pass keeping the top in order (a sort of thousands of groups costs more).
 */
function topGroups(groups: Map<number, Counts>, limit: number): { top: number[]; totalMessages: number; totalEvents: number } {
  let totalMessages = 0;
  let totalEvents = 0;
  const top: number[] = [];
  const ahead = (a: number, b: number) => {
    const x = groups.get(a)!;
    const y = groups.get(b)!;
    return y.messages + y.events - (x.messages + x.events) || a - b;
  };
  for (const [id, g] of groups) {
    totalMessages += g.messages;
    totalEvents += g.events;
    if (g.messages + g.events > 0) keepBest(top, id, limit, ahead);
  }
  return { top, totalMessages, totalEvents };
}

/** The range counted in buckets of the interval asked for (hourly buckets read no day rows). */
const bucketed = (q: ActivitySummariesQuery, c: Counted) => ({
  start: c.start,
  end: c.end,
  coarsest: q.interval === 'hour' ? ('hour' as const) : ('day' as const),
  bucket: q.interval,
});

/** A group's counts in bucket `b`: [messages, events]. */
function bucketOf(c: Counts, b: number): [number, number] {
  const m = (c.buckets ??= new Map());
  let x = m.get(b);
  if (!x) m.set(b, (x = [0, 0]));
  return x;
}

/** A group as the read answers it: its counts and its non-empty buckets in time order. */
const shapeGroup = (c: Counts, size: number): Omit<ActivityGroup, 'traderId'> => ({
  messageCount: c.messages,
  eventCount: c.events,
  buckets: [...(c.buckets ?? [])]
    .filter(([, [m, e]]) => m + e > 0)
    .sort(([a], [b]) => a - b)
    .map(([b, [m, e]]) => ({ start: new Date(b).toISOString(), end: new Date(b + size).toISOString(), messageCount: m, eventCount: e })),
});

/** The trader a source's messages count for (the lowest live trader assigned it), or null when they do not count for this caller. */
function messageTrader(facts: Facts, p: Principal, key: string, traderIds: readonly number[] | undefined): number | null {
  const id = facts.sourceTrader.get(key);
  if (id === undefined) return null;
  if (!permits(p.messageVisibility, id, facts.traderPlatform.get(id)!)) return null;
  return traderIds && !traderIds.includes(id) ? null : id;
}
