import { splitList } from '../../schemas/api/common-params.ts';
import type { LegacyTradersQuery, TraderDirectoryQuery } from '../../schemas/api/queries.ts';
import type { LegacyTraderRow, TraderDirectoryRow } from '../../schemas/api/resources.ts';
import { TRADER_DIRECTORY_TABLE } from '../../storage/tables/traders.ts';
import { positionCounts, traderEligible } from './analytics/sample.ts';
import { type ReadContext, visibilitySql } from './context.ts';
import type { Key } from './cursor.ts';
import { factsOf } from './facts.ts';
import { listRead, type StatementRow, statementPage, type Where } from './list.ts';

interface Row extends StatementRow {
  t: string;
  id: number;
  name: string;
  slug: string | null;
  avatarUrl: string | null;
  sourcePlatform: string;
  sourceIdentityId: string;
  hasSource: number;
  displayName: string | null;
  handle: string | null;
  sAvatarUrl: string | null;
  profileUrl: string | null;
  audienceCount: number | null;
}

const COLUMNS = `s.id AS id, s.name AS name, s.name AS t, s.slug AS slug, s.avatarUrl AS avatarUrl, s.sourcePlatform AS sourcePlatform,
  s.sourceIdentityId AS sourceIdentityId, s.hasSource AS hasSource, s.displayName AS displayName, s.handle AS handle,
  s.sAvatarUrl AS sAvatarUrl, s.profileUrl AS profileUrl, s.audienceCount AS audienceCount, s.live AS live, s.tomb AS tomb, s.seq AS seq`;

/**
 * One page fetch of the trader directory: ordered by name then id; a row needs message or signal
 * visibility. Read from the trader_directory statement table (ordered by (name, id,
 * sourcePlatform), the source identity denormalized): a page is the first rows in key order after
 * the cursor, versions resolved over them. A search matches columns outside the sorting key, so
 * it runs on resolved statements (the newest row of each key first, then the search). `keep`:
 * a further condition on resolved rows (v1's minTrades), `share` the part of rows it lets through.
 */
function directoryRows(
  ctx: ReadContext,
  q: TraderDirectoryQuery,
  where: Where,
  after: Key | undefined,
  limit: number,
  keep?: (r: Row) => boolean,
  share?: number,
): Promise<Row[]> {
  const msg = visibilitySql(ctx.principal, 'msg', 's.id', 's.sourcePlatform');
  const sig = visibilitySql(ctx.principal, 'sig', 's.id', 's.sourcePlatform');
  where
    .add(`(${msg.sql} OR ${sig.sql})`, { ...msg.params, ...sig.params })
    .when(splitList(q.sourcePlatforms), 's.sourcePlatform IN {platforms:Array(String)}', 'platforms');
  const page = (before: [number | string, number | string] | undefined, n: number) => {
    const params: Record<string, unknown> = { ...where.params, n };
    const from = before ? '(s.name, s.id) > ({cName:String}, {cId:UInt64})' : '1';
    if (before) Object.assign(params, { cName: String(before[0]), cId: Number(before[1]) });
    if (q.search === undefined) {
      return ctx.store.query<Row>(
        `SELECT ${COLUMNS} FROM ${TRADER_DIRECTORY_TABLE} AS s WHERE ${where.sql} AND ${from}
        ORDER BY s.name, s.id LIMIT {n:UInt32}`,
        params,
      );
    }
    params.search = q.search;
    return ctx.store.query<Row>(
      `SELECT * FROM (
        SELECT ${COLUMNS} FROM ${TRADER_DIRECTORY_TABLE} AS s WHERE ${where.sql} AND ${from}
        ORDER BY s.name, s.id, s.seq DESC LIMIT 1 BY s.name, s.id
      ) WHERE positionCaseInsensitiveUTF8(name, {search:String}) > 0
        OR positionCaseInsensitiveUTF8(ifNull(slug, ''), {search:String}) > 0
        OR positionCaseInsensitiveUTF8(ifNull(displayName, ''), {search:String}) > 0
        OR positionCaseInsensitiveUTF8(ifNull(handle, ''), {search:String}) > 0
        OR positionCaseInsensitiveUTF8(ifNull(profileUrl, ''), {search:String}) > 0
      ORDER BY name, id LIMIT {n:UInt32}`,
      params,
    );
  };
  return statementPage<Row>(limit, after as [string, number] | undefined, page, keep, share);
}

const directoryRow = (r: Row): TraderDirectoryRow => ({
  id: r.id,
  name: r.name,
  slug: r.slug,
  avatarUrl: r.avatarUrl,
  source:
    r.hasSource === 1
      ? {
          platform: r.sourcePlatform as 'TELEGRAM' | 'X',
          sourceIdentityId: r.sourceIdentityId,
          displayName: r.displayName,
          handle: r.handle,
          avatarUrl: r.sAvatarUrl,
          profileUrl: r.profileUrl,
          audienceCount: r.audienceCount,
        }
      : null,
});

/** Trader directory (v2): see directoryRows. */
export function listTraderDirectory(ctx: ReadContext, q: TraderDirectoryQuery) {
  return listRead<Row, TraderDirectoryRow>(ctx, {
    op: 'list_trader_directory',
    query: q,
    historical: false,
    keyParts: ['string', 'id'],
    fetch: ({ where, after, limit }) => directoryRows(ctx, q, where, after, limit),
    keyOf: (r) => [r.name, r.id],
    shape: (rows) => rows.map(directoryRow),
  });
}

/**
 * Legacy trader discovery (v1): the directory rows (same visibility, search and order) with
 * `tradeCount`, the trader's eligible positions opened within the bounds that the caller's signal
 * visibility shows (0 for a trader seen through message visibility only), at least `minTrades`.
 * The counts are the analytics sample's (one aggregate per page over one window's evaluation
 * rows, a row per position), as trader activity counts them.
 */
export function listLegacyTraders(ctx: ReadContext, q: LegacyTradersQuery) {
  return listRead<Row & { tradeCount: number }, LegacyTraderRow>(ctx, {
    op: 'list_traders',
    query: q,
    historical: true,
    unboundedDefault: true,
    keyParts: ['string', 'id'],
    fetch: async ({ where, after, window, limit }) => {
      const facts = await factsOf(ctx);
      const counts = await positionCounts(ctx, facts, { window });
      const tradeCount = (id: number) => (traderEligible(facts, ctx.principal, id) ? (counts.get(id) ?? 0) : 0);
      const keep = (r: Row) => tradeCount(r.id) >= q.minTrades;
      const share = q.minTrades === 0 ? 1 : Math.max(counts.size, 1) / Math.max(facts.traderName.size, 1);
      const rows = await directoryRows(ctx, q, where, after, limit, keep, share);
      return rows.map((r) => Object.assign(r, { tradeCount: tradeCount(r.id) }));
    },
    keyOf: (r) => [r.name, r.id],
    shape: (rows) => rows.map((r) => ({ ...directoryRow(r), tradeCount: r.tradeCount })),
  });
}
