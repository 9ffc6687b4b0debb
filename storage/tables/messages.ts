import { STATEMENT_COLUMNS_DDL, statementEngine } from '../statements.ts';
import { table } from '../table.ts';

// A message's source is in the sorting key (a message that moves leaves its tombstone at the old one).
export const MESSAGES_TABLE = table('messages', { changes: { time: 'writtenAt', source: ['platform', 'sourceIdentityId'] } });
export const MESSAGES_CURRENT_TABLE = table('messages_current');

/**
 * Messages as a statement table (storage/statements.ts) ordered for the list read, newest
 * first by (writtenAt, id), with a projection ordered by source identity (a trader's messages are
 * those of its assigned source) and one by id (hydration by ids, and the previous statement).
 */
export const MESSAGES_DDL = `CREATE TABLE IF NOT EXISTS ${MESSAGES_TABLE} (
    id String, platform LowCardinality(String), sourceIdentityId String, writtenAt DateTime64(3, 'UTC'),
    url Nullable(String), text Nullable(String), attachmentTypes Array(String), attachmentUrls Array(String),
    isEdited Nullable(UInt8), isReply Nullable(UInt8), isQuote Nullable(UInt8), isRepost Nullable(UInt8),
    version UInt64, deleted UInt8, ${STATEMENT_COLUMNS_DDL},
    PROJECTION by_source (SELECT * ORDER BY platform, sourceIdentityId, writtenAt, id),
    PROJECTION by_id (SELECT * ORDER BY id)
  ) ${statementEngine('writtenAt, id, platform, sourceIdentityId')}`;
