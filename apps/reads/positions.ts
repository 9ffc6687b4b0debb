import { splitIds } from '../../schemas/api/common-params.ts';
import type { OpenPositionsQuery, PositionsQuery } from '../../schemas/api/queries.ts';
import type { OpenPosition, Position } from '../../schemas/api/resources.ts';
import { iso } from '../../schemas/formats.ts';
import { PRICES_TABLE } from '../../storage/tables/prices.ts';
import { OPEN_POSITIONS_TABLE, POSITIONS_TABLE } from '../../storage/tables/trading.ts';
import { perDataVersion, type ReadContext } from './context.ts';
import { addSignalFilters, factsOf } from './facts.ts';
import { addWindow, listRead, type StatementRow, statementPage, statementRows, type Where } from './list.ts';
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
  const unchanged = (m: Mark, a: number) =>
    Number.isFinite(m.seq) && !ctx.changes!.changedSince({ tables: PRICE_TABLES, traders: null, assets: [a] }, m.seq);
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
