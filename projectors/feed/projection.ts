import type { AssetRecord, SourceIdentityRecord, TraderRecord } from '../../schemas/topics/index.ts';
import { remember } from '../../storage/bounded.ts';
import { param, type Sql, sql } from '../../storage/sql.ts';
import { batchSeq, inJsonIds, newestById, type Statement, sameFields, statementRows } from '../../storage/statements.ts';
import {
  decodeFeedEvents,
  encodeFeedEvents,
  FEED_CHANGES_DDL,
  FEED_CHANGES_TABLE,
  FEED_GROUPS_DDL,
  FEED_GROUPS_TABLE,
  FEED_WATERMARK_DDL,
  FEED_WATERMARK_FACTS_DDL,
  FEED_WATERMARK_TABLE,
  type FeedEventState,
} from '../../storage/tables/feed-groups.ts';
import { MESSAGES_TABLE } from '../../storage/tables/messages.ts';
import { sourceKey, sourceKeySql } from '../../storage/tables/traders.ts';
import { keptMessages } from '../messages/projection.ts';
import type { Projection, ProjectionContext, ValidRecord } from '../projection.ts';

export interface GroupStatement extends Statement {
  id: string;
  platform: string;
  sourceIdentityId: string;
  t: number;
  url: string | null;
  text: string | null;
  attachmentTypes: string[];
  attachmentUrls: string[];
  hasMessage: number;
  events: string;
  assetIds: number[];
  traderIds: number[];
}
/** A stamp: the group's statement as it was when stamped, at its sequence number. */
interface ChangeStatement extends GroupStatement {
  fseq: number;
}

const GROUP_COLUMNS = [
  'id',
  'platform',
  'sourceIdentityId',
  'writtenAt',
  'url',
  'text',
  'attachmentTypes',
  'attachmentUrls',
  'hasMessage',
  'events',
  'assetIds',
  'traderIds',
  'live',
  'tomb',
  'seq',
] as const;
const groupValues = (g: GroupStatement): unknown[] => [
  g.id,
  g.platform,
  g.sourceIdentityId,
  new Date(g.t).toISOString(),
  g.url,
  g.text,
  g.attachmentTypes,
  g.attachmentUrls,
  g.hasMessage,
  g.events,
  g.assetIds,
  g.traderIds,
  g.live,
  g.tomb,
  g.seq,
];
const GROUP_SELECT = `SELECT id, platform, sourceIdentityId, toUnixTimestamp64Milli(writtenAt) AS t, url, text, attachmentTypes, attachmentUrls,
  hasMessage, events, assetIds, traderIds, live, tomb, seq FROM ${FEED_GROUPS_TABLE}`;
const sameGroup = sameFields<GroupStatement>([
  'id',
  'platform',
  'sourceIdentityId',
  't',
  'url',
  'text',
  'attachmentTypes',
  'attachmentUrls',
  'hasMessage',
  'events',
  'live',
]);
const sameGroupKey = sameFields<GroupStatement>(['t', 'id', 'platform', 'sourceIdentityId']);
// A new stamp always differs (its fseq): a stamp is never skipped, and its key always moves.
const sameChange = sameFields<ChangeStatement>(['fseq', 'id']);
const changeValues = (c: ChangeStatement): unknown[] => [c.fseq, ...groupValues(c)];

/** The message fields of a group, from the messages table's current statement (none: not known yet). */
interface MessageFields {
  platform: string;
  sourceIdentityId: string;
  t: number;
  url: string | null;
  text: string | null;
  attachmentTypes: string[];
  attachmentUrls: string[];
  live: number;
}
const NO_MESSAGE: MessageFields = {
  platform: '',
  sourceIdentityId: '',
  t: 0,
  url: null,
  text: null,
  attachmentTypes: [],
  attachmentUrls: [],
  live: 0,
};

/** The current message of each of `ids` that has one (live or not, not deleted), as the messages projection keeps it or else read. */
async function currentMessages(ctx: ProjectionContext, ids: readonly string[]): Promise<Map<string, MessageFields>> {
  if (!ids.length) return new Map();
  const { kept, unknown } = keptMessages(ctx, ids);
  const out = new Map<string, MessageFields>();
  for (const [id, s] of kept) if (s.tomb === 0) out.set(id, s);
  if (!unknown.length) return out;
  const rows = await ctx.store.query<MessageFields & { id: string; seq: number; tomb: number }>(
    `
    SELECT id, platform, sourceIdentityId, toUnixTimestamp64Milli(writtenAt) AS t, url, text, attachmentTypes, attachmentUrls, live, tomb, seq
    FROM ${MESSAGES_TABLE} WHERE id IN ${inJsonIds('ids', 'String')}`,
    { ids: JSON.stringify(unknown) },
  );
  for (const [id, r] of newestById(rows, (r) => r.id)) if (r.tomb === 0) out.set(id, r);
  return out;
}

/**
 * The current row of each group that has one (tombstones included), as this session knows it or
 * else read from the store (and then known).
 */
async function currentGroups(ctx: ProjectionContext, ids: readonly string[]): Promise<Map<string, GroupStatement>> {
  const { groups } = stateOf(ctx);
  const out = new Map<string, GroupStatement>();
  const unknown: string[] = [];
  for (const id of ids) {
    const g = groups.get(id);
    if (g === undefined) unknown.push(id);
    else if (g) out.set(id, g);
  }
  if (!unknown.length) return out;
  const { store } = ctx;
  // Which of them have rows, reading the id column only: in a catch-up most have none yet, and the
  // rows of those that do lie all over the table (a granule of every column read for each).
  const found = [
    ...new Set(
      (
        await store.query<{ id: string }>(`SELECT id FROM ${FEED_GROUPS_TABLE} WHERE id IN ${inJsonIds('ids', 'String')}`, {
          ids: JSON.stringify(unknown),
        })
      ).map((r) => r.id),
    ),
  ];
  const read = found.length
    ? newestById(
        await store.query<GroupStatement>(`${GROUP_SELECT} WHERE id IN ${inJsonIds('ids', 'String')}`, { ids: JSON.stringify(found) }),
        (r) => r.id,
      )
    : new Map<string, GroupStatement>();
  for (const id of unknown) {
    const g = read.get(id);
    remember(groups, id, g ?? null, KNOWN_GROUPS);
    if (g) out.set(id, g);
  }
  return out;
}

/** A group's row from its message and its events (sorted by time, then id). */
function groupState(id: string, m: MessageFields, events: FeedEventState[]): Omit<GroupStatement, 'seq' | 'tomb'> {
  events.sort((a, b) => a.t - b.t || a.id - b.id);
  const live = m.live === 1 && events.length > 0 ? 1 : 0;
  return {
    id,
    platform: m.platform,
    sourceIdentityId: m.sourceIdentityId,
    t: m.live === 1 ? m.t : 0,
    url: m.url,
    text: m.text,
    attachmentTypes: m.attachmentTypes,
    attachmentUrls: m.attachmentUrls,
    hasMessage: m.live,
    events: encodeFeedEvents(events),
    assetIds: [...new Set(events.map((e) => e.assetId))].sort((a, b) => a - b),
    traderIds: [...new Set(events.map((e) => e.traderId))].sort((a, b) => a - b),
    live,
  };
}

/**
 * A group's message as its row holds it. A deleted message keeps its source (platform and source
 * identity): a removal is named to the callers whose visibility permits that source.
 */
const messageOf = (g: GroupStatement): MessageFields => ({
  platform: g.platform,
  sourceIdentityId: g.sourceIdentityId,
  t: g.t,
  url: g.url,
  text: g.text,
  attachmentTypes: g.attachmentTypes,
  attachmentUrls: g.attachmentUrls,
  live: g.hasMessage,
});

/** A stamp's version, as a new stamp of its group needs it. */
type StampKey = Pick<ChangeStatement, 'fseq' | 'seq' | 'tomb'>;

/**
 * What the projection keeps of a store (its state in the projector session): the feed sequence
 * counter (null: not read yet), the last watermark written, the step lock, and the newest row and
 * stamp of the groups it read or wrote last (null: none stored). Only this projection writes
 * feed_groups and feed_changes, so what it wrote last is what the store holds: a live message and
 * then its event cost one look-up of the group instead of three (issue 26).
 */
interface FeedState {
  fseq: number | null;
  /** The sequence number the last step after a change of traders, assets or source identities took (feedMarks). */
  facts: number;
  published: number;
  lock: Promise<void>;
  groups: Map<string, GroupStatement | null>;
  stamps: Map<string, StampKey | null>;
}
const stateOf = (ctx: ProjectionContext): FeedState => ctx.stateOf(feedProjection);

/** Groups whose row and stamp the session keeps at most (the oldest known is forgotten first). */
const KNOWN_GROUPS = 10_000;

/** Runs one feed step at a time per store. */
async function locked<T>(ctx: ProjectionContext, step: () => Promise<T>): Promise<T> {
  const s = stateOf(ctx);
  const run = s.lock.then(async () => {
    try {
      return await step();
    } catch (err) {
      // A write that failed may have landed all the same: what is known is read again.
      s.groups.clear();
      s.stamps.clear();
      throw err;
    }
  });
  s.lock = run.then(
    () => undefined,
    () => undefined,
  );
  return run;
}

/** The sequence counter (and the facts mark), read from the store once per session. */
async function counter(ctx: ProjectionContext): Promise<FeedState & { fseq: number }> {
  const s = stateOf(ctx);
  if (s.fseq === null) {
    const [r] = await ctx.store.query<{ f: number; facts: number }>(
      `SELECT greatest((SELECT max(fseq) FROM ${FEED_CHANGES_TABLE}), (SELECT max(fseq) FROM ${FEED_WATERMARK_TABLE})) AS f,
        (SELECT max(facts) FROM ${FEED_WATERMARK_TABLE}) AS facts`,
    );
    s.fseq = Number(r?.f ?? 0);
    s.facts = Number(r?.facts ?? 0);
  }
  return s as FeedState & { fseq: number };
}

/**
 * Writes group rows that changed and stamps every group in `restamp` and every changed group:
 * stamps first, then rows, then the watermark (see above).
 */
async function writeAndStamp(ctx: ProjectionContext, rows: GroupStatement[], restamp: Iterable<string>, base: number): Promise<void> {
  const { store } = ctx;
  const s = await counter(ctx);
  // The stamped content: the rows written now, else (a restamp) the group's current statement.
  const content = new Map<string, GroupStatement>();
  for (const r of rows) if (r.tomb === 0) content.set(r.id, r);
  const others = [...new Set(restamp)].filter((id) => !content.has(id));
  for (const [id, g] of await currentGroups(ctx, others)) content.set(id, g);
  if (content.size) {
    const prev = await currentStamps(ctx, [...content.keys()]);
    const stamps: unknown[][] = [];
    const newest = new Map<string, ChangeStatement>();
    for (const [id, g] of content) {
      const before = prev.get(id);
      const { seq: _s, tomb: _t, ...group } = g;
      // A tombstone needs only its key: the stamp's other columns are not read under it.
      const was = before && ({ ...g, fseq: before.fseq, seq: before.seq, tomb: before.tomb } as ChangeStatement);
      for (const c of statementRows<ChangeStatement>(was, { ...group, fseq: ++s.fseq }, base, sameChange, sameChange)) {
        stamps.push(changeValues(c));
        newest.set(id, c);
      }
    }
    await store.insertCompact(FEED_CHANGES_TABLE.name, ['fseq', ...GROUP_COLUMNS], stamps);
    for (const [id, c] of newest) remember(s.stamps, id, { fseq: c.fseq, seq: c.seq, tomb: c.tomb }, KNOWN_GROUPS);
  }
  await store.insertCompact(FEED_GROUPS_TABLE.name, GROUP_COLUMNS, rows.map(groupValues));
  for (const [id, g] of newestById(rows, (r) => r.id)) remember(s.groups, id, g, KNOWN_GROUPS);
  // Also when nothing changed: a replay after a crash before the watermark publishes it here.
  if (s.fseq > s.published) {
    // As rows: the commit's changes carry the marks (storage/changes.ts `marks`), so the API's are kept without a read.
    await store.insert(FEED_WATERMARK_TABLE.name, [{ k: 0, fseq: s.fseq, facts: s.facts }]);
    s.published = s.fseq;
  }
}

/**
 * The newest stamp of each group that has one, as this session knows it or else read from the
 * store. A group known to have no row has no stamp: a group is stamped only once it has a row,
 * and its rows are never all removed (the newest is never a tombstone).
 */
async function currentStamps(ctx: ProjectionContext, ids: readonly string[]): Promise<Map<string, StampKey>> {
  const { groups, stamps } = stateOf(ctx);
  const out = new Map<string, StampKey>();
  const unknown: string[] = [];
  for (const id of ids) {
    const k = stamps.get(id);
    if (k) out.set(id, k);
    else if (k === undefined && groups.get(id) !== null) unknown.push(id);
  }
  if (!unknown.length) return out;
  const read = newestById(
    await ctx.store.query<StampKey & { id: string }>(
      `SELECT fseq, id, seq, tomb FROM ${FEED_CHANGES_TABLE} WHERE id IN ${inJsonIds('ids', 'String')}`,
      { ids: JSON.stringify(unknown) },
    ),
    (r) => r.id,
  );
  for (const id of unknown) {
    const k = read.get(id);
    remember(stamps, id, k ? { fseq: k.fseq, seq: k.seq, tomb: k.tomb } : null, KNOWN_GROUPS);
    if (k) out.set(id, k);
  }
  return out;
}

/** An event statement of the trading projection as the feed keeps it. */
export interface FeedTouch {
  event: FeedEventState & { messageId: string | null; live: number };
  /** The message the event belonged to before this batch (null: none, or a new event). */
  before: string | null;
}

/**
 * The trading projection's feed step, run after positions and before events are written (so a
 * replay after a crash in between touches the same events again): each changed event statement
 * leaves the group it belonged to and, when live, joins the group of its message.
 */
export function applyFeedTouches(ctx: ProjectionContext, touches: readonly FeedTouch[], version: bigint): Promise<void> {
  if (!touches.length) return Promise.resolve();
  return locked(ctx, async () => {
    const ids = new Set<string>();
    for (const { event, before } of touches) {
      if (before !== null) ids.add(before);
      if (event.messageId !== null) ids.add(event.messageId);
    }
    const groupIds = [...ids];
    const stored = await currentGroups(ctx, groupIds);
    const missing = groupIds.filter((id) => {
      const g = stored.get(id);
      return !g || g.tomb === 1;
    });
    const messages = await currentMessages(ctx, missing);
    const events = new Map<string, Map<number, FeedEventState>>();
    const eventsOf = (id: string) => {
      let m = events.get(id);
      if (!m) {
        const g = stored.get(id);
        m = new Map((g && g.tomb === 0 ? decodeFeedEvents(g.events) : []).map((e) => [e.id, e]));
        events.set(id, m);
      }
      return m;
    };
    for (const { event: e, before } of touches) {
      if (before !== null) eventsOf(before).delete(e.id);
      if (e.messageId !== null) {
        const m = eventsOf(e.messageId);
        m.delete(e.id);
        if (e.live === 1) {
          m.set(e.id, {
            id: e.id,
            type: e.type,
            price: e.price,
            t: e.t,
            direction: e.direction,
            assumed: e.assumed,
            retrospective: e.retrospective,
            autoGenerated: e.autoGenerated,
            positionId: e.positionId,
            traderId: e.traderId,
            assetId: e.assetId,
          });
        }
      }
    }
    const base = batchSeq(version);
    const rows: GroupStatement[] = [];
    for (const [id, m] of events) {
      const g = stored.get(id);
      const current = g && g.tomb === 0 ? g : undefined;
      const next = groupState(id, current ? messageOf(current) : (messages.get(id) ?? NO_MESSAGE), [...m.values()]);
      if (!current && next.events === '[]') continue; // no events, no row
      for (const r of statementRows(current, next, base, sameGroup, sameGroupKey)) rows.push(r);
    }
    await writeAndStamp(ctx, rows, [], base);
  });
}

/** After messages are stored: the groups of these messages take their current fields. */
function applyFeedMessages(ctx: ProjectionContext, batch: readonly ValidRecord[], version: bigint): Promise<void> {
  return locked(ctx, async () => {
    const ids = [...new Set(batch.map((r) => (r.value as { id: string }).id))];
    const stored = await currentGroups(ctx, ids);
    const live = [...stored.values()].filter((g) => g.tomb === 0);
    const messages = await currentMessages(
      ctx,
      live.map((g) => g.id),
    );
    const base = batchSeq(version);
    const rows: GroupStatement[] = [];
    for (const g of live) {
      const next = groupState(g.id, messages.get(g.id) ?? NO_MESSAGE, decodeFeedEvents(g.events));
      for (const r of statementRows(g, next, base, sameGroup, sameGroupKey)) rows.push(r);
    }
    await writeAndStamp(ctx, rows, [], base);
  });
}

/**
 * After traders, assets or source identities are stored: what a group embeds (its trader, the
 * source identity, its events' traders and assets, and whether they are eligible) may have
 * changed, so the groups that embed them are stamped again.
 */
function restampEmbedding(ctx: ProjectionContext, topic: string, batch: readonly ValidRecord[], version: bigint): Promise<void> {
  const { store } = ctx;
  return locked(ctx, async () => {
    let embedding: Sql;
    if (topic === 'assets') {
      const assets = [...new Set(batch.map((r) => (r.value as AssetRecord).id))];
      embedding = sql`hasAny(assetIds, ${param('assets', 'Array(UInt64)', assets)})`;
    } else if (topic === 'traders') {
      const traders = batch.map((r) => r.value as TraderRecord);
      const traderIds = [...new Set(traders.map((t) => t.id))];
      const sources = traders.flatMap((t) => (t.source ? [sourceKey(t.source.platform, t.source.sourceIdentityId)] : []));
      embedding = sql`hasAny(traderIds, ${param('traders', 'Array(UInt64)', traderIds)}) OR ${sourceKeySql()} IN ${param('sources', 'Array(String)', sources)}`;
    } else {
      const sources = batch.map((r) => {
        const s = r.value as SourceIdentityRecord;
        return sourceKey(s.platform, s.sourceIdentityId);
      });
      embedding = sql`${sourceKeySql()} IN ${param('sources', 'Array(String)', sources)}`;
    }
    // Every group that has or had a row matching; its current statement decides nothing here: a stamp too many only repeats an upsert.
    const groups = sql`SELECT DISTINCT id FROM ${FEED_GROUPS_TABLE} WHERE ${embedding}`;
    const ids = (await store.query<{ id: string }>(groups.text, groups.params)).map((r) => r.id);
    // A number of its own, also when no group embeds what changed: every stamp after it (these,
    // and any later group's) is judged by the tables as they are now (feedMarks), so it is published
    // with the watermark.
    const s = await counter(ctx);
    s.facts = ++s.fseq;
    await writeAndStamp(ctx, [], ids, batchSeq(version));
  });
}

export const feedProjection: Projection<FeedState> = {
  name: 'feed',
  canHandle: ['messages', 'traders', 'assets', 'source-identities'],
  ddl: [FEED_GROUPS_DDL, FEED_CHANGES_DDL, FEED_WATERMARK_DDL, FEED_WATERMARK_FACTS_DDL],
  state: {
    init: () => ({ fseq: null, facts: 0, published: -1, lock: Promise.resolve(), groups: new Map(), stamps: new Map() }),
    // The counter, the watermark and the groups are read again; the lock stays, so a step in flight still runs alone.
    reset: (s) => {
      s.fseq = null;
      s.published = -1;
      s.groups.clear();
      s.stamps.clear();
    },
  },
  afterStore: (ctx, batch, version) => {
    const topic = batch[0]?.topic;
    if (!topic) return Promise.resolve();
    return topic === 'messages' ? applyFeedMessages(ctx, batch, version) : restampEmbedding(ctx, topic, batch, version);
  },
};
