import { splitIds } from '../../schemas/api/common-params.ts';
import { ApiError } from '../../schemas/api/errors.ts';
import { RESUME_COLUMN } from '../../schemas/api/exports.ts';
import type { FeedQuery } from '../../schemas/api/queries.ts';
import type { FeedItem } from '../../schemas/api/resources.ts';
import { iso } from '../../schemas/formats.ts';
import { writtenTo } from '../../storage/changes.ts';
import { identifier, sql } from '../../storage/sql.ts';
import { beforeKey } from '../../storage/statements.ts';
import {
  curatedFeedEventsSql,
  curateFeedEvents,
  decodeFeedEvents,
  FEED_CHANGES_TABLE,
  FEED_EVENT_TYPES,
  FEED_GROUPS_TABLE,
  FEED_WATERMARK_TABLE,
  type FeedMarks,
  feedMarks,
} from '../../storage/tables/feed-groups.ts';
import { MESSAGES_TABLE } from '../../storage/tables/messages.ts';
import { parseSourceKey, sourceKey, sourceKeySql } from '../../storage/tables/traders.ts';
import { perDataVersion, type ReadContext } from './context.ts';
import { type CursorCodec, fingerprint } from './cursor.ts';
import {
  exportStatement,
  leafNames,
  lookedUp,
  type NativeExport,
  nativeStart,
  resumeTokenSql,
  sourceColumns,
  type TupleShape,
  tupleType,
} from './exports.ts';
import { type Facts, factsOf, permits, setCondition, signalTraders } from './facts.ts';
import {
  addWindow,
  type ListMeta,
  listRead,
  PAGE_FACTS,
  type PageFacts,
  type StatementRow,
  statementPage,
  statementRows,
  Where,
} from './list.ts';
import type { Principal } from './principal.ts';
import { appliedTimeRange, type Window, windowAt, windowRule } from './window.ts';

interface Row extends StatementRow {
  id: string;
  t: number;
  platform: 'TELEGRAM' | 'X';
  sourceIdentityId: string;
  url: string | null;
  text: string | null;
  attachmentTypes: string[];
  attachmentUrls: string[];
  events: string;
  traderIds: number[];
  /** The group as this caller sees it (set by the page's row check). */
  item?: FeedItem | null;
}

const COLUMNS = `s.id AS id, s.platform AS platform, s.sourceIdentityId AS sourceIdentityId, s.url AS url, s.text AS text,
  s.attachmentTypes AS attachmentTypes, s.attachmentUrls AS attachmentUrls, s.events AS events, s.traderIds AS traderIds`;

/** A stamp of feed_changes: its key (fseq as `t`, id) and the group it carries. */
interface Stamp extends Row {
  writtenAt: number;
  groupLive: number;
}

interface Filters {
  traderIds?: Set<number>;
  assetIds?: Set<number>;
  window?: Window;
}

/**
 * A stored group as the caller sees it, or null when it shows nothing: the group's trader is the
 * live trader assigned the message's source (facts), and both the caller's message visibility
 * (the source text) and signal visibility (the events) must permit it; its events are curated
 * (contract 4), then each needs a live, signal-visible trader and an asset with an active
 * market; a group with no event left is not in the feed. `traderIds` selects by the group's
 * trader, `assetIds` needs a shown event on one of the assets.
 */
function groupAsSeen(r: Row, writtenAt: number, facts: Facts, p: Principal, f: Filters): FeedItem | null {
  const key = sourceKey(r.platform, r.sourceIdentityId);
  const traderId = facts.sourceTrader.get(key);
  if (traderId === undefined) return null;
  const platform = facts.traderPlatform.get(traderId)!;
  if (!permits(p.messageVisibility, traderId, platform) || !permits(p.signalVisibility, traderId, platform)) return null;
  if (f.traderIds && !f.traderIds.has(traderId)) return null;
  if (f.window && ((f.window.start !== null && writtenAt < f.window.start) || (f.window.end !== null && writtenAt > f.window.end)))
    return null;
  const events = curateFeedEvents(decodeFeedEvents(r.events)).filter((e) => {
    const ep = facts.traderPlatform.get(e.traderId);
    return ep !== undefined && permits(p.signalVisibility, e.traderId, ep) && facts.assetById.has(e.assetId);
  });
  if (!events.length || (f.assetIds && !events.some((e) => f.assetIds!.has(e.assetId)))) return null;
  const identity = facts.identities.get(key);
  const look = facts.traderLook.get(traderId)!;
  return {
    id: r.id,
    writtenAt: iso(writtenAt),
    source: {
      platform: r.platform,
      url: r.url,
      text: r.text,
      attachments: r.attachmentTypes.map((type, i) => ({ type, url: r.attachmentUrls[i]! })),
      identity: {
        platform: r.platform,
        sourceIdentityId: r.sourceIdentityId,
        displayName: identity?.displayName ?? null,
        handle: identity?.handle ?? null,
        avatarUrl: identity?.avatarUrl ?? null,
        profileUrl: identity?.profileUrl ?? null,
        audienceCount: identity?.audienceCount ?? null,
      },
    },
    trader: { id: traderId, name: facts.traderName.get(traderId)!, slug: look.slug, avatarUrl: look.avatarUrl },
    events: events.map((e) => {
      const a = facts.assetById.get(e.assetId)!;
      return {
        id: e.id,
        type: e.type,
        price: e.price,
        quoteSymbol: a.quoteSymbol,
        timeOfEvent: iso(e.t),
        direction: e.direction,
        assumed: e.assumed,
        retrospective: e.retrospective,
        positionId: e.positionId,
        traderId: e.traderId,
        assetId: e.assetId,
        asset: { id: a.id, name: a.name, symbol: a.symbol, logoUrl: a.logoUrl },
      };
    }),
  };
}

/**
 * Whether a visibility permits a group as the feed applies it, from what its stamp still holds:
 * all, the group's platform, or the source's current trader or (once that one is gone) a trader
 * of the group's events.
 */
function permitsGroup(v: Principal['messageVisibility'], r: Row, owner: number | undefined): boolean {
  switch (v.mode) {
    case 'all':
      return true;
    case 'platforms':
      return (v.platforms ?? []).includes(r.platform);
    case 'traders':
      return (v.traderIds ?? []).some((t) => t === owner || r.traderIds.includes(t));
    default:
      return false;
  }
}

/**
 * Whether a caller may learn that a group left its feed (DESIGN 6 "History window scope"): only a
 * group it could have read, so both its visibilities permit the group and the group's writtenAt
 * (the last one it had, `writtenAt`; null: it never had one) lies within the poll's window (the
 * history window, and explicit bounds). Any other id would name a row the caller could not list.
 */
function mayName(r: Row, writtenAt: number | null, facts: Facts, p: Principal, window: Window): boolean {
  if (writtenAt === null || (window.start !== null && writtenAt < window.start) || (window.end !== null && writtenAt > window.end))
    return false;
  const owner = facts.sourceTrader.get(sourceKey(r.platform, r.sourceIdentityId));
  return permitsGroup(p.messageVisibility, r, owner) && permitsGroup(p.signalVisibility, r, owner);
}

/**
 * The writtenAt each of these messages last had (ms), from the messages table's newest statement
 * of each id (a tombstone sits at the key of the statement it cancels): a group whose message was
 * deleted is stamped without one. Few ids (removals of one poll), read by the table's id projection.
 */
async function lastWrittenAt(ctx: ReadContext, ids: string[]): Promise<Map<string, number>> {
  if (!ids.length) return new Map();
  const rows = await ctx.store.query<{ id: string; t: number | string }>(
    `
    SELECT id, toUnixTimestamp64Milli(writtenAt) AS t FROM ${MESSAGES_TABLE} WHERE id IN {ids:Array(String)}
    ORDER BY id, seq DESC LIMIT 1 BY id`,
    { ids },
  );
  return new Map(rows.map((r) => [r.id, Number(r.t)]));
}

/** The sources (`sourceKey`) whose groups the caller may see, each with its trader: both visibilities permit that trader (and `traderIds` selects it). */
function visibleSources(facts: Facts, p: Principal, traderIds: Set<number> | undefined): string[] {
  const sources: string[] = [];
  for (const [k, traderId] of facts.sourceTrader) {
    const platform = facts.traderPlatform.get(traderId)!;
    if (
      (!traderIds || traderIds.has(traderId)) &&
      permits(p.messageVisibility, traderId, platform) &&
      permits(p.signalVisibility, traderId, platform)
    )
      sources.push(k);
  }
  return sources;
}

export type FeedMeta = ListMeta & { dataComputedAt: string; removedIds?: string[] };

/**
 * The partner feed (contract 4, DESIGN 5 and 6): pages of groups newest writtenAt first (ties by
 * id descending) from feed_groups, or with `since` the groups changed after a watermark.
 */
export async function listFeed(ctx: ReadContext, q: FeedQuery): Promise<{ results: FeedItem[]; meta: FeedMeta }> {
  if (q.wait !== undefined && q.since === undefined)
    throw new ApiError('VALIDATION_ERROR', 'wait holds a since-poll: give since with it', [{ param: 'wait', message: 'needs since' }]);
  if (q.since !== undefined) {
    if (q.cursor !== undefined) {
      throw new ApiError('VALIDATION_ERROR', 'cursor and since are mutually exclusive', [
        { param: 'since', message: 'must not be given with cursor' },
      ]);
    }
    return sincePoll(ctx, q);
  }
  const traderIds = splitIds(q.traderIds);
  const assetIds = splitIds(q.assetIds);
  const f: Filters = { traderIds: traderIds && new Set(traderIds), assetIds: assetIds && new Set(assetIds) };
  const page = await listRead<Row, FeedItem>(ctx, {
    op: 'list_feed',
    query: q,
    historical: true,
    keyParts: ['time', 'string'],
    fetch: async ({ where, after, window, limit }) => {
      const facts = await factsOf(ctx);
      // The sources whose groups the caller may see (and that traderIds selects), as a set condition.
      const sources = visibleSources(facts, ctx.principal, f.traderIds);
      const sourceIds = f.traderIds ? sources.map((k) => parseSourceKey(k).sourceIdentityId) : undefined;
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
        .when(sourceIds, 's.sourceIdentityId IN {sourceIds:Array(String)}', 'sourceIds')
        .when(assetIds, 'hasAny(s.assetIds, {assetIds:Array(UInt64)})', 'assetIds');
      addWindow(where, 's.writtenAt', window);
      const spec = {
        table: FEED_GROUPS_TABLE,
        columns: COLUMNS,
        timeCol: 'writtenAt',
        idType: 'String' as const,
        where,
        selective: traderIds !== undefined,
      };
      // A stored group shows nothing when every event is curated away or ineligible: such rows are passed over.
      const keep = (r: Row) => sourceOk.keep(r) && (r.item = groupAsSeen(r, r.t, facts, ctx.principal, f)) !== null;
      return statementPage<Row>(
        limit,
        after,
        (before, n) => statementRows<Row>(ctx, spec, before, n),
        keep,
        traderIds ? 1 : sourceOk.share,
      );
    },
    keyOf: (r) => [r.t, r.id],
    shape: (rows) => rows.map((r) => r.item!),
  });
  (page.meta as FeedMeta).dataComputedAt = ctx.now.toISOString();
  return page as { results: FeedItem[]; meta: FeedMeta };
}

/**
 * The feed's marks, per data version: the projector writes them before it commits, so the ones
 * read during a data version are at least that version's (a 2 ms query of every since-poll before).
 * Then they follow the commits: each says the highest marks it wrote (issue 26: no read per commit).
 */
const marksOf = perDataVersion((store) => feedMarks(store), {
  update: (m, since) => {
    // Both, or not known (a change set of an older projector says neither): read again.
    const c = writtenTo(since, FEED_WATERMARK_TABLE.name)?.marks;
    const watermark = c?.fseq;
    const facts = c?.facts;
    if (typeof watermark !== 'number' || typeof facts !== 'number' || !Number.isFinite(watermark) || !Number.isFinite(facts)) return null;
    return { watermark: Math.max(m.watermark, watermark), facts: Math.max(m.facts, facts) };
  },
});

/**
 * How far a since-poll may go with these facts: a stamp is judged by the traders, assets and
 * identities (groupAsSeen, mayName), so it must not be passed with facts older than it. A batch
 * stores those tables before its feed step takes a facts mark and stamps after it; the facts hold
 * the marks read just before they were loaded. While the facts mark has not moved past theirs,
 * every stamp up to the watermark is theirs to judge; once it has, they are older than a change
 * the stamps after their own watermark were made under (a commit of the feed announced before the
 * one of that change: lanes, commit rounds), and the poll stops at their watermark until they are
 * loaded again (issue 28: a held poll passed a group's removal, judged by facts without it).
 */
function judgedUpTo(marks: FeedMarks, facts: Facts): number {
  return marks.facts <= facts.feedMarks.facts ? marks.watermark : Math.min(marks.watermark, facts.feedMarks.watermark);
}

/**
 * The stamps above `after` up to `watermark`, `n` at most, in key order. Read by every poll for
 * itself: rows at or below a watermark are not final within a data version (a batch writes the
 * tombstones of older stamps before it commits), so rows read by one poll are not another's to
 * use (shared among woken long-polls, they let a held poll keep a group the batch removed).
 */
function stampsAfter(ctx: ReadContext, after: number, watermark: number, n: number): Promise<Stamp[]> {
  return ctx.store.query<Stamp>(
    `
      SELECT fseq AS t, id, platform, sourceIdentityId, toUnixTimestamp64Milli(writtenAt) AS writtenAt, url, text, attachmentTypes, attachmentUrls,
        events, traderIds, c.live AS groupLive, 1 - c.tomb AS live, tomb, seq
      FROM ${FEED_CHANGES_TABLE} AS c WHERE fseq > {after:UInt64} AND fseq <= {watermark:UInt64}
      ORDER BY fseq, id LIMIT {n:UInt32} SETTINGS max_threads = 1`,
    { after, watermark, n },
  );
}

/**
 * What makes held since-polls one question whoever asks them (issue 28: 1,000 polls of 100
 * accounts woken by one commit each read the same stamps), or null when the poll is none (a cursor with it) or its cursor does not
 * decode (its own read says why): the position the cursor holds, the filters, and the policy the
 * answer is made under (visibility and history window, not the account). Their answers differ only
 * in `nextCursor`, signed for each caller: `resign` makes one's answer another's.
 */
export function sincePollShare(
  q: FeedQuery,
  p: Principal,
  cursors: CursorCodec,
): { key: string; resign(answer: { meta: FeedMeta }, from: Principal, to: Principal): { meta: FeedMeta } } | null {
  const { since, cursor, limit, wait: _w, ...filters } = q;
  // With a cursor it is no since-poll: its own read says why (cursor and since are exclusive).
  if (since === undefined || cursor !== undefined) return null;
  const fp = fingerprint('list_feed:since', filters);
  let from: string;
  try {
    from = since === '0' || since === 'now' ? since : String(cursors.decode(since, ['seq'], fp, cursors.policyPrint(p), false).k[0]);
  } catch {
    return null;
  }
  return {
    key: JSON.stringify([from, limit, fp, p.messageVisibility, p.signalVisibility, p.historyWindowDays]),
    resign: (answer, a, b) => {
      const next = cursors.decode(answer.meta.nextCursor!, ['seq'], fp, cursors.policyPrint(a), false);
      return { ...answer, meta: { ...answer.meta, nextCursor: cursors.encode({ k: next.k }, fp, cursors.policyPrint(b)) } };
    },
  };
}

/**
 * A since-poll (DESIGN 6 "Feed since"): the groups stamped after the watermark `since` carries,
 * up to the current watermark, oldest change first, `limit` changes at most: each as a whole-group
 * upsert when the caller sees it now, else its id in `meta.removedIds` when the caller could have
 * read it (mayName). `nextCursor` is the watermark to pass next, on every poll. Filters apply as on pages;
 * the window is the explicit bounds only (a since-poll starts at the beginning of ingestion),
 * clamped by the account's history window.
 */
async function sincePoll(ctx: ReadContext, q: FeedQuery): Promise<{ results: FeedItem[]; meta: FeedMeta }> {
  const { since: _s, cursor: _c, limit: _l, wait: _w, ...filters } = q;
  const fp = fingerprint('list_feed:since', filters);
  const policy = ctx.cursors.policyPrint(ctx.principal);
  const marks = await marksOf(ctx);
  const facts = await factsOf(ctx);
  const judged = judgedUpTo(marks, facts);
  // `now`: the head, so that a new poller starts with what changes next instead of replaying
  // history (issue 28); the head these facts judge up to, as what an export read with them holds.
  let from = q.since === '0' ? 0 : q.since === 'now' ? judged : Number(ctx.cursors.decode(q.since!, ['seq'], fp, policy, false).k[0]);
  // A watermark from before the read models were rebuilt (their sequence starts again): everything is new.
  if (from > marks.watermark) from = 0;
  // Never behind where the caller is (a cursor of a process whose facts are newer).
  const watermark = Math.max(from, judged);
  const rule = windowRule(q, ctx.principal, { unboundedDefault: true });
  const window = windowAt(rule, ctx.now.getTime());
  const traderIds = splitIds(q.traderIds);
  const assetIds = splitIds(q.assetIds);
  const f: Filters = { traderIds: traderIds && new Set(traderIds), assetIds: assetIds && new Set(assetIds), window };

  // The current stamps in (from, watermark], in key order (fseq, id), each carrying its group as
  // stamped: a since-poll is one read in the stamps' order, resolved as statement pages are (at a key
  // the newest row decides, a tombstone cancels). A stamp is `live` unless cancelled; its group's
  // own liveness is `groupLive` (0: a removal; `c.live`, qualified, is the column, not the alias).
  const changes = await statementPage<Stamp>(q.limit + 1, [from, ''], (before, n) => stampsAfter(ctx, Number(before![0]), watermark, n));
  const hasMore = changes.length > q.limit;
  const page = changes.slice(0, q.limit);

  const results: FeedItem[] = [];
  const removed: Stamp[] = [];
  for (const r of page) {
    const item = r.groupLive === 1 ? groupAsSeen(r, r.writtenAt, facts, ctx.principal, f) : null;
    if (item) results.push(item);
    else removed.push(r);
  }
  // A removal stamped without its message's time (the message was deleted) is named by the time it last had.
  const last = await lastWrittenAt(
    ctx,
    removed.filter((r) => !(Number(r.writtenAt) > 0)).map((r) => r.id),
  );
  const removedIds: string[] = [];
  const removedAt: number[] = [];
  for (const r of removed) {
    const t = Number(r.writtenAt) > 0 ? Number(r.writtenAt) : (last.get(r.id) ?? null);
    if (mayName(r, t, facts, ctx.principal, window)) {
      removedIds.push(r.id);
      removedAt.push(t!);
    }
  }
  const next = hasMore ? Number(page[page.length - 1]!.t) : watermark;
  const answer = {
    results,
    meta: {
      hasMore,
      nextCursor: ctx.cursors.encode({ k: [next] }, fp, policy),
      serverTime: ctx.now.toISOString(),
      appliedTimeRange: appliedTimeRange(window),
      dataComputedAt: ctx.now.toISOString(),
      removedIds,
    } as FeedMeta,
  };
  // For the read cache (apps/api/read-cache.ts): the poll holds until the data changes, or until its
  // oldest group or named removal leaves a history window that trails the clock; the watermark is
  // signed for each caller that the answer is served to.
  const pageFacts: PageFacts = { window: rule, next: { k: [next], fp, windowless: true } };
  if (results.length || removedAt.length) pageFacts.oldest = Math.min(...results.map((g) => Date.parse(g.writtenAt)), ...removedAt);
  Object.defineProperty(answer, PAGE_FACTS, { value: pageFacts, enumerable: false });
  return answer;
}

/** The export's `source` and `trader` columns (the list read's FeedItem); attachments as JSON text in CSV. */
const groupShapes = (format: 'ndjson' | 'csv'): { source: TupleShape; trader: TupleShape } => ({
  source: {
    platform: 'String',
    url: 'Nullable(String)',
    text: 'Nullable(String)',
    attachments: format === 'csv' ? 'String' : 'Array(Tuple(type String, url String))',
    identity: {
      platform: 'String',
      sourceIdentityId: 'String',
      displayName: 'Nullable(String)',
      handle: 'Nullable(String)',
      avatarUrl: 'Nullable(String)',
      profileUrl: 'Nullable(String)',
      audienceCount: 'Nullable(Int64)',
    },
  },
  trader: { id: 'UInt64', name: 'String', slug: 'Nullable(String)', avatarUrl: 'Nullable(String)' },
});

/** A FeedEvent, from a stored event `e` (curatedFeedEventsSql) and the eligible assets' parameters. */
const FEED_EVENT_TYPE = tupleType({
  id: 'UInt64',
  type: 'String',
  price: 'Nullable(Float64)',
  quoteSymbol: 'Nullable(String)',
  timeOfEvent: "DateTime64(3, 'UTC')",
  direction: 'String',
  assumed: 'Bool',
  retrospective: 'Bool',
  positionId: 'UInt64',
  traderId: 'UInt64',
  assetId: 'UInt64',
  asset: { id: 'UInt64', name: 'String', symbol: 'String', logoUrl: 'Nullable(String)' },
});

/**
 * The feed export as one statement (issue 28): listFeed's pages done by the store. The groups of
 * the sources the caller may see (visibleSources), resolved (the newest row of each key, live
 * ones), their events curated (curatedFeedEventsSql) and kept when their trader is signal-visible
 * and their asset eligible; a group with no event left, or none on `assetIds`, is not exported.
 * Each shaped as a FeedItem (the trader, identity and assets from the facts, as parameter sets),
 * with its resume token.
 */
export async function exportFeed(
  ctx: ReadContext,
  q: Omit<FeedQuery, 'limit'>,
  resume: string | undefined,
  rows: number,
  format: 'ndjson' | 'csv',
): Promise<NativeExport> {
  const { after, window, seal } = nativeStart(ctx, { op: 'list_feed', query: q, keyParts: ['time', 'string'] }, resume);
  const facts = await factsOf(ctx);
  const traderIds = splitIds(q.traderIds);
  const assetIds = splitIds(q.assetIds);
  const sources = visibleSources(facts, ctx.principal, traderIds && new Set(traderIds));
  const where = new Where();
  where
    .add(sql`${sourceKeySql('s')} IN {sources:Array(String)}`, { sources })
    .when(assetIds, 'hasAny(s.assetIds, {assetIds:Array(UInt64)})', 'assetIds');
  addWindow(where, 's.writtenAt', window);
  const b = beforeKey(identifier('s.writtenAt'), identifier('s.id'), 'String', after as [number, string] | undefined);
  const source = sourceColumns(facts, 'g');
  const looks = [...facts.traderLook];
  const assets = [...facts.assetById.values()];
  // Each event's asset looked up once (lookedUp), each field then read at its position.
  const asset = (values: string) => `arrayElement({${values}}, a)`;
  const events = `arrayMap((e, a) -> CAST(tuple(e.id, {eventTypes:Array(String)}[e.type + 1], e.price,
      ${asset('assetQuotes:Array(Nullable(String))')}, fromUnixTimestamp64Milli(e.t, 'UTC'),
      if(e.short = 1, 'short', 'long'), toBool(e.assumed), toBool(e.retrospective), e.positionId, e.traderId, e.assetId,
      tuple(e.assetId, ${asset('assetNames:Array(String)')}, ${asset('assetSymbols:Array(String)')},
        ${asset('assetLogos:Array(Nullable(String))')})), {eventType:String}),
      g_events, arrayMap(e -> ${lookedUp('e.assetId', 'assetKeys:Array(UInt64)', 'assetCount')}, g_events))`;
  const shapes = groupShapes(format);
  const json = (v: string) => (format === 'csv' ? `toJSONString(${v})` : v);
  return {
    sql: exportStatement({
      outer: `g_id AS id, g_time AS writtenAt,
        CAST(tuple(g_platform, g_url, g_text, ${json(source.attachments)},
          tuple(g_platform, g_source, g_name, g_handle, g_avatar, g_profile, g_audience)), {sourceType:String}) AS source,
        CAST(tuple(g_trader, arrayElement({traderNames:Array(String)}, g_look), arrayElement({slugs:Array(Nullable(String))}, g_look),
          arrayElement({traderAvatars:Array(Nullable(String))}, g_look)), {traderType:String}) AS trader,
        ${json(events)} AS events,
        ${resumeTokenSql('g_t', 'toJSONString(g_id)')}`,
      inner: `s.id AS g_id, toString(s.platform) AS g_platform, s.sourceIdentityId AS g_source,
        ${source.sql},
        ${lookedUp('g_trader', 'lookIds:Array(UInt64)', 'lookCount')} AS g_look,
        toTimeZone(s.writtenAt, 'UTC') AS g_time, s.url AS g_url, s.text AS g_text,
        arrayFilter(e -> e.traderId IN {visibleTraders:Array(UInt64)} AND e.assetId IN {eligibleAssets:Array(UInt64)},
          ${curatedFeedEventsSql('s.events')}) AS g_events,
        toUnixTimestamp64Milli(s.writtenAt) AS g_t`,
      table: FEED_GROUPS_TABLE,
      where: where.sql,
      before: b.text,
      timeCol: 'writtenAt',
      keep: `notEmpty(g_events)${assetIds ? ' AND arrayExists(e -> e.assetId IN {assetIds:Array(UInt64)}, g_events)' : ''}`,
    }),
    params: {
      ...where.params,
      ...b.params,
      seal,
      sourceType: tupleType(shapes.source),
      traderType: tupleType(shapes.trader),
      eventType: FEED_EVENT_TYPE,
      eventTypes: [...FEED_EVENT_TYPES],
      visibleTraders: signalTraders(facts, ctx.principal),
      eligibleAssets: facts.assetIds,
      ...source.params,
      lookIds: looks.map(([id]) => id),
      lookCount: looks.length,
      traderNames: looks.map(([id]) => facts.traderName.get(id)!),
      slugs: looks.map(([, l]) => l.slug),
      traderAvatars: looks.map(([, l]) => l.avatarUrl),
      assetKeys: assets.map((a) => a.id),
      assetCount: assets.length,
      assetQuotes: assets.map((a) => a.quoteSymbol),
      assetNames: assets.map((a) => a.name),
      assetSymbols: assets.map((a) => a.symbol),
      assetLogos: assets.map((a) => a.logoUrl),
      exportRows: rows,
    },
    columns: ['id', 'writtenAt', ...leafNames(shapes.source, 'source'), ...leafNames(shapes.trader, 'trader'), 'events', RESUME_COLUMN],
  };
}
