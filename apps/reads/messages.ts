import { splitIds, splitList } from '../../schemas/api/common-params.ts';
import { RESUME_COLUMN } from '../../schemas/api/exports.ts';
import type { MessagesQuery } from '../../schemas/api/queries.ts';
import type { Message } from '../../schemas/api/resources.ts';
import { iso } from '../../schemas/formats.ts';
import { identifier, sql } from '../../storage/sql.ts';
import { beforeKey } from '../../storage/statements.ts';
import { MESSAGES_TABLE } from '../../storage/tables/messages.ts';
import { parseSourceKey, sourceKey, sourceKeySql } from '../../storage/tables/traders.ts';
import { flag, type ReadContext } from './context.ts';
import {
  exportStatement,
  leafNames,
  type NativeExport,
  nativeStart,
  resumeTokenSql,
  sourceColumns,
  type TupleShape,
  tupleType,
} from './exports.ts';
import { type Facts, factsOf, type Identity, permits, setCondition } from './facts.ts';
import { addWindow, listRead, type StatementRow, statementPage, statementRows, Where } from './list.ts';
import type { Window } from './window.ts';

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

/**
 * The filters of a messages read: the sources the caller may read (of traderIds' traders, if
 * given), ids, platforms and the window. Returns the check of resolved rows (setCondition); with
 * `allInSql` every condition is in the SQL.
 */
function messageFilters(
  ctx: ReadContext,
  q: Omit<MessagesQuery, 'limit'>,
  facts: Facts,
  where: Where,
  window: Window,
  allInSql = false,
): { keep: (r: { platform: string; sourceIdentityId: string }) => boolean; share: number } {
  const traderIds = splitIds(q.traderIds);
  const ids = splitList(q.ids);
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
  if (wanted) ctx.sources = sources;
  const visible = new Set(sources);
  const sourceOk = setCondition(
    where,
    sql`${sourceKeySql('s')} IN {sources:Array(String)}`,
    'sources',
    sources,
    allInSql ? Infinity : facts.sourceTrader.size,
    (r: { platform: string; sourceIdentityId: string }) => visible.has(sourceKey(r.platform, r.sourceIdentityId)),
  );
  where
    .when(traderIds && sourceIds, 's.sourceIdentityId IN {sourceIds:Array(String)}', 'sourceIds')
    .when(ids, 's.id IN {ids:Array(String)}', 'ids')
    .when(splitList(q.sourcePlatforms), 's.platform IN {platforms:Array(String)}', 'platforms');
  addWindow(where, 's.writtenAt', window);
  return { keep: sourceOk.keep, share: traderIds || ids ? 1 : sourceOk.share };
}

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
      const sourceOk = messageFilters(ctx, q, facts, where, window);
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
        sourceOk.share,
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

/** The export's `source` column (the list read's Message.source); attachments as JSON text in CSV. */
const sourceShape = (format: 'ndjson' | 'csv'): TupleShape => ({
  platform: 'String',
  identity: {
    platform: 'String',
    sourceIdentityId: 'String',
    displayName: 'Nullable(String)',
    handle: 'Nullable(String)',
    avatarUrl: 'Nullable(String)',
    profileUrl: 'Nullable(String)',
    audienceCount: 'Nullable(Int64)',
  },
  preview: {
    platform: 'String',
    writtenAt: "DateTime64(3, 'UTC')",
    url: 'Nullable(String)',
    text: 'Nullable(String)',
    attachments: format === 'csv' ? 'String' : 'Array(Tuple(type String, url String))',
    isEdited: 'Nullable(Bool)',
    isReply: 'Nullable(Bool)',
    isQuote: 'Nullable(Bool)',
    isRepost: 'Nullable(Bool)',
  },
});

/**
 * The messages export as one statement (issue 28): listMessages' filters and versions, resolved by
 * the store, each message with its trader and its source's identity (from the facts, as parameter
 * sets) shaped as a Message, with its resume token.
 */
export async function exportMessages(
  ctx: ReadContext,
  q: Omit<MessagesQuery, 'limit'>,
  resume: string | undefined,
  rows: number,
  format: 'ndjson' | 'csv',
): Promise<NativeExport> {
  const { after, window, seal } = nativeStart(
    ctx,
    { op: 'list_messages', query: q, keyParts: ['time', 'string'], unboundedDefault: splitList(q.ids) !== undefined },
    resume,
  );
  const facts = await factsOf(ctx);
  const where = new Where();
  messageFilters(ctx, q, facts, where, window, true);
  const b = beforeKey(identifier('s.writtenAt'), identifier('s.id'), 'String', after as [number, string] | undefined);
  const source = sourceColumns(facts, 'm');
  const attachments = source.attachments;
  const shape = sourceShape(format);
  return {
    sql: exportStatement({
      outer: `m_trader AS traderId, m_id AS id,
        CAST(tuple(m_platform, tuple(m_platform, m_source, m_name, m_handle, m_avatar, m_profile, m_audience),
          tuple(m_platform, m_time, m_url, m_text, ${format === 'csv' ? `toJSONString(${attachments})` : attachments}, m_edited, m_reply, m_quote, m_repost)),
          {sourceType:String}) AS source,
        ${resumeTokenSql('m_t', 'toJSONString(m_id)')}`,
      inner: `s.id AS m_id, toString(s.platform) AS m_platform, s.sourceIdentityId AS m_source,
        ${source.sql},
        toTimeZone(s.writtenAt, 'UTC') AS m_time, s.url AS m_url, s.text AS m_text,
        CAST(s.isEdited, 'Nullable(Bool)') AS m_edited, CAST(s.isReply, 'Nullable(Bool)') AS m_reply,
        CAST(s.isQuote, 'Nullable(Bool)') AS m_quote, CAST(s.isRepost, 'Nullable(Bool)') AS m_repost,
        toUnixTimestamp64Milli(s.writtenAt) AS m_t`,
      table: MESSAGES_TABLE,
      where: where.sql,
      before: b.text,
      timeCol: 'writtenAt',
    }),
    params: {
      ...where.params,
      ...b.params,
      seal,
      sourceType: tupleType(shape),
      ...source.params,
      exportRows: rows,
    },
    columns: ['traderId', 'id', ...leafNames(shape, 'source'), RESUME_COLUMN],
  };
}
