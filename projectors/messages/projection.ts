import { parseDateTime } from '../../schemas/formats.ts';
import type { MessageRecord } from '../../schemas/topics/index.ts';
import { remember } from '../../storage/bounded.ts';
import {
  applyVersioned,
  canonicalDateTime,
  currentViewDdl,
  type Statement,
  sameFields,
  type VersionedStatements,
} from '../../storage/statements.ts';
import { ACTIVITY_MESSAGES_BY_SOURCE_DDL, ACTIVITY_MESSAGES_DDL, ACTIVITY_ROLLUP_DDL } from '../../storage/tables/activity.ts';
import { MESSAGES_CURRENT_TABLE, MESSAGES_DDL, MESSAGES_TABLE } from '../../storage/tables/messages.ts';
import { rollUpActivity } from '../activity/rollup.ts';
import { bool, type Projection, type ProjectionContext, type ValidRecord } from '../projection.ts';
import { httpUrl, plainTextOrNull } from '../sanitize.ts';

export interface MessageStatement extends Statement {
  id: string;
  platform: string;
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
  version: number;
  deleted: number;
  /** writtenAt as the store gets it, when known (else formatted from `t`). */
  writtenAt?: string;
}

const COLUMNS = [
  'id',
  'platform',
  'sourceIdentityId',
  'writtenAt',
  'url',
  'text',
  'attachmentTypes',
  'attachmentUrls',
  'isEdited',
  'isReply',
  'isQuote',
  'isRepost',
  'version',
  'deleted',
  'live',
  'tomb',
  'seq',
] as const;
const values = (s: MessageStatement): unknown[] => [
  s.id,
  s.platform,
  s.sourceIdentityId,
  s.writtenAt ?? new Date(s.t).toISOString(),
  s.url,
  s.text,
  s.attachmentTypes,
  s.attachmentUrls,
  s.isEdited,
  s.isReply,
  s.isQuote,
  s.isRepost,
  s.version,
  s.deleted,
  s.live,
  s.tomb,
  s.seq,
];
const same = sameFields<MessageStatement>([
  'id',
  'platform',
  'sourceIdentityId',
  't',
  'url',
  'text',
  'attachmentTypes',
  'attachmentUrls',
  'isEdited',
  'isReply',
  'isQuote',
  'isRepost',
  'version',
  'deleted',
  'live',
]);
// The sorting key: the read order, then the columns the read filters on.
const sameKey = sameFields<MessageStatement>(['t', 'id', 'platform', 'sourceIdentityId']);

// Text and URLs are sanitized here (DESIGN 6); an attachment without an http(s) URL is dropped.
function messageState(m: MessageRecord): Omit<MessageStatement, 'seq' | 'tomb'> {
  const attachmentTypes: string[] = [];
  const attachmentUrls: string[] = [];
  for (const a of m.attachments) {
    const url = httpUrl(a.url);
    if (url) {
      attachmentTypes.push(a.type);
      attachmentUrls.push(url);
    }
  }
  const t = parseDateTime(m.writtenAt)!;
  return {
    id: m.id,
    platform: m.platform,
    sourceIdentityId: m.sourceIdentityId,
    t,
    url: httpUrl(m.url),
    text: plainTextOrNull(m.text),
    attachmentTypes,
    attachmentUrls,
    isEdited: bool(m.isEdited),
    isReply: bool(m.isReply),
    isQuote: bool(m.isQuote),
    isRepost: bool(m.isRepost),
    version: m.version,
    deleted: m.deleted ? 1 : 0,
    live: m.deleted ? 0 : 1,
    writtenAt: canonicalDateTime(m.writtenAt, t),
  };
}

const MESSAGES: VersionedStatements<MessageRecord, MessageStatement> = {
  table: MESSAGES_TABLE,
  columns: COLUMNS,
  idOf: (m) => m.id,
  state: messageState,
  values,
  same,
  sameKey,
  select: `SELECT id, platform, sourceIdentityId, toUnixTimestamp64Milli(writtenAt) AS t, url, text, attachmentTypes, attachmentUrls,
           isEdited, isReply, isQuote, isRepost, version, deleted, live, tomb, seq FROM ${MESSAGES_TABLE}`,
};

/**
 * What the projection keeps of a store (its state in the projector session): the current
 * statement of the messages of its last batches, as it wrote or read them (it is the only writer
 * of the messages table). The feed projection takes a new group's message from here: a live
 * message and then its event read the message once instead of twice (issue 26).
 */
interface MessagesState {
  current: Map<string, MessageStatement>;
}

/** Messages whose current statement the session keeps at most (the oldest kept is forgotten first). */
const KEPT_MESSAGES = 10_000;

export async function applyMessages(ctx: ProjectionContext, batch: readonly ValidRecord[], version: bigint): Promise<void> {
  const { current } = ctx.stateOf(messagesProjection);
  // Forgotten first: a failed write may have landed all the same.
  for (const r of batch) current.delete((r.value as MessageRecord).id);
  for (const [id, statement] of await applyVersioned(ctx.store, MESSAGES, batch, version)) remember(current, id, statement, KEPT_MESSAGES);
  await rollUpActivity(ctx, MESSAGES_TABLE);
}

/**
 * The current statement of each of the messages `ids` that has one, as the session keeps it (see
 * MessagesState), and the ids it does not keep (to be read from the store).
 */
export function keptMessages(ctx: ProjectionContext, ids: readonly string[]): { kept: Map<string, MessageStatement>; unknown: string[] } {
  const { current } = ctx.stateOf(messagesProjection);
  const kept = new Map<string, MessageStatement>();
  const unknown: string[] = [];
  for (const id of ids) {
    const s = current.get(id);
    if (s) kept.set(id, s);
    else unknown.push(id);
  }
  return { kept, unknown };
}

export const messagesProjection: Projection<MessagesState> = {
  name: 'messages',
  canHandle: ['messages'],
  ddl: [
    MESSAGES_DDL,
    ACTIVITY_MESSAGES_DDL,
    ...ACTIVITY_MESSAGES_BY_SOURCE_DDL,
    ACTIVITY_ROLLUP_DDL,
    currentViewDdl(MESSAGES_CURRENT_TABLE, MESSAGES_TABLE),
  ],
  // What each record states, as stored (no `table`: the rows are written by `afterStore`).
  handle: (batch) => batch.map((r) => messageState(r.value)),
  afterStore: (ctx, batch, version) => applyMessages(ctx, batch, version),
  // No reset: a take-over drops what is kept, read again when next needed.
  state: { init: () => ({ current: new Map() }) },
};
