import type { ActivityGroup } from '../../../schemas/api/analytics.ts';
import { EVENT_TYPE_VALUES, splitIds, splitList } from '../../../schemas/api/common-params.ts';
import { ApiError } from '../../../schemas/api/errors.ts';
import { type ActivitySummariesQuery, MAX_BUCKETS } from '../../../schemas/api/queries.ts';
import type { ReadContext } from '../context.ts';
import { type Facts, factsOf, permits } from '../facts.ts';
import { appliedTimeRange, DAY_MS, explicitBounds } from '../window.ts';
import { activityCounts, bucketStart, HOUR_MS, WEEK_MS } from './activity-counts.ts';
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
 * overall) in UTC-aligned buckets. First the totals per trader (events) and per source (messages)
 * over the range, from the activity rolled up by day and hour and the partial hours at the ends
 * (activity-counts.ts); then the buckets of the groups returned only: for `groupBy=trader` the top
 * groups, for `none` everything but the rows of traders the caller may not count (known from the
 * totals).
 */
export async function activitySummaries(ctx: ReadContext, q: ActivitySummariesQuery) {
  const now = ctx.now.getTime();
  const given = explicitBounds(q);
  const end = given.end ?? now;
  const size = SIZE[q.interval];
  // The default start is 7 days before the end, or for hourly buckets the start of the 168th bucket
  // back when that is later (an unaligned 7 days meets 169 hours), and not before 1970.
  const { start } = clampToHistory(
    { start: given.start ?? Math.max(0, end - 7 * DAY_MS, bucketStart(q.interval, end) - (MAX_BUCKETS - 1) * size), end },
    ctx.principal,
    now,
  );
  const empty = start > end; // a start after the default end, or a history window that ends the range before it starts
  const buckets = empty ? 0 : (bucketStart(q.interval, end) - bucketStart(q.interval, start)) / size + 1;
  if (buckets > MAX_BUCKETS) {
    throw new ApiError('BUCKET_LIMIT_EXCEEDED', `${buckets} ${q.interval} buckets per group; at most ${MAX_BUCKETS}`);
  }
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

  // Totals per trader and per source over the range (the coarsest rolled-up rows), then the buckets
  // of the groups returned: each pair of counts in one read (activityCounts).
  const types = q.eventTypes !== undefined ? eventTypes : undefined;
  const { events: eventTotals, messages: sourceTotals } = await activityCounts(
    ctx,
    facts,
    { start, end, coarsest: 'day', types, only: traderIds },
    { start, end, coarsest: 'day' },
  );

  // Which rows count: events of live, signal-visible traders; messages of a source whose trader is live, message-visible and asked for.
  const groups = new Map<number, Counts>();
  const group = (id: number) => {
    let g = groups.get(id);
    if (!g) groups.set(id, (g = { messages: 0, events: 0 }));
    return g;
  };
  const excludedTraders: number[] = [];
  for (const r of eventTotals) {
    if (traderEligible(facts, ctx.principal, r.g)) group(r.g).events += r.n;
    else excludedTraders.push(r.g);
  }
  const sourceOf = new Map<string, number>();
  const excludedSources: string[] = [];
  for (const r of sourceTotals) {
    const id = messageTrader(facts, ctx, r.g, traderIds);
    if (id === null) {
      excludedSources.push(r.g);
      continue;
    }
    sourceOf.set(r.g, id);
    group(id).messages += r.n;
  }
  let totalMessages = 0;
  let totalEvents = 0;
  // The top `limit` groups by combined activity, ties by id: one pass keeping them in order (a sort of thousands of groups costs more).
  const top: number[] = [];
  const before = (a: number, b: number) => {
    const x = groups.get(a)!;
    const y = groups.get(b)!;
    return x.messages + x.events - (y.messages + y.events) || b - a;
  };
  for (const [id, g] of groups) {
    totalMessages += g.messages;
    totalEvents += g.events;
    if (g.messages + g.events === 0 || (top.length === q.limit && before(id, top[top.length - 1]!) <= 0)) continue;
    let i = top.length;
    while (i > 0 && before(id, top[i - 1]!) > 0) i--;
    top.splice(i, 0, id);
    if (top.length > q.limit) top.pop();
  }

  // Buckets of the groups returned.
  const byTrader = q.groupBy === 'trader';
  if (byTrader && !top.length) return { results: [], filtersApplied, meta: { totalMessages, totalEvents, serverTime } };
  const topSet = new Set(top);
  const topSources: string[] = [];
  for (const [k, id] of sourceOf) if (topSet.has(id)) topSources.push(k);
  // A group may be there for its messages alone: its events count only when its trader's signals are visible.
  const topTraders = top.filter((id) => traderEligible(facts, ctx.principal, id));
  const bucketed = { start, end, coarsest: q.interval === 'hour' ? ('hour' as const) : ('day' as const), bucket: q.interval };
  const { events: eb, messages: mb } = await activityCounts(
    ctx,
    facts,
    byTrader && !topTraders.length
      ? null
      : { ...bucketed, types, ...(byTrader ? { only: topTraders } : { only: traderIds, except: excludedTraders }) },
    byTrader && !topSources.length ? null : { ...bucketed, ...(byTrader ? { only: topSources } : { except: excludedSources }) },
  );
  const overall: Counts = { messages: totalMessages, events: totalEvents };
  const bucketOf = (c: Counts, b: number) => {
    const m = (c.buckets ??= new Map());
    let x = m.get(b);
    if (!x) m.set(b, (x = [0, 0]));
    return x;
  };
  for (const r of eb) bucketOf(byTrader ? groups.get(r.g)! : overall, r.b)[1] += r.n;
  for (const r of mb) {
    const id = sourceOf.get(r.g);
    if (id === undefined) continue; // a source that appeared between the two queries
    bucketOf(byTrader ? groups.get(id)! : overall, r.b)[0] += r.n;
  }
  const shape = (c: Counts): Omit<ActivityGroup, 'traderId'> => ({
    messageCount: c.messages,
    eventCount: c.events,
    buckets: [...(c.buckets ?? [])]
      .filter(([, [m, e]]) => m + e > 0)
      .sort(([a], [b]) => a - b)
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
