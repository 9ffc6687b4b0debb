import { splitList } from '../../schemas/api/common-params.ts';
import type { TraderDirectoryRow } from '../../schemas/api/resources.ts';
import { visibilitySql, type ReadContext } from './context.ts';
import { listRead } from './list.ts';

import type { TraderDirectoryQuery } from '../../schemas/api/queries.ts';

interface Row {
  id: number; name: string; slug: string | null; avatarUrl: string | null; sourcePlatform: string; sourceIdentityId: string;
  hasSource: number; displayName: string | null; handle: string | null; sAvatarUrl: string | null; profileUrl: string | null; audienceCount: number | null;
}

/** Trader directory (v2): ordered by name then id; a row needs message or signal visibility. */
export function listTraderDirectory(ctx: ReadContext, q: TraderDirectoryQuery) {
  return listRead<Row, TraderDirectoryRow>(ctx, {
    op: 'list_trader_directory', query: q, historical: false, keyParts: ['string', 'id'],
    fetch: ({ where, after, limit }) => {
      where.add(`(${visibilitySql('msg', 't.id', 't.sourcePlatform')} OR ${visibilitySql('sig', 't.id', 't.sourcePlatform')})`)
        .when(splitList(q.sourcePlatforms), 't.sourcePlatform IN {platforms:Array(String)}', 'platforms');
      if (q.search !== undefined) {
        where.add(`(positionCaseInsensitiveUTF8(t.name, {search:String}) > 0
          OR positionCaseInsensitiveUTF8(ifNull(t.slug, ''), {search:String}) > 0
          OR positionCaseInsensitiveUTF8(ifNull(s.displayName, ''), {search:String}) > 0
          OR positionCaseInsensitiveUTF8(ifNull(s.handle, ''), {search:String}) > 0
          OR positionCaseInsensitiveUTF8(ifNull(s.profileUrl, ''), {search:String}) > 0)`, { search: q.search });
      }
      if (after) where.add('(t.name, t.id) > ({cName:String}, {cId:UInt64})', { cName: String(after[0]), cId: Number(after[1]) });
      return ctx.store.query<Row>(`
        SELECT t.id AS id, t.name AS name, t.slug AS slug, t.avatarUrl AS avatarUrl, t.sourcePlatform AS sourcePlatform,
               t.sourceIdentityId AS sourceIdentityId, s.sourceIdentityId IS NOT NULL AS hasSource,
               s.displayName AS displayName, s.handle AS handle, s.avatarUrl AS sAvatarUrl, s.profileUrl AS profileUrl, s.audienceCount AS audienceCount
        FROM (SELECT * FROM $db.traders FINAL WHERE deleted = 0) AS t
        LEFT JOIN (SELECT * FROM $db.source_identities FINAL WHERE deleted = 0) AS s
          ON s.platform = t.sourcePlatform AND s.sourceIdentityId = t.sourceIdentityId
        WHERE ${where.sql}
        ORDER BY t.name, t.id LIMIT {limit:UInt32}
        SETTINGS join_use_nulls = 1`, { ...where.params, limit });
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
