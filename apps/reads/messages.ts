import { splitIds, splitList } from '../../schemas/api/common-params.ts';
import type { Message } from '../../schemas/api/resources.ts';
import { b, iso, visibilitySql, type ReadContext } from './context.ts';
import { addWindow, beforeSql, listRead, statementPage, type StatementRow } from './list.ts';

import type { MessagesQuery } from '../../schemas/api/queries.ts';

interface Row extends StatementRow {
  id: string; traderId: number; platform: 'TELEGRAM' | 'X'; sourceIdentityId: string; t: number;
  url: string | null; text: string | null; attachmentTypes: string[]; attachmentUrls: string[];
  isEdited: number | null; isReply: number | null; isQuote: number | null; isRepost: number | null;
  displayName: string | null; handle: string | null; avatarUrl: string | null; profileUrl: string | null; audienceCount: number | null;
}

/**
 * A message belongs to the live trader assigned its source identity (lowest id if several).
 * Message visibility applies; signal visibility does not, so `traderIds` selects messages of
 * those traders' assigned source even for an account that cannot see their signals.
 */
const MESSAGE_TRADERS_SQL = `SELECT sourcePlatform, sourceIdentityId, min(id) AS traderId FROM $db.traders FINAL
  WHERE deleted = 0 AND sourcePlatform != '' GROUP BY sourcePlatform, sourceIdentityId`;

export function listMessages(ctx: ReadContext, q: MessagesQuery) {
  const ids = splitList(q.ids);
  return listRead<Row, Message>(ctx, {
    op: 'list_messages', query: q, historical: true, keyParts: ['time', 'string'],
    // Hydration by id is not limited by the 90-day default window.
    unboundedDefault: ids !== undefined,
    fetch: ({ where, after, window, limit }) => {
      // Trader-side conditions select the assigned sources first (a small set); the statement
      // table (ordered by (writtenAt, id), with projections by source and by id) is then read in
      // key order, and only the page is joined back for traderId and the source identity.
      const traderIds = splitIds(q.traderIds);
      // Without traderIds or ids the page is a read in (writtenAt, id) order; the source condition
      // alone would lead the planner to the by-source projection and a sort of all its rows.
      where.add(`(m.platform, m.sourceIdentityId) IN (SELECT sourcePlatform, sourceIdentityId FROM (${MESSAGE_TRADERS_SQL})
          WHERE ${visibilitySql('msg', 'traderId', 'sourcePlatform')}${traderIds ? ' AND traderId IN {traderIds:Array(UInt64)}' : ''})`,
        traderIds ? { traderIds } : {})
        .when(ids, 'm.id IN {ids:Array(String)}', 'ids')
        .when(splitList(q.sourcePlatforms), 'm.platform IN {platforms:Array(String)}', 'platforms');
      addWindow(where, 'm.writtenAt', window);
      return statementPage<Row>(limit, after, (before, n) => {
        const b = beforeSql('m.writtenAt', 'm.id', 'String', before);
        return ctx.store.query<Row>(`
          SELECT p.id AS id, t.traderId AS traderId, p.platform AS platform, p.sourceIdentityId AS sourceIdentityId,
                 toUnixTimestamp64Milli(p.writtenAt) AS t, p.url AS url, p.text AS text,
                 p.attachmentTypes AS attachmentTypes, p.attachmentUrls AS attachmentUrls,
                 p.isEdited AS isEdited, p.isReply AS isReply, p.isQuote AS isQuote, p.isRepost AS isRepost,
                 s.displayName AS displayName, s.handle AS handle, s.avatarUrl AS avatarUrl, s.profileUrl AS profileUrl, s.audienceCount AS audienceCount,
                 p.live AS live, p.tomb AS tomb, p.seq AS seq
          FROM (
            SELECT * FROM $db.messages AS m WHERE ${where.sql} AND ${b.sql}
            ORDER BY m.writtenAt DESC, m.id DESC LIMIT {n:UInt32}
          ) AS p
          LEFT JOIN (${MESSAGE_TRADERS_SQL}) AS t ON t.sourcePlatform = p.platform AND t.sourceIdentityId = p.sourceIdentityId
          LEFT JOIN (SELECT * FROM $db.source_identities FINAL WHERE deleted = 0) AS s
            ON s.platform = p.platform AND s.sourceIdentityId = p.sourceIdentityId
          ORDER BY p.writtenAt DESC, p.id DESC
          SETTINGS join_use_nulls = 1${traderIds || ids ? '' : ', optimize_use_projections = 0'}`, { ...where.params, ...b.params, n });
      });
    },
    keyOf: (r) => [r.t, r.id],
    shape: (rows) => rows.map((r) => ({
      traderId: r.traderId,
      id: r.id,
      source: {
        platform: r.platform,
        identity: {
          platform: r.platform, sourceIdentityId: r.sourceIdentityId, displayName: r.displayName, handle: r.handle,
          avatarUrl: r.avatarUrl, profileUrl: r.profileUrl, audienceCount: r.audienceCount,
        },
        preview: {
          platform: r.platform, writtenAt: iso(r.t), url: r.url, text: r.text,
          attachments: r.attachmentTypes.map((type, i) => ({ type, url: r.attachmentUrls[i]! })),
          isEdited: b(r.isEdited), isReply: b(r.isReply), isQuote: b(r.isQuote), isRepost: b(r.isRepost),
        },
      },
    })),
  });
}
