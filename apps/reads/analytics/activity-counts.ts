import { DAY_MS, EVENT_COUNTS, HOUR_MS } from '../../../projectors/activity/rollup.ts';
import { perDataVersion, type ReadContext } from '../context.ts';
import type { Facts } from '../facts.ts';
import { currentStatements, FINAL_SETTINGS, forEachHeld, heldRows, mergedParts } from './sample.ts';

export { HOUR_MS };
export const WEEK_MS = 7 * DAY_MS;
/** 1970-01-01 was a Thursday: the Monday before it is 3 days earlier. */
const MONDAY_BEFORE_EPOCH_MS = 3 * DAY_MS;

export type Interval = 'hour' | 'day' | 'week';

/** Start of the UTC-aligned bucket holding t (ISO weeks begin on Monday 00:00 UTC). */
export function bucketStart(interval: Interval, t: number): number {
  if (interval === 'hour') return Math.floor(t / HOUR_MS) * HOUR_MS;
  if (interval === 'day') return Math.floor(t / DAY_MS) * DAY_MS;
  return Math.floor((t + MONDAY_BEFORE_EPOCH_MS) / WEEK_MS) * WEEK_MS - MONDAY_BEFORE_EPOCH_MS;
}

/** bucketStart in SQL, of an ms column (integer arithmetic: a 32-bit DateTime would wrap after 2106; times are from 1970). */
const BUCKET_SQL: Record<Interval, (t: string) => string> = {
  hour: (t) => `intDiv(${t}, ${HOUR_MS}) * ${HOUR_MS}`,
  day: (t) => `intDiv(${t}, ${DAY_MS}) * ${DAY_MS}`,
  week: (t) => `intDiv(${t} + ${MONDAY_BEFORE_EPOCH_MS}, ${WEEK_MS}) * ${WEEK_MS} - ${MONDAY_BEFORE_EPOCH_MS}`,
};

/** A half-open range of ms [from, to). */
export type Range = readonly [number, number];

/** An inclusive range of ms as the rolled-up rows that cover it and the partial hours left at its ends. */
export interface Segments { raw: Range[]; hour: Range[]; day: Range[] }

/**
 * [start, end] (ms, inclusive) cut into the partial hours at its ends (`raw`: read from the
 * statement table), whole hours, and with `coarsest` day the whole UTC days between them.
 */
export function segments(start: number, end: number, coarsest: 'hour' | 'day'): Segments {
  const a = start; const b = end + 1;
  const h0 = Math.ceil(a / HOUR_MS) * HOUR_MS; const h1 = Math.floor(b / HOUR_MS) * HOUR_MS;
  if (h0 >= h1) return { raw: a < b ? [[a, b]] : [], hour: [], day: [] };
  const raw: Range[] = [];
  if (a < h0) raw.push([a, h0]);
  if (h1 < b) raw.push([h1, b]);
  const d0 = Math.ceil(h0 / DAY_MS) * DAY_MS; const d1 = Math.floor(h1 / DAY_MS) * DAY_MS;
  if (coarsest === 'hour' || d0 >= d1) return { raw, hour: [[h0, h1]], day: [] };
  const hour: Range[] = [];
  if (h0 < d0) hour.push([h0, d0]);
  if (d1 < h1) hour.push([d1, h1]);
  return { raw, hour, day: [[d0, d1]] };
}

/** `column` within any of `ranges` (ms Int64 column), with the bounds as parameters named `${name}N`. */
function inRanges(column: string, ranges: readonly Range[], name: string, params: Record<string, unknown>): string {
  return `(${ranges.map(([from, to], i) => {
    params[`${name}${i}a`] = from; params[`${name}${i}b`] = to;
    return `(${column} >= {${name}${i}a:Int64} AND ${column} < {${name}${i}b:Int64})`;
  }).join(' OR ')})`;
}

/** The same on a DateTime64 column: inclusive bounds (the end of 2299 has no next ms in DateTime64). */
function timeInRanges(column: string, ranges: readonly Range[], name: string, params: Record<string, unknown>): string {
  return `(${ranges.map(([from, to], i) => {
    params[`${name}${i}a`] = from; params[`${name}${i}b`] = to - 1;
    return `(${column} >= fromUnixTimestamp64Milli({${name}${i}a:Int64}, 'UTC') AND ${column} <= fromUnixTimestamp64Milli({${name}${i}b:Int64}, 'UTC'))`;
  }).join(' OR ')})`;
}

/** The asset ids the events table holds, per data version (the ineligible ones among them are few). */
const eventAssets = perDataVersion(async (store) => {
  const [r] = await store.query<{ assets: number[] }>('SELECT groupUniqArray(assetId) AS assets FROM $db.events');
  return (r?.assets ?? []).map(Number);
});

export interface CountQuery {
  /** Inclusive bounds (ms) on the event's or message's time. */
  start: number; end: number;
  /** The coarsest rolled-up rows to read: `day` when buckets are days or weeks or there are none. */
  coarsest: 'hour' | 'day';
  /** Counts per bucket too (else `b` is 0). */
  bucket?: Interval;
  /** Groups counted: only these, or all but these. */
  only?: readonly (number | string)[];
  except?: readonly (number | string)[];
}

interface Kind {
  table: 'events' | 'messages'; alias: string; time: string;
  /** The rolled-up rows by time, and the same by owner (for a few groups: `only`). */
  rollup: string; byOwner: string;
  /** The group of a row: a column (expression) of the rolled-up table (alias r) and of the statement table. */
  group: (alias: string) => string; groupType: string;
  /** A condition on the owner columns that the table by owner finds by its key, implied by `only` (params added to `params`). */
  ownerKey: (only: readonly (number | string)[], params: Record<string, unknown>) => string;
}
const EVENTS: Kind = {
  table: 'events', alias: 'e', time: 'e.timeOfEvent', rollup: 'activity_events', byOwner: 'activity_events_by_trader',
  group: (x) => `${x}.traderId`, groupType: 'UInt64', ownerKey: () => '1',
};
const MESSAGES: Kind = {
  table: 'messages', alias: 'm', time: 'm.writtenAt', rollup: 'activity_messages', byOwner: 'activity_messages_by_source',
  group: (x) => `concat(${x}.platform, ':', ${x}.sourceIdentityId)`, groupType: 'String',
  // `platform:sourceIdentityId`, and a platform name has no colon.
  ownerKey: (only, params) => {
    const keys = only.map(String);
    params.onlyPlatforms = [...new Set(keys.map((k) => k.slice(0, k.indexOf(':'))))];
    params.onlySourceIds = [...new Set(keys.map((k) => k.slice(k.indexOf(':') + 1)))];
    return 'r.platform IN {onlyPlatforms:Array(String)} AND r.sourceIdentityId IN {onlySourceIds:Array(String)}';
  },
};

/** Up to this many groups (`only`), the rolled-up rows are read from the table by owner. */
const BY_OWNER_MAX = 200;

export interface Count<G> { g: G; b: number; n: number }

/**
 * The earliest and latest time (ms) of any row of the events and messages tables (current or
 * not), per data version: a partial hour at an end of a range with nothing stored beyond the
 * bound is read as its whole rolled-up hour.
 */
const timeSpans = perDataVersion(async (store) => {
  const [r] = await store.query<{ elo: number | null; ehi: number | null; mlo: number | null; mhi: number | null }>(`
    SELECT (SELECT toUnixTimestamp64Milli(min(timeOfEvent)) FROM $db.events) AS elo, (SELECT toUnixTimestamp64Milli(max(timeOfEvent)) FROM $db.events) AS ehi,
           (SELECT toUnixTimestamp64Milli(min(writtenAt)) FROM $db.messages) AS mlo, (SELECT toUnixTimestamp64Milli(max(writtenAt)) FROM $db.messages) AS mhi`);
  // An empty table (min and max of nothing): no row anywhere.
  const span = (lo: number | null | undefined, hi: number | null | undefined) => (lo == null || hi == null || Number(lo) > Number(hi)
    ? { lo: Number.POSITIVE_INFINITY, hi: Number.NEGATIVE_INFINITY } : { lo: Number(lo), hi: Number(hi) });
  return { events: span(r?.elo, r?.ehi), messages: span(r?.mlo, r?.mhi) };
});

type Row<G> = { g: G; b: number; n: number; s: number };

/**
 * An end's partial hour read whole: the hour, and the bound past which its rolled-up row must count
 * nothing (ms, inclusive): the start's (firstAt before it) or the end's (lastAt after it).
 */
interface Whole { hour: number; side: 'start' | 'end'; bound: number }

/**
 * Counts per group (and bucket) over [start, end]: the rolled-up rows of the whole hours and days
 * (README "Read models"), plus the current statements of the partial hours at the ends, read from
 * the statement table's merged part (sample.ts mergedParts) or with FINAL. A partial hour with no
 * row stored beyond the bound (timeSpans, per data version) is read as its whole rolled-up hour
 * instead; a rolled-up row of that hour whose counted rows reach past the bound (firstAt, lastAt:
 * a row that landed since) marks the answer (s = 2), and the read runs again with the partial hour
 * read from the statements. `n` is the count of one rolled-up row (a sum of its columns);
 * `rawWhere` what a statement must meet to count, `correction` statements of the whole hours to
 * take back (n -1: events on ineligible assets).
 */
async function counts<G>(ctx: ReadContext, kind: Kind, q: CountQuery, spec: CountSpec): Promise<Count<G>[]> {
  const span = (await timeSpans(ctx))[kind.table];
  const whole: Whole[] = [];
  let { start, end } = q;
  if (start <= span.lo && start % HOUR_MS !== 0) { start = Math.floor(start / HOUR_MS) * HOUR_MS; whole.push({ hour: start, side: 'start', bound: q.start }); }
  if (end >= span.hi && (end + 1) % HOUR_MS !== 0) { end = Math.ceil((end + 1) / HOUR_MS) * HOUR_MS - 1; whole.push({ hour: Math.floor(q.end / HOUR_MS) * HOUR_MS, side: 'end', bound: q.end }); }
  const rows = await countRows<G>(ctx, kind, { ...q, start, end }, spec, whole);
  return shape<G>(kind, rows.some((r) => Number(r.s) === 2) ? await countRows<G>(ctx, kind, q, spec, []) : rows);
}

/** A counted row to take back from the rolled-up counts: its group and time (ms). */
interface Taken { g: number; t: number }

interface CountSpec {
  n: string; rawWhere: string; params: Record<string, unknown>;
  /** Statements of the whole hours to take back: a condition on the statement table, or the rows themselves (in memory, by time). */
  correction?: { sql: string } | { rows: readonly Taken[] };
}

const shape = <G>(kind: Kind, rows: Row<G>[]): Count<G>[] => rows.filter((r) => Number(r.s) === 0)
  .map((r) => ({ g: (kind.groupType === 'String' ? r.g : Number(r.g)) as G, b: Number(r.b), n: Number(r.n) }));

/** The rows of counts: data rows (s 0), the pinned part's sentinel (s 1), groups with a row of an hour read whole that reaches past the bounds (s 2). */
async function countRows<G>(ctx: ReadContext, kind: Kind, q: CountQuery, spec: CountSpec, whole: readonly Whole[]): Promise<Row<G>[]> {
  const seg = segments(q.start, q.end, q.coarsest);
  const params: Record<string, unknown> = { ...spec.params };
  const groupCond = (expr: string): string => [
    q.only ? `${expr} IN {onlyGroups:Array(${kind.groupType})}` : '1',
    q.except?.length ? `${expr} NOT IN {exceptGroups:Array(${kind.groupType})}` : '1',
  ].join(' AND ');
  if (q.only) params.onlyGroups = q.only;
  if (q.except?.length) params.exceptGroups = q.except;
  const rolled = [
    ...(seg.day.length ? [`(r.grain = 'day' AND ${inRanges('r.start', seg.day, 'day', params)})`] : []),
    ...(seg.hour.length ? [`(r.grain = 'hour' AND ${inRanges('r.start', seg.hour, 'hour', params)})`] : []),
  ];
  // A row of an hour read whole that counts something outside the bounds (only the side's column is read).
  const past = whole.map((w, i) => {
    Object.assign(params, { [`whole${i}h`]: w.hour, [`whole${i}b`]: w.bound });
    return `(r.grain = 'hour' AND r.start = {whole${i}h:Int64} AND r.n > 0 AND ${w.side === 'start' ? 'r.firstAt <' : 'r.lastAt >'} {whole${i}b:Int64})`;
  });
  // The whole hours: from the first hour row to the end of the last (the correction's range).
  const covered = [...seg.day, ...seg.hour];
  const coveredRange: Range | undefined = covered.length ? [Math.min(...covered.map((r) => r[0])), Math.max(...covered.map((r) => r[1]))] : undefined;
  const a = kind.alias;
  const none = kind.groupType === 'String' ? "''" : 'toUInt64(0)';
  const correctionSql = spec.correction && 'sql' in spec.correction ? spec.correction.sql : undefined;
  const bucket = (t: string) => (q.bucket ? BUCKET_SQL[q.bucket](t) : '0');
  const byOwner = q.only !== undefined && q.only.length <= BY_OWNER_MAX;
  const rolledFrom = `$db.${byOwner ? kind.byOwner : kind.rollup} AS r FINAL
        WHERE (${rolled.join(' OR ')}) AND ${groupCond(kind.group('r'))}${byOwner ? ` AND ${kind.ownerKey(q.only!, params)}` : ''}`;
  const flag = past.length ? `if(${past.join(' OR ')}, 2, 0)` : '0';
  const build = (from: string, part: string, pinned: boolean): string => {
    const branches: string[] = [];
    if (rolled.length) branches.push(`SELECT ${kind.group('r')} AS g, r.start AS t, toInt64(${spec.n}) AS n, ${flag} AS s FROM ${rolledFrom}`);
    if (seg.raw.length) {
      branches.push(`SELECT ${kind.group(a)} AS g, toUnixTimestamp64Milli(${kind.time}) AS t, toInt64(1) AS n, 0 AS s FROM ${from}
        WHERE ${a}.live = 1 AND ${a}.tomb = 0 AND ${spec.rawWhere} AND ${timeInRanges(kind.time, seg.raw, 'raw', params)} AND ${groupCond(kind.group(a))} AND ${part}`);
    }
    if (correctionSql && coveredRange) {
      branches.push(`SELECT ${kind.group(a)} AS g, toUnixTimestamp64Milli(${kind.time}) AS t, toInt64(-1) AS n, 0 AS s FROM ${from}
        WHERE ${a}.live = 1 AND ${a}.tomb = 0 AND ${correctionSql} AND ${timeInRanges(kind.time, [coveredRange], 'covered', params)} AND ${groupCond(kind.group(a))} AND ${part}`);
    }
    // A row that says the pinned part was still there when the query began (else it read nothing from it).
    if (pinned) branches.push(`SELECT ${none} AS g, toInt64(0) AS t, toInt64(0) AS n, 1 AS s FROM ${from} WHERE ${part} LIMIT 1`);
    return `SELECT g, ${bucket('t')} AS b, sum(n) AS n, max(s) AS s FROM (${branches.join('\nUNION ALL\n')})
      GROUP BY g, b ${FINAL_SETTINGS}`;
  };
  if (!rolled.length && !seg.raw.length) return [];
  const readsStatements = seg.raw.length > 0 || (correctionSql !== undefined && coveredRange !== undefined);
  // The rolled-up rows alone: one GROUP BY over them, no UNION to gather (a fifth of the query).
  if (!readsStatements) {
    const rows = await ctx.store.query<Row<G>>(`SELECT ${kind.group('r')} AS g, ${bucket('r.start')} AS b, sum(toInt64(${spec.n})) AS n, max(${flag}) AS s
      FROM ${rolledFrom} GROUP BY g, b ${FINAL_SETTINGS}`, params);
    return spec.correction && 'rows' in spec.correction && coveredRange ? takeBack(rows, spec.correction.rows, coveredRange, q) : rows;
  }
  const part = readsStatements ? (await mergedParts(ctx)).get(kind.table) : undefined;
  let rows: Row<G>[] | undefined;
  if (part !== undefined) {
    rows = await ctx.store.query<Row<G>>(build(`$db.${kind.table} AS ${a}`, `${a}._part = {mergedPart:String}`, true), { ...params, mergedPart: part });
    if (!rows.some((r) => Number(r.s) === 1)) rows = undefined;
  }
  rows ??= await ctx.store.query<Row<G>>(build(`$db.${kind.table} AS ${a}${readsStatements ? ' FINAL' : ''}`, '1', false), params);
  return spec.correction && 'rows' in spec.correction && coveredRange ? takeBack(rows, spec.correction.rows, coveredRange, q) : rows;
}

/** The rows with the taken-back rows of the whole hours (`covered`) and of the groups counted subtracted (never below 0). */
function takeBack<G>(rows: Row<G>[], taken: readonly Taken[], [from, to]: Range, q: CountQuery): Row<G>[] {
  const only = q.only && new Set(q.only);
  const except = q.except && new Set(q.except);
  const minus = new Map<string, number>();
  forEachHeld(taken, (x) => x.t, from, to, (x) => {
    if ((only && !only.has(x.g)) || except?.has(x.g)) return;
    const k = `${x.g}/${q.bucket ? bucketStart(q.bucket, x.t) : 0}`;
    minus.set(k, (minus.get(k) ?? 0) + 1);
  });
  if (!minus.size) return rows;
  return rows.map((r) => {
    const m = Number(r.s) === 0 ? minus.get(`${Number(r.g)}/${Number(r.b)}`) : undefined;
    return m ? { ...r, n: Math.max(0, Number(r.n) - m) } : r;
  });
}

/**
 * Counted events per trader (and bucket): live events of live positions on eligible assets
 * (facts), of the given types and direction. Trader eligibility is the caller's (`only`, `except`).
 */
export async function eventCounts(ctx: ReadContext, facts: Facts, q: CountQuery & { types?: readonly string[]; direction?: string }): Promise<Count<number>[]> {
  const counted = EVENT_COUNTS.filter((c) => (!q.types || q.types.includes(c.type)) && (!q.direction || c.direction === q.direction));
  const columns = counted.length === EVENT_COUNTS.length ? ['r.n'] : counted.map((c) => `r.${c.column}`);
  const params: Record<string, unknown> = { eligibleAssets: facts.assetIds };
  const filters: string[] = [];
  if (q.types) { filters.push('e.type IN {eventTypes:Array(String)}'); params.eventTypes = q.types; }
  if (q.direction) { filters.push('e.direction = {direction:String}'); params.direction = q.direction; }
  const only = filters.length ? filters.join(' AND ') : '1';
  // The rolled-up rows count events on every asset: those on assets that are not eligible are taken back.
  const excluded = (await eventAssets(ctx)).filter((id) => !facts.assetQuote.has(id));
  let correction: CountSpec['correction'];
  if (excluded.length) {
    const held = await excludedEvents(ctx, excluded);
    if (held) {
      correction = { rows: q.types || q.direction ? held.filter((x) => (!q.types || q.types.includes(x.type)) && (!q.direction || x.direction === q.direction)) : held };
    } else {
      params.excludedAssets = excluded;
      correction = { sql: `e.assetId IN {excludedAssets:Array(UInt64)} AND ${only}` };
    }
  }
  return counts<number>(ctx, EVENTS, q, {
    n: columns.length ? columns.join(' + ') : '0', params,
    rawWhere: `e.assetId IN {eligibleAssets:Array(UInt64)} AND ${only}`,
    correction,
  });
}

/** Up to this many current events on ineligible assets are held in memory (excludedEvents); with more, the read takes them back in SQL. */
export const CORRECTION_LIMITS = { maxHeldEvents: 200_000 };

interface ExcludedEvent extends Taken { type: string; direction: string }

/**
 * The current, live events on the given (ineligible) assets by time, per data version (sample.ts
 * heldRows), or null when there are more than CORRECTION_LIMITS.maxHeldEvents: the rolled-up
 * counts less these need no read of the statement table (a second table read and a sentinel per
 * query). Read from the events table's merged part by its asset projection, or with FINAL.
 */
function excludedEvents(ctx: ReadContext, assets: readonly number[]): Promise<readonly ExcludedEvent[] | null> {
  return heldRows(ctx, `events:${assets.join(',')}`, CORRECTION_LIMITS.maxHeldEvents, (limit) =>
    currentStatements<{ g: number; t: number; type: string; direction: string }>(ctx, 'events', 'e', (from, where) => `
      SELECT e.traderId AS g, toUnixTimestamp64Milli(e.timeOfEvent) AS t, e.type AS type, e.direction AS direction FROM ${from}
      WHERE e.live = 1 AND e.tomb = 0 AND e.assetId IN {excludedAssets:Array(UInt64)} AND ${where} LIMIT {heldLimit:UInt64}`,
    { excludedAssets: assets, heldLimit: limit }).then((r) => r.map((x) => ({ g: Number(x.g), t: Number(x.t), type: x.type, direction: x.direction }))),
  (x) => x.t);
}

/** Counted messages per source (`platform:sourceIdentityId`) (and bucket): live messages. */
export function messageCounts(ctx: ReadContext, q: CountQuery): Promise<Count<string>[]> {
  return counts<string>(ctx, MESSAGES, q, { n: 'r.n', rawWhere: '1', params: {} });
}
