import { STATEMENT_COLUMNS_DDL, statementEngine } from '../statements.ts';
import { table } from '../table.ts';

export const CHANNEL_SUMMARIES_TABLE = table('channel_summaries');
export const AGGREGATE_SUMMARIES_TABLE = table('aggregate_summaries');
export const CHANNEL_SUMMARIES_CURRENT_TABLE = table('channel_summaries_current');
export const AGGREGATE_SUMMARIES_CURRENT_TABLE = table('aggregate_summaries_current');

/**
 * Generated summaries as statement tables (storage/statements.ts) ordered for their list
 * reads, newest Source Window first by (windowStart, id), then the columns the reads filter on
 * (windowEnd for the overlap, status for includeLowSignal, and a channel summary's traderId for
 * visibility). The narrative itself (overview, insights, assets...) is kept as the JSON `body`.
 * The contract's array caps are checked at ingest (the topic schemas' maxItems): a record over a
 * cap is dead-lettered with its reason, never truncated.
 */
export const HEAD_DDL = `id String, windowStart DateTime64(3, 'UTC'), windowEnd DateTime64(3, 'UTC'), generatedAt DateTime64(3, 'UTC'),
    status LowCardinality(String), body String, version UInt64, deleted UInt8, ${STATEMENT_COLUMNS_DDL}`;

export const CHANNEL_SUMMARIES_DDL = `CREATE TABLE IF NOT EXISTS ${CHANNEL_SUMMARIES_TABLE} (
    ${HEAD_DDL}, traderId UInt64,
    PROJECTION by_id (SELECT * ORDER BY id)
  ) ${statementEngine('windowStart, id, windowEnd, status, traderId')}`;

export const AGGREGATE_SUMMARIES_DDL = `CREATE TABLE IF NOT EXISTS ${AGGREGATE_SUMMARIES_TABLE} (
    ${HEAD_DDL},
    PROJECTION by_id (SELECT * ORDER BY id)
  ) ${statementEngine('windowStart, id, windowEnd, status')}`;
