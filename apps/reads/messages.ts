import { splitIds, splitList } from '../../schemas/api/common-params.ts';
import type { Message } from '../../schemas/api/resources.ts';
import { b, iso, visibilitySql, type ReadContext } from './context.ts';
import { addBefore, addWindow, listRead } from './list.ts';

export interface MessagesQuery {
  traderIds?: string; ids?: string; sourcePlatforms?: string;
  startTime?: string; endTime?: string; limit: number; cursor?: string;
}

interface Row {
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
    op: 'list_messages', query: q as any, historical: true,
    // Hydration by id is not limited by the 90-day default window.
    unboundedDefault: ids !== undefined,
    fetch: ({ where, after, window, limit }) => {
      where.add(visibilitySql('msg', 't.traderId', 'm.platform'))
        .when(splitIds(q.traderIds), 't.traderId IN {traderIds:Array(UInt64)}', 'traderIds')
        .when(ids, 'm.id IN {ids:Array(String)}', 'ids')
        .when(splitList(q.sourcePlatforms), 'm.platform IN {platforms:Array(String)}', 'platforms');
      addWindow(where, 'm.writtenAt', window);
      addBefore(where, 'm.writtenAt', 'm.id', 'String', after);
      return ctx.store.query<Row>(`
        SELECT p.*, s.displayName AS displayName, s.handle AS handle, s.avatarUrl AS avatarUrl, s.profileUrl AS profileUrl, s.audienceCount AS audienceCount
        FROM (
          SELECT m.id AS id, t.traderId AS traderId, m.platform AS platform, m.sourceIdentityId AS sourceIdentityId,
                 toUnixTimestamp64Milli(m.writtenAt) AS t, m.writtenAt AS writtenAt, m.url AS url, m.text AS text,
                 m.attachmentTypes AS attachmentTypes, m.attachmentUrls AS attachmentUrls,
                 m.isEdited AS isEdited, m.isReply AS isReply, m.isQuote AS isQuote, m.isRepost AS isRepost
          FROM (SELECT * FROM $db.messages FINAL WHERE deleted = 0) AS m
          INNER JOIN (${MESSAGE_TRADERS_SQL}) AS t ON t.sourcePlatform = m.platform AND t.sourceIdentityId = m.sourceIdentityId
          WHERE ${where.sql}
          ORDER BY m.writtenAt DESC, m.id DESC LIMIT {limit:UInt32}
        ) AS p
        LEFT JOIN (SELECT * FROM $db.source_identities FINAL WHERE deleted = 0) AS s
          ON s.platform = p.platform AND s.sourceIdentityId = p.sourceIdentityId
        ORDER BY p.writtenAt DESC, p.id DESC
        SETTINGS join_use_nulls = 1`, { ...where.params, limit });
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
