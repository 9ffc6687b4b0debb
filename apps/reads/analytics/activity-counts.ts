import type { Table } from '../../../storage/table.ts';
import {
  ACTIVITY_EVENTS_BY_TRADER_TABLE,
  ACTIVITY_EVENTS_TABLE,
  ACTIVITY_MESSAGES_BY_SOURCE_TABLE,
  ACTIVITY_MESSAGES_TABLE,
  DAY_MS,
  EVENT_COUNTS,
  HOUR_MS,
} from '../../../storage/tables/activity.ts';
import { MESSAGES_TABLE } from '../../../storage/tables/messages.ts';
import { parseSourceKey, sourceKeySql } from '../../../storage/tables/traders.ts';
import { EVENTS_TABLE } from '../../../storage/tables/trading.ts';
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
export interface Segments {
  raw: Range[];
  hour: Range[];
  day: Range[];
}

/**
 * [start, end] (ms, inclusive) cut into the partial hours at its ends (`raw`: read from the
 * statement table), whole hours, and with `coarsest` day the whole UTC days between them.
 */
export function segments(start: number, end: number, coarsest: 'hour' | 'day'): Segments {
  const a = start;
  const b = end + 1;
  const h0 = Math.ceil(a / HOUR_MS) * HOUR_MS;
  const h1 = Math.floor(b / HOUR_MS) * HOUR_MS;
  if (h0 >= h1) return { raw: a < b ? [[a, b]] : [], hour: [], day: [] };
  const raw: Range[] = [];
  if (a < h0) raw.push([a, h0]);
  if (h1 < b) raw.push([h1, b]);
  const d0 = Math.ceil(h0 / DAY_MS) * DAY_MS;
  const d1 = Math.floor(h1 / DAY_MS) * DAY_MS;
  if (coarsest === 'hour' || d0 >= d1) return { raw, hour: [[h0, h1]], day: [] };
  const hour: Range[] = [];
  if (h0 < d0) hour.push([h0, d0]);
  if (d1 < h1) hour.push([d1, h1]);
  return { raw, hour, day: [[d0, d1]] };
}

/** `column` within any of `ranges` (ms Int64 column), with the bounds as parameters named `${name}N`. */
function inRanges(column: string, ranges: readonly Range[], name: string, params: Record<string, unknown>): string {
  return `(${ranges
    .map(([from, to], i) => {
      params[`${name}${i}a`] = from;
      params[`${name}${i}b`] = to;
      return `(${column} >= {${name}${i}a:Int64} AND ${column} < {${name}${i}b:Int64})`;
    })
    .join(' OR ')})`;
}

/** The same on a DateTime64 column: inclusive bounds (the end of 2299 has no next ms in DateTime64). */
function timeInRanges(column: string, ranges: readonly Range[], name: string, params: Record<string, unknown>): string {
  return `(${ranges
    .map(([from, to], i) => {
      params[`${name}${i}a`] = from;
      params[`${name}${i}b`] = to - 1;
      return `(${column} >= fromUnixTimestamp64Milli({${name}${i}a:Int64}, 'UTC') AND ${column} <= fromUnixTimestamp64Milli({${name}${i}b:Int64}, 'UTC'))`;
    })
    .join(' OR ')})`;
}

/** The asset ids the events table holds, per data version (the ineligible ones among them are few). */
const eventAssets = perDataVersion(async (store) => {
  const [r] = await store.query<{ assets: number[] }>(`SELECT groupUniqArray(assetId) AS assets FROM ${EVENTS_TABLE}`);
  return (r?.assets ?? []).map(Number);
});

export interface CountQuery {
  /** Inclusive bounds (ms) on the event's or message's time. */
  start: number;
  end: number;
  /** The coarsest rolled-up rows to read: `day` when buckets are days or weeks or there are none. */
  coarsest: 'hour' | 'day';
  /** Counts per bucket too (else `b` is 0). */
  bucket?: Interval;
  /** Groups counted: only these, or all but these. */
  only?: readonly (number | string)[];
  except?: readonly (number | string)[];
}

interface Kind {
  table: Table;
  /** Which of timeSpans' spans is the table's. */
  span: 'events' | 'messages';
  alias: string;
  time: string;
  /** The rolled-up rows by time, and the same by owner (for a few groups: `only`). */
  rollup: Table;
  byOwner: Table;
  /** The group of a row: a column (expression) of the rolled-up table (alias r) and of the statement table. */
  group: (alias: string) => string;
  groupType: string;
  /** A condition on the owner columns that the table by owner finds by its key, implied by `only` (params added to `params`). */
  ownerKey: (only: readonly (number | string)[], params: Record<string, unknown>) => string;
}
const EVENTS: Kind = {
  table: EVENTS_TABLE,
  span: 'events',
  alias: 'e',
  time: 'e.timeOfEvent',
  rollup: ACTIVITY_EVENTS_TABLE,
  byOwner: ACTIVITY_EVENTS_BY_TRADER_TABLE,
  group: (x) => `${x}.traderId`,
  groupType: 'UInt64',
  ownerKey: () => '1',
};
const MESSAGES: Kind = {
  table: MESSAGES_TABLE,
  span: 'messages',
  alias: 'm',
  time: 'm.writtenAt',
  rollup: ACTIVITY_MESSAGES_TABLE,
  byOwner: ACTIVITY_MESSAGES_BY_SOURCE_TABLE,
  group: (x) => sourceKeySql(x).text,
  groupType: 'String',
  ownerKey: (only, params) => {
    const keys = only.map((k) => parseSourceKey(String(k)));
    params.onlyPlatforms = [...new Set(keys.map((k) => k.platform))];
    params.onlySourceIds = [...new Set(keys.map((k) => k.sourceIdentityId))];
    return 'r.platform IN {onlyPlatforms:Array(String)} AND r.sourceIdentityId IN {onlySourceIds:Array(String)}';
  },
};

/** Up to this many groups (`only`), the rolled-up rows are read from the table by owner. */
const BY_OWNER_MAX = 200;

export interface Count<G> {
  g: G;
  b: number;
  n: number;
}

/**
 * The earliest and latest time (ms) of any row of the events and messages tables (current or
 * not), per data version: a partial hour at an end of a range with nothing stored beyond the
 * bound is read as its whole rolled-up hour.
 */
const timeSpans = perDataVersion(async (store) => {
  const [r] = await store.query<{ elo: number | null; ehi: number | null; mlo: number | null; mhi: number | null }>(`
    SELECT (SELECT toUnixTimestamp64Milli(min(timeOfEvent)) FROM ${EVENTS_TABLE}) AS elo, (SELECT toUnixTimestamp64Milli(max(timeOfEvent)) FROM ${EVENTS_TABLE}) AS ehi,
           (SELECT toUnixTimestamp64Milli(min(writtenAt)) FROM ${MESSAGES_TABLE}) AS mlo, (SELECT toUnixTimestamp64Milli(max(writtenAt)) FROM ${MESSAGES_TABLE}) AS mhi`);
  // An empty table (min and max of nothing): no row anywhere.
  const span = (lo: number | null | undefined, hi: number | null | undefined) =>
    lo == null || hi == null || Number(lo) > Number(hi)
      ? { lo: Number.POSITIVE_INFINITY, hi: Number.NEGATIVE_INFINITY }
      : { lo: Number(lo), hi: Number(hi) };
  return { events: span(r?.elo, r?.ehi), messages: span(r?.mlo, r?.mhi) };
});

type Row<G> = { g: G; b: number; n: number; s: number };

/**
 * An end's partial day or hour read whole: its rolled-up rows (grain, start), and the bound past
 * which they must count nothing (ms, inclusive): the start's (firstAt before it) or the end's
 * (lastAt after it).
 */
interface Whole {
  grain: 'hour' | 'day';
  start: number;
  side: 'start' | 'end';
  bound: number;
}

/**
 * [q.start, q.end] with each end that has no row stored beyond it (`span`) widened to its whole day
 * (coarsest `day`) or else whole hour, when the widened range still holds that whole row: a
 * default range ending now reads today's day row instead of its hour rows.
 */
export function widen(
  q: { start: number; end: number; coarsest: 'hour' | 'day' },
  span: { lo: number; hi: number },
): { start: number; end: number; whole: Whole[] } {
  let { start, end } = q;
  const whole: Whole[] = [];
  for (const [grain, size] of q.coarsest === 'day'
    ? ([
        ['day', DAY_MS],
        ['hour', HOUR_MS],
      ] as const)
    : ([['hour', HOUR_MS]] as const)) {
    const s = start === q.start && q.start <= span.lo ? Math.floor(q.start / size) * size : start;
    const e = end === q.end && q.end >= span.hi ? Math.ceil((q.end + 1) / size) * size - 1 : end;
    // Both ends' rows lie within the widened range exactly when it holds one whole row.
    if (e + 1 - s < size) continue;
    if (s !== start) {
      start = s;
      whole.push({ grain, start: s, side: 'start', bound: q.start });
    }
    if (e !== end) {
      end = e;
      whole.push({ grain, start: e + 1 - size, side: 'end', bound: q.end });
    }
  }
  return { start, end, whole };
}

/**
 * Counts per group (and bucket) over [start, end]: the rolled-up rows of the whole hours and days
 * (README "Read models"), plus the current statements of the partial hours at the ends, read from
 * the statement table's merged part (sample.ts mergedParts) or with FINAL. An end with no row
 * stored beyond it (timeSpans, per data version) is read as its whole rolled-up day or hour
 * instead (widen); a rolled-up row of those whose counted rows reach past the bound (firstAt,
 * lastAt: a row that landed since) marks the answer (s = 2), and the read runs again with the
 * partial hours read from the statements. `n` is the count of one rolled-up row (a sum of its columns);
 * `rawWhere` what a statement must meet to count, `correction` statements of the whole hours to
 * take back (n -1: events on ineligible assets). Reads of several kinds that need the rolled-up
 * rows alone share one query (a round trip and a pipeline less each).
 */
async function counts(ctx: ReadContext, jobs: readonly (Job | null)[]): Promise<Count<number | string>[][]> {
  const spans = await timeSpans(ctx);
  const plans = jobs.map((j) => {
    if (!j) return null;
    const { start, end, whole } = widen(j.q, spans[j.kind.span]);
    return plan<number | string>(ctx, j.kind, { ...j.q, start, end }, j.spec, whole);
  });
  const rolled = plans.filter((p) => p?.rolled);
  const shared = new Map<CountPlan, Row<number | string>[]>();
  if (rolled.length > 1) {
    const rows = await ctx.store.query<Omit<Row<never>, 'g'> & { k: number; gn: number; gs: string }>(
      `${rolled.map((p, i) => p!.rolled!.sql(i)).join('\nUNION ALL\n')} ${FINAL_SETTINGS}`,
      Object.assign({}, ...rolled.map((p) => p!.rolled!.params)),
    );
    rolled.forEach((p, i) => {
      shared.set(
        p!,
        rows.filter((r) => Number(r.k) === i).map((r) => ({ g: p!.rolled!.text ? r.gs : r.gn, b: r.b, n: r.n, s: r.s })),
      );
    });
  }
  // One query after the other: the embedded store runs one at a time.
  const out: Count<number | string>[][] = [];
  for (const [i, p] of plans.entries()) {
    const j = jobs[i];
    if (!p || !j) {
      out.push([]);
      continue;
    }
    let rows = p.finish(shared.get(p) ?? (await p.run()));
    if (rows.some((r) => Number(r.s) === 2)) {
      const again = plan<number | string>(ctx, j.kind, j.q, j.spec, []);
      rows = again.finish(await again.run());
    }
    out.push(shape(j.kind, rows));
  }
  return out;
}

/** One count: the kind counted, over what, and how. */
interface Job {
  kind: Kind;
  q: CountQuery;
  spec: CountSpec;
}

/** A counted row to take back from the rolled-up counts: its group and time (ms). */
interface Taken {
  g: number;
  t: number;
}

interface CountSpec {
  n: string;
  rawWhere: string;
  params: Record<string, unknown>;
  /** Statements of the whole hours to take back: a condition on the statement table, or the rows themselves (in memory, by time). */
  correction?: { sql: string } | { rows: readonly Taken[] };
}

const shape = <G>(kind: Kind, rows: Row<G>[]): Count<G>[] =>
  rows
    .filter((r) => Number(r.s) === 0)
    .map((r) => ({ g: (kind.groupType === 'String' ? r.g : Number(r.g)) as G, b: Number(r.b), n: Number(r.n) }));

/**
 * A count's read: its own query (`run`), and when it needs the rolled-up rows alone, that query as
 * a branch another kind's may share (`rolled.sql(k)`: rows tagged k, the group in gn or, `text`, gs); `finish`
 * takes back the held rows. Its rows: data rows (s 0), the pinned part's sentinel (s 1), groups
 * with a row read whole (widen) that reaches past the bounds (s 2). Parameter names begin with the
 * kind's alias, so that two kinds' branches never share one.
 */
interface CountPlan<G = number | string> {
  rolled?: { sql: (k: number) => string; params: Record<string, unknown>; text: boolean };
  run: () => Promise<Row<G>[]>;
  finish: (rows: Row<G>[]) => Row<G>[];
}

function plan<G>(ctx: ReadContext, kind: Kind, q: CountQuery, spec: CountSpec, whole: readonly Whole[]): CountPlan<G> {
  const seg = segments(q.start, q.end, q.coarsest);
  const a = kind.alias;
  const params: Record<string, unknown> = { ...spec.params };
  const groupCond = (expr: string): string =>
    [
      q.only ? `${expr} IN {${a}OnlyGroups:Array(${kind.groupType})}` : '1',
      q.except?.length ? `${expr} NOT IN {${a}ExceptGroups:Array(${kind.groupType})}` : '1',
    ].join(' AND ');
  if (q.only) params[`${a}OnlyGroups`] = q.only;
  if (q.except?.length) params[`${a}ExceptGroups`] = q.except;
  const rolled = [
    ...(seg.day.length ? [`(r.grain = 'day' AND ${inRanges('r.start', seg.day, `${a}day`, params)})`] : []),
    ...(seg.hour.length ? [`(r.grain = 'hour' AND ${inRanges('r.start', seg.hour, `${a}hour`, params)})`] : []),
  ];
  // A row read whole (widen) that counts something outside the bounds (only the side's column is read).
  const past = whole.map((w, i) => {
    Object.assign(params, { [`${a}whole${i}s`]: w.start, [`${a}whole${i}b`]: w.bound });
    return `(r.grain = '${w.grain}' AND r.start = {${a}whole${i}s:Int64} AND r.n > 0 AND ${w.side === 'start' ? 'r.firstAt <' : 'r.lastAt >'} {${a}whole${i}b:Int64})`;
  });
  // The whole hours: from the first hour row to the end of the last (the correction's range).
  const covered = [...seg.day, ...seg.hour];
  const coveredRange: Range | undefined = covered.length
    ? [Math.min(...covered.map((r) => r[0])), Math.max(...covered.map((r) => r[1]))]
    : undefined;
  const none = kind.groupType === 'String' ? "''" : 'toUInt64(0)';
  const correctionSql = spec.correction && 'sql' in spec.correction ? spec.correction.sql : undefined;
  const bucket = (t: string) => (q.bucket ? BUCKET_SQL[q.bucket](t) : '0');
  const byOwner = q.only !== undefined && q.only.length <= BY_OWNER_MAX;
  const rolledFrom = `${byOwner ? kind.byOwner : kind.rollup} AS r FINAL
        WHERE (${rolled.join(' OR ')}) AND ${groupCond(kind.group('r'))}${byOwner ? ` AND ${kind.ownerKey(q.only!, params)}` : ''}`;
  const flag = past.length ? `if(${past.join(' OR ')}, 2, 0)` : '0';
  const finish = (rows: Row<G>[]): Row<G>[] =>
    spec.correction && 'rows' in spec.correction && coveredRange ? takeBack(rows, spec.correction.rows, coveredRange, q) : rows;
  const build = (from: string, part: string, pinned: boolean): string => {
    const branches: string[] = [];
    if (rolled.length)
      branches.push(`SELECT ${kind.group('r')} AS g, r.start AS t, toInt64(${spec.n}) AS n, ${flag} AS s FROM ${rolledFrom}`);
    if (seg.raw.length) {
      branches.push(`SELECT ${kind.group(a)} AS g, toUnixTimestamp64Milli(${kind.time}) AS t, toInt64(1) AS n, 0 AS s FROM ${from}
        WHERE ${a}.live = 1 AND ${a}.tomb = 0 AND ${spec.rawWhere} AND ${timeInRanges(kind.time, seg.raw, `${a}raw`, params)} AND ${groupCond(kind.group(a))} AND ${part}`);
    }
    if (correctionSql && coveredRange) {
      branches.push(`SELECT ${kind.group(a)} AS g, toUnixTimestamp64Milli(${kind.time}) AS t, toInt64(-1) AS n, 0 AS s FROM ${from}
        WHERE ${a}.live = 1 AND ${a}.tomb = 0 AND ${correctionSql} AND ${timeInRanges(kind.time, [coveredRange], `${a}covered`, params)} AND ${groupCond(kind.group(a))} AND ${part}`);
    }
    // A row that says the pinned part was still there when the query began (else it read nothing from it).
    if (pinned) branches.push(`SELECT ${none} AS g, toInt64(0) AS t, toInt64(0) AS n, 1 AS s FROM ${from} WHERE ${part} LIMIT 1`);
    return `SELECT g, ${bucket('t')} AS b, sum(n) AS n, max(s) AS s FROM (${branches.join('\nUNION ALL\n')})
      GROUP BY g, b ${FINAL_SETTINGS}`;
  };
  if (!rolled.length && !seg.raw.length) return { run: async () => [], finish };
  const readsStatements = seg.raw.length > 0 || (correctionSql !== undefined && coveredRange !== undefined);
  // The rolled-up rows alone: one GROUP BY over them, no UNION to gather (a fifth of the query).
  if (!readsStatements) {
    // Tagged: the group in the column of its type (gn or gs), each grouped by its own type.
    const text = kind.groupType === 'String';
    const sql = (
      k?: number,
    ) => `SELECT ${k === undefined ? `${kind.group('r')} AS g` : `${k} AS k, ${text ? 'toUInt64(0)' : kind.group('r')} AS gn, ${text ? kind.group('r') : "''"} AS gs`},
        ${bucket('r.start')} AS b, sum(toInt64(${spec.n})) AS n, max(${flag}) AS s
      FROM ${rolledFrom} GROUP BY ${k === undefined ? 'g' : text ? 'gs' : 'gn'}, b`;
    return { rolled: { sql, params, text }, run: () => ctx.store.query<Row<G>>(`${sql()} ${FINAL_SETTINGS}`, params), finish };
  }
  return {
    finish,
    run: async () => {
      const part = (await mergedParts(ctx)).get(kind.table.name);
      if (part !== undefined) {
        const rows = await ctx.store.query<Row<G>>(build(`${kind.table} AS ${a}`, `${a}._part = {mergedPart:String}`, true), {
          ...params,
          mergedPart: part,
        });
        if (rows.some((r) => Number(r.s) === 1)) return rows;
      }
      return ctx.store.query<Row<G>>(build(`${kind.table} AS ${a} FINAL`, '1', false), params);
    },
  };
}

/** The rows with the taken-back rows of the whole hours (`covered`) and of the groups counted subtracted (never below 0). */
function takeBack<G>(rows: Row<G>[], taken: readonly Taken[], [from, to]: Range, q: CountQuery): Row<G>[] {
  const only = q.only && new Set(q.only);
  const except = q.except && new Set(q.except);
  const minus = new Map<string, number>();
  forEachHeld(
    taken,
    (x) => x.t,
    from,
    to,
    (x) => {
      if ((only && !only.has(x.g)) || except?.has(x.g)) return;
      const k = `${x.g}/${q.bucket ? bucketStart(q.bucket, x.t) : 0}`;
      minus.set(k, (minus.get(k) ?? 0) + 1);
    },
  );
  if (!minus.size) return rows;
  return rows.map((r) => {
    const m = Number(r.s) === 0 ? minus.get(`${Number(r.g)}/${Number(r.b)}`) : undefined;
    return m ? { ...r, n: Math.max(0, Number(r.n) - m) } : r;
  });
}

export type EventCountQuery = CountQuery & { types?: readonly string[]; direction?: string };

/**
 * Counted events per trader (and bucket): live events of live positions on eligible assets
 * (facts), of the given types and direction. Trader eligibility is the caller's (`only`, `except`).
 */
export async function eventCounts(ctx: ReadContext, facts: Facts, q: EventCountQuery): Promise<Count<number>[]> {
  const [events] = await counts(ctx, [{ kind: EVENTS, q, spec: await eventSpec(ctx, facts, q) }]);
  return events as Count<number>[];
}

/**
 * Counted events per trader (as eventCounts) and counted messages per source
 * (`platform:sourceIdentityId`: live messages), per bucket, in one read; either may be null (none
 * of that kind).
 */
export async function activityCounts(
  ctx: ReadContext,
  facts: Facts,
  events: EventCountQuery | null,
  messages: CountQuery | null,
): Promise<{ events: Count<number>[]; messages: Count<string>[] }> {
  const [e, m] = await counts(ctx, [
    events && { kind: EVENTS, q: events, spec: await eventSpec(ctx, facts, events) },
    messages && { kind: MESSAGES, q: messages, spec: MESSAGE_SPEC },
  ]);
  return { events: e as Count<number>[], messages: m as Count<string>[] };
}

const MESSAGE_SPEC: CountSpec = { n: 'r.n', rawWhere: '1', params: {} };

/** What a statement must meet to count as an event of eventCounts, and the ineligible-asset events to take back. */
async function eventSpec(ctx: ReadContext, facts: Facts, q: EventCountQuery): Promise<CountSpec> {
  const counted = EVENT_COUNTS.filter((c) => (!q.types || q.types.includes(c.type)) && (!q.direction || c.direction === q.direction));
  const columns = counted.length === EVENT_COUNTS.length ? ['r.n'] : counted.map((c) => `r.${c.column}`);
  const params: Record<string, unknown> = { eligibleAssets: facts.assetIds };
  const filters: string[] = [];
  if (q.types) {
    filters.push('e.type IN {eventTypes:Array(String)}');
    params.eventTypes = q.types;
  }
  if (q.direction) {
    filters.push('e.direction = {direction:String}');
    params.direction = q.direction;
  }
  const only = filters.length ? filters.join(' AND ') : '1';
  // The rolled-up rows count events on every asset: those on assets that are not eligible are taken back.
  const excluded = (await eventAssets(ctx)).filter((id) => !facts.assetQuote.has(id));
  let correction: CountSpec['correction'];
  if (excluded.length) {
    const held = await excludedEvents(ctx, excluded);
    if (held) {
      correction = {
        rows:
          q.types || q.direction
            ? held.filter((x) => (!q.types || q.types.includes(x.type)) && (!q.direction || x.direction === q.direction))
            : held,
      };
    } else {
      params.excludedAssets = excluded;
      correction = { sql: `e.assetId IN {excludedAssets:Array(UInt64)} AND ${only}` };
    }
  }
  return {
    n: columns.length ? columns.join(' + ') : '0',
    params,
    rawWhere: `e.assetId IN {eligibleAssets:Array(UInt64)} AND ${only}`,
    correction,
  };
}

/** Up to this many current events on ineligible assets are held in memory (excludedEvents); with more, the read takes them back in SQL. */
export const CORRECTION_LIMITS = { maxHeldEvents: 200_000 };

interface ExcludedEvent extends Taken {
  type: string;
  direction: string;
}

/**
 * The current, live events on the given (ineligible) assets by time, per data version (sample.ts
 * heldRows), or null when there are more than CORRECTION_LIMITS.maxHeldEvents: the rolled-up
 * counts less these need no read of the statement table (a second table read and a sentinel per
 * query). Read from the events table's merged part by its asset projection, or with FINAL.
 */
function excludedEvents(ctx: ReadContext, assets: readonly number[]): Promise<readonly ExcludedEvent[] | null> {
  return heldRows(
    ctx,
    `events:${assets.join(',')}`,
    CORRECTION_LIMITS.maxHeldEvents,
    (limit) =>
      currentStatements<{ g: number; t: number; type: string; direction: string }>(
        ctx,
        EVENTS_TABLE,
        'e',
        (from, where) => `
      SELECT e.traderId AS g, toUnixTimestamp64Milli(e.timeOfEvent) AS t, e.type AS type, e.direction AS direction FROM ${from}
      WHERE e.live = 1 AND e.tomb = 0 AND e.assetId IN {excludedAssets:Array(UInt64)} AND ${where} LIMIT {heldLimit:UInt64}`,
        { excludedAssets: assets, heldLimit: limit },
      ).then((r) => r.map((x) => ({ g: Number(x.g), t: Number(x.t), type: x.type, direction: x.direction }))),
    (x) => x.t,
  );
}
