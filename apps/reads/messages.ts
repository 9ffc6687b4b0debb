import { splitIds, splitList } from '../../schemas/api/common-params.ts';
import type { MessagesQuery } from '../../schemas/api/queries.ts';
import type { Message } from '../../schemas/api/resources.ts';
import { iso } from '../../schemas/formats.ts';
import { sql } from '../../storage/sql.ts';
import { MESSAGES_TABLE } from '../../storage/tables/messages.ts';
import { parseSourceKey, sourceKey, sourceKeySql } from '../../storage/tables/traders.ts';
import { flag, type ReadContext } from './context.ts';
import { factsOf, type Identity, permits, setCondition } from './facts.ts';
import { addWindow, listRead, type StatementRow, statementPage, statementRows } from './list.ts';

interface Row extends StatementRow {
  id: string;
  traderId: number;
  platform: 'TELEGRAM' | 'X';
  sourceIdentityId: string;
  t: number;
  url: string | null;
  text: string | null;
  attachmentTypes: string[];
  attachmentUrls: string[];
  isEdited: number | null;
  isReply: number | null;
  isQuote: number | null;
  isRepost: number | null;
  identity: Identity | null;
}

/**
 * A message belongs to the live trader assigned its source identity (lowest id if several).
 * Message visibility applies; signal visibility does not, so `traderIds` selects messages of
 * those traders' assigned source even for an account that cannot see their signals. Sources,
 * their traders and identities come from the facts of the data version.
 */
const COLUMNS = `s.id AS id, s.platform AS platform, s.sourceIdentityId AS sourceIdentityId, s.url AS url, s.text AS text,
  s.attachmentTypes AS attachmentTypes, s.attachmentUrls AS attachmentUrls,
  s.isEdited AS isEdited, s.isReply AS isReply, s.isQuote AS isQuote, s.isRepost AS isRepost`;

export function listMessages(ctx: ReadContext, q: MessagesQuery) {
  const ids = splitList(q.ids);
  return listRead<Row, Message>(ctx, {
    op: 'list_messages',
    query: q,
    historical: true,
    keyParts: ['time', 'string'],
    // Hydration by id is not limited by the 90-day default window.
    unboundedDefault: ids !== undefined,
    fetch: async ({ where, after, window, limit }) => {
      const facts = await factsOf(ctx);
      const traderIds = splitIds(q.traderIds);
      const wanted = traderIds && new Set(traderIds);
      const sources: string[] = [];
      const sourceIds: string[] = [];
      for (const [k, traderId] of facts.sourceTrader) {
        const { platform, sourceIdentityId } = parseSourceKey(k);
        if ((!wanted || wanted.has(traderId)) && permits(ctx.principal.messageVisibility, traderId, platform)) {
          sources.push(k);
          sourceIds.push(sourceIdentityId);
        }
      }
      // A page of some traders' messages depends on their sources' rows only (who holds a source is in the facts' tables).
      if (wanted) ctx.sources = sources;
      // With traderIds the few sources' ids also lead the planner to the by-source projection.
      const visible = new Set(sources);
      const sourceOk = setCondition(
        where,
        sql`${sourceKeySql('s')} IN {sources:Array(String)}`,
        'sources',
        sources,
        facts.sourceTrader.size,
        (r: Row) => visible.has(sourceKey(r.platform, r.sourceIdentityId)),
      );
      where
        .when(traderIds && sourceIds, 's.sourceIdentityId IN {sourceIds:Array(String)}', 'sourceIds')
        .when(ids, 's.id IN {ids:Array(String)}', 'ids')
        .when(splitList(q.sourcePlatforms), 's.platform IN {platforms:Array(String)}', 'platforms');
      addWindow(where, 's.writtenAt', window);
      // Without traderIds or ids the page is a read in (writtenAt, id) order.
      const spec = {
        table: MESSAGES_TABLE,
        columns: COLUMNS,
        timeCol: 'writtenAt',
        idType: 'String' as const,
        where,
        selective: traderIds !== undefined || ids !== undefined,
      };
      const rows = await statementPage<Row>(
        limit,
        after,
        (before, n) => statementRows<Row>(ctx, spec, before, n),
        sourceOk.keep,
        traderIds || ids ? 1 : sourceOk.share,
      );
      for (const r of rows) {
        const k = sourceKey(r.platform, r.sourceIdentityId);
        r.traderId = facts.sourceTrader.get(k)!;
        r.identity = facts.identities.get(k) ?? null;
      }
      return rows;
    },
    keyOf: (r) => [r.t, r.id],
    shape: (rows) =>
      rows.map((r) => ({
        traderId: r.traderId,
        id: r.id,
        source: {
          platform: r.platform,
          identity: {
            platform: r.platform,
            sourceIdentityId: r.sourceIdentityId,
            displayName: r.identity?.displayName ?? null,
            handle: r.identity?.handle ?? null,
            avatarUrl: r.identity?.avatarUrl ?? null,
            profileUrl: r.identity?.profileUrl ?? null,
            audienceCount: r.identity?.audienceCount ?? null,
          },
          preview: {
            platform: r.platform,
            writtenAt: iso(r.t),
            url: r.url,
            text: r.text,
            attachments: r.attachmentTypes.map((type, i) => ({ type, url: r.attachmentUrls[i]! })),
            isEdited: flag(r.isEdited),
            isReply: flag(r.isReply),
            isQuote: flag(r.isQuote),
            isRepost: flag(r.isRepost),
          },
        },
      })),
  });
}
