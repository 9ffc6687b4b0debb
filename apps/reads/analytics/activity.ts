import type { ActivityGroup } from '../../../schemas/api/analytics.ts';
import { EVENT_TYPE_VALUES, splitIds, splitList } from '../../../schemas/api/common-params.ts';
import { ApiError } from '../../../schemas/api/errors.ts';
import { MAX_BUCKETS, type ActivitySummariesQuery } from '../../../schemas/api/queries.ts';
import type { ReadContext } from '../context.ts';
import { factsOf, permits, type Facts } from '../facts.ts';
import { Where } from '../list.ts';
import { appliedTimeRange, DAY_MS, explicitBounds } from '../window.ts';
import { clampToHistory, currentStatements, traderEligible } from './sample.ts';

const HOUR_MS = 3_600_000;
const WEEK_MS = 7 * DAY_MS;
const MONDAY_OFFSET_MS = 4 * DAY_MS; // 1970-01-01 was a Thursday: Mondays are 4 days after a multiple of 7 days

/** Start of the UTC-aligned bucket holding t (ISO weeks begin on Monday 00:00 UTC). */
export function bucketStart(interval: 'hour' | 'day' | 'week', t: number): number {
  if (interval === 'hour') return Math.floor(t / HOUR_MS) * HOUR_MS;
  if (interval === 'day') return Math.floor(t / DAY_MS) * DAY_MS;
  return Math.floor((t - MONDAY_OFFSET_MS) / WEEK_MS) * WEEK_MS + MONDAY_OFFSET_MS;
}
const SIZE = { hour: HOUR_MS, day: DAY_MS, week: WEEK_MS } as const;
/** The bucket of a DateTime64 column in SQL, as ms (the same alignment as bucketStart). */
const BUCKET_SQL = {
  hour: (c: string) => `toUnixTimestamp(toStartOfHour(${c})) * 1000`,
  day: (c: string) => `toUnixTimestamp(toStartOfDay(${c})) * 1000`,
  week: (c: string) => `toUnixTimestamp(toDateTime(toMonday(${c}), 'UTC')) * 1000`,
} as const;

interface Counts { messages: number; events: number; buckets: Map<number, [number, number]> }

/**
 * Activity summaries (README "Analytics reads"): counted messages and events per trader (or
 * overall) in UTC-aligned buckets. First the totals per trader (events) and per source (messages)
 * over the range, from the statement tables' current statements (sample.ts currentStatements:
 * their merged part, else FINAL) over the time range; then the buckets of
 * the groups returned only: for `groupBy=trader` the top groups, for `none` everything but the
 * rows of traders the caller may not count (known from the totals).
 */
export async function activitySummaries(ctx: ReadContext, q: ActivitySummariesQuery) {
  const now = ctx.now.getTime();
  const given = explicitBounds(q);
  const end = given.end ?? now;
  const size = SIZE[q.interval];
  // The default start is 7 days before the end, or for hourly buckets the start of the 168th bucket
  // back when that is later (an unaligned 7 days meets 169 hours), and not before 1970.
  const { start } = clampToHistory({ start: given.start ?? Math.max(0, end - 7 * DAY_MS, bucketStart(q.interval, end) - (MAX_BUCKETS - 1) * size), end }, ctx.principal, now);
  const empty = start > end; // a start after the default end, or a history window that ends the range before it starts
  const buckets = empty ? 0 : (bucketStart(q.interval, end) - bucketStart(q.interval, start)) / size + 1;
  if (buckets > MAX_BUCKETS) {
    throw new ApiError('BUCKET_LIMIT_EXCEEDED', `${buckets} ${q.interval} buckets per group; at most ${MAX_BUCKETS}`);
  }
  const eventTypes = splitList(q.eventTypes) ?? [...EVENT_TYPE_VALUES];
  const traderIds = splitIds(q.traderIds);
  const facts = await factsOf(ctx);
  const filtersApplied = { groupBy: q.groupBy, interval: q.interval, eventTypes, traderIds: traderIds ?? [], appliedTimeRange: appliedTimeRange({ start, end }) };
  const serverTime = ctx.now.toISOString();
  if (empty) {
    return { results: q.groupBy === 'none' ? [{ messageCount: 0, eventCount: 0, buckets: [] }] : [], filtersApplied, meta: { totalMessages: 0, totalEvents: 0, serverTime } };
  }

  const events = new Where({ aStart: start, aEnd: end })
    .add('e.live = 1 AND e.tomb = 0')
    .add("e.timeOfEvent >= fromUnixTimestamp64Milli({aStart:Int64}, 'UTC') AND e.timeOfEvent <= fromUnixTimestamp64Milli({aEnd:Int64}, 'UTC')")
    .add('e.assetId IN {eligibleAssets:Array(UInt64)}', { eligibleAssets: facts.assetIds })
    .when(q.eventTypes !== undefined ? eventTypes : undefined, 'e.type IN {eventTypes:Array(String)}', 'eventTypes')
    .when(traderIds, 'e.traderId IN {traderIds:Array(UInt64)}', 'traderIds');
  const messages = new Where({ aStart: start, aEnd: end })
    .add('m.live = 1 AND m.tomb = 0')
    .add("m.writtenAt >= fromUnixTimestamp64Milli({aStart:Int64}, 'UTC') AND m.writtenAt <= fromUnixTimestamp64Milli({aEnd:Int64}, 'UTC')");
  const [eventTotals, sourceTotals] = await Promise.all([
    currentStatements<{ traderId: number; n: number }>(ctx, 'events', 'e', (from, part) =>
      `SELECT e.traderId AS traderId, count() AS n FROM ${from} WHERE ${events.sql} AND ${part} GROUP BY traderId`, events.params),
    currentStatements<{ k: string; n: number }>(ctx, 'messages', 'm', (from, part) =>
      `SELECT concat(m.platform, ':', m.sourceIdentityId) AS k, count() AS n FROM ${from} WHERE ${messages.sql} AND ${part} GROUP BY k`, messages.params),
  ]);

  // Which rows count: events of live, signal-visible traders; messages of a source whose trader is live, message-visible and asked for.
  const groups = new Map<number, Counts>();
  const group = (id: number) => { let g = groups.get(id); if (!g) groups.set(id, g = { messages: 0, events: 0, buckets: new Map() }); return g; };
  const excludedTraders: number[] = [];
  for (const r of eventTotals) {
    const id = Number(r.traderId);
    if (traderEligible(facts, ctx.principal, id)) group(id).events += Number(r.n); else excludedTraders.push(id);
  }
  const sourceOf = new Map<string, number>();
  const excludedSources: string[] = [];
  for (const r of sourceTotals) {
    const id = messageTrader(facts, ctx, r.k, traderIds);
    if (id === null) { excludedSources.push(r.k); continue; }
    sourceOf.set(r.k, id);
    group(id).messages += Number(r.n);
  }
  let totalMessages = 0; let totalEvents = 0;
  for (const g of groups.values()) { totalMessages += g.messages; totalEvents += g.events; }
  const ranked = [...groups].filter(([, g]) => g.messages + g.events > 0)
    .sort(([a, x], [b, y]) => (y.messages + y.events) - (x.messages + x.events) || a - b).slice(0, q.limit);

  // Buckets of the groups returned.
  const byTrader = q.groupBy === 'trader';
  const top = ranked.map(([id]) => id);
  if (byTrader && !top.length) return { results: [], filtersApplied, meta: { totalMessages, totalEvents, serverTime } };
  const topSources = [...sourceOf].filter(([, id]) => top.includes(id)).map(([k]) => k);
  // A group may be there for its messages alone: its events count only when its trader's signals are visible.
  const topTraders = top.filter((id) => traderEligible(facts, ctx.principal, id));
  const eventBuckets = byTrader ? events.add('e.traderId IN {top:Array(UInt64)}', { top: topTraders })
    : excludedTraders.length ? events.add('e.traderId NOT IN {excluded:Array(UInt64)}', { excluded: excludedTraders }) : events;
  const messageBuckets = byTrader ? messages.add("concat(m.platform, ':', m.sourceIdentityId) IN {sources:Array(String)}", { sources: topSources })
    : excludedSources.length ? messages.add("concat(m.platform, ':', m.sourceIdentityId) NOT IN {excluded:Array(String)}", { excluded: excludedSources }) : messages;
  const [eb, mb] = await Promise.all([
    byTrader && !topTraders.length ? [] : currentStatements<{ traderId: number; b: number; n: number }>(ctx, 'events', 'e', (from, part) => `
      SELECT e.traderId AS traderId, ${BUCKET_SQL[q.interval]('e.timeOfEvent')} AS b, count() AS n
      FROM ${from} WHERE ${eventBuckets.sql} AND ${part} GROUP BY traderId, b`, eventBuckets.params),
    byTrader && !topSources.length ? [] : currentStatements<{ k: string; b: number; n: number }>(ctx, 'messages', 'm', (from, part) => `
      SELECT concat(m.platform, ':', m.sourceIdentityId) AS k, ${BUCKET_SQL[q.interval]('m.writtenAt')} AS b, count() AS n
      FROM ${from} WHERE ${messageBuckets.sql} AND ${part} GROUP BY k, b`, messageBuckets.params),
  ]);
  const overall: Counts = { messages: totalMessages, events: totalEvents, buckets: new Map() };
  const bucketOf = (c: Counts, b: number) => { let x = c.buckets.get(b); if (!x) c.buckets.set(b, x = [0, 0]); return x; };
  for (const r of eb) bucketOf(byTrader ? groups.get(Number(r.traderId))! : overall, Number(r.b))[1] += Number(r.n);
  for (const r of mb) {
    const id = sourceOf.get(r.k);
    if (id === undefined) continue; // a source that appeared between the two queries
    bucketOf(byTrader ? groups.get(id)! : overall, Number(r.b))[0] += Number(r.n);
  }
  const shape = (c: Counts): Omit<ActivityGroup, 'traderId'> => ({
    messageCount: c.messages, eventCount: c.events,
    buckets: [...c.buckets].filter(([, [m, e]]) => m + e > 0).sort(([a], [b]) => a - b)
      .map(([b, [m, e]]) => ({ start: new Date(b).toISOString(), end: new Date(b + size).toISOString(), messageCount: m, eventCount: e })),
  });
  const results: ActivityGroup[] = byTrader ? top.map((id) => ({ traderId: id, ...shape(groups.get(id)!) })) : [shape(overall)];
  return { results, filtersApplied, meta: { totalMessages, totalEvents, serverTime } };
}

/** The trader a source's messages count for (the lowest live trader assigned it), or null when they do not count for this caller. */
function messageTrader(facts: Facts, ctx: ReadContext, key: string, traderIds: number[] | undefined): number | null {
  const id = facts.sourceTrader.get(key);
  if (id === undefined) return null;
  if (!permits(ctx.principal.messageVisibility, id, facts.traderPlatform.get(id)!)) return null;
  return traderIds && !traderIds.includes(id) ? null : id;
}
