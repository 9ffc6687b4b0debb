import { writtenTo } from '../../../storage/changes.ts';
import { checkIdentifier } from '../../../storage/port.ts';
import { identifier, join, literal, param, type Sql, sql } from '../../../storage/sql.ts';
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
import { currentStatements, FINAL_SETTINGS, forEachHeld, heldRows, mergedParts, union } from './sample.ts';

export { HOUR_MS };
export const WEEK_MS = 7 * DAY_MS;
/** 1970-01-01 was a Thursday: the Monday before it is 3 days earlier. */
const MONDAY_BEFORE_EPOCH_MS = 3 * DAY_MS;

export type Interval = 'hour' | 'day' | 'week';

/** Start of the UTC-aligned bucket holding t (ISO weeks begin on Monday 00:00 UTC); `instant`: t itself. */
export function bucketStart(interval: Interval | 'instant', t: number): number {
  if (interval === 'instant') return t;
  if (interval === 'hour') return Math.floor(t / HOUR_MS) * HOUR_MS;
  if (interval === 'day') return Math.floor(t / DAY_MS) * DAY_MS;
  return Math.floor((t + MONDAY_BEFORE_EPOCH_MS) / WEEK_MS) * WEEK_MS - MONDAY_BEFORE_EPOCH_MS;
}

/** bucketStart in SQL, of an ms column (integer arithmetic: a 32-bit DateTime would wrap after 2106; times are from 1970). */
const BUCKET_SQL: Record<Interval | 'instant', (t: Sql) => Sql> = {
  instant: (t) => t,
  hour: (t) => sql`intDiv(${t}, ${literal(HOUR_MS)}) * ${literal(HOUR_MS)}`,
  day: (t) => sql`intDiv(${t}, ${literal(DAY_MS)}) * ${literal(DAY_MS)}`,
  week: (t) =>
    sql`intDiv(${t} + ${literal(MONDAY_BEFORE_EPOCH_MS)}, ${literal(WEEK_MS)}) * ${literal(WEEK_MS)} - ${literal(MONDAY_BEFORE_EPOCH_MS)}`,
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
 * statement table), whole hours, and with `coarsest` day the whole UTC days between them; with
 * `none`, all of it read from the statement table.
 */
export function segments(start: number, end: number, coarsest: Coarsest): Segments {
  const a = start;
  const b = end + 1;
  if (coarsest === 'none') return { raw: a < b ? [[a, b]] : [], hour: [], day: [] };
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

const OR = sql` OR `;
const UNION_ALL = sql`\nUNION ALL\n`;

/** `column` within any of `ranges` (ms Int64 column), with the bounds as parameters named `${name}N`. */
function inRanges(column: Sql, ranges: readonly Range[], name: string): Sql {
  const each = ranges.map(
    ([from, to], i) => sql`(${column} >= ${param(`${name}${i}a`, 'Int64', from)} AND ${column} < ${param(`${name}${i}b`, 'Int64', to)})`,
  );
  return sql`(${join(each, OR)})`;
}

/** The same on a DateTime64 column: inclusive bounds (the end of 2299 has no next ms in DateTime64). */
function timeInRanges(column: Sql, ranges: readonly Range[], name: string): Sql {
  const each = ranges.map(
    ([from, to], i) =>
      sql`(${column} >= fromUnixTimestamp64Milli(${param(`${name}${i}a`, 'Int64', from)}, 'UTC') AND ${column} <= fromUnixTimestamp64Milli(${param(`${name}${i}b`, 'Int64', to - 1)}, 'UTC'))`,
  );
  return sql`(${join(each, OR)})`;
}

/** The asset ids the events table holds (the ineligible ones among them are few), kept up to date with each commit's. */
const eventAssets = perDataVersion(
  async (store) => {
    const [r] = await store.query<{ assets: number[] }>(`SELECT groupUniqArray(assetId) AS assets FROM ${EVENTS_TABLE}`);
    return (r?.assets ?? []).map(Number);
  },
  {
    // Rows are not taken out but by a compaction (which says no ids): the assets of rows written are added.
    update: (assets, since) => {
      const w = writtenTo(since, EVENTS_TABLE.name);
      return w?.assets ? union(assets, w.assets) : null;
    },
  },
);

export type Coarsest = 'hour' | 'day' | 'none';

export interface CountQuery {
  /** Inclusive bounds (ms) on the event's or message's time. */
  start: number;
  end: number;
  /** The coarsest rolled-up rows to read: `day` when buckets are days or weeks or there are none; `none`: statements alone (short spans). */
  coarsest: Coarsest;
  /** Counts per bucket too (else `b` is 0); `instant`: per ms. */
  bucket?: Interval | 'instant';
  /** Groups counted: only these, or all but these. */
  only?: readonly (number | string)[];
  except?: readonly (number | string)[];
}

interface Kind {
  table: Table;
  alias: string;
  time: Sql;
  /** The rolled-up rows by time, and the same by owner (for a few groups: `only`). */
  rollup: Table;
  byOwner: Table;
  /** The group of a row: a column (expression) of the rolled-up table (alias r) and of the statement table. */
  group: (alias: string) => Sql;
  groupType: 'UInt64' | 'String';
  /** A condition on the owner columns that the table by owner finds by its key, implied by `only`. */
  ownerKey: (only: readonly (number | string)[]) => Sql;
}
const EVENTS: Kind = {
  table: EVENTS_TABLE,
  alias: 'e',
  time: identifier('e.timeOfEvent'),
  rollup: ACTIVITY_EVENTS_TABLE,
  byOwner: ACTIVITY_EVENTS_BY_TRADER_TABLE,
  group: (x) => identifier(`${x}.traderId`),
  groupType: 'UInt64',
  ownerKey: () => sql`1`,
};
const MESSAGES: Kind = {
  table: MESSAGES_TABLE,
  alias: 'm',
  time: identifier('m.writtenAt'),
  rollup: ACTIVITY_MESSAGES_TABLE,
  byOwner: ACTIVITY_MESSAGES_BY_SOURCE_TABLE,
  group: (x) => sourceKeySql(x),
  groupType: 'String',
  ownerKey: (only) => {
    const keys = only.map((k) => parseSourceKey(String(k)));
    const platforms = [...new Set(keys.map((k) => k.platform))];
    const sourceIds = [...new Set(keys.map((k) => k.sourceIdentityId))];
    return sql`r.platform IN ${param('onlyPlatforms', 'Array(String)', platforms)} AND r.sourceIdentityId IN ${param('onlySourceIds', 'Array(String)', sourceIds)}`;
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
 * The earliest and latest time (ms) of any row of a statement table (current or not): a partial
 * hour at an end of a range with nothing stored beyond the bound is read as its whole rolled-up
 * hour. Widened by the dates of the rows each commit writes (rows are not taken out but by a
 * compaction, which says no dates).
 */
const spanOf = (table: Table) => {
  const column = checkIdentifier(table.changes!.time!);
  return perDataVersion(
    async (store) => {
      const [r] = await store.query<{ lo: number | null; hi: number | null }>(
        `SELECT toUnixTimestamp64Milli(min(${column})) AS lo, toUnixTimestamp64Milli(max(${column})) AS hi FROM ${table}`,
      );
      // An empty table (min and max of nothing): no row anywhere.
      return r?.lo == null || r.hi == null || Number(r.lo) > Number(r.hi)
        ? { lo: Number.POSITIVE_INFINITY, hi: Number.NEGATIVE_INFINITY }
        : { lo: Number(r.lo), hi: Number(r.hi) };
    },
    {
      update: (span, since) => {
        const w = writtenTo(since, table.name);
        return w?.times ? { lo: Math.min(span.lo, w.times.lo), hi: Math.max(span.hi, w.times.hi) } : null;
      },
    },
  );
};
const SPANS = new Map([EVENTS_TABLE, MESSAGES_TABLE].map((t) => [t.name, spanOf(t)]));

/** The latest time of any event or message stored (-Infinity: none). */
export async function latestActivity(ctx: ReadContext): Promise<number> {
  const spans = await Promise.all([...SPANS.values()].map((span) => span(ctx)));
  return Math.max(...spans.map((s) => s.hi));
}

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
  q: { start: number; end: number; coarsest: Coarsest },
  span: { lo: number; hi: number },
): { start: number; end: number; whole: Whole[] } {
  let { start, end } = q;
  const whole: Whole[] = [];
  if (q.coarsest === 'none') return { start, end, whole };
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
 * stored beyond it (spanOf) is read as its whole rolled-up day or hour
 * instead (widen); a rolled-up row of those whose counted rows reach past the bound (firstAt,
 * lastAt: a row that landed since) marks the answer (s = 2), and the read runs again with the
 * partial hours read from the statements. `n` is the count of one rolled-up row (a sum of its columns);
 * `rawWhere` what a statement must meet to count, `correction` statements of the whole hours to
 * take back (n -1: events on ineligible assets). Reads of several kinds that need the rolled-up
 * rows alone share one query (a round trip and a pipeline less each).
 */
async function counts(ctx: ReadContext, jobs: readonly (Job | null)[]): Promise<Count<number | string>[][]> {
  const present = jobs.filter((j): j is Job => j !== null);
  if (present.length > 1 && present.every((j) => j.q.coarsest === 'none')) {
    const rows = await statementsTogether(ctx, present);
    return jobs.map((j) => (j ? shape(j.kind, rows.get(j)!) : []));
  }
  const spans = await Promise.all(jobs.map((j) => (j ? SPANS.get(j.kind.table.name)!(ctx) : null)));
  const plans = jobs.map((j, i) => {
    if (!j) return null;
    const { start, end, whole } = widen(j.q, spans[i]!);
    return plan<number | string>(ctx, j.kind, { ...j.q, start, end }, j.spec, whole);
  });
  const shared = await rolledTogether(ctx, plans);
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

/** The rows of the plans that read the rolled-up rows alone, in one query when there are several (each branch tagged). */
async function rolledTogether(ctx: ReadContext, plans: readonly (CountPlan | null)[]): Promise<Map<CountPlan, Row<number | string>[]>> {
  const rolled = plans.filter((p): p is CountPlan & Required<Pick<CountPlan, 'rolled'>> => p?.rolled !== undefined);
  const shared = new Map<CountPlan, Row<number | string>[]>();
  if (rolled.length < 2) return shared;
  const rows = await runFinal<Omit<Row<never>, 'g'> & { k: number; gn: number; gs: string }>(
    ctx,
    join(
      rolled.map((p, k) => p.rolled.sql(k)),
      UNION_ALL,
    ),
  );
  for (const [k, p] of rolled.entries()) {
    const tagged = rows.filter((r) => Number(r.k) === k);
    shared.set(
      p,
      tagged.map((r) => ({ g: p.rolled.text ? r.gs : r.gn, b: r.b, n: r.n, s: r.s })),
    );
  }
  return shared;
}

/**
 * Counts read from the statements alone (short spans by instant), several kinds in one query with
 * FINAL (a round trip and a pipeline less each; live rows are in parts of their own anyway).
 */
async function statementsTogether(ctx: ReadContext, jobs: readonly Job[]): Promise<Map<Job, Row<number | string>[]>> {
  const branches = jobs.flatMap((j, k) => {
    const f = frame(j.kind, j.q, j.spec, []);
    if (!f.seg.raw.length) return [];
    const a = identifier(j.kind.alias);
    const source = { from: sql`${j.kind.table} AS ${a} FINAL`, part: sql`1`, pinned: false };
    const text = j.kind.groupType === 'String';
    return [
      sql`SELECT ${literal(k)} AS k, ${text ? sql`toUInt64(0)` : sql`g`} AS gn, ${text ? sql`g` : sql`''`} AS gs, ${bucketOf(j.q, identifier('t'))} AS b, n
        FROM (${statementBranch(f, source, 1, j.spec.rawWhere, f.seg.raw, 'raw')})`,
    ];
  });
  const rows = branches.length
    ? await runFinal<{ k: number; gn: number; gs: string; b: number; n: number }>(
        ctx,
        sql`SELECT k, gn, gs, b, sum(n) AS n FROM (${join(branches, UNION_ALL)}) GROUP BY k, gn, gs, b`,
      )
    : [];
  return new Map(
    jobs.map((j, k) => [
      j,
      rows.filter((r) => Number(r.k) === k).map((r) => ({ g: j.kind.groupType === 'String' ? r.gs : r.gn, b: r.b, n: r.n, s: 0 })),
    ]),
  );
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
  /** The count of one rolled-up row (a sum of its columns). */
  n: Sql;
  /** What a statement must meet to count. */
  rawWhere: Sql;
  /** Statements of the whole hours to take back: a condition on the statement table, or the rows themselves (in memory, by time). */
  correction?: { sql: Sql } | { rows: readonly Taken[] };
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
  rolled?: { sql: (k: number) => Sql; text: boolean };
  run: () => Promise<Row<G>[]>;
  finish: (rows: Row<G>[]) => Row<G>[];
}

/** A query with the settings of reads with FINAL (sample.ts). */
const runFinal = <R>(ctx: ReadContext, query: Sql): Promise<R[]> => ctx.store.query<R>(`${query.text} ${FINAL_SETTINGS}`, query.params);

/** What the branches of a count's query are made of. */
interface Frame {
  kind: Kind;
  q: CountQuery;
  spec: CountSpec;
  seg: Segments;
  /** The rolled-up rows read, by time or by owner (`FROM` this), when the range has whole hours or days. */
  rolledFrom?: Sql;
  /** 2 for a rolled-up row read whole (widen) that counts something outside the bounds, else 0. */
  flag: Sql;
  /** The whole hours and days: from the first rolled-up row to the end of the last (the correction's range). */
  covered?: Range;
  /** The correction as a condition on the statement table, when it is one. */
  correction?: Sql;
}

/** Where a query reads the statements: the table's merged part (`part` names it), or the whole table with FINAL. */
interface StatementSource {
  from: Sql;
  part: Sql;
  pinned: boolean;
}

function frame(kind: Kind, q: CountQuery, spec: CountSpec, whole: readonly Whole[]): Frame {
  const seg = segments(q.start, q.end, q.coarsest);
  const covered = [...seg.day, ...seg.hour];
  return {
    kind,
    q,
    spec,
    seg,
    rolledFrom: covered.length ? rolledFrom(kind, q, seg) : undefined,
    flag: pastBoundsFlag(kind, whole),
    covered: covered.length ? [Math.min(...covered.map((r) => r[0])), Math.max(...covered.map((r) => r[1]))] : undefined,
    correction: spec.correction && 'sql' in spec.correction ? spec.correction.sql : undefined,
  };
}

/** The groups counted: `expr` among `only` and not among `except` (parameters named after the kind's alias). */
function groupCondition(kind: Kind, q: CountQuery, expr: Sql): Sql {
  const a = kind.alias;
  const type = `Array(${kind.groupType})`;
  const only = q.only ? sql`${expr} IN ${param(`${a}OnlyGroups`, type, q.only)}` : sql`1`;
  const except = q.except?.length ? sql`${expr} NOT IN ${param(`${a}ExceptGroups`, type, q.except)}` : sql`1`;
  return sql`${only} AND ${except}`;
}

/** The rolled-up rows of the whole days and hours of the groups counted, from the table by owner for a few groups. */
function rolledFrom(kind: Kind, q: CountQuery, seg: Segments): Sql {
  const a = kind.alias;
  const grains = [
    ...(seg.day.length ? [sql`(r.grain = 'day' AND ${inRanges(identifier('r.start'), seg.day, `${a}day`)})`] : []),
    ...(seg.hour.length ? [sql`(r.grain = 'hour' AND ${inRanges(identifier('r.start'), seg.hour, `${a}hour`)})`] : []),
  ];
  const byOwner = q.only !== undefined && q.only.length <= BY_OWNER_MAX;
  const owners = byOwner ? sql` AND ${kind.ownerKey(q.only!)}` : sql``;
  return sql`${byOwner ? kind.byOwner : kind.rollup} AS r FINAL
        WHERE (${join(grains, OR)}) AND ${groupCondition(kind, q, kind.group('r'))}${owners}`;
}

/** A row read whole (widen) that counts something outside the bounds (only the side's column is read). */
function pastBoundsFlag(kind: Kind, whole: readonly Whole[]): Sql {
  if (!whole.length) return sql`0`;
  const a = kind.alias;
  const past = whole.map((w, i) => {
    const grain = w.grain === 'day' ? sql`'day'` : sql`'hour'`;
    const beyond = w.side === 'start' ? sql`r.firstAt <` : sql`r.lastAt >`;
    return sql`(r.grain = ${grain} AND r.start = ${param(`${a}whole${i}s`, 'Int64', w.start)} AND r.n > 0 AND ${beyond} ${param(`${a}whole${i}b`, 'Int64', w.bound)})`;
  });
  return sql`if(${join(past, OR)}, 2, 0)`;
}

const bucketOf = (q: CountQuery, t: Sql): Sql => (q.bucket ? BUCKET_SQL[q.bucket](t) : sql`0`);

/** The rolled-up rows' counts, each at its row's start. */
function rolledBranch(f: Frame): Sql {
  return sql`SELECT ${f.kind.group('r')} AS g, r.start AS t, toInt64(${f.spec.n}) AS n, ${f.flag} AS s FROM ${f.rolledFrom!}`;
}

/** The statements that count (+1 each) in `ranges` (the partial hours), or are taken back (-1) in them (the whole hours). */
function statementBranch(f: Frame, source: StatementSource, sign: 1 | -1, where: Sql, ranges: readonly Range[], name: string): Sql {
  const a = f.kind.alias;
  const live = sql`${identifier(`${a}.live`)} = 1 AND ${identifier(`${a}.tomb`)} = 0`;
  return sql`SELECT ${f.kind.group(a)} AS g, toUnixTimestamp64Milli(${f.kind.time}) AS t, toInt64(${literal(sign)}) AS n, 0 AS s FROM ${source.from}
        WHERE ${live} AND ${where} AND ${timeInRanges(f.kind.time, ranges, `${a}${name}`)} AND ${groupCondition(f.kind, f.q, f.kind.group(a))} AND ${source.part}`;
}

/** A row that says the pinned part was still there when the query began (else it read nothing from it). */
function pinnedBranch(f: Frame, source: StatementSource): Sql {
  const none = f.kind.groupType === 'String' ? sql`''` : sql`toUInt64(0)`;
  return sql`SELECT ${none} AS g, toInt64(0) AS t, toInt64(0) AS n, 1 AS s FROM ${source.from} WHERE ${source.part} LIMIT 1`;
}

/** The count's query over the rolled-up rows and the statements: its branches, summed per group and bucket. */
function unionQuery(f: Frame, source: StatementSource): Sql {
  const branches: Sql[] = [];
  if (f.rolledFrom) branches.push(rolledBranch(f));
  if (f.seg.raw.length) branches.push(statementBranch(f, source, 1, f.spec.rawWhere, f.seg.raw, 'raw'));
  if (f.correction && f.covered) branches.push(statementBranch(f, source, -1, f.correction, [f.covered], 'covered'));
  if (source.pinned) branches.push(pinnedBranch(f, source));
  return sql`SELECT g, ${bucketOf(f.q, identifier('t'))} AS b, sum(n) AS n, max(s) AS s FROM (${join(branches, UNION_ALL)})
      GROUP BY g, b`;
}

/**
 * The count's query over the rolled-up rows alone: one GROUP BY, no UNION to gather. With a tag
 * `k`, a branch of a query several kinds share: the group in the column of its type (gn or gs),
 * each grouped by its own type.
 */
function rolledOnlyQuery(f: Frame, k?: number): Sql {
  const group = f.kind.group('r');
  const text = f.kind.groupType === 'String';
  const columns =
    k === undefined
      ? sql`${group} AS g`
      : sql`${literal(k)} AS k, ${text ? sql`toUInt64(0)` : group} AS gn, ${text ? group : sql`''`} AS gs`;
  const groupBy = k === undefined ? sql`g` : text ? sql`gs` : sql`gn`;
  return sql`SELECT ${columns},
        ${bucketOf(f.q, identifier('r.start'))} AS b, sum(toInt64(${f.spec.n})) AS n, max(${f.flag}) AS s
      FROM ${f.rolledFrom!} GROUP BY ${groupBy}, b`;
}

/** The count read with the statements: from the merged part while it is there (its sentinel row says so), else with FINAL. */
async function readWithStatements<G>(ctx: ReadContext, f: Frame): Promise<Row<G>[]> {
  const a = identifier(f.kind.alias);
  const part = (await mergedParts(ctx)).get(f.kind.table.name);
  if (part !== undefined) {
    const source = {
      from: sql`${f.kind.table} AS ${a}`,
      part: sql`${a}._part = ${param('mergedPart', 'String', part)}`,
      pinned: true,
    };
    const rows = await runFinal<Row<G>>(ctx, unionQuery(f, source));
    if (rows.some((r) => Number(r.s) === 1)) return rows;
  }
  return runFinal<Row<G>>(ctx, unionQuery(f, { from: sql`${f.kind.table} AS ${a} FINAL`, part: sql`1`, pinned: false }));
}

function plan<G>(ctx: ReadContext, kind: Kind, q: CountQuery, spec: CountSpec, whole: readonly Whole[]): CountPlan<G> {
  const f = frame(kind, q, spec, whole);
  const held = spec.correction && 'rows' in spec.correction ? spec.correction.rows : undefined;
  const covered = f.covered;
  const finish = (rows: Row<G>[]): Row<G>[] => (held && covered ? takeBack(rows, held, covered, q) : rows);
  if (!f.rolledFrom && !f.seg.raw.length) return { run: async () => [], finish };
  const readsStatements = f.seg.raw.length > 0 || (f.correction !== undefined && f.covered !== undefined);
  if (!readsStatements) {
    return {
      rolled: { sql: (k) => rolledOnlyQuery(f, k), text: kind.groupType === 'String' },
      run: () => runFinal<Row<G>>(ctx, rolledOnlyQuery(f)),
      finish,
    };
  }
  return { finish, run: () => readWithStatements<G>(ctx, f) };
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

const MESSAGE_SPEC: CountSpec = { n: sql`r.n`, rawWhere: sql`1` };

/** What a statement must meet to count as an event of eventCounts, and the ineligible-asset events to take back. */
async function eventSpec(ctx: ReadContext, facts: Facts, q: EventCountQuery): Promise<CountSpec> {
  const counted = EVENT_COUNTS.filter((c) => (!q.types || q.types.includes(c.type)) && (!q.direction || c.direction === q.direction));
  const columns = counted.length === EVENT_COUNTS.length ? [sql`r.n`] : counted.map((c) => identifier(`r.${c.column}`));
  const filters: Sql[] = [];
  if (q.types) filters.push(sql`e.type IN ${param('eventTypes', 'Array(String)', q.types)}`);
  if (q.direction) filters.push(sql`e.direction = ${param('direction', 'String', q.direction)}`);
  const only = join(filters, sql` AND `, sql`1`);
  return {
    n: join(columns, sql` + `, sql`0`),
    rawWhere: sql`e.assetId IN ${param('eligibleAssets', 'Array(UInt64)', facts.assetIds)} AND ${only}`,
    // Statements alone count nothing on ineligible assets (rawWhere): only the rolled-up rows need taking back.
    correction: q.coarsest === 'none' ? undefined : await eventCorrection(ctx, facts, q, only),
  };
}

/**
 * The rolled-up rows count events on every asset: those on assets that are not eligible are taken
 * back, held in memory when they are few (excludedEvents), else as a condition on the statements.
 */
async function eventCorrection(ctx: ReadContext, facts: Facts, q: EventCountQuery, only: Sql): Promise<CountSpec['correction']> {
  const excluded = (await eventAssets(ctx)).filter((id) => !facts.assetQuote.has(id));
  if (!excluded.length) return undefined;
  const held = await excludedEvents(ctx, excluded);
  if (!held) return { sql: sql`e.assetId IN ${param('excludedAssets', 'Array(UInt64)', excluded)} AND ${only}` };
  const counted = (x: ExcludedEvent) => (!q.types || q.types.includes(x.type)) && (!q.direction || x.direction === q.direction);
  return { rows: q.types || q.direction ? held.filter(counted) : held };
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
    { key: `events:${assets.join(',')}`, table: EVENTS_TABLE, assets },
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
