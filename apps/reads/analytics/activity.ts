import type { ActivityGroup } from '../../../schemas/api/analytics.ts';
import { EVENT_TYPE_VALUES, splitIds, splitList } from '../../../schemas/api/common-params.ts';
import { ApiError } from '../../../schemas/api/errors.ts';
import { MAX_BUCKETS, type ActivitySummariesQuery } from '../../../schemas/api/queries.ts';
import type { ReadContext } from '../context.ts';
import { factsOf, permits, signalTraders, type Facts } from '../facts.ts';
import { Where } from '../list.ts';
import { appliedTimeRange, DAY_MS } from '../window.ts';
import { currentStatements, explicitBounds, historyStart } from './sample.ts';

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
 * overall) in UTC-aligned buckets, from the events and messages statement tables with FINAL over
 * the time range, restricted to the traders and sources the caller may count, in one query.
 */
export async function activitySummaries(ctx: ReadContext, q: ActivitySummariesQuery) {
  const now = ctx.now.getTime();
  const given = explicitBounds(q);
  const end = given.end ?? now;
  const size = SIZE[q.interval];
  // The default start is 7 days before the end, or for hourly buckets the start of the 168th bucket
  // back when that is later (an unaligned 7 days meets 169 hours), and not before 1970.
  let start = given.start ?? Math.max(0, end - 7 * DAY_MS, bucketStart(q.interval, end) - (MAX_BUCKETS - 1) * size);
  const floor = historyStart(ctx.principal, now);
  if (floor !== null && start < floor) start = floor;
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

  // Who counts: events of live, signal-visible traders (and of traderIds); messages of a source whose
  // trader (the lowest live one assigned it) is live, message-visible (and in traderIds).
  const eventTraders = signalTraders(facts, ctx.principal).filter((id) => !traderIds || traderIds.includes(id));
  const sourceKeys: string[] = []; const owners: number[] = [];
  for (const [k, id] of facts.sourceTrader) {
    if (messageTrader(facts, ctx, id, traderIds)) { sourceKeys.push(k); owners.push(id); }
  }
  const byTrader = q.groupBy === 'trader';
  const events = new Where({ aStart: start, aEnd: end })
    .add('e.live = 1 AND e.tomb = 0')
    .add("e.timeOfEvent >= fromUnixTimestamp64Milli({aStart:Int64}, 'UTC') AND e.timeOfEvent <= fromUnixTimestamp64Milli({aEnd:Int64}, 'UTC')")
    .add('e.assetId IN {eligibleAssets:Array(UInt64)}', { eligibleAssets: facts.assetIds })
    .add('e.traderId IN {eventTraders:Array(UInt64)}', { eventTraders })
    .when(q.eventTypes !== undefined ? eventTypes : undefined, 'e.type IN {eventTypes:Array(String)}', 'eventTypes');
  const messages = new Where()
    .add('m.live = 1 AND m.tomb = 0')
    .add("m.writtenAt >= fromUnixTimestamp64Milli({aStart:Int64}, 'UTC') AND m.writtenAt <= fromUnixTimestamp64Milli({aEnd:Int64}, 'UTC')")
    .add("concat(m.platform, ':', m.sourceIdentityId) IN {sourceKeys:Array(String)}", { sourceKeys, owners });
  // One query: counts per (group, bucket) of both tables, each group's totals and its place by
  // combined activity (ties by trader id), the totals over all groups; only the top groups' rows come back.
  const rows = await currentStatements<{ t: number; b: number; m: number; e: number; gm: number; ge: number; tm: number; te: number }>(ctx,
    [['events', 'e'], ['messages', 'm']], ([fromE, fromM], [partE, partM]) => `
    SELECT t, b, m, e, gm, ge, tm, te FROM (
      SELECT t, b, m, e, gm, ge, sum(m) OVER () AS tm, sum(e) OVER () AS te,
        dense_rank() OVER (ORDER BY gm + ge DESC, t) AS place FROM (
        SELECT t, b, m, e, sum(m) OVER (PARTITION BY t) AS gm, sum(e) OVER (PARTITION BY t) AS ge FROM (
          SELECT t, b, sum(m) AS m, sum(e) AS e FROM (
            SELECT ${byTrader ? 'e.traderId' : '0'} AS t, ${BUCKET_SQL[q.interval]('e.timeOfEvent')} AS b, 0 AS m, 1 AS e
            FROM ${fromE} WHERE ${events.sql} AND ${partE}
            UNION ALL
            SELECT ${byTrader ? "transform(concat(m.platform, ':', m.sourceIdentityId), {sourceKeys:Array(String)}, {owners:Array(UInt64)}, toUInt64(0))" : '0'} AS t,
              ${BUCKET_SQL[q.interval]('m.writtenAt')} AS b, 1 AS m, 0 AS e
            FROM ${fromM} WHERE ${messages.sql} AND ${partM})
          GROUP BY t, b)))
    WHERE place <= {limit:UInt32}
    ORDER BY t, b`, { ...events.params, ...messages.params, limit: q.limit });
  const totalMessages = Number(rows[0]?.tm ?? 0);
  const totalEvents = Number(rows[0]?.te ?? 0);
  const groups = new Map<number, ActivityGroup>();
  for (const r of rows) {
    const t = Number(r.t);
    let g = groups.get(t);
    if (!g) groups.set(t, g = { ...(byTrader ? { traderId: t } : {}), messageCount: Number(r.gm), eventCount: Number(r.ge), buckets: [] });
    const b = Number(r.b);
    g.buckets.push({ start: new Date(b).toISOString(), end: new Date(b + size).toISOString(), messageCount: Number(r.m), eventCount: Number(r.e) });
  }
  const results = byTrader
    ? [...groups.values()].sort((x, y) => (y.messageCount + y.eventCount) - (x.messageCount + x.eventCount) || x.traderId! - y.traderId!)
    : [groups.get(0) ?? { messageCount: 0, eventCount: 0, buckets: [] }];
  return { results, filtersApplied, meta: { totalMessages, totalEvents, serverTime } };
}

/** Whether a source's messages count for this caller: its trader `id` is message-visible and asked for. */
function messageTrader(facts: Facts, ctx: ReadContext, id: number, traderIds: number[] | undefined): boolean {
  return permits(ctx.principal.messageVisibility, id, facts.traderPlatform.get(id)!) && (!traderIds || traderIds.includes(id));
}
