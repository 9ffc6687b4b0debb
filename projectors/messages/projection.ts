import type { MessageRecord } from '../../schemas/topics/index.ts';
import { bool, del, iso, type Projection } from '../projection.ts';
import { httpUrl, plainTextOrNull } from '../sanitize.ts';

export const messagesProjection: Projection = {
  name: 'messages',
  canHandle: ['messages'],
  table: 'messages',
  ddl: [`CREATE TABLE IF NOT EXISTS $db.messages (
    id String, platform LowCardinality(String), sourceIdentityId String, writtenAt DateTime64(3, 'UTC'),
    url Nullable(String), text Nullable(String), attachmentTypes Array(String), attachmentUrls Array(String),
    isEdited Nullable(UInt8), isReply Nullable(UInt8), isQuote Nullable(UInt8), isRepost Nullable(UInt8),
    version UInt64, deleted UInt8,
    INDEX written writtenAt TYPE minmax GRANULARITY 1
  ) ENGINE = ReplacingMergeTree(version) ORDER BY id`],
  // Text and URLs are sanitized here (DESIGN 6); an attachment without an http(s) URL is dropped.
  handle: (batch) => batch.map(({ value: m }: { value: MessageRecord }) => {
    const attachments = m.attachments.flatMap((a) => { const url = httpUrl(a.url); return url ? [{ type: a.type, url }] : []; });
    return {
      id: m.id, platform: m.platform, sourceIdentityId: m.sourceIdentityId, writtenAt: iso(m.writtenAt),
      url: httpUrl(m.url), text: plainTextOrNull(m.text), attachmentTypes: attachments.map((a) => a.type), attachmentUrls: attachments.map((a) => a.url),
      isEdited: bool(m.isEdited), isReply: bool(m.isReply), isQuote: bool(m.isQuote), isRepost: bool(m.isRepost),
      version: m.version, deleted: del(m),
    };
  }),
};
