// Independent brute-force oracle for the five analytics reads (README "Analytics reads (REST v2)";
// contract sections 2, 4, 7, 8; DESIGN 6): /traders/stats, /assets/stats, /traders/rankings,
// /activity-summaries and /traders/activity. Plain loops over the raw topic records, through the
// list-read oracle's world (test/oracle/oracle.ts: versions, tombstones, the fold of positions,
// per-window evaluation, visibility): no SQL, nothing from apps/ or projectors/.
//
// Every read takes the query parameters exactly as a caller sends them (strings), the caller's
// account policy and the serverTime of the answer, and returns either `{ status: 200, data }`
// (the response's `data`) or `{ status, code, details }` for the errors the reads raise
// themselves (403 without the needed visibility, 400 for a startTime after the endTime, the two
// 422s). Schema validation (bad values, unknown parameters) is not modelled.
//
// Readings chosen where README is silent or ambiguous (each flagged to the service's author):
//  A1 Counted events are the events /events would serve (live event of a live position, live and
//     signal-visible trader, eligible asset), selected by their own timeOfEvent; the position's
//     openAt does not have to lie in the bounds (a close in range of a position opened before
//     startTime counts). assetIds/direction/traderIds/eventTypes apply to the event's own fields.
//  A2 A startTime after an endTime is a 400 only when both were sent. A history window that moves
//     the start past the end leaves an empty sample (no error, 0 buckets), as on the list reads.
//  A3 /traders/stats, /assets/stats, /activity-summaries and /traders/activity echo the start
//     clamped to the history window (also an omitted one: it becomes serverTime - days, as
//     resolveWindow does for the list reads); /traders/rankings echoes its bounds unclamped
//     (README says so) and clamps only the sample.
//  A4 windowEvaluability's `partial` and the preserve_sample alternative use the sample's start: the
//     later of the applied startTime and the account's history window (README); `resolved` and
//     preserve_evaluation use the echoed, unclamped bounds.
//  A5 PERFORMANCE_WINDOW_NOT_ELAPSED `details.requested` holds the parameters exactly as sent
//     (strings, null when omitted); `resolved` and the alternatives are normalized ISO strings
//     (toISOString). Alternatives are listed preserve_sample first, then preserve_evaluation.
//  A6 `filtersApplied` echoes: lists deduplicated in request order, `[]` when omitted, except
//     `eventTypes`, which echoes its applied default, all four types in the contract's order
//     (open, close, increase, decrease), as groupBy and interval echo theirs (first reading was
//     `[]`; the service echoes the default, which fits the contract's defaults table better);
//     `direction` null when omitted;
//     rankings echo `minPositions` as applied (default 3) also for activity metrics, and
//     `timeBasedPerformanceWindow` as applied (default 30D) for every metric, also the activity
//     metrics that ignore it (issue 27: the contract gives it the default 30D).
//  A7 Trader stats `source` is the assigned source identity record as on /traders (null when the
//     trader has none or its identity record does not exist). Tags are lowercased (JS
//     toLowerCase), duplicates kept, ordered thematic first, then category and name in byte order.
//  A8 A standard deviation is 0 exactly when every scored return is equal (Sharpe null then); the
//     oracle does not let rounding turn identical returns into a tiny deviation.
//  A9 Activity buckets are listed oldest first; `end` = start + interval (exclusive aligned bound).
//     groupBy=none always answers exactly one group, also with no activity (zeros, no buckets).
//     A group's counts are its totals over the range; groups need messageCount + eventCount > 0.
//  A10 The bucket limit counts the aligned buckets meeting [applied start, applied end] with both
//     ends inclusive: an endTime exactly on a boundary meets the bucket that starts there. The
//     default start (README) is the latest of endTime - 7 days, 1970, and for interval=hour the
//     start of the 168th hourly bucket back, so the default range is never a 422.
//  A11 topTraderIds lists only traders with at least one long (short) sample position.
//  A12 Messages are counted by activity summaries only; their trader is the lowest live trader id
//     assigned the message's source (whatever the signal visibility); message visibility is
//     checked against that trader.

import type { Policy, Pos, TopicRec, WindowName, World } from './oracle.ts';
import * as O from './oracle.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const WEEK = 7 * DAY;
const iso = (t: number): string => new Date(t).toISOString();

/** Query parameters as sent (strings; numbers are stringified). Undefined members are omitted. */
export type Query = Record<string, string | number | undefined>;

export type Answer = { status: 200; data: any } | { status: number; code: string; details?: unknown };

const err = (status: number, code: string, details?: unknown): Answer =>
  details === undefined ? { status, code } : { status, code, details };

// ---------------------------------------------------------------------------------------------------
// The analytics world: the list oracle's world plus tags, and the policy-independent eligible rows

export interface Tag {
  category: string;
  name: string;
}
export interface Eval {
  window: WindowName;
  status: string;
  returnPercentage: number | null;
}
/** A live position of a live trader on an eligible asset, with its mature evaluations. */
export interface PosX {
  p: Pos;
  trader: any;
  /** Per window: null when the asset has no price series; else the evaluation once of age. */
  mature: Record<WindowName, Eval | null>;
}
export interface EvX {
  id: number;
  t: number;
  type: string;
  traderId: number;
  assetId: number;
  direction: string;
  trader: any;
}
export interface MsgX {
  id: string;
  t: number;
  traderId: number;
  trader: any;
}

export interface AWorld {
  w: World;
  tags: Map<number, Tag[]>;
  positions: PosX[];
  events: EvX[];
  messages: MsgX[];
}

const cache = new WeakMap<readonly TopicRec[], AWorld>();

export function analyticsWorld(records: readonly TopicRec[]): AWorld {
  const hit = cache.get(records);
  if (hit) return hit;
  const w = O.buildWorld(records);
  // Trader tags: latest version per trader, a tombstone removes the set.
  const latestTags = new Map<number, any>();
  for (const r of records) {
    if (r.topic !== 'trader-tags') continue;
    const cur = latestTags.get(r.value.traderId);
    if (cur === undefined || r.value.version >= cur.version) latestTags.set(r.value.traderId, r.value);
  }
  const tags = new Map<number, Tag[]>();
  for (const [id, v] of latestTags) {
    if (v.deleted === true) continue;
    const list: Tag[] = (v.tags as Tag[]).map((t) => ({ category: t.category.toLowerCase(), name: t.name.toLowerCase() }));
    list.sort((a, b) => {
      const ta = a.category === 'thematic' ? 0 : 1;
      const tb = b.category === 'thematic' ? 0 : 1;
      return ta - tb || O.cmpBytes(a.category, b.category) || O.cmpBytes(a.name, b.name);
    });
    tags.set(id, list);
  }
  const positions: PosX[] = [];
  for (const p of w.positions.values()) {
    const trader = w.traders.get(p.traderId);
    if (!trader || !O.eligibleAsset(w, p.assetId)) continue;
    const m = (win: WindowName) => O.evaluate(w, p, win, Number.POSITIVE_INFINITY) as Eval | null;
    positions.push({ p, trader, mature: { '1D': m('1D'), '7D': m('7D'), '30D': m('30D') } });
  }
  const events: EvX[] = [];
  for (const e of w.events.values()) {
    const trader = w.traders.get(e.traderId);
    if (!trader || !O.eligibleAsset(w, e.assetId) || !w.positions.has(e.positionId)) continue;
    events.push({
      id: e.id,
      t: Date.parse(e.timeOfEvent),
      type: e.type,
      traderId: e.traderId,
      assetId: e.assetId,
      direction: e.direction,
      trader,
    });
  }
  const own = O.owners(w);
  const messages: MsgX[] = [];
  for (const m of w.messages.values()) {
    const traderId = own.get(O.srcKey(m.platform, m.sourceIdentityId));
    if (traderId === undefined) continue;
    messages.push({ id: m.id, t: Date.parse(m.writtenAt), traderId, trader: w.traders.get(traderId) });
  }
  const aw: AWorld = { w, tags, positions, events, messages };
  cache.set(records, aw);
  return aw;
}

/** The evaluation of a position for a window at serverTime (as /positions shows it). */
export function evalAt(x: PosX, win: WindowName, serverTime: number): Eval | null {
  const m = x.mature[win];
  if (m === null) return null;
  if (serverTime < x.p.openAt + O.WINDOW_MS[win]) return { window: win, status: 'too_young', returnPercentage: null };
  return m;
}

// ---------------------------------------------------------------------------------------------------
// Parameters

/** A comma list as the service splits it: members in request order, duplicates removed; undefined when omitted. */
export function strList(v: string | number | undefined): string[] | undefined {
  if (v === undefined || v === '') return undefined;
  return [...new Set(String(v).split(','))];
}
export const idList = (v: string | number | undefined): number[] | undefined => strList(v)?.map(Number);
const time = (v: string | number | undefined): number | null => (v === undefined ? null : Date.parse(String(v)));
const inList = <T>(v: T, list: readonly T[] | undefined): boolean => list === undefined || list.includes(v);
const sig = (p: Policy) => p.signalVisibility.mode !== 'none';
const msgVis = (p: Policy) => p.messageVisibility.mode !== 'none';
const floorOf = (p: Policy, serverTime: number): number | null =>
  p.historyWindowDays === null ? null : O.historyFloor(serverTime, p.historyWindowDays);
const range = (start: number | null, end: number | null) => ({
  startTime: start === null ? null : iso(start),
  endTime: end === null ? null : iso(end),
});
const inRange = (t: number, start: number | null, end: number | null) => (start === null || t >= start) && (end === null || t <= end);

/** Bounds of the stats reads (trader stats, asset stats, trader activity): omitted = unbounded; the start clamped to the history window. */
function statsBounds(q: Query, p: Policy, serverTime: number): { start: number | null; end: number | null } | Answer {
  let start = time(q.startTime);
  const end = time(q.endTime);
  if (start !== null && end !== null && start > end) return err(400, 'VALIDATION_ERROR');
  const floor = floorOf(p, serverTime);
  if (floor !== null && (start === null || start < floor)) start = floor;
  return { start, end };
}
const isAnswer = (x: unknown): x is Answer => typeof x === 'object' && x !== null && 'status' in x;

// ---------------------------------------------------------------------------------------------------
// Figures

export interface SampleFilter {
  start: number | null;
  end: number | null;
  traderIds?: number[];
  assetIds?: number[];
  direction?: string;
}

/** Sample positions: eligible, signal-visible, opened within [start, end], and the filters. */
export function sample(aw: AWorld, p: Policy, f: SampleFilter): PosX[] {
  const out: PosX[] = [];
  for (const x of aw.positions) {
    if (!O.permits(p.signalVisibility, x.trader)) continue;
    if (!inRange(x.p.openAt, f.start, f.end)) continue;
    if (!inList(x.p.traderId, f.traderIds) || !inList(x.p.assetId, f.assetIds)) continue;
    if (f.direction !== undefined && x.p.direction !== f.direction) continue;
    out.push(x);
  }
  return out;
}

export function directionBias(sampleOf: readonly { p: Pos }[]) {
  let longCount = 0;
  let shortCount = 0;
  for (const x of sampleOf)
    if (x.p.direction === 'long') longCount++;
    else shortCount++;
  const n = longCount + shortCount;
  if (n === 0) return { label: 'none', longCount: 0, shortCount: 0, longPercentage: 0, shortPercentage: 0 };
  // 60 % or more, in integers: 5 * count >= 3 * n.
  const label = 5 * longCount >= 3 * n ? 'long' : 5 * shortCount >= 3 * n ? 'short' : 'mixed';
  return { label, longCount, shortCount, longPercentage: (100 * longCount) / n, shortPercentage: (100 * shortCount) / n };
}

/** Metrics over a list of returns (the scored positions): mean, exact median, win rate, Sharpe. */
export function metrics(returns: readonly number[]) {
  const n = returns.length;
  if (n === 0) return { averageReturnPercentage: null, medianReturnPercentage: null, winRatePercentage: null, sharpeRatio: null };
  let sum = 0;
  let wins = 0;
  for (const r of returns) {
    sum += r;
    if (r > 0) wins++;
  }
  const mean = sum / n;
  const sorted = [...returns].sort((a, b) => a - b);
  const median = n % 2 === 1 ? sorted[(n - 1) / 2]! : (sorted[n / 2 - 1]! + sorted[n / 2]!) / 2;
  let sharpe: number | null = null;
  if (n >= 2 && !returns.every((r) => r === returns[0])) {
    let ss = 0;
    for (const r of returns) ss += (r - mean) * (r - mean);
    const sd = Math.sqrt(ss / (n - 1));
    sharpe = sd === 0 ? null : mean / sd;
  }
  return { averageReturnPercentage: mean, medianReturnPercentage: median, winRatePercentage: (100 * wins) / n, sharpeRatio: sharpe };
}

export function timeBasedPerformance(win: WindowName, sampleOf: readonly PosX[], serverTime: number) {
  const returns: number[] = [];
  for (const x of sampleOf) {
    const e = evalAt(x, win, serverTime);
    if (e !== null && e.status === 'ready') returns.push(e.returnPercentage!);
  }
  const sampled = sampleOf.length;
  return {
    window: win,
    ...metrics(returns),
    positionsCount: returns.length,
    coverage: {
      sampledPositionsCount: sampled,
      scoredPositionsCount: returns.length,
      ratio: sampled === 0 ? null : returns.length / sampled,
    },
  };
}

function sourceOf(w: World, trader: any) {
  if (!trader.source) return null;
  const s = w.sources.get(O.srcKey(trader.source.platform, trader.source.sourceIdentityId));
  if (!s) return null;
  return {
    platform: s.platform,
    sourceIdentityId: s.sourceIdentityId,
    displayName: s.displayName,
    handle: s.handle,
    avatarUrl: s.avatarUrl,
    profileUrl: s.profileUrl,
    audienceCount: s.audienceCount,
  };
}
const onPlatforms = (trader: any, platforms: string[] | undefined) =>
  platforms === undefined || (trader.source != null && platforms.includes(trader.source.platform));

// ---------------------------------------------------------------------------------------------------
// GET /traders/stats

export function traderStats(records: readonly TopicRec[], q: Query, p: Policy, serverTime: number): Answer {
  if (!sig(p)) return err(403, 'FORBIDDEN');
  const b = statsBounds(q, p, serverTime);
  if (isAnswer(b)) return b;
  const aw = analyticsWorld(records);
  const ids = idList(q.traderIds) ?? [];
  const platforms = strList(q.sourcePlatforms);
  const all = sample(aw, p, { start: b.start, end: b.end, traderIds: ids });
  const results: any[] = [];
  const missingTraderIds: number[] = [];
  for (const id of ids) {
    const t = aw.w.traders.get(id);
    if (!t || !O.permits(p.signalVisibility, t) || !onPlatforms(t, platforms)) {
      missingTraderIds.push(id);
      continue;
    }
    const mine = all.filter((x) => x.p.traderId === id);
    results.push({
      traderId: id,
      name: t.name,
      source: sourceOf(aw.w, t),
      tags: aw.tags.get(id) ?? [],
      summary: {
        positionCount: mine.length,
        directionBias: directionBias(mine),
        timeBasedPerformances: {
          '1D': timeBasedPerformance('1D', mine, serverTime),
          '7D': timeBasedPerformance('7D', mine, serverTime),
          '30D': timeBasedPerformance('30D', mine, serverTime),
        },
      },
    });
  }
  return {
    status: 200,
    data: { results, meta: { missingTraderIds, serverTime: iso(serverTime), appliedTimeRange: range(b.start, b.end) } },
  };
}

// ---------------------------------------------------------------------------------------------------
// GET /assets/stats

/** Up to 5 trader ids with the most positions of the list, ties by id ascending. */
function top5(positionsOf: readonly PosX[]): number[] {
  const n = new Map<number, number>();
  for (const x of positionsOf) n.set(x.p.traderId, (n.get(x.p.traderId) ?? 0) + 1);
  return [...n.entries()]
    .sort((a, b) => b[1] - a[1] || a[0] - b[0])
    .slice(0, 5)
    .map(([id]) => id);
}

export function assetStats(records: readonly TopicRec[], q: Query, p: Policy, serverTime: number): Answer {
  if (!sig(p)) return err(403, 'FORBIDDEN');
  const b = statsBounds(q, p, serverTime);
  if (isAnswer(b)) return b;
  const aw = analyticsWorld(records);
  const ids = idList(q.assetIds) ?? [];
  const traderIds = idList(q.traderIds);
  const direction = q.direction === undefined ? undefined : String(q.direction);
  const all = sample(aw, p, { start: b.start, end: b.end, assetIds: ids, traderIds, direction });
  const results: any[] = [];
  const missingAssetIds: number[] = [];
  for (const id of ids) {
    if (!O.eligibleAsset(aw.w, id)) {
      missingAssetIds.push(id);
      continue;
    }
    const mine = all.filter((x) => x.p.assetId === id);
    results.push({
      assetId: id,
      summary: {
        marketPositioning: directionBias(mine),
        topTraderIds: {
          long: top5(mine.filter((x) => x.p.direction === 'long')),
          short: top5(mine.filter((x) => x.p.direction === 'short')),
        },
      },
    });
  }
  return {
    status: 200,
    data: {
      results,
      filtersApplied: { traderIds: traderIds ?? [], direction: direction ?? null, appliedTimeRange: range(b.start, b.end) },
      meta: { requestedAssetIds: ids, missingAssetIds, serverTime: iso(serverTime) },
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// GET /traders/rankings

export const ACTIVITY = ['event_count', 'position_count'];
const SHORTER: WindowName[] = ['30D', '7D', '1D'];

/** Jan 1 00:00 UTC of the year of `t`. */
export const yearStart = (t: number): number => Date.UTC(new Date(t).getUTCFullYear(), 0, 1);

export interface RankingCandidate {
  traderId: number;
  metricValue: number | null;
  positionCount: number;
  row: any;
}

export function rankings(
  records: readonly TopicRec[],
  q: Query,
  p: Policy,
  serverTime: number,
): Answer & { candidates?: RankingCandidate[] } {
  if (!sig(p)) return err(403, 'FORBIDDEN');
  const metric = String(q.metric ?? 'event_count');
  const activity = ACTIVITY.includes(metric);
  const win = String(q.timeBasedPerformanceWindow ?? '30D') as WindowName;
  const minPositions = q.minPositions === undefined ? 3 : Number(q.minPositions);
  const limit = q.limit === undefined ? 10 : Number(q.limit);
  const end = time(q.endTime) ?? serverTime;
  const start = time(q.startTime) ?? yearStart(end);
  if (q.startTime !== undefined && q.endTime !== undefined && start > end) return err(400, 'VALIDATION_ERROR');
  let windowEvaluability = 'not_applicable';
  if (!activity) {
    const W = O.WINDOW_MS[win];
    const hw = floorOf(p, serverTime);
    const sampleStart = hw === null ? start : Math.max(start, hw);
    if (end + W <= serverTime) windowEvaluability = 'full';
    else if (sampleStart + W <= serverTime) windowEvaluability = 'partial';
    else {
      const alternatives: any[] = [];
      const shorter = SHORTER.slice(SHORTER.indexOf(win) + 1).find((x) => sampleStart + O.WINDOW_MS[x] <= serverTime);
      if (shorter)
        alternatives.push({ strategy: 'preserve_sample', startTime: iso(start), endTime: iso(end), timeBasedPerformanceWindow: shorter });
      alternatives.push({
        strategy: 'preserve_evaluation',
        startTime: iso(Math.max(0, serverTime - W - (end - start))),
        endTime: iso(end),
        timeBasedPerformanceWindow: win,
      });
      return err(422, 'PERFORMANCE_WINDOW_NOT_ELAPSED', {
        requested: {
          startTime: q.startTime === undefined ? null : String(q.startTime),
          endTime: q.endTime === undefined ? null : String(q.endTime),
          timeBasedPerformanceWindow: q.timeBasedPerformanceWindow === undefined ? null : String(q.timeBasedPerformanceWindow),
        },
        resolved: { startTime: iso(start), endTime: iso(end), timeBasedPerformanceWindow: win },
        alternatives,
      });
    }
  }
  const aw = analyticsWorld(records);
  const floor = floorOf(p, serverTime);
  const lo = floor === null ? start : Math.max(start, floor);
  const assetIds = idList(q.assetIds);
  const direction = q.direction === undefined ? undefined : String(q.direction);
  const byTrader = new Map<number, { trader: any; positions: PosX[]; events: number }>();
  const slot = (trader: any) => {
    let s = byTrader.get(trader.id);
    if (!s) byTrader.set(trader.id, (s = { trader, positions: [], events: 0 }));
    return s;
  };
  for (const x of sample(aw, p, { start: lo, end, assetIds, direction })) slot(x.trader).positions.push(x);
  for (const e of aw.events) {
    if (!O.permits(p.signalVisibility, e.trader) || !inRange(e.t, lo, end)) continue;
    if (!inList(e.assetId, assetIds) || (direction !== undefined && e.direction !== direction)) continue;
    slot(e.trader).events++;
  }
  const candidates: RankingCandidate[] = [];
  for (const [traderId, s] of byTrader) {
    const row: any = { traderId, eventCount: s.events, positionCount: s.positions.length, directionBias: directionBias(s.positions) };
    let value: number | null;
    if (metric === 'event_count') {
      if (s.events === 0) continue;
      value = s.events;
    } else if (metric === 'position_count') {
      if (s.positions.length === 0) continue;
      value = s.positions.length;
    } else {
      if (s.positions.length === 0) continue;
      const tbp = timeBasedPerformance(win, s.positions, serverTime);
      if (tbp.positionsCount < minPositions) continue;
      row.timeBasedPerformance = tbp;
      value =
        metric === 'win_rate'
          ? tbp.winRatePercentage
          : metric === 'avg_return'
            ? tbp.averageReturnPercentage
            : metric === 'median_return'
              ? tbp.medianReturnPercentage
              : tbp.sharpeRatio;
    }
    row.metricValue = value;
    candidates.push({ traderId, metricValue: value, positionCount: s.positions.length, row });
  }
  candidates.sort(compareRanked);
  const results = candidates.slice(0, limit).map((c, i) => ({ ...c.row, rank: i + 1 }));
  return {
    status: 200,
    data: {
      results,
      filtersApplied: {
        metric,
        assetIds: assetIds ?? [],
        direction: direction ?? null,
        timeBasedPerformanceWindow: win,
        minPositions,
        windowEvaluability,
        appliedTimeRange: range(start, end),
      },
      meta: { totalCandidates: candidates.length, serverTime: iso(serverTime) },
    },
    candidates,
  };
}

/** Ranking order: metricValue descending (nulls last), positionCount descending, traderId ascending. */
export function compareRanked(a: { metricValue: number | null; positionCount: number; traderId: number }, b: typeof a): number {
  if (a.metricValue !== b.metricValue) {
    if (a.metricValue === null) return 1;
    if (b.metricValue === null) return -1;
    return a.metricValue > b.metricValue ? -1 : 1;
  }
  return b.positionCount - a.positionCount || a.traderId - b.traderId;
}

// ---------------------------------------------------------------------------------------------------
// GET /activity-summaries

export const MAX_BUCKETS = 168;
export type Interval = 'hour' | 'day' | 'week';

/** Start of the UTC-aligned bucket holding `t`: the hour, the day, or the ISO week (Monday 00:00). */
export function bucketStart(t: number, interval: Interval): number {
  const d = new Date(t);
  if (interval === 'hour') return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours());
  const day = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  if (interval === 'day') return day;
  const sinceMonday = (d.getUTCDay() + 6) % 7; // getUTCDay: 0 = Sunday
  return day - sinceMonday * DAY;
}
export const bucketSize = (interval: Interval): number => (interval === 'hour' ? HOUR : interval === 'day' ? DAY : WEEK);

/** Aligned buckets meeting [start, end] (both inclusive), counted one by one; stops past `cap`. */
export function bucketsMeeting(start: number, end: number, interval: Interval, cap = MAX_BUCKETS + 1): number {
  let n = 0;
  for (let b = bucketStart(start, interval); b <= end && n < cap; b += bucketSize(interval)) n++;
  return n;
}

export function activitySummaries(records: readonly TopicRec[], q: Query, p: Policy, serverTime: number): Answer {
  if (!sig(p) && !msgVis(p)) return err(403, 'FORBIDDEN');
  const groupBy = String(q.groupBy ?? 'trader');
  const interval = String(q.interval ?? 'day') as Interval;
  const limit = q.limit === undefined ? 10 : Number(q.limit);
  const end = time(q.endTime) ?? serverTime;
  let start =
    time(q.startTime) ??
    Math.max(0, end - 7 * DAY, interval === 'hour' ? Math.floor(end / HOUR) * HOUR - (MAX_BUCKETS - 1) * HOUR : -Infinity);
  if (q.startTime !== undefined && q.endTime !== undefined && start > end) return err(400, 'VALIDATION_ERROR');
  const floor = floorOf(p, serverTime);
  if (floor !== null && start < floor) start = floor;
  if (bucketsMeeting(start, end, interval) > MAX_BUCKETS) return err(422, 'BUCKET_LIMIT_EXCEEDED');
  const aw = analyticsWorld(records);
  const eventTypes = strList(q.eventTypes);
  const traderIds = idList(q.traderIds);
  interface G {
    traderId: number;
    messageCount: number;
    eventCount: number;
    buckets: Map<number, { m: number; e: number }>;
  }
  const groups = new Map<number, G>();
  const add = (traderId: number, t: number, kind: 'm' | 'e') => {
    const key = groupBy === 'trader' ? traderId : 0;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { traderId: key, messageCount: 0, eventCount: 0, buckets: new Map() }));
    const bs = bucketStart(t, interval);
    let b = g.buckets.get(bs);
    if (!b) g.buckets.set(bs, (b = { m: 0, e: 0 }));
    b[kind]++;
    if (kind === 'm') g.messageCount++;
    else g.eventCount++;
  };
  for (const m of aw.messages) {
    if (!O.permits(p.messageVisibility, m.trader) || !inList(m.traderId, traderIds) || !inRange(m.t, start, end)) continue;
    add(m.traderId, m.t, 'm');
  }
  for (const e of aw.events) {
    if (
      !O.permits(p.signalVisibility, e.trader) ||
      !inList(e.traderId, traderIds) ||
      !inList(e.type, eventTypes) ||
      !inRange(e.t, start, end)
    )
      continue;
    add(e.traderId, e.t, 'e');
  }
  const size = bucketSize(interval);
  const shape = (g: G, withId: boolean) => ({
    ...(withId ? { traderId: g.traderId } : {}),
    messageCount: g.messageCount,
    eventCount: g.eventCount,
    buckets: [...g.buckets.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([s, c]) => ({ start: iso(s), end: iso(s + size), messageCount: c.m, eventCount: c.e })),
  });
  let totalMessages = 0;
  let totalEvents = 0;
  for (const g of groups.values()) {
    totalMessages += g.messageCount;
    totalEvents += g.eventCount;
  }
  let results: any[];
  if (groupBy === 'none') {
    results = [shape(groups.get(0) ?? { traderId: 0, messageCount: 0, eventCount: 0, buckets: new Map() }, false)];
  } else {
    results = [...groups.values()]
      .sort((a, b) => b.messageCount + b.eventCount - (a.messageCount + a.eventCount) || a.traderId - b.traderId)
      .slice(0, limit)
      .map((g) => shape(g, true));
  }
  return {
    status: 200,
    data: {
      results,
      filtersApplied: {
        groupBy,
        interval,
        eventTypes: eventTypes ?? ['open', 'close', 'increase', 'decrease'],
        traderIds: traderIds ?? [],
        appliedTimeRange: range(start, end),
      },
      meta: { totalMessages, totalEvents, serverTime: iso(serverTime) },
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// GET /traders/activity (every row of every page, in order; the test walks the pages)

export function traderActivity(records: readonly TopicRec[], q: Query, p: Policy, serverTime: number): Answer {
  if (!sig(p)) return err(403, 'FORBIDDEN');
  const b = statsBounds(q, p, serverTime);
  if (isAnswer(b)) return b;
  const aw = analyticsWorld(records);
  const assetIds = idList(q.assetIds);
  const platforms = strList(q.sourcePlatforms);
  const asked = q.minPositionCount === undefined ? 3 : Number(q.minPositionCount);
  const min = assetIds === undefined ? asked : Math.max(1, asked);
  const counts = new Map<number, number>();
  for (const x of sample(aw, p, { start: b.start, end: b.end, assetIds })) counts.set(x.p.traderId, (counts.get(x.p.traderId) ?? 0) + 1);
  const rows: { t: any; positionCount: number }[] = [];
  for (const t of aw.w.traders.values()) {
    if (!O.permits(p.signalVisibility, t) || !onPlatforms(t, platforms)) continue;
    const n = counts.get(t.id) ?? 0;
    if (n >= min) rows.push({ t, positionCount: n });
  }
  rows.sort((a, b2) => O.cmpBytes(a.t.name, b2.t.name) || a.t.id - b2.t.id);
  return {
    status: 200,
    data: {
      results: rows.map((r) => ({ traderId: r.t.id, positionCount: r.positionCount })),
      meta: { serverTime: iso(serverTime), appliedTimeRange: range(b.start, b.end) },
    },
  };
}

// ---------------------------------------------------------------------------------------------------
// Dispatch and comparison

export type Read = 'traderStats' | 'assetStats' | 'rankings' | 'activity' | 'traderActivity';
export const PATHS: Record<Read, string> = {
  traderStats: '/v2/traders/stats',
  assetStats: '/v2/assets/stats',
  rankings: '/v2/traders/rankings',
  activity: '/v2/activity-summaries',
  traderActivity: '/v2/traders/activity',
};
export const READS: Record<Read, (records: readonly TopicRec[], q: Query, p: Policy, serverTime: number) => Answer> = {
  traderStats,
  assetStats,
  rankings,
  activity: activitySummaries,
  traderActivity,
};

/**
 * First difference between `actual` and `expected` (null when equal): numbers within a relative
 * tolerance of `relTol`, or an absolute one of `absTol` near zero (a mean of returns that cancel
 * out is 0 in one summation order and 1e-15 in another); everything else exactly.
 */
export const diff = (actual: unknown, expected: unknown, path = '$', relTol = 1e-9, absTol = 1e-9): string | null =>
  O.diff(actual, expected, path, relTol, absTol);

/** Numbers equal within the comparison tolerance (nulls only to nulls). */
export const near = (a: number | null, b: number | null): boolean => (a === null || b === null ? a === b : diff(a, b) === null);

/** Account policies for the tests: visibilities and a policy builder (signal, message, history days). */
const ALL: O.Visibility = { mode: 'all' };
export const policies = {
  ALL,
  NONE: { mode: 'none' } as O.Visibility,
  traders: (...traderIds: number[]): O.Visibility => ({ mode: 'traders', traderIds }),
  pol: (
    signalVisibility: O.Visibility = ALL,
    messageVisibility: O.Visibility = ALL,
    historyWindowDays: number | null = null,
  ): O.Policy => ({ signalVisibility, messageVisibility, historyWindowDays }),
  OPEN: { signalVisibility: ALL, messageVisibility: ALL, historyWindowDays: null } as O.Policy,
};

// ---------------------------------------------------------------------------------------------------
// Hand-built record set (the unit tests state its answers by hand; the API test serves it)
//
// Sections, isolated by trader and asset ids:
//  P  trader stats, serverTime HAND.P: traders 1..8; assets 1 (priced), 2 (no price series), 3
//     (inactive market), 4 (loses its active market in version 2), 5 (deleted), 6 (markets []).
//  A  asset stats: traders 11..18 (18 deleted) on asset 7 (no price series), November 2025.
//  R  rankings, serverTime HAND.R: traders 21..28 (28 deleted) on asset 10 (priced), 2026.
//  S  activity summaries, serverTime HAND.S: traders 31..35 around the 2025/2026 year boundary
//     (32 and 35 share a source: its messages are 32's; 33 is deleted and shares a source with 34).
//  T  trader activity, serverTime HAND.T: traders 41..47 (names in byte order), assets 11, 12.

export const HAND = {
  P: Date.parse('2026-01-10T12:00:00.000Z'),
  R: Date.parse('2026-03-01T00:00:00.000Z'),
  S: Date.parse('2026-01-06T12:00:00.000Z'),
  T: Date.parse('2025-10-20T00:00:00.000Z'),
} as const;

export function handRecords(): TopicRec[] {
  const recs: TopicRec[] = [];
  const at = (s: string) => new Date(Date.parse(s)).toISOString();
  const source = (platform: string, id: string) =>
    recs.push({
      topic: 'source-identities',
      value: {
        platform,
        sourceIdentityId: id,
        displayName: `Source ${id}`,
        handle: id,
        avatarUrl: null,
        profileUrl: null,
        audienceCount: 10,
        version: 1,
      },
    });
  const trader = (id: number, name: string, src: [string, string] | null, version = 1, deleted = false) =>
    recs.push({
      topic: 'traders',
      value: {
        id,
        name,
        slug: null,
        avatarUrl: null,
        source: src === null ? null : { platform: src[0], sourceIdentityId: src[1] },
        version,
        ...(deleted ? { deleted: true } : {}),
      },
    });
  const asset = (id: number, markets: any[], version = 1, deleted = false) =>
    recs.push({
      topic: 'assets',
      value: {
        id,
        name: `Asset ${id}`,
        symbol: `H${id}`,
        logoUrl: null,
        assetClass: 'crypto',
        category: null,
        markets,
        version,
        ...(deleted ? { deleted: true } : {}),
      },
    });
  const USD = [{ quoteSymbol: 'USD', active: true, preferred: true }];
  const price = (assetId: number, when: string, p: number) =>
    recs.push({ topic: 'prices', value: { assetId, at: at(when), price: p, version: 1 } });
  const event = (
    id: number,
    positionId: number,
    traderId: number,
    assetId: number,
    type: string,
    direction: string,
    p: number | null,
    when: string,
    version = 1,
    deleted = false,
  ) =>
    recs.push({
      topic: 'trade-events',
      value: {
        id,
        type,
        direction,
        price: p,
        timeOfEvent: at(when),
        assumed: false,
        retrospective: false,
        autoGenerated: false,
        positionId,
        traderId,
        assetId,
        messageId: null,
        version,
        ...(deleted ? { deleted: true } : {}),
      },
    });
  /** A position: its open event has id pid * 10. */
  const open = (pid: number, traderId: number, assetId: number, direction: string, p: number | null, when: string) =>
    event(pid * 10, pid, traderId, assetId, 'open', direction, p, when);
  const message = (id: string, platform: string, src: string, when: string, deleted = false) =>
    recs.push({
      topic: 'messages',
      value: {
        id,
        platform,
        sourceIdentityId: src,
        writtenAt: at(when),
        url: null,
        text: `text ${id}`,
        attachments: [],
        isEdited: false,
        isReply: false,
        isQuote: false,
        isRepost: false,
        version: deleted ? 2 : 1,
        ...(deleted ? { deleted: true } : {}),
      },
    });

  // ----- P: trader stats
  source('TELEGRAM', 'src-1');
  source('X', 'src-7');
  trader(1, 'One', ['TELEGRAM', 'src-1']);
  trader(2, 'Two', ['TELEGRAM', 'src-2']);
  source('TELEGRAM', 'src-2');
  trader(3, 'Three', ['TELEGRAM', 'src-3']);
  source('TELEGRAM', 'src-3');
  trader(4, 'Four', null);
  trader(5, 'Five', ['TELEGRAM', 'src-5']);
  trader(5, 'Five', ['TELEGRAM', 'src-5'], 2, true); // deleted
  trader(6, 'Six', ['TELEGRAM', 'src-missing']); // no identity record
  trader(7, 'Seven', ['X', 'src-7']);
  trader(8, 'Eight', null);
  recs.push({
    topic: 'trader-tags',
    value: {
      traderId: 1,
      version: 1,
      tags: [
        { category: 'style', name: 'swing' },
        { category: 'thematic', name: 'memecoins' },
        { category: 'risk', name: 'high' },
        { category: 'thematic', name: 'ai' },
        { category: 'style', name: 'position' },
        { category: 'thematic', name: 'Ærø' },
      ],
    },
  });
  recs.push({ topic: 'trader-tags', value: { traderId: 2, version: 1, tags: [{ category: 'thematic', name: 'old' }] } });
  recs.push({
    topic: 'trader-tags',
    value: {
      traderId: 2,
      version: 2,
      tags: [
        { category: 'risk', name: 'low' },
        { category: 'thematic', name: 'rates' },
      ],
    },
  });
  recs.push({ topic: 'trader-tags', value: { traderId: 3, version: 1, tags: [{ category: 'thematic', name: 'gone' }] } });
  recs.push({ topic: 'trader-tags', value: { traderId: 3, version: 2, tags: [], deleted: true } });
  asset(1, USD);
  asset(2, USD);
  asset(3, [{ quoteSymbol: 'USD', active: false, preferred: true }]);
  asset(4, USD);
  asset(
    4,
    [
      { quoteSymbol: 'USD', active: false, preferred: true },
      { quoteSymbol: 'EUR', active: false, preferred: false },
    ],
    2,
  );
  asset(5, USD);
  asset(5, USD, 2, true);
  asset(6, []);
  price(1, '2025-12-02T00:00:00Z', 110);
  price(1, '2025-12-03T00:30:00Z', 90);
  price(1, '2025-12-04T01:00:00Z', 130);
  price(1, '2025-12-05T00:00:00Z', 100);
  price(1, '2025-12-06T00:00:00Z', 80);
  price(1, '2025-12-14T00:00:00Z', 105);
  price(1, '2025-12-15T00:00:00Z', 105);
  price(1, '2025-12-17T00:00:00Z', 150);
  price(1, '2025-12-26T01:00:00.001Z', 500);
  open(101, 1, 1, 'long', 100, '2025-12-01T00:00:00Z'); // 1D +10
  open(102, 1, 1, 'long', 100, '2025-12-02T00:00:00Z'); // 1D -10 (sample 30 min after E)
  open(103, 1, 1, 'long', 100, '2025-12-03T00:00:00Z'); // 1D +30 (sample exactly 1 h after E)
  open(104, 1, 1, 'long', 100, '2025-12-04T00:00:00Z'); // 1D 0
  open(105, 1, 1, 'short', 100, '2025-12-05T00:00:00Z'); // 1D +20
  open(106, 1, 1, 'long', null, '2025-12-06T00:00:00Z'); // missing_entry_price
  open(107, 1, 1, 'long', 0, '2025-12-07T00:00:00Z'); // zero_entry_price
  open(108, 1, 1, 'long', 100, '2025-12-25T00:00:00Z'); // 1D missing_forward_price (1 h + 1 ms)
  open(109, 1, 1, 'long', 100, '2026-01-10T10:00:00Z'); // too_young everywhere
  open(110, 1, 2, 'long', 100, '2025-12-10T00:00:00Z'); // no price series: null windows
  event(1101, 110, 1, 2, 'close', 'long', 101, '2025-12-11T00:00:00Z');
  open(111, 1, 3, 'long', 100, '2025-12-10T00:00:00Z'); // inactive market
  open(112, 1, 4, 'long', 100, '2025-12-10T00:00:00Z'); // lost its active market
  open(113, 1, 5, 'long', 100, '2025-12-10T00:00:00Z'); // deleted asset
  open(114, 1, 6, 'long', 100, '2025-12-10T00:00:00Z'); // no markets
  open(115, 1, 1, 'long', 100, '2025-12-11T00:00:00Z'); // its open is deleted below: no position
  event(1151, 115, 1, 1, 'close', 'long', 100, '2025-12-12T00:00:00Z');
  event(1150, 115, 1, 1, 'open', 'long', 100, '2025-12-11T00:00:00Z', 2, true);
  open(201, 2, 1, 'long', 100, '2025-12-13T00:00:00Z'); // 1D +5
  open(202, 2, 1, 'long', 100, '2025-12-14T00:00:00Z'); // 1D +5 (identical: Sharpe null)
  open(203, 2, 2, 'short', 100, '2025-12-15T00:00:00Z');
  open(204, 2, 2, 'short', 100, '2025-12-16T00:00:00Z');
  open(301, 3, 1, 'long', 200, '2025-12-16T00:00:00Z'); // 1D -25, the only scored one
  open(501, 5, 1, 'long', 100, '2025-12-01T00:00:00Z'); // deleted trader
  for (let i = 0; i < 5; i++) open(601 + i, 6, 2, i < 3 ? 'long' : 'short', 100, `2025-12-0${i + 1}T00:00:00Z`); // 60 % long
  for (let i = 0; i < 5; i++) open(701 + i, 7, 2, i < 2 ? 'long' : 'short', 100, `2025-12-0${i + 1}T00:00:00Z`); // 60 % short
  for (let i = 0; i < 7; i++) open(801 + i, 8, 2, i < 4 ? 'long' : 'short', 100, `2025-12-0${i + 1}T00:00:00Z`); // 57 % long: mixed

  // ----- A: asset stats on asset 7
  asset(7, USD);
  for (const id of [11, 12, 13, 14, 15, 16, 17]) trader(id, `A${id}`, null);
  trader(18, 'A18', null);
  trader(18, 'A18', null, 2, true);
  const a7: [number, number, string, string][] = [
    [1101, 11, 'long', '2025-11-01'],
    [1102, 11, 'long', '2025-11-02'],
    [1103, 11, 'long', '2025-11-03'],
    [1201, 12, 'long', '2025-11-04'],
    [1202, 12, 'long', '2025-11-05'],
    [1301, 13, 'long', '2025-11-06'],
    [1302, 13, 'long', '2025-11-07'],
    [1401, 14, 'long', '2025-11-08'],
    [1501, 15, 'long', '2025-11-09'],
    [1601, 16, 'long', '2025-11-10'],
    [1602, 16, 'short', '2025-11-11'],
    [1603, 16, 'short', '2025-11-12'],
    [1701, 17, 'short', '2025-11-13'],
    [1801, 18, 'long', '2025-11-14'],
    [1802, 18, 'long', '2025-11-14'],
    [1803, 18, 'long', '2025-11-14'],
  ];
  for (const [pid, t, dir, day] of a7) open(pid, t, 7, dir, 50, `${day}T00:00:00Z`);
  open(1104, 11, 7, 'short', 50, '2025-11-05T00:00:00Z');
  event(11040, 1104, 11, 7, 'open', 'short', 50, '2025-11-05T00:00:00Z', 2, true); // position gone

  // ----- R: rankings on asset 10 (1D returns from samples exactly at E)
  asset(10, USD);
  for (const id of [21, 22, 23, 24, 25, 26, 27]) trader(id, `R${id}`, ['X', `r-${id}`]);
  trader(28, 'R28', null);
  trader(28, 'R28', null, 2, true);
  const r10: [number, number, string, number | null, string, number | null][] = [
    // pid, trader, direction, open price, openAt, price sample at openAt + 1 day
    [2101, 21, 'long', 100, '2026-01-10', 110],
    [2102, 21, 'long', 100, '2026-01-12', 110],
    [2201, 22, 'long', 100, '2026-01-14', 110],
    [2202, 22, 'long', 100, '2026-01-16', 110],
    [2203, 22, 'long', 100, '2026-01-18', 110],
    [2301, 23, 'long', 100, '2026-01-20', 110],
    [2302, 23, 'long', 100, '2026-01-22', 110],
    [2401, 24, 'long', 100, '2026-01-24', 150],
    [2601, 26, 'long', null, '2026-02-01', null],
    [2701, 27, 'short', 100, '2026-02-02', 120],
    [2801, 28, 'long', 100, '2026-02-04', 200],
  ];
  for (const [pid, t, dir, p, day, fwd] of r10) {
    open(pid, t, 10, dir, p, `${day}T00:00:00Z`);
    if (fwd !== null) price(10, new Date(Date.parse(`${day}T00:00:00Z`) + DAY).toISOString(), fwd);
  }
  event(21011, 2101, 21, 10, 'close', 'long', 111, '2026-01-20T00:00:00Z');
  event(21012, 2101, 21, 10, 'increase', 'long', 105, '2026-01-11T00:00:00Z');
  event(21012, 2101, 21, 10, 'increase', 'long', 105, '2026-01-11T00:00:00Z', 2, true); // deleted event
  event(23011, 2301, 23, 10, 'close', 'long', 111, '2026-01-25T00:00:00Z');
  event(23021, 2302, 23, 10, 'close', 'long', 111, '2026-01-26T00:00:00Z');
  open(2402, 24, 10, 'long', 100, '2025-12-20T00:00:00Z'); // opened before the default start
  event(24021, 2402, 24, 10, 'close', 'long', 100, '2026-01-05T00:00:00Z'); // closed inside it
  open(2501, 25, 10, 'long', 100, '2026-02-28T12:00:00Z'); // too_young at HAND.R for 1D
  open(2502, 25, 10, 'long', 100, '2026-02-28T18:00:00Z');

  // ----- S: activity summaries around the year boundary (ISO week 2026-W01 = Mon 2025-12-29 .. Sun 2026-01-04)
  asset(30, USD);
  source('TELEGRAM', 's-31');
  source('X', 's-shared');
  source('TELEGRAM', 's-34');
  source('X', 's-orphan');
  trader(31, 'S31', ['TELEGRAM', 's-31']);
  trader(32, 'S32', ['X', 's-shared']);
  trader(35, 'S35', ['X', 's-shared']);
  trader(33, 'S33', ['TELEGRAM', 's-34']);
  trader(33, 'S33', ['TELEGRAM', 's-34'], 2, true);
  trader(34, 'S34', ['TELEGRAM', 's-34']);
  open(3101, 31, 30, 'long', 10, '2025-12-28T23:59:59.999Z'); // Sunday, week of Mon 2025-12-22
  event(31011, 3101, 31, 30, 'close', 'long', 11, '2025-12-29T00:00:00.000Z'); // Monday: the next week
  message('s31-a', 'TELEGRAM', 's-31', '2025-12-31T23:30:00Z');
  message('s31-b', 'TELEGRAM', 's-31', '2026-01-01T00:30:00Z');
  message('s31-gone', 'TELEGRAM', 's-31', '2026-01-01T01:30:00Z');
  message('s31-gone', 'TELEGRAM', 's-31', '2026-01-01T01:30:00Z', true);
  message('s32-a', 'X', 's-shared', '2026-01-02T10:00:00Z');
  message('s32-b', 'X', 's-shared', '2026-01-02T10:00:00Z');
  open(3201, 32, 30, 'short', 10, '2026-01-04T23:59:59.999Z'); // Sunday, still 2026-W01
  event(32011, 3201, 32, 30, 'increase', 'short', 9, '2026-01-05T00:00:00.000Z'); // Monday 2026-W02
  message('s34-a', 'TELEGRAM', 's-34', '2026-01-03T00:00:00Z'); // 33 is deleted: 34's
  open(3401, 34, 30, 'long', 10, '2026-01-06T11:00:00Z');
  message('orphan-1', 'X', 's-orphan', '2026-01-02T00:00:00Z'); // no trader: never counted
  open(3301, 33, 30, 'long', 10, '2026-01-02T00:00:00Z'); // deleted trader

  // ----- T: trader activity
  asset(11, USD);
  asset(12, USD);
  const tSrc = (id: number, platform: string | null): [string, string] | null => (platform === null ? null : [platform, `t-${id}`]);
  trader(41, 'Zed', tSrc(41, 'X'));
  trader(42, 'alpha', tSrc(42, 'TELEGRAM'));
  trader(43, 'Ärger', tSrc(43, 'X'));
  trader(44, 'Beta', tSrc(44, 'X'));
  trader(45, 'Beta', tSrc(45, 'TELEGRAM'));
  trader(46, '東京', tSrc(46, null));
  trader(47, 'Émile', tSrc(47, 'X'));
  const tPos: [number, number, number, string][] = [
    [4101, 41, 11, '01'],
    [4102, 41, 11, '02'],
    [4103, 41, 11, '03'],
    [4301, 43, 12, '06'],
    [4401, 44, 11, '01'],
    [4402, 44, 11, '02'],
    [4403, 44, 11, '03'],
    [4404, 44, 12, '04'],
    [4405, 44, 12, '05'],
    [4501, 45, 11, '07'],
    [4502, 45, 11, '08'],
    [4503, 45, 11, '09'],
    [4601, 46, 11, '10'],
    [4602, 46, 11, '11'],
    [4701, 47, 12, '12'],
    [4702, 47, 12, '13'],
    [4703, 47, 12, '14'],
    [4704, 47, 12, '15'],
  ];
  for (const [pid, t, a, d] of tPos) open(pid, t, a, pid % 2 ? 'long' : 'short', 10, `2025-10-${d}T00:00:00Z`);
  return recs;
}
