import { splitList } from '../../schemas/api/common-params.ts';
import type { TraderDirectoryRow } from '../../schemas/api/resources.ts';
import { visibilitySql, type ReadContext } from './context.ts';
import { listRead, statementPage, type StatementRow } from './list.ts';

import type { TraderDirectoryQuery } from '../../schemas/api/queries.ts';

interface Row extends StatementRow {
  t: string; id: number; name: string; slug: string | null; avatarUrl: string | null; sourcePlatform: string; sourceIdentityId: string;
  hasSource: number; displayName: string | null; handle: string | null; sAvatarUrl: string | null; profileUrl: string | null; audienceCount: number | null;
}

const COLUMNS = `s.id AS id, s.name AS name, s.name AS t, s.slug AS slug, s.avatarUrl AS avatarUrl, s.sourcePlatform AS sourcePlatform,
  s.sourceIdentityId AS sourceIdentityId, s.hasSource AS hasSource, s.displayName AS displayName, s.handle AS handle,
  s.sAvatarUrl AS sAvatarUrl, s.profileUrl AS profileUrl, s.audienceCount AS audienceCount, s.live AS live, s.tomb AS tomb, s.seq AS seq`;

/**
 * Trader directory (v2): ordered by name then id; a row needs message or signal visibility. Read
 * from the trader_directory statement table (ordered by (name, id, sourcePlatform), the source
 * identity denormalized): a page is the first rows in key order after the cursor, versions
 * resolved over them. A search matches columns outside the sorting key, so it runs on resolved
 * statements (the newest row of each key first, then the search).
 */
export function listTraderDirectory(ctx: ReadContext, q: TraderDirectoryQuery) {
  return listRead<Row, TraderDirectoryRow>(ctx, {
    op: 'list_trader_directory', query: q, historical: false, keyParts: ['string', 'id'],
    fetch: ({ where, after, limit }) => {
      const msg = visibilitySql(ctx.principal, 'msg', 's.id', 's.sourcePlatform');
      const sig = visibilitySql(ctx.principal, 'sig', 's.id', 's.sourcePlatform');
      where.add(`(${msg.sql} OR ${sig.sql})`, { ...msg.params, ...sig.params })
        .when(splitList(q.sourcePlatforms), 's.sourcePlatform IN {platforms:Array(String)}', 'platforms');
      const page = (before: [number | string, number | string] | undefined, n: number) => {
        const params: Record<string, unknown> = { ...where.params, n };
        const from = before ? '(s.name, s.id) > ({cName:String}, {cId:UInt64})' : '1';
        if (before) Object.assign(params, { cName: String(before[0]), cId: Number(before[1]) });
        if (q.search === undefined) {
          return ctx.store.query<Row>(`SELECT ${COLUMNS} FROM $db.trader_directory AS s WHERE ${where.sql} AND ${from}
            ORDER BY s.name, s.id LIMIT {n:UInt32}`, params);
        }
        params.search = q.search;
        return ctx.store.query<Row>(`SELECT * FROM (
            SELECT ${COLUMNS} FROM $db.trader_directory AS s WHERE ${where.sql} AND ${from}
            ORDER BY s.name, s.id, s.seq DESC LIMIT 1 BY s.name, s.id
          ) WHERE positionCaseInsensitiveUTF8(name, {search:String}) > 0
            OR positionCaseInsensitiveUTF8(ifNull(slug, ''), {search:String}) > 0
            OR positionCaseInsensitiveUTF8(ifNull(displayName, ''), {search:String}) > 0
            OR positionCaseInsensitiveUTF8(ifNull(handle, ''), {search:String}) > 0
            OR positionCaseInsensitiveUTF8(ifNull(profileUrl, ''), {search:String}) > 0
          ORDER BY name, id LIMIT {n:UInt32}`, params);
      };
      return statementPage<Row>(limit, after, page);
    },
    keyOf: (r) => [r.name, r.id],
    shape: (rows) => rows.map((r) => ({
      id: r.id, name: r.name, slug: r.slug, avatarUrl: r.avatarUrl,
      source: r.hasSource === 1 ? {
        platform: r.sourcePlatform as 'TELEGRAM' | 'X', sourceIdentityId: r.sourceIdentityId, displayName: r.displayName,
        handle: r.handle, avatarUrl: r.sAvatarUrl, profileUrl: r.profileUrl, audienceCount: r.audienceCount,
      } : null,
    })),
  });
}
