import { splitIds } from '../../schemas/api/common-params.ts';
import { RESUME_COLUMN } from '../../schemas/api/exports.ts';
import type { OpenPositionsQuery, PositionsQuery } from '../../schemas/api/queries.ts';
import { type OpenPosition, type Position, WINDOW_MS, WINDOWS } from '../../schemas/api/resources.ts';
import { iso } from '../../schemas/formats.ts';
import { identifier } from '../../storage/sql.ts';
import { beforeKey } from '../../storage/statements.ts';
import { POSITION_PERFORMANCES_TABLE } from '../../storage/tables/performance.ts';
import { PRICES_TABLE } from '../../storage/tables/prices.ts';
import { OPEN_POSITIONS_TABLE, POSITIONS_TABLE } from '../../storage/tables/trading.ts';
import { perDataVersion, type ReadContext, unchangedSince } from './context.ts';
import {
  exportStatement,
  leafNames,
  type NativeExport,
  nativeStart,
  quoteColumn,
  resumeTokenSql,
  type TupleShape,
  tupleType,
} from './exports.ts';
import { addSignalFilters, factsOf } from './facts.ts';
import { addWindow, listRead, type StatementRow, statementPage, statementRows, Where } from './list.ts';
import { timeBasedPerformances } from './performance.ts';
import { readsFromProjection } from './stats.ts';

interface Row extends StatementRow {
  t: number;
  id: number;
  direction: 'long' | 'short';
  openPrice: number | null;
  quoteSymbol: string | null;
  traderId: number;
  assetId: number;
}

const COLUMNS = `s.id AS id, s.direction AS direction, s.openPrice AS openPrice, s.traderId AS traderId, s.assetId AS assetId`;

/**
 * Up to n rows of the positions statement table (ordered by (openAt, id), with projections by
 * trader and by asset) in key order before `before`, with the page's filters; eligibility
 * (live, signal-visible trader; live asset with an active market) and the quote symbol come from
 * the facts of the data version. `open`: open positions only, read from open_positions (the
 * statements at open keys) unless a projection of the positions table serves the filter.
 */
async function positionPage<R extends Row>(
  ctx: ReadContext,
  q: OpenPositionsQuery & { positionIds?: string },
  where: Where,
  page: {
    open: boolean;
    limit: number;
    after: Parameters<typeof statementPage>[1];
    /** A row check besides eligibility. */
    keep?: (r: R) => boolean;
    /** Completes a chunk of rows before they are checked (open positions' live marks). */
    marks?: (rows: R[]) => Promise<void>;
  },
): Promise<R[]> {
  const { open, limit, after, keep, marks } = page;
  const facts = await factsOf(ctx);
  const eligible = addSignalFilters(where, facts, ctx.principal, q);
  where.when(splitIds(q.positionIds), 's.id IN {positionIds:Array(UInt64)}', 'positionIds');
  const selective =
    q.positionIds !== undefined ||
    readsFromProjection(ctx.store, POSITIONS_TABLE, { traderIds: splitIds(q.traderIds), assetIds: splitIds(q.assetIds) });
  if (open && selective) where.add('s.isOpen = 1');
  const spec = {
    table: open && !selective ? OPEN_POSITIONS_TABLE : POSITIONS_TABLE,
    columns: COLUMNS,
    timeCol: 'openAt',
    idType: 'UInt64' as const,
    where,
    selective,
  };
  const rows = await statementPage<R>(
    limit,
    after,
    async (before, n) => {
      const chunk = await statementRows<R>(ctx, spec, before, n);
      await marks?.(chunk);
      return chunk;
    },
    (r) => eligible.keep(r) && (!keep || keep(r)),
    eligible.share,
  );
  for (const r of rows) r.quoteSymbol = facts.assetQuote.get(r.assetId) ?? null;
  return rows;
}

/** Position history: open and closed, newest openAt first. */
export function listPositions(ctx: ReadContext, q: PositionsQuery) {
  const positionIds = splitIds(q.positionIds);
  return listRead<Row, Position>(ctx, {
    op: 'list_positions',
    query: q,
    historical: true,
    keyParts: ['time', 'id'],
    unboundedDefault: positionIds !== undefined,
    fetch: ({ where, after, window, limit }) => {
      addWindow(where, 's.openAt', window);
      return positionPage<Row>(ctx, q, where, { open: false, limit, after });
    },
    keyOf: (r) => [r.t, r.id],
    shape: async (rows) => {
      const perf = await timeBasedPerformances(
        ctx.store,
        rows.map((r) => ({ ...r, openAt: r.t })),
        ctx.now.getTime(),
      );
      return rows.map((r) => ({
        id: r.id,
        direction: r.direction,
        openAt: iso(r.t),
        openPrice: r.openPrice,
        quoteSymbol: r.quoteSymbol,
        timeBasedPerformances: perf.get(r.id)!,
        traderId: r.traderId,
        assetId: r.assetId,
      }));
    },
  });
}

/**
 * The export's `timeBasedPerformances` column (the list read's, see performance.ts): per window, null
 * or `{window, status, returnPercentage}`. In CSV a window is its three columns, empty when null.
 */
const performancesShape = (format: 'ndjson' | 'csv'): TupleShape =>
  Object.fromEntries(
    WINDOWS.map((w) => [
      w,
      format === 'csv'
        ? { window: 'Nullable(String)', status: 'Nullable(String)', returnPercentage: 'Nullable(Float64)' }
        : `Nullable(${tupleType({ window: 'String', status: 'String', returnPercentage: 'Nullable(Float64)' })})`,
    ]),
  );

/**
 * The positions export as one statement (issue 28): listPositions' filters and versions, resolved by
 * the store, each position joined with its evaluations (the newest row of each window, as
 * timeBasedPerformances reads them: a window is null with no row or status '', too_young until
 * serverTime reaches openAt + window), shaped as a Position with its resume token.
 */
export async function exportPositions(
  ctx: ReadContext,
  q: Omit<PositionsQuery, 'limit'>,
  resume: string | undefined,
  rows: number,
  format: 'ndjson' | 'csv',
): Promise<NativeExport> {
  const positionIds = splitIds(q.positionIds);
  const { after, window, seal } = nativeStart(
    ctx,
    { op: 'list_positions', query: q, keyParts: ['time', 'id'], unboundedDefault: positionIds !== undefined },
    resume,
  );
  const facts = await factsOf(ctx);
  const where = new Where();
  addSignalFilters(where, facts, ctx.principal, q, true);
  where.when(positionIds, 's.id IN {positionIds:Array(UInt64)}', 'positionIds');
  addWindow(where, 's.openAt', window);
  const b = beforeKey(identifier('s.openAt'), identifier('s.id'), 'UInt64', after as [number, number] | undefined);
  const quote = quoteColumn(facts);
  const shape = performancesShape(format);
  const windows = WINDOWS.map((w) => {
    const none = `f_${w}.1 = ''`;
    const young = `{now:Int64} < p_t + ${WINDOW_MS[w]}`;
    const status = `if(${young}, 'too_young', toString(f_${w}.1))`;
    return format === 'csv'
      ? `tuple(if(${none}, NULL, '${w}'), if(${none}, NULL, ${status}), if(${none} OR ${young}, NULL, f_${w}.2))`
      : `if(${none}, NULL, tuple('${w}', ${status}, if(${young}, NULL, f_${w}.2)))`;
  });
  const positions = exportStatement({
    outer: `p_id, p_direction, p_time, p_price, p_quote, p_trader, p_asset, p_t, ${resumeTokenSql('p_t', 'toString(p_id)')}`,
    inner: `s.id AS p_id, s.direction AS p_direction, toTimeZone(s.openAt, 'UTC') AS p_time, s.openPrice AS p_price,
      ${quote.sql} AS p_quote,
      s.traderId AS p_trader, s.assetId AS p_asset, toUnixTimestamp64Milli(s.openAt) AS p_t`,
    table: POSITIONS_TABLE,
    where: where.sql,
    before: b.text,
    timeCol: 'openAt',
  });
  // The positions stream through the join in their order: the evaluations are the table built (never swapped, and
  // aggregated on every thread: max_threads 0 is the store's own count), the positions on one stream.
  return {
    sql: `
    SELECT p_id AS id, p_direction AS direction, p_time AS openAt, p_price AS openPrice, p_quote AS quoteSymbol,
      CAST(tuple(${windows.join(', ')}), {performancesType:String}) AS timeBasedPerformances,
      p_trader AS traderId, p_asset AS assetId, ${RESUME_COLUMN}
    FROM (${positions}) AS p
    LEFT ANY JOIN (
      SELECT positionId AS f_id,
        ${WINDOWS.map((w) => {
          // The latest evaluation's status and return, as scalars: argMax of a tuple costs about twice
          // as much, and argMax of a Nullable skips NULLs (a newer NULL return would give an older one).
          const latest = (value: string) => `argMaxIf(${value}, seq, window = '${w}')`;
          const ret = `if(${latest('isNull(returnPercentage)')}, NULL, ${latest('assumeNotNull(returnPercentage)')})`;
          return `tuple(${latest('status')}, ${ret}) AS f_${w}`;
        }).join(', ')}
      FROM ${POSITION_PERFORMANCES_TABLE}
      WHERE positionId IN (SELECT s.id FROM ${POSITIONS_TABLE} AS s WHERE ${where.sql} AND ${b.text})
      GROUP BY positionId
      SETTINGS max_threads = 0
    ) AS f ON f.f_id = p.p_id`,
    settings: { query_plan_join_swap_table: 'false', max_threads: 1 },
    params: {
      ...where.params,
      ...b.params,
      seal,
      now: ctx.now.getTime(),
      performancesType: tupleType(shape),
      ...quote.params,
      exportRows: rows,
    },
    // The item's columns as columnsOf names them (the CSV ones), whichever the format.
    columns: [
      ...['id', 'direction', 'openAt', 'openPrice', 'quoteSymbol'],
      ...leafNames(performancesShape('csv'), 'timeBasedPerformances'),
      ...['traderId', 'assetId', RESUME_COLUMN],
    ],
  };
}

type OpenRow = Row & { currentPrice: number | null; currentReturnPercentage: number };

const PRICE_TABLES = new Set([PRICES_TABLE.name]);

/** How far back the first look for an asset's latest mark goes: marks are usually recent, so this reads little. */
const RECENT_MARK_MS = 2 * 86_400_000;

/**
 * An asset's mark as looked up at `from`, read at commit `seq`: it holds until `until`, the asset's
 * first sample after `from`, and until a commit writes a price of that asset (issue 26: a price of
 * one asset leaves every other asset's mark as it is).
 */
interface Mark {
  price: number | null;
  from: number;
  until: number;
  seq: number;
}
/** Marks looked up, per store; each is checked against the commits since it was read (not made anew per commit). */
const marksOf = perDataVersion(() => new Map<number, Mark>(), { tables: [] });

/**
 * The latest live price sample at or before serverTime of each asset (prices are ordered by
 * (assetId, at)): first within the last two days, then, for assets with no recent sample, over
 * their whole series. A mark is kept for the data version while serverTime stays before the
 * asset's next sample (future-dated samples come into force at their time).
 */
async function latestMarks(ctx: ReadContext, assetIds: number[]): Promise<Map<number, number>> {
  const now = ctx.now.getTime();
  // Taken before the store is read: a price committed meanwhile ends the marks read now.
  const seq = ctx.changes ? await ctx.changes.current() : Number.NaN;
  const marks = await marksOf(ctx);
  // The answer depends on the prices, whether a mark is read now or was kept.
  ctx.reads?.add(PRICES_TABLE.name);
  const out = new Map<number, number>();
  const missing: number[] = [];
  // A mark no commit up to `seq` repriced is as of `seq` from then on: each commit is looked at once per mark.
  const unchanged = (m: Mark, a: number) => unchangedSince(ctx.changes!, { tables: PRICE_TABLES, traders: null, assets: [a] }, m, seq);
  for (const a of assetIds) {
    const m = marks.get(a);
    if (m && m.from <= now && now < m.until && unchanged(m, a)) {
      if (m.price !== null) out.set(a, m.price);
    } else missing.push(a);
  }
  if (!missing.length) return out;
  const recent = await ctx.store.query<{ assetId: number; price: number; n: number; later: number; next: number }>(
    `
    SELECT assetId, argMaxIf(price, at, at <= fromUnixTimestamp64Milli({now:Int64}, 'UTC')) AS price,
           countIf(at <= fromUnixTimestamp64Milli({now:Int64}, 'UTC')) AS n,
           countIf(at > fromUnixTimestamp64Milli({now:Int64}, 'UTC')) AS later,
           minIf(toUnixTimestamp64Milli(at), at > fromUnixTimestamp64Milli({now:Int64}, 'UTC')) AS next
    FROM ${PRICES_TABLE} FINAL
    WHERE assetId IN {ids:Array(UInt64)} AND deleted = 0 AND at >= fromUnixTimestamp64Milli({since:Int64}, 'UTC')
    GROUP BY assetId`,
    { ids: missing, now, since: now - RECENT_MARK_MS },
  );
  const found = new Map(recent.map((r) => [Number(r.assetId), r]));
  const old = missing.filter((a) => !(Number(found.get(a)?.n ?? 0) > 0));
  const older = new Map(
    old.length
      ? (
          await ctx.store.query<{ assetId: number; price: number }>(
            `
    SELECT assetId, argMax(price, at) AS price FROM ${PRICES_TABLE} FINAL
    WHERE assetId IN {old:Array(UInt64)} AND deleted = 0 AND at <= fromUnixTimestamp64Milli({now:Int64}, 'UTC')
    GROUP BY assetId`,
            { old, now },
          )
        ).map((r) => [Number(r.assetId), r.price])
      : [],
  );
  for (const a of missing) {
    const r = found.get(a);
    const price = r && Number(r.n) > 0 ? r.price : (older.get(a) ?? null);
    marks.set(a, { price, from: now, until: r && Number(r.later) > 0 ? Number(r.next) : Infinity, seq });
    if (price !== null) out.set(a, price);
  }
  return out;
}

/**
 * Open positions with live marks: the mark is the asset's latest price sample at or before
 * serverTime. `currentPrice` and `currentReturnPercentage` are required numbers, so a position
 * that cannot be marked (no price series, an entry price that is null or 0, or a non-finite
 * return) is omitted. Marks are looked up for the assets of each chunk of candidates only. The
 * account's history window applies by openAt (nothing is echoed: the read has no window of its own).
 */
export function listOpenPositions(ctx: ReadContext, q: OpenPositionsQuery) {
  return listRead<OpenRow, OpenPosition>(ctx, {
    op: 'list_open_positions',
    query: q,
    historical: false,
    historyBound: true,
    keyParts: ['time', 'id'],
    fetch: ({ where, after, window, limit }) => {
      // The account's history window bounds open positions by openAt (DESIGN 6), in the query.
      addWindow(where, 's.openAt', window);
      // A null or zero entry price is left to the row check below (no return, so the row is
      // omitted): nearly every position has one, and the condition in SQL costs a page 0.6 ms.
      return positionPage<OpenRow>(ctx, q, where, {
        open: true,
        limit,
        after,
        keep: (r) => r.currentPrice !== null && Number.isFinite(r.currentReturnPercentage),
        marks: async (rows) => {
          const marks = await latestMarks(ctx, [...new Set(rows.map((r) => r.assetId))]);
          for (const r of rows) {
            const mark = marks.get(r.assetId);
            r.currentPrice = mark ?? null;
            if (mark !== undefined && r.openPrice) {
              const ratio = mark / r.openPrice;
              r.currentReturnPercentage = r.direction === 'long' ? (ratio - 1) * 100 : (1 - ratio) * 100;
            } else r.currentReturnPercentage = NaN; // no mark, or no entry price: omitted
          }
        },
      });
    },
    keyOf: (r) => [r.t, r.id],
    shape: (rows) =>
      rows.map((r) => ({
        id: r.id,
        direction: r.direction,
        openAt: iso(r.t),
        openPrice: r.openPrice,
        quoteSymbol: r.quoteSymbol,
        currentPrice: r.currentPrice!,
        currentReturnPercentage: r.currentReturnPercentage,
        traderId: r.traderId,
        assetId: r.assetId,
      })),
  });
}
