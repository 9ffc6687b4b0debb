import type { MessageRecord } from '../../schemas/topics/index.ts';
import { bool, del, type Projection } from '../projection.ts';

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
  handle: (batch) => batch.map(({ value: m }: { value: MessageRecord }) => ({
    id: m.id, platform: m.platform, sourceIdentityId: m.sourceIdentityId, writtenAt: m.writtenAt,
    url: m.url, text: m.text, attachmentTypes: m.attachments.map((a) => a.type), attachmentUrls: m.attachments.map((a) => a.url),
    isEdited: bool(m.isEdited), isReply: bool(m.isReply), isQuote: bool(m.isQuote), isRepost: bool(m.isRepost),
    version: m.version, deleted: del(m),
  })),
};
