import type { DirectionBias, TimeBasedPerformance } from '../../../schemas/api/analytics.ts';
import { WINDOWS, type WindowName } from '../../../schemas/api/resources.ts';
import { writtenTo } from '../../../storage/changes.ts';
import type { Store } from '../../../storage/port.ts';
import type { Table } from '../../../storage/table.ts';
import { MESSAGES_TABLE } from '../../../storage/tables/messages.ts';
import { POSITION_SAMPLES_TABLE } from '../../../storage/tables/performance.ts';
import { PRICES_TABLE } from '../../../storage/tables/prices.ts';
import { EVENTS_TABLE } from '../../../storage/tables/trading.ts';
import { earliest, keptFirstAfter } from '../clock.ts';
import { keptUntilChanged, perDataVersion, type ReadContext, type Seen } from '../context.ts';
import { type Facts, permits, signalTraders } from '../facts.ts';
import { type PageFacts, Where } from '../list.ts';
import type { Principal } from '../principal.ts';
import { DAY_MS, type Window } from '../window.ts';
import { keptGroups, onlyGroups } from './kept-groups.ts';

/**
 * The sample of the analytics reads (README "Analytics reads"): live positions on live assets with
 * an active market, of live, signal-visible traders, opened within the bounds and not before the
 * account's history window. Read from position_samples (projectors/performance: one row per
 * position and window, by window and month, ordered by (traderId, assetId, openAt)) with FINAL: the newest
 * row of each key is the truth, and WHERE applies after FINAL. Partitions in one part are read
 * without merging (do_not_merge_across_partitions_select_final), so FINAL costs only where the
 * projector has written since the last compaction. Trader eligibility (live, visible, platform)
 * is a parameter where the read names its traders, and a check of each trader's group otherwise.
 */
export const FINAL_SETTINGS = 'SETTINGS do_not_merge_across_partitions_select_final = 1';

/**
 * The events or messages statement table's one part, when it is a merged one (level > 0), per data
 * version. A merged part of a ReplacingMergeTree holds one row per sorting key, the newest, so a
 * read of that part alone without FINAL equals FINAL over the table as the part stands, and may use
 * the table's projections (by trader, by asset), which FINAL cannot. Only an insert can add a part
 * (and a second part is what a merge needs), and every insert moves the data version.
 */
export const mergedParts = perDataVersion(
  async (store) => {
    const rows = await store.query<{ table: string; name: string; level: number }>(
      `
    SELECT table, name, level FROM system.parts WHERE database = {db:String} AND table IN {tables:Array(String)} AND active`,
      { db: store.database, tables: [EVENTS_TABLE.name, MESSAGES_TABLE.name] },
    );
    const out = new Map<string, string>();
    for (const table of [EVENTS_TABLE.name, MESSAGES_TABLE.name]) {
      const parts = rows.filter((r) => r.table === table);
      if (parts.length === 1 && Number(parts[0]!.level) > 0) out.set(table, parts[0]!.name);
    }
    return out;
  },
  // Read from system.parts: kept until a commit (or a compaction) writes either table.
  { tables: [EVENTS_TABLE, MESSAGES_TABLE] },
);

/**
 * An aggregate over the current statements of the events or messages table: `sql(from, where)`
 * builds it from a FROM clause (the table aliased `alias`) and a condition to AND into its WHERE.
 * Read from the table's one merged part when it has one (mergedParts), else with FINAL. A read
 * pinned to a part that a merge has replaced since finds no row at all, and so does an aggregate
 * with nothing to count: an empty answer is read again with FINAL.
 */
export async function currentStatements<R>(
  ctx: ReadContext,
  table: Table,
  alias: string,
  sql: (from: string, where: string) => string,
  params: Record<string, unknown>,
): Promise<R[]> {
  const part = (await mergedParts(ctx)).get(table.name);
  if (part !== undefined) {
    const rows = await ctx.store.query<R>(sql(`${table} AS ${alias}`, `${alias}._part = {mergedPart:String}`), {
      ...params,
      mergedPart: part,
    });
    if (rows.length) return rows;
  }
  return ctx.store.query<R>(`${sql(`${table} AS ${alias} FINAL`, '1')} ${FINAL_SETTINGS}`, params);
}

/** The earliest time the account may read (its history window), or null. */
function historyStart(p: Principal, now: number): number | null {
  return p.historyWindowDays == null ? null : now - p.historyWindowDays * DAY_MS;
}

/** Bounds with the start clamped forward to the account's history window (null: none). */
export function clampToHistory<W extends Window>(w: W, p: Principal, now: number): W {
  const floor = historyStart(p, now);
  return floor !== null && (w.start === null || w.start < floor) ? { ...w, start: floor } : w;
}

/** Whether a trader's rows may be counted: live, signal-visible, and on one of `platforms` when given. */
export function traderEligible(facts: Facts, p: Principal, traderId: number, platforms?: readonly string[]): boolean {
  const platform = facts.traderPlatform.get(traderId);
  if (platform === undefined || !permits(p.signalVisibility, traderId, platform)) return false;
  return !platforms || platforms.includes(platform);
}

export interface SampleFilter {
  /** Bounds on openAt, inclusive (already clamped as the read requires). */
  window: Window;
  traderIds?: readonly number[];
  assetIds?: readonly number[];
  direction?: string;
}

/**
 * The asset and trader ids position_samples holds, kept up to date with each commit: the sample's
 * eligibility is then the few ids present that are not eligible (NOT IN), or no condition at all,
 * instead of a set of every eligible id that each row is looked up in (15-20 ms a scan on the
 * large seed).
 */
const presentIds = perDataVersion(
  async (store) => {
    const [r] = await store.query<{ assets: number[]; traders: number[] }>(
      `SELECT groupUniqArray(assetId) AS assets, groupUniqArray(traderId) AS traders FROM ${POSITION_SAMPLES_TABLE} WHERE window = '1D'`,
    );
    return { assets: (r?.assets ?? []).map(Number), traders: (r?.traders ?? []).map(Number) };
  },
  {
    // Rows are not taken out but by a compaction (which says no ids): the ids of rows written are
    // added (of any window: an id too many costs a longer NOT IN, never a wrong count).
    update: (present, since) => {
      const w = writtenTo(since, POSITION_SAMPLES_TABLE.name);
      return w?.assets && w.traders ? { assets: union(present.assets, w.assets), traders: union(present.traders, w.traders) } : null;
    },
  },
);

/** The ids of `a` and those of `b` not in it (a itself when there are none). */
export function union(a: readonly number[], b: ReadonlySet<number>): number[] {
  const have = new Set(a);
  const more = [...b].filter((id) => !have.has(id));
  return more.length ? [...a, ...more] : (a as number[]);
}

type InCondition = (where: Where, name: string, ids: readonly number[], negate: boolean) => void;
const columnIn =
  (column: string): InCondition =>
  (where, name, ids, negate) => {
    where.add(`${column} ${negate ? 'NOT IN' : 'IN'} {${name}:Array(UInt64)}`, { [name]: ids });
  };

/** A set condition as the cheaper of `IN allowed` and `NOT IN` the present ids that are not allowed (none: no condition). */
function cheaperInCondition(
  where: Where,
  cond: InCondition,
  name: string,
  allowed: readonly number[],
  present: readonly number[],
  ok: (id: number) => boolean,
): void {
  const excluded = present.filter((id) => !ok(id));
  if (!excluded.length) return;
  if (excluded.length <= allowed.length) cond(where, name, excluded, true);
  else cond(where, name, allowed, false);
}

const low16 = (id: number) => id % 65536;

/**
 * `p.assetId IN ids` (or NOT IN) as the same test of `p.assetLow` (its low 16 bits: 2 bytes a row
 * to read instead of 8) when that is exact: no asset present in the sample but outside `ids`
 * shares the low bits of one inside.
 */
const assetIn =
  (present: readonly number[]): InCondition =>
  (where, name, ids, negate) => {
    const inside = new Set(ids);
    const lows = new Set(ids.map(low16));
    if (present.some((a) => !inside.has(a) && lows.has(low16(a)))) return columnIn('p.assetId')(where, name, ids, negate);
    where.add(`p.assetLow ${negate ? 'NOT IN' : 'IN'} {${name}:Array(UInt16)}`, { [name]: [...lows] });
  };

/**
 * WHERE of the sample on position_samples aliased `p` (history window applied here too): live
 * rows on eligible assets (and of the read's own assets); `traders`: also only live, signal-visible
 * traders (reads that aggregate per trader check that per group instead).
 */
export async function sampleWhere(
  ctx: ReadContext,
  facts: Facts,
  f: SampleFilter & { traders?: boolean; everyAsset?: boolean },
): Promise<Where> {
  const { start, end } = clampToHistory(f.window, ctx.principal, ctx.now.getTime());
  const where = new Where().add('p.live = 1');
  const present = await presentIds(ctx);
  // The read's own assets that are eligible: one set, and a range of the key per asset; else every eligible asset.
  if (f.assetIds)
    assetIn(present.assets)(
      where,
      'sampleAssets',
      f.assetIds.filter((a) => facts.assetQuote.has(a)),
      false,
    );
  else if (!f.everyAsset)
    cheaperInCondition(where, assetIn(present.assets), 'eligibleAssets', facts.assetIds, present.assets, (a) => facts.assetQuote.has(a));
  if (f.traders)
    cheaperInCondition(where, columnIn('p.traderId'), 'eligibleTraders', signalTraders(facts, ctx.principal), present.traders, (t) =>
      traderEligible(facts, ctx.principal, t),
    );
  // The read's own traders first: their ranges of the key, before any other column is read (a
  // third off trader stats for the 200 busiest traders on the large seed).
  if (f.traderIds) where.prewhere('p.traderId IN {sampleTraders:Array(UInt64)}', { sampleTraders: f.traderIds });
  return where
    .when(start ?? undefined, 'p.openAt >= {sampleStart:Int64}', 'sampleStart')
    .when(end ?? undefined, 'p.openAt <= {sampleEnd:Int64}', 'sampleEnd')
    .when(f.direction, 'p.direction = {sampleDirection:String}', 'sampleDirection');
}

/** Aggregates of one group's sample for one window, as the SQL below returns them. */
export interface WindowAggregate {
  window: WindowName;
  sampled: number;
  scored: number;
  mean: number | null;
  median: number | null;
  wins: number;
  sd: number | null;
  longs: number;
}

/**
 * The latest price sample time stored (ms; deleted samples included: a sample's row is never
 * removed, only its newer versions kept), per data version. A `ready` evaluation had a forward
 * sample at or after its evaluation time, and the projector stores prices before it evaluates
 * from them, so while serverTime is at or after this every `ready` row has come of age.
 */
const latestPriceMemo = perDataVersion(
  async (store) => {
    const [r] = await store.query<{ m: number | null }>(`SELECT max(toUnixTimestamp64Milli(at)) AS m FROM ${PRICES_TABLE}`);
    return Number(r?.m ?? 0);
  },
  {
    // Then it follows the commits: each says the latest sample time it wrote (issue 26: no read per commit).
    update: (m, since) => {
      const hi = writtenTo(since, PRICES_TABLE.name)?.times?.hi;
      return hi !== undefined && Number.isFinite(hi) ? Math.max(m, hi) : null;
    },
  },
);
/**
 * latestPriceAt without making the read depend on the prices table (ReadContext.reads): it only
 * decides whether the age check is needed (the answer is the same either way, a function of the
 * evaluation rows), and whether a cached answer needs an instant at which a row comes of age
 * (sampleClock): a price that can make a row `ready` writes that row, and a commit that writes
 * position_samples ends the answers read from it. So a price-only commit leaves them cached.
 */
const latestPriceAt = (ctx: ReadContext): Promise<number> => latestPriceMemo({ ...ctx, reads: undefined });

/**
 * Whether a `ready` row may still come of age after serverTime (some price sample is stored after
 * it): only then does the clock change which rows are scored (performanceSql's `checkAge`).
 */
export const mayComeOfAge = async (ctx: ReadContext): Promise<boolean> => ctx.now.getTime() < (await latestPriceAt(ctx));

/**
 * When the clock may change an aggregate over the sample `where` (position_samples aliased `p`),
 * for the read cache (PageFacts.later): with `ripen`, the first evaluation time after serverTime
 * of a `ready` row (it is scored from then on); with `lagMs` (a start that trails serverTime by
 * that much: the account's history window), the instant the oldest row leaves (leavesAt). One
 * query without FINAL: older versions of a row count too, which can only make either instant
 * earlier. Undefined when neither can happen.
 */
export function sampleClock(
  where: Where,
  opts: { windows?: readonly WindowName[]; ripen: boolean; lagMs: number | null },
): PageFacts['later'] {
  if (!opts.ripen && opts.lagMs === null) return undefined;
  const windows = opts.windows && opts.windows.length < WINDOWS.length ? opts.windows : undefined;
  return async (store, now) => {
    const [r] = await store.query<{ ripens: number | string | null; oldest: number | string | null }>(
      `
      SELECT minIfOrNull(p.evaluatedAt, p.isReady AND p.evaluatedAt > {clockNow:Int64}) AS ripens, minOrNull(p.openAt) AS oldest
      FROM ${POSITION_SAMPLES_TABLE} AS p ${where.prewhereSql}
      WHERE ${where.sql}${windows ? ' AND p.window IN {clockWindows:Array(String)}' : ''}`,
      { ...where.params, clockNow: now, ...(windows ? { clockWindows: windows } : {}) },
    );
    const ripens = opts.ripen && r?.ripens != null ? Number(r.ripens) : null;
    const leaves = opts.lagMs !== null && r?.oldest != null ? Number(r.oldest) + opts.lagMs + 1 : null;
    return earliest(ripens, leaves);
  };
}

/**
 * The first openAt after `now` (ms) of any row of position_samples in `window`, or null: a sample
 * whose end is serverTime takes that position in when the clock reaches it. The partitions by
 * month of openAt keep the read to the months from now on. Kept with `seen` (keptFirstAfter).
 */
export function firstOpenAfter(store: Store, window: WindowName, now: number, seen?: Seen): Promise<number | null> {
  return keptFirstAfter(store, { table: POSITION_SAMPLES_TABLE, column: 'openAt', key: window }, now, seen, async () => {
    const [r] = await store.query<{ t: number | string | null }>(
      `SELECT minOrNull(openAt) AS t FROM ${POSITION_SAMPLES_TABLE} WHERE window = {w:String} AND openAt > {now:Int64}`,
      { w: window, now },
    );
    return r?.t != null ? Number(r.t) : null;
  });
}

/**
 * The first openAt at or after `start` (and at or before `end`, when given) of any row of
 * position_samples in `window`, or null: the first to leave a sample whose start trails the clock.
 */
export async function firstOpenFrom(store: Store, window: WindowName, start: number, end: number | null): Promise<number | null> {
  const [r] = await store.query<{ t: number | string | null }>(
    `SELECT minOrNull(openAt) AS t FROM ${POSITION_SAMPLES_TABLE}
     WHERE window = {w:String} AND openAt >= {start:Int64}${end === null ? '' : ' AND openAt <= {end:Int64}'}`,
    { w: window, start, ...(end === null ? {} : { end }) },
  );
  return r?.t != null ? Number(r.t) : null;
}

/**
 * Per group and window: sampled and scored counts, and the moments of the scored returns (a
 * window is scored when `ready` and come of age at serverTime). `groupBy` is a column of `p`.
 * `countsOnly`: the positions and their directions, no returns (activity rankings). `checkAge`:
 * whether a `ready` row may still be too young at serverTime (else its evaluation time, a column
 * the size of the return's, is not read). `ripens`: per group, the first instant after serverTime
 * a `ready` row comes of age, and the last one at or before it (`ripened`); `opened`: the latest
 * openAt (the clock instants that kept aggregates hold between, keptGroups).
 */
export function performanceSql(
  where: Where,
  groupBy: string,
  {
    windows = WINDOWS,
    countsOnly = false,
    checkAge = true,
    ripens = false,
    opened = false,
  }: { windows?: readonly WindowName[]; countsOnly?: boolean; checkAge?: boolean; ripens?: boolean; opened?: boolean } = {},
): { sql: string; params: Record<string, unknown> } {
  const moments = countsOnly
    ? '0 AS scored, NULL AS mean, NULL AS median, 0 AS wins, NULL AS sd'
    : 'countIf(ready) AS scored, avgIf(r, ready) AS mean, quantileExactInclusiveIf(0.5)(r, ready) AS median, countIf(ready AND r > 0) AS wins, stddevSampStableIf(r, ready) AS sd';
  // The group's first `ready` row still too young at serverTime comes of age at its evaluation time.
  const ripen =
    (ripens
      ? ', minIfOrNull(p.evaluatedAt, p.isReady AND p.evaluatedAt > {now:Int64}) AS ripens, maxIfOrNull(p.evaluatedAt, p.isReady AND p.evaluatedAt <= {now:Int64}) AS ripened'
      : '') + (opened ? ', max(p.openAt) AS opened' : '');
  // One flat GROUP BY (a subquery to name `r` and `ready` cost a twentieth of trader stats).
  return {
    sql: `
      WITH p.readyReturn AS r, p.isReady${checkAge ? ' AND p.evaluatedAt <= {now:Int64}' : ''} AS ready
      SELECT p.${groupBy} AS g, p.window AS window, count() AS sampled, ${moments}, countIf(p.direction = 'long') AS longs${ripen}
      FROM ${POSITION_SAMPLES_TABLE} AS p FINAL ${where.prewhereSql}
      WHERE ${where.sql}${windows.length < WINDOWS.length ? ' AND p.window IN {windows:Array(String)}' : ''}
      GROUP BY g, window
      ${FINAL_SETTINGS}`,
    params: { ...where.params, ...(windows.length < WINDOWS.length ? { windows } : {}) },
  };
}

type Groups = Map<number, Map<WindowName, WindowAggregate>>;

/**
 * A group's clock instants (performanceSql's `ripens` and `opened`): the first after serverTime
 * (of any window, and per window in `ripensIn`), and the last at or before it.
 */
interface GroupClock {
  ripens: number;
  ripensIn: Map<WindowName, number>;
  since: number;
}

/** Runs performanceSql and indexes the aggregates by group, then window; `clock` collects each group's GroupClock. */
async function readGroups(
  ctx: ReadContext,
  q: { sql: string; params: Record<string, unknown> },
  now: number,
  clock?: Map<number, GroupClock>,
): Promise<Groups> {
  type Instant = number | string | null | undefined;
  const rows = await ctx.store.query<WindowAggregate & { g: number; ripens?: Instant; ripened?: Instant; opened?: Instant }>(q.sql, {
    ...q.params,
    now,
  });
  const out: Groups = new Map();
  for (const r of rows) {
    const g = Number(r.g);
    let m = out.get(g);
    if (!m) out.set(g, (m = new Map()));
    const { ripens, ripened, opened, ...agg } = r;
    m.set(r.window, { ...agg, sampled: Number(r.sampled), scored: Number(r.scored), wins: Number(r.wins), longs: Number(r.longs) });
    if (clock) {
      const c = clock.get(g) ?? { ripens: Number.POSITIVE_INFINITY, ripensIn: new Map(), since: Number.NEGATIVE_INFINITY };
      if (ripens != null) {
        c.ripens = Math.min(c.ripens, Number(ripens));
        c.ripensIn.set(r.window, Number(ripens));
      }
      for (const t of [ripened, opened]) if (t != null) c.since = Math.max(c.since, Number(t));
      clock.set(g, c);
    }
  }
  return out;
}

/** Runs performanceSql and indexes the aggregates by group, then window. */
export async function performanceByGroup(
  ctx: ReadContext,
  where: Where,
  groupBy: string,
  { windows = WINDOWS, countsOnly = false }: { windows?: readonly WindowName[]; countsOnly?: boolean } = {},
): Promise<Groups> {
  const now = ctx.now.getTime();
  const q = performanceSql(where, groupBy, { windows, countsOnly, checkAge: countsOnly ? false : now < (await latestPriceAt(ctx)) });
  return readGroups(ctx, q, now);
}

/**
 * The per-trader aggregates of one sample, kept from one request to the next (TraderMemo), and
 * when they may change with the clock alone.
 */
export interface TraderAggregates {
  groups: Groups;
  /**
   * The first evaluation time after serverTime of a `ready` row of the sample (Infinity: none), when
   * it is known from the aggregates themselves (the sample's start does not trail the clock).
   */
  ripens?: number;
  /** The same per trader (absent: none of its rows), when known. */
  ripensBy?: ReadonlyMap<number, number>;
  /** The same per window (absent: none of its rows), when known. */
  ripensIn?: ReadonlyMap<WindowName, number>;
}

/**
 * A trader's aggregates as kept: per window, the first instant one of its `ready` rows comes of age
 * (Infinity: none), and the last instant before the clock it read them at that the clock changed
 * them (-Infinity: none).
 */
interface TraderGroup extends GroupClock {
  windows: Map<WindowName, WindowAggregate>;
}

/**
 * performanceByGroup by trader, for rankings and trader stats, kept across requests and commits
 * (keptGroups): every window with every figure, so that rankings of any window and metric share it
 * and a commit has its traders read again once (issue 26: once per window and kind of metric
 * before), and only the traders it wrote into position_samples (one range of the table's key each)
 * instead of the whole sample (under live ingest, every trade commit ended the 18 rankings of the
 * default window, each a scan of the sample). When a `ready` row comes of age, its trader is read
 * again; all of them when, with `endAtNow` (the sample ends at serverTime), a row dated after what
 * is kept enters. Not kept where the sample's start trails the clock (the account's history
 * window). A request that cannot take
 * what is kept reads for itself only its `windows` (and with `countsOnly`, no returns), and with
 * `need` (trader stats: the traders asked for) only those traders.
 */
export async function performanceByTrader(
  ctx: ReadContext,
  where: Where,
  {
    windows = WINDOWS,
    countsOnly = false,
    endAtNow,
    need,
  }: { windows?: readonly WindowName[]; countsOnly?: boolean; endAtNow: boolean; need?: readonly number[] },
): Promise<TraderAggregates> {
  const now = ctx.now.getTime();
  // What is kept checks each row's age whatever the latest price (a price after serverTime would
  // otherwise make it another question), and says when the first `ready` row comes of age.
  const sqlOf = (w: Where) => performanceSql(w, 'traderId', { checkAge: true, ripens: true, opened: endAtNow });
  const q = sqlOf(where);
  /** With `endAtNow`, the first position after `at` in any window (it enters the sample then); else Infinity. */
  const firstEntering = async (at: number, seen: Seen): Promise<number> => {
    let first = Number.POSITIVE_INFINITY;
    if (endAtNow)
      for (const w of WINDOWS) first = Math.min(first, (await firstOpenAfter(ctx.store, w, at, seen)) ?? Number.POSITIVE_INFINITY);
    return first;
  };
  // The sample's end is serverTime's here: the key holds every parameter but that.
  const { sampleEnd: _end, ...fixed } = q.params;
  const kept =
    ctx.principal.historyWindowDays == null
      ? await keptGroups<TraderGroup>(ctx, {
          key: `${q.sql}\n${JSON.stringify(endAtNow ? fixed : q.params)}`,
          table: POSITION_SAMPLES_TABLE,
          by: 'traders',
          read: async (ids) => {
            const clock = new Map<number, GroupClock>();
            const groups = await readGroups(ctx, ids ? sqlOf(onlyGroups(where, 'p.traderId', 'patchTraders', ids)) : q, now, clock);
            return new Map([...groups].map(([t, windows]) => [t, { windows, ...clock.get(t)! }]));
          },
          // A request whose clock is behind the one read at, but not behind the last `ready` row
          // coming of age nor (ending at serverTime) the last position opened, has the same
          // figures (issue 26: concurrent requests behind a refresh each read every trader).
          from: (groups) => {
            let since = Number.NEGATIVE_INFINITY;
            for (const g of groups.values()) since = Math.max(since, g.since);
            return since;
          },
          until: async (groups, at, seen) => {
            let until = await firstEntering(at, seen);
            for (const g of groups.values()) until = Math.min(until, g.ripens);
            return until;
          },
          // A trader's figures change with the clock only when one of its own `ready` rows comes of
          // age: those traders are read again; a position entering a sample that ends at serverTime
          // may be any trader's (every trader is read again).
          due: async (groups, at, now, seen) => {
            if ((await firstEntering(at, seen)) <= now) return null;
            const ids: number[] = [];
            for (const [t, g] of groups) if (g.ripens <= now) ids.push(t);
            return ids;
          },
        })
      : null;
  if (!kept) {
    const checkAge = countsOnly ? false : now < (await latestPriceAt(ctx));
    const only = need ? onlyGroups(where, 'p.traderId', 'needTraders', need) : where;
    return { groups: await readGroups(ctx, performanceSql(only, 'traderId', { windows, countsOnly, checkAge }), now) };
  }
  // The callers' view, made once per version of what is kept.
  if (!kept.view) {
    const groups: Groups = new Map();
    const ripensBy = new Map<number, number>();
    const ripensIn = new Map<WindowName, number>();
    let first = Number.POSITIVE_INFINITY;
    for (const [t, g] of kept.groups) {
      groups.set(t, g.windows);
      if (g.ripens !== Number.POSITIVE_INFINITY) ripensBy.set(t, g.ripens);
      first = Math.min(first, g.ripens);
      for (const [w, at] of g.ripensIn) ripensIn.set(w, Math.min(ripensIn.get(w) ?? Number.POSITIVE_INFINITY, at));
    }
    kept.view = { groups, ripens: first, ripensBy, ripensIn } satisfies TraderAggregates;
  }
  return kept.view as TraderAggregates;
}

/** The contract's timeBasedPerformance of an aggregate (metrics null when nothing is scored). */
export function timeBasedPerformance(window: WindowName, a: WindowAggregate | undefined): TimeBasedPerformance {
  const sampled = a?.sampled ?? 0;
  const scored = a?.scored ?? 0;
  return {
    window,
    averageReturnPercentage: averageReturnPercentage(a),
    medianReturnPercentage: medianReturnPercentage(a),
    winRatePercentage: winRatePercentage(a),
    sharpeRatio: sharpeRatio(a),
    positionsCount: scored,
    coverage: { sampledPositionsCount: sampled, scoredPositionsCount: scored, ratio: sampled ? scored / sampled : null },
  };
}

// timeBasedPerformance's metrics one by one (rankings compare them without making the object).
const isScored = (a: WindowAggregate | undefined): a is WindowAggregate => a !== undefined && a.scored > 0;
export const averageReturnPercentage = (a: WindowAggregate | undefined): number | null => (isScored(a) ? a.mean : null);
export const medianReturnPercentage = (a: WindowAggregate | undefined): number | null => (isScored(a) ? a.median : null);
export const winRatePercentage = (a: WindowAggregate | undefined): number | null => (isScored(a) ? (a.wins / a.scored) * 100 : null);
export const sharpeRatio = (a: WindowAggregate | undefined): number | null =>
  isScored(a) && a.scored >= 2 && a.sd !== null && a.sd !== 0 && a.mean !== null ? a.mean / a.sd : null;

/** Long/short split with its label: long or short at 60 % or more, mixed below, none without positions. */
export function directionBias(longCount: number, shortCount: number): DirectionBias {
  const n = longCount + shortCount;
  const longPercentage = n ? (longCount / n) * 100 : 0;
  const shortPercentage = n ? (shortCount / n) * 100 : 0;
  const label = !n ? 'none' : longCount * 10 >= n * 6 ? 'long' : shortCount * 10 >= n * 6 ? 'short' : 'mixed';
  return { label, longCount, shortCount, longPercentage, shortPercentage };
}

/**
 * Rows a read takes back in memory instead of excluding them in its query (positions or events on
 * ineligible assets: few, and an asset condition reads a column of every row), loaded once per
 * `key` until a commit touches the assets they are on in `table` (any asset, for a table whose
 * changes do not say which), ordered by `time`; null when there are more than `max` (the read
 * then excludes them in SQL). `load(limit)` reads at most `limit` rows of `table` on `assets`.
 */
export function heldRows<R>(
  ctx: ReadContext,
  held: { key: string; table: Table; assets: readonly number[] },
  max: number,
  load: (limit: number) => Promise<R[]>,
  time: (r: R) => number,
): Promise<readonly R[] | null> {
  const deps = { tables: new Set([held.table.name]), traders: null, assets: held.table.changes?.asset ? held.assets : null };
  return keptUntilChanged(ctx, `held:${held.key}/${max}`, deps, () =>
    load(max + 1).then((r) => (r.length > max ? null : r.sort((x, y) => time(x) - time(y)))),
  );
}

/** Calls `f` on each held row (ordered by `time`) with from <= time < to: one run of them, found by a binary search. */
export function forEachHeld<R>(rows: readonly R[], time: (r: R) => number, from: number, to: number, f: (r: R) => void): void {
  let lo = 0;
  let hi = rows.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (time(rows[mid]!) < from) lo = mid + 1;
    else hi = mid;
  }
  for (let i = lo; i < rows.length && time(rows[i]!) < to; i++) f(rows[i]!);
}

/** Up to this many sample positions on ineligible assets are held in memory; with more, counts exclude them in SQL. */
export const SAMPLE_LIMITS = { maxHeldPositions: 100_000 };

/** The live 1D sample rows (a row per position) on the given assets. */
const ineligiblePositions = (ctx: ReadContext, assets: readonly number[]) =>
  heldRows(
    ctx,
    { key: `positions:${assets.join(',')}`, table: POSITION_SAMPLES_TABLE, assets },
    SAMPLE_LIMITS.maxHeldPositions,
    (limit) =>
      ctx.store
        .query<{ traderId: number; openAt: number }>(
          `
    SELECT p.traderId AS traderId, p.openAt AS openAt FROM ${POSITION_SAMPLES_TABLE} AS p FINAL
    WHERE p.live = 1 AND p.window = '1D' AND p.assetId IN {heldAssets:Array(UInt64)} LIMIT {heldLimit:UInt64} ${FINAL_SETTINGS}`,
          { heldAssets: assets, heldLimit: limit },
        )
        .then((r) => r.map((x) => ({ traderId: Number(x.traderId), openAt: Number(x.openAt) }))),
    (r) => r.openAt,
  );

/**
 * Sample positions per trader (trader activity, v1's tradeCount): one aggregate over one window's
 * evaluation rows, a row per position. Without assetIds, the positions on ineligible assets are
 * taken back in memory (ineligiblePositions) rather than excluded by the query: an asset condition
 * reads the assetId column of every row, about half the query on the large seed. Every trader's
 * counts (no assets, traders or direction, no history window) are kept across requests and
 * commits (keptGroups): a commit has only the traders it wrote into position_samples counted again.
 */
export async function positionCounts(
  ctx: ReadContext,
  facts: Facts,
  f: SampleFilter & { traders?: boolean },
): Promise<Map<number, number>> {
  const excluded = f.assetIds ? [] : (await presentIds(ctx)).assets.filter((a) => !facts.assetQuote.has(a));
  const held = excluded.length && !f.direction ? await ineligiblePositions(ctx, excluded) : null;
  const where = await sampleWhere(ctx, facts, held ? { ...f, everyAsset: true } : f);
  if (!f.assetIds && !f.traderIds && !f.direction && ctx.principal.historyWindowDays == null) {
    const kept = await keptGroups<number>(ctx, {
      key: JSON.stringify(['positionCounts', where.pre, where.sql, where.params, held ? excluded : null]),
      table: POSITION_SAMPLES_TABLE,
      by: 'traders',
      read: (ids) => countedPositions(ctx, f, ids ? onlyGroups(where, 'p.traderId', 'patchTraders', ids) : where, held),
      // Bounds given or none, no history window: no count moves with the clock.
      until: async () => Number.POSITIVE_INFINITY,
      from: () => Number.NEGATIVE_INFINITY,
    });
    if (kept) return kept.groups;
  }
  return countedPositions(ctx, f, where, held);
}

/** The sample positions per trader of `where`, less the `held` positions on ineligible assets when the query counts every asset. */
async function countedPositions(
  ctx: ReadContext,
  f: SampleFilter,
  where: Where,
  held: readonly { traderId: number; openAt: number }[] | null,
): Promise<Map<number, number>> {
  const rows = await ctx.store.query<{ traderId: number; n: number }>(
    `
      SELECT p.traderId AS traderId, count() AS n FROM ${POSITION_SAMPLES_TABLE} AS p FINAL ${where.prewhereSql}
      WHERE ${where.sql} AND p.window = '1D' GROUP BY traderId ${FINAL_SETTINGS}`,
    where.params,
  );
  const counts = new Map(rows.map((r) => [Number(r.traderId), Number(r.n)]));
  if (!held) return counts;
  // The same bounds as the query's (sampleWhere: clamped to the history window); a trader the
  // query did not count (not asked for, not eligible) has nothing to take back.
  const { start, end } = clampToHistory(f.window, ctx.principal, ctx.now.getTime());
  forEachHeld(
    held,
    (r) => r.openAt,
    start ?? Number.NEGATIVE_INFINITY,
    end === null ? Number.POSITIVE_INFINITY : end + 1,
    ({ traderId }) => {
      const n = counts.get(traderId);
      if (n === undefined) return;
      if (n <= 1) counts.delete(traderId);
      else counts.set(traderId, n - 1);
    },
  );
  return counts;
}
