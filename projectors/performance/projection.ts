import { TOLERANCE_MS, WINDOW_MS, WINDOWS } from '../../schemas/api/resources.ts';
import { parseDateTime } from '../../schemas/formats.ts';
import type { PriceRecord } from '../../schemas/topics/index.ts';
import { remember } from '../../storage/bounded.ts';
import type { Store } from '../../storage/port.ts';
import { newestById } from '../../storage/statements.ts';
import {
  PERFORMANCES_DDL,
  POSITION_PERFORMANCES_TABLE,
  POSITION_SAMPLES_TABLE,
  PRICE_SERIES_DDL,
  PRICE_SERIES_TABLE,
  SAMPLES_COPIED_DDL,
  SAMPLES_COPIED_TABLE,
  SAMPLES_DDL,
  SAMPLES_SETTINGS_DDL,
} from '../../storage/tables/performance.ts';
import { PRICES_TABLE } from '../../storage/tables/prices.ts';
import { POSITIONS_TABLE } from '../../storage/tables/trading.ts';
import type { Projection, ProjectionContext, ValidRecord } from '../projection.ts';
import { evaluateWindow, firstSampleFrom, type PriceSeries } from './evaluate.ts';

/**
 * Time-based performance as a read model (DESIGN 5): one evaluation row per position and window,
 * holding what the window's status is once it has come of age (the evaluation time E = openAt +
 * window is stored with it). A read shows `too_young` while serverTime < E and the stored
 * evaluation after, so a window coming of age rewrites nothing. Rows are re-evaluated when their
 * position changes (the trade-event projection calls `writePerformances` with the new position
 * statements before it writes them) and when price samples that can be their forward price
 * arrive, change or go (the price projection's follow-up below). `status` '' means the asset has
 * no price series at all (the window is null); `price_series` remembers that per asset, so the
 * first sample of an asset (or the deletion of its last one) re-evaluates all its positions.
 *
 * The same rows are the sample of the analytics reads (trader stats, rankings, asset stats, trader
 * activity), which aggregate them with FINAL, and two layouts serve the two kinds of read:
 * position_performances is ordered by (positionId, window) in small granules, for a page of
 * positions' ~50 point lookups (a few KiB each); position_samples partitioned by window and
 * month of openAt and ordered by (traderId, assetId, openAt, positionId) in default granules, for
 * range scans: a one-window aggregate reads that window's partitions only, a trader's positions
 * are a range of each partition, and FINAL (with do_not_merge_across_partitions_select_final)
 * merges only the partitions with fresh parts. A position whose trader, asset or openAt changes leaves rows with live = 0 at its old
 * position_samples key (`retired` below), as statement tables leave tombstones. Each key's
 * newest row (highest seq) is the truth; merges collapse a key to it. seq comes from a per-store
 * counter that starts above every seq stored, so a later evaluation always wins, whichever topic
 * triggered it.
 *
 * openAt and evaluatedAt are milliseconds since the epoch (Int64: half the insert cost of
 * DateTime64 text); window, direction and status are Enum8 (a quarter off the insert cost of
 * LowCardinality strings; 2.6M rows on the large seed make this the projector's largest write).
 */

/**
 * The keys (traderId, assetId, openAt) at which position_samples still counts each of the given
 * positions (its newest row there is live in some window), read by position (by_position). A
 * trade batch that finds the previous one unfinished retires every one of them but the position's current key: performance rows are
 * written before positions, so a killed batch may have left rows at a key that positions never
 * held, and the replay, cut into other batches, never passes that key again (a crash run counted
 * a position twice so).
 */
export async function countedSampleKeys(store: Store, positionIds: readonly number[]): Promise<PositionState[]> {
  if (!positionIds.length) return [];
  const rows = await store.query<{
    positionId: number;
    traderId: number;
    assetId: number;
    direction: 'long' | 'short';
    openAt: number;
    live: number;
  }>(
    `
    SELECT positionId, traderId, assetId, any(direction) AS direction, openAt, max(live) AS live FROM (
      SELECT positionId, window, traderId, assetId, openAt, argMax(direction, seq) AS direction, argMax(live, seq) AS live
      FROM ${POSITION_SAMPLES_TABLE} WHERE positionId IN {positionIds:Array(UInt64)}
      GROUP BY positionId, window, traderId, assetId, openAt)
    GROUP BY positionId, traderId, assetId, openAt HAVING live = 1`,
    { positionIds },
  );
  return rows.map((r) => ({
    id: Number(r.positionId),
    traderId: Number(r.traderId),
    assetId: Number(r.assetId),
    direction: r.direction,
    openAt: Number(r.openAt),
    openPrice: null,
    live: 0,
  }));
}

const PERFORMANCE_COLUMNS = [
  'positionId',
  'window',
  'traderId',
  'assetId',
  'direction',
  'openAt',
  'evaluatedAt',
  'status',
  'returnPercentage',
  'live',
  'seq',
] as const;

/** What an evaluation depends on: a position statement (from the fold or the positions table). */
export interface PositionState {
  id: number;
  traderId: number;
  assetId: number;
  direction: 'long' | 'short';
  openAt: number;
  openPrice: number | null;
  live: number;
}
/** The fields of a position statement whose change re-evaluates it. */
export const EVALUATED_FIELDS = ['traderId', 'assetId', 'direction', 'openAt', 'openPrice', 'live'] as const;

/**
 * What the projection keeps of a store (its state in the projector session): the seq counter and
 * a cache of price series (live samples, FINAL), bounded by MAX_CACHED_SAMPLES (least recently
 * used assets go first). The price projection drops an asset's series before it re-evaluates, so
 * the cache never outlives what the store holds.
 */
interface PerformanceState {
  seq: number | null;
  series: Map<number, PriceSeries>;
  samples: number;
  /**
   * Seqs of evaluation inserts that may have reached position_performances without being copied
   * into position_samples (an insert that failed; null: not known yet, as at the start of a
   * session, when a stopped projector may have left rows uncopied). healSamples copies what they
   * lack before evaluations are compared with position_performances.
   */
  unhealed: number[] | null;
  /**
   * Rows written to position_performances and not yet copied into position_samples (with their
   * seq). A live projector copies them with its settled work (copySamples): a commit that writes
   * position_samples has every cached analytics answer over the traders it names read again, and
   * a round's commit every 500 ms had them read again twice as often as anything else.
   */
  uncopied: unknown[][];
  /** Whether each asset has a price series, as price_series says (null: not read yet; seriesFlags). */
  hasSeries: Map<number, number> | null;
  /**
   * The newest evaluation row in position_performances of the positions read or written last, per
   * window (as `evaluationText`): this projection is that table's only writer, so what it wrote
   * last is what the store holds, and a trickle of prices re-evaluating the same positions compares
   * them without a read (issue 26: the read was the costliest statement of a live price batch).
   */
  evaluations: Map<number, Map<string, string>>;
}
const MAX_CACHED_SAMPLES = 4_000_000;
/** Positions whose evaluations the session keeps at most (the oldest kept is forgotten first). */
const KEPT_EVALUATIONS = 50_000;
/** Past this many samples in a batch, the series it touches are read again whole (patching is for live trickles). */
const PATCHED_SAMPLES = 1_000;

const stateOf = (ctx: ProjectionContext): PerformanceState => ctx.stateOf(performanceProjection);

async function nextSeq(ctx: ProjectionContext): Promise<number> {
  const s = stateOf(ctx);
  if (s.seq === null) {
    const [row] = await ctx.store.query<{ seq: number }>(
      `SELECT greatest((SELECT max(seq) FROM ${POSITION_PERFORMANCES_TABLE}), (SELECT max(seq) FROM ${PRICE_SERIES_TABLE})) AS seq`,
    );
    s.seq = Number(row?.seq ?? 0);
  }
  return ++s.seq;
}

/**
 * Brings the cached series of the batch's assets up to what the store holds now, reading only the
 * samples the batch wrote (their rows FINAL: a lower version or a deletion decides as it does in a
 * read) instead of each asset's whole series (issue 26: a live price batch re-read a whole series,
 * the projector's costliest read under a trickle of prices). Assets not cached are read whole when next needed.
 */
async function patchSeries(ctx: ProjectionContext, samples: readonly { assetId: number; at: number }[]): Promise<void> {
  const s = stateOf(ctx);
  const touched = samples.filter((p) => s.series.has(p.assetId));
  if (!touched.length) return;
  const lo = Math.min(...touched.map((p) => p.at));
  const hi = Math.max(...touched.map((p) => p.at));
  const rows = await ctx.store.query<{ assetId: number; t: number; price: number; deleted: number }>(
    `SELECT assetId, toUnixTimestamp64Milli(at) AS t, price, deleted FROM ${PRICES_TABLE} FINAL
     WHERE assetId IN {assets:Array(UInt64)}
       AND at BETWEEN fromUnixTimestamp64Milli({lo:Int64}, 'UTC') AND fromUnixTimestamp64Milli({hi:Int64}, 'UTC')`,
    { assets: [...new Set(touched.map((p) => p.assetId))], lo, hi },
  );
  const stored = new Map(rows.map((r) => [`${r.assetId}:${Number(r.t)}`, r]));
  for (const p of touched) {
    const series = s.series.get(p.assetId)!;
    const row = stored.get(`${p.assetId}:${p.at}`);
    const next = withSample(series, p.at, row && !Number(row.deleted) ? Number(row.price) : null);
    s.samples += next.at.length - series.at.length;
    s.series.set(p.assetId, next);
  }
}

/** `series` with its sample at `at` set to `price` (null: none there). */
function withSample(series: PriceSeries, at: number, price: number | null): PriceSeries {
  let lo = 0;
  let hi = series.at.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (series.at[mid]! < at) lo = mid + 1;
    else hi = mid;
  }
  const found = lo < series.at.length && series.at[lo] === at;
  if (found && price !== null) {
    series.price[lo] = price;
    return series;
  }
  if (!found && price === null) return series;
  const n = series.at.length + (found ? -1 : 1);
  const out = { at: new Float64Array(n), price: new Float64Array(n) };
  out.at.set(series.at.subarray(0, lo));
  out.price.set(series.price.subarray(0, lo));
  const rest = found ? lo + 1 : lo;
  const to = found ? lo : lo + 1;
  if (!found) {
    out.at[lo] = at;
    out.price[lo] = price!;
  }
  out.at.set(series.at.subarray(rest), to);
  out.price.set(series.price.subarray(rest), to);
  return out;
}

function forgetSeries(ctx: ProjectionContext, assetIds: Iterable<number>): void {
  const s = stateOf(ctx);
  for (const a of assetIds) {
    const had = s.series.get(a);
    if (had) {
      s.samples -= had.at.length;
      s.series.delete(a);
    }
  }
}

async function seriesOf(ctx: ProjectionContext, assetIds: readonly number[]): Promise<Map<number, PriceSeries>> {
  const s = stateOf(ctx);
  const missing = assetIds.filter((a) => !s.series.has(a));
  if (missing.length) {
    const rows = await ctx.store.query<{ assetId: number; at: number[]; price: number[] }>(
      `
      SELECT assetId, groupArray(t) AS at, groupArray(price) AS price FROM (
        SELECT assetId, toUnixTimestamp64Milli(at) AS t, price FROM ${PRICES_TABLE} FINAL
        WHERE assetId IN {missing:Array(UInt64)} AND deleted = 0 ORDER BY assetId, at
      ) GROUP BY assetId`,
      { missing },
    );
    const found = new Map(rows.map((r) => [Number(r.assetId), r]));
    for (const a of missing) {
      const r = found.get(a);
      const series = { at: Float64Array.from(r?.at ?? [], Number), price: Float64Array.from(r?.price ?? []) };
      s.series.set(a, series);
      s.samples += series.at.length;
    }
  }
  const out = new Map<number, PriceSeries>();
  for (const a of assetIds) {
    const series = s.series.get(a)!;
    // Most recently used last: eviction takes from the front.
    s.series.delete(a);
    s.series.set(a, series);
    out.set(a, series);
  }
  for (const [a, series] of s.series) {
    if (s.samples <= MAX_CACHED_SAMPLES || out.has(a)) break;
    s.series.delete(a);
    s.samples -= series.at.length;
  }
  return out;
}

/**
 * Evaluates every window of the given positions and writes their rows (one seq for the call) to
 * position_performances and then to position_samples (copySamples), with, in position_samples at once, a row of live = 0 for every window of each `retired`
 * statement: a position's earlier (traderId, assetId, openAt), whose rows would otherwise stay at
 * that key (position_performances is keyed by positionId and needs none).
 */
export async function writePerformances(
  ctx: ProjectionContext,
  positions: readonly PositionState[],
  retired: readonly PositionState[] = [],
  opts: { onlyChanged?: boolean } = {},
): Promise<void> {
  if (!positions.length && !retired.length) return;
  const { store } = ctx;
  // Before the session's first evaluation insert (a later one would be the newest).
  await healSamples(ctx);
  const series = await seriesOf(ctx, [...new Set(positions.map((p) => p.assetId))]);
  let rows: unknown[][] = [];
  for (const p of positions) {
    const s = series.get(p.assetId)!;
    for (const w of WINDOWS) {
      const evaluatedAt = p.openAt + WINDOW_MS[w];
      // Evaluated as of a clock past E: a read shows too_young until E.
      const e = s.at.length ? evaluateWindow(p, w, firstSampleFrom(s, evaluatedAt), Infinity) : { status: '', returnPercentage: null };
      rows.push([p.id, w, p.traderId, p.assetId, p.direction, p.openAt, evaluatedAt, e.status, e.returnPercentage, p.live]);
    }
  }
  if (opts.onlyChanged) rows = await changedEvaluations(ctx, positions, rows);
  if (!rows.length && !retired.length) return;
  const seq = await nextSeq(ctx);
  const gone: unknown[][] = [];
  for (const p of retired) {
    for (const w of WINDOWS) gone.push([p.id, w, p.traderId, p.assetId, p.direction, p.openAt, p.openAt + WINDOW_MS[w], '', null, 0, seq]);
  }
  if (gone.length) await store.insertCompact(POSITION_SAMPLES_TABLE.name, PERFORMANCE_COLUMNS, gone);
  if (rows.length) {
    const { evaluations } = stateOf(ctx);
    // Forgotten first: a failed insert may have landed all the same.
    const known = new Map<number, Map<string, string>>();
    for (const r of rows) {
      const id = Number(r[0]);
      const had = evaluations.get(id);
      if (had) known.set(id, had);
      evaluations.delete(id);
    }
    const written = rows.map((r) => [...r, seq]);
    try {
      await store.insertCompact(POSITION_PERFORMANCES_TABLE.name, PERFORMANCE_COLUMNS, written);
    } catch (err) {
      stateOf(ctx).unhealed?.push(seq);
      throw err;
    }
    const { uncopied } = stateOf(ctx);
    for (const r of written) uncopied.push(r);
    // Kept when every window's newest row is known: all written now, or the others known before.
    const kept = new Map<number, Map<string, string>>();
    for (const r of rows) {
      const id = Number(r[0]);
      let byWindow = kept.get(id);
      if (!byWindow) kept.set(id, (byWindow = new Map(known.get(id))));
      byWindow.set(String(r[1]), evaluationText(r));
    }
    for (const [id, byWindow] of kept)
      if (known.has(id) || byWindow.size === WINDOWS.length) remember(evaluations, id, byWindow, KEPT_EVALUATIONS);
    await ctx.settle(COPY_SAMPLES, () => copySamples(ctx));
  }
}

/** The settled work that copies evaluations into position_samples (ProjectionContext.settle). */
const COPY_SAMPLES = 'copy position_samples';

/**
 * Copies into position_samples the rows written to position_performances since the last copy, and
 * then marks the highest seq copied (position_samples_copied): at once while catching up, with
 * the settled work of a live projector (at most every SETTLE_MS, projectors/runner.ts), so the
 * analytics reads may trail position_performances by that much, as the activity reads trail the
 * statement tables. Rows that fail to be copied stay to be copied.
 */
async function copySamples(ctx: ProjectionContext): Promise<void> {
  const s = stateOf(ctx);
  const rows = s.uncopied;
  if (!rows.length) return;
  s.uncopied = [];
  try {
    await ctx.store.insertCompact(POSITION_SAMPLES_TABLE.name, PERFORMANCE_COLUMNS, rows);
    let seq = 0;
    for (const r of rows) seq = Math.max(seq, Number(r[PERFORMANCE_COLUMNS.length - 1]));
    await markCopied(ctx, seq);
  } catch (err) {
    s.uncopied = [...rows, ...s.uncopied];
    throw err;
  }
}

/** Every row of position_performances at or below `seq` is in position_samples now. */
const markCopied = (ctx: ProjectionContext, seq: number) => ctx.store.insertCompact(SAMPLES_COPIED_TABLE.name, ['k', 'seq'], [[0, seq]]);

/**
 * position_samples as position_performances has it: what a stopped projector left uncopied, and
 * what this session has not copied yet. Before position_samples is read by position
 * (countedSampleKeys): an evaluation written at a key the position never came to hold must be
 * there to be retired.
 */
export async function samplesCopied(ctx: ProjectionContext): Promise<void> {
  await healSamples(ctx);
  await copySamples(ctx);
}

/** An evaluation row (PERFORMANCE_COLUMNS but seq) as text, to compare with another. */
const evaluationText = (r: readonly unknown[]) => JSON.stringify(r.map((v) => (v === null || typeof v === 'string' ? v : Number(v))));

/**
 * Makes position_samples hold every row of the evaluation inserts that may have reached
 * position_performances without being copied: at the start of a session, every row above the
 * last seq marked copied (a projector stopped before its settled work); later, the inserts that
 * failed (PerformanceState.unhealed: one may have landed all the same). After this, the two tables
 * agree on every evaluation key but this session's uncopied rows, and either can be compared with.
 */
async function healSamples(ctx: ProjectionContext): Promise<void> {
  const s = stateOf(ctx);
  if (s.unhealed?.length === 0) return;
  const columns = PERFORMANCE_COLUMNS.join(', ');
  if (s.unhealed === null) {
    const [r] = await ctx.store.query<{ copied: number; top: number }>(
      `SELECT (SELECT max(seq) FROM ${SAMPLES_COPIED_TABLE}) AS copied, (SELECT max(seq) FROM ${POSITION_PERFORMANCES_TABLE}) AS top`,
    );
    const copied = Number(r?.copied ?? 0);
    const top = Number(r?.top ?? 0);
    if (top > copied) {
      // Rows of this session's not copied yet may be among them: a row copied twice is one row (the same key and seq).
      await ctx.store.exec(
        `INSERT INTO ${POSITION_SAMPLES_TABLE} (${columns})
         SELECT ${columns} FROM ${POSITION_PERFORMANCES_TABLE} WHERE seq > {copied:UInt64} AND seq <= {top:UInt64}`,
        { copied, top },
      );
      await markCopied(ctx, top);
    }
  } else {
    const key = 'positionId, window, traderId, assetId, openAt, seq';
    await ctx.store.exec(
      `INSERT INTO ${POSITION_SAMPLES_TABLE} (${columns})
       SELECT ${columns} FROM ${POSITION_PERFORMANCES_TABLE}
       WHERE seq IN {seqs:Array(UInt64)} AND (${key}) NOT IN (SELECT ${key} FROM ${POSITION_SAMPLES_TABLE} WHERE seq IN {seqs:Array(UInt64)})`,
      { seqs: s.unhealed },
    );
  }
  s.unhealed = [];
}

/**
 * The evaluation rows (PERFORMANCE_COLUMNS but seq) that differ from the newest stored for their
 * position and window.
 * A live price is the forward price of only the few windows whose evaluation time it is the first
 * sample after; every other window it can be the forward price of is evaluated to what is stored
 * already, and rewriting those (hundreds of rows per price on the large seed) would change the
 * analytics' sample, and end their cached answers, for nothing (issue 26).
 *
 * Compared with position_performances, ordered by positionId for point reads (a third of the cost
 * of reading position_samples by position, issue 26), once healSamples has made position_samples
 * hold all of it (writePerformances heals before it compares): an evaluation found in position_performances alone (a projector stopped
 * before it copied it) would otherwise never reach the analytics (stopped-price-batch test).
 * What the session keeps (PerformanceState.evaluations) is compared with instead where it has them.
 */
async function changedEvaluations(ctx: ProjectionContext, positions: readonly PositionState[], rows: unknown[][]): Promise<unknown[][]> {
  const { evaluations } = stateOf(ctx);
  const ids = [...new Set(positions.map((p) => p.id))].filter((id) => !evaluations.has(id));
  if (ids.length) {
    const KEY = ['positionId', 'window'];
    const newest = PERFORMANCE_COLUMNS.filter((c) => c !== 'seq' && !KEY.includes(c)).map((c) => `argMax(${c}, seq) AS ${c}`);
    const stored = await ctx.store.query<Record<(typeof PERFORMANCE_COLUMNS)[number], unknown>>(
      `SELECT ${KEY.join(', ')}, ${newest.join(', ')} FROM ${POSITION_PERFORMANCES_TABLE}
       WHERE positionId IN {ids:Array(UInt64)} GROUP BY ${KEY.join(', ')}`,
      { ids },
    );
    const read = new Map<number, Map<string, string>>(ids.map((id) => [id, new Map()]));
    for (const r of stored)
      read
        .get(Number(r.positionId))
        ?.set(String(r.window), evaluationText(PERFORMANCE_COLUMNS.filter((c) => c !== 'seq').map((c) => r[c])));
    for (const [id, byWindow] of read) remember(evaluations, id, byWindow, KEPT_EVALUATIONS);
  }
  return rows.filter((r) => evaluations.get(Number(r[0]))?.get(String(r[1])) !== evaluationText(r));
}

/**
 * After a batch of price samples is stored: the positions whose forward price the samples can be
 * (evaluation time E in [at - tolerance, at] of some sample, per window), and every position of an
 * asset whose series appeared or vanished, are evaluated again.
 */
export async function reevaluateForPrices(ctx: ProjectionContext, batch: readonly ValidRecord[]): Promise<void> {
  if (!batch.length) return;
  const { store } = ctx;
  let lo = Infinity;
  let hi = -Infinity;
  const assets = new Set<number>();
  const deletes = new Set<number>();
  const samples: { assetId: number; at: number }[] = [];
  for (const { value: p } of batch as readonly ValidRecord<PriceRecord>[]) {
    const at = parseDateTime(p.at)!;
    lo = Math.min(lo, at);
    hi = Math.max(hi, at);
    assets.add(p.assetId);
    samples.push({ assetId: p.assetId, at });
    if (p.deleted) deletes.add(p.assetId);
  }
  const assetIds = [...assets];
  // The cached series of these assets are stale now: a live trickle patches them, a catch-up forgets them.
  if (samples.length <= PATCHED_SAMPLES) await patchSeries(ctx, samples);
  else forgetSeries(ctx, assetIds);
  const known = await seriesFlags(ctx, assetIds);
  // An asset known to have a series keeps it unless the batch deletes samples; the others are looked at.
  const unsure = assetIds.filter((a) => known.get(a) !== 1 || deletes.has(a));
  const series = await seriesOf(ctx, unsure);
  const flipped = unsure.filter((a) => (series.get(a)!.at.length ? 1 : 0) !== (known.get(a) ?? 0));
  const ranges = WINDOWS.map((w) => ({ from: lo - TOLERANCE_MS[w] - WINDOW_MS[w], to: hi - WINDOW_MS[w] }));
  // (No column alias may shadow `openAt` here: the WHERE clause would compare the alias.)
  const rows = await store.query<Omit<PositionState, 'openAt'> & { t: number; tomb: number; seq: number }>(
    `
    SELECT id, traderId, assetId, direction, toUnixTimestamp64Milli(openAt) AS t, openPrice, live, tomb, seq FROM ${POSITIONS_TABLE}
    WHERE assetId IN {flipped:Array(UInt64)}
       OR (assetId IN {assetIds:Array(UInt64)} AND (${ranges
         .map(
           (_, i) =>
             `(openAt BETWEEN fromUnixTimestamp64Milli({from${i}:Int64}, 'UTC') AND fromUnixTimestamp64Milli({to${i}:Int64}, 'UTC'))`,
         )
         .join(' OR ')}))`,
    {
      flipped,
      assetIds,
      ...Object.fromEntries(
        ranges.flatMap((r, i) => [
          [`from${i}`, r.from],
          [`to${i}`, r.to],
        ]),
      ),
    },
  );
  // The newest row per position among those found: a tombstone there means it lives elsewhere now.
  const newest = newestById(rows, (r) => r.id);
  await writePerformances(
    ctx,
    [...newest.values()].filter((p) => p.tomb === 0 && p.live === 1).map(({ t, ...p }) => ({ ...p, openAt: t })),
    [],
    { onlyChanged: true },
  );
  if (flipped.length) {
    const seq = await nextSeq(ctx);
    // Read again whole when next needed (flips are rare: an asset's first sample, or its last deleted).
    stateOf(ctx).hasSeries = null;
    await store.insertCompact(
      PRICE_SERIES_TABLE.name,
      ['assetId', 'hasSeries', 'seq'],
      flipped.map((a) => [a, series.get(a)!.at.length ? 1 : 0, seq]),
    );
  }
}

/**
 * price_series' flag of each asset (0: none stored), from what the session keeps: the whole table
 * (a row per asset) is read once, and this projection is its only writer after.
 */
async function seriesFlags(ctx: ProjectionContext, assetIds: readonly number[]): Promise<Map<number, number>> {
  const s = stateOf(ctx);
  if (!s.hasSeries) {
    const rows = await ctx.store.query<{ assetId: number; hasSeries: number }>(
      `SELECT assetId, argMax(hasSeries, seq) AS hasSeries FROM ${PRICE_SERIES_TABLE} GROUP BY assetId`,
    );
    s.hasSeries = new Map(rows.map((k) => [Number(k.assetId), Number(k.hasSeries)]));
  }
  const { hasSeries } = s;
  return new Map(assetIds.map((a) => [a, hasSeries.get(a) ?? 0]));
}

export const performanceProjection: Projection<PerformanceState> = {
  name: 'position-performances',
  canHandle: ['prices'],
  ddl: [PERFORMANCES_DDL, SAMPLES_DDL, SAMPLES_SETTINGS_DDL, SAMPLES_COPIED_DDL, PRICE_SERIES_DDL],
  // No reset: a take-over drops the counter and the caches, all read again when next needed.
  state: {
    init: () => ({ seq: null, series: new Map(), samples: 0, unhealed: null, uncopied: [], hasSeries: null, evaluations: new Map() }),
  },
  afterStore: (ctx, batch) => reevaluateForPrices(ctx, batch),
  resume: (ctx) => healSamples(ctx),
};
