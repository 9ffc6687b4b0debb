import { DIRECTIONS, EVENT_TYPES } from '../../schemas/topics/common.ts';
import { table } from '../table.ts';

// A bucket's row belongs to its owner, and a roll-up rewrites the rows of the owners whose buckets
// it counts again: a live roll-up's rows name them (projectors/activity/rollup.ts), so a commit of
// one ends only what was read of those owners' rows (issue 26).
const BY_TRADER = { changes: { trader: 'traderId' } } as const;
const BY_SOURCE = { changes: { source: ['platform', 'sourceIdentityId'] } } as const;
export const ACTIVITY_EVENTS_TABLE = table('activity_events', BY_TRADER);
export const ACTIVITY_MESSAGES_TABLE = table('activity_messages', BY_SOURCE);
export const ACTIVITY_EVENTS_BY_TRADER_TABLE = table('activity_events_by_trader', BY_TRADER);
export const ACTIVITY_MESSAGES_BY_SOURCE_TABLE = table('activity_messages_by_source', BY_SOURCE);
export const ACTIVITY_EVENTS_BY_TRADER_FEED_TABLE = table('activity_events_by_trader_feed');
export const ACTIVITY_MESSAGES_BY_SOURCE_FEED_TABLE = table('activity_messages_by_source_feed');
export const ACTIVITY_ROLLUP_TABLE = table('activity_rollup');

/**
 * The activity roll-up tables (the roll-up itself: projectors/activity/rollup.ts): activity rolled up by hour and by day (README "Read models"): how many current, live events each
 * trader has per type and direction, and how many current, live messages each source has, per UTC hour and UTC
 * day. The activity reads add up these rows instead of scanning the events and messages tables
 * (apps/reads/analytics/activity-counts.ts); only the partial hours at the ends of a range are
 * read from the statement tables.
 *
 * A bucket's row is recomputed from the statement table, never adjusted by a delta: after each
 * batch, every bucket holding a row written since the last roll-up (a new statement, or a
 * tombstone at a key an event or message left) is counted again over the table's current
 * statements, and the day rows of those buckets' days are summed again from their hour rows. The
 * roll-up remembers the highest `seq` it has counted (`activity_rollup`) and is written last, so
 * a crash anywhere leaves rows above that mark that the next batch's roll-up counts: nothing lost,
 * nothing counted twice. A bucket that is left empty gets a row of zeros (it replaces the old row).
 *
 * Rows are versioned by the highest statement seq the roll-up saw, which grows with every roll-up
 * (ReplacingMergeTree: reads use FINAL, one part per grain after compaction).
 */

/** The grains, UTC-aligned from the epoch: the reads cut their ranges along the same boundaries. */
export const HOUR_MS = 3_600_000;
export const DAY_MS = 86_400_000;
/**
 * The hour of a DateTime64 column, as ms since the epoch. Integer arithmetic: toStartOfHour returns
 * a 32-bit DateTime, which wraps after 2106 (the store holds instants up to 2299).
 */
export const hourOf = (column: string): string => `intDiv(toUnixTimestamp64Milli(${column}), ${HOUR_MS}) * ${HOUR_MS}`;

/** Event-count columns, one per event type and direction: `n_open_long`, `n_open_short`, ... */
export const EVENT_COUNTS = EVENT_TYPES.flatMap((type) =>
  DIRECTIONS.map((direction) => ({ type, direction, column: `n_${type}_${direction}` })),
);
export const EVENT_COUNT_COLUMNS = EVENT_COUNTS.map((c) => c.column);

/**
 * The earliest and latest time (ms) of the rows a bucket counts (0 when it counts none): a read may
 * take a partial hour at an end of its range as the whole hour when no counted row of that hour
 * lies past the bound.
 */
const SPAN_DDL = 'firstAt Int64, lastAt Int64';
// `n`: all of a row's events (a read without a type or direction filter reads this column alone).
const EVENTS_COLUMNS_DDL = `grain Enum8('hour' = 1, 'day' = 2), start Int64, traderId UInt64,
    ${EVENT_COUNT_COLUMNS.map((c) => `${c} UInt32`).join(', ')}, ${SPAN_DDL}, seq UInt64, n UInt32 MATERIALIZED ${EVENT_COUNT_COLUMNS.join(' + ')}`;
const MESSAGES_COLUMNS_DDL = `grain Enum8('hour' = 1, 'day' = 2), start Int64, platform LowCardinality(String), sourceIdentityId String,
    n UInt32, ${SPAN_DDL}, seq UInt64`;

/** By time: the totals of a time range over every owner. */
export const ACTIVITY_EVENTS_DDL = `CREATE TABLE IF NOT EXISTS $db.activity_events (${EVENTS_COLUMNS_DDL})
  ENGINE = ReplacingMergeTree(seq) PARTITION BY grain ORDER BY (grain, start, traderId)`;
export const ACTIVITY_MESSAGES_DDL = `CREATE TABLE IF NOT EXISTS $db.activity_messages (${MESSAGES_COLUMNS_DDL})
  ENGINE = ReplacingMergeTree(seq) PARTITION BY grain ORDER BY (grain, start, platform, sourceIdentityId)`;

/**
 * The same rows by owner, copied within each insert by a materialized view: the buckets of a few
 * traders or sources (the top groups of an activity summary) are a range per owner here, where the
 * table by time holds them among every owner's rows of the range. Granules of 1,024 rows and
 * compressed blocks of at most 16 KiB: a trader's 168 hours are a few hundred rows, and each column
 * read of ten traders decompressed ten default blocks of up to 1 MiB (a fifth of the read).
 */
const BY_OWNER_SETTINGS = 'index_granularity = 1024, min_compress_block_size = 4096, max_compress_block_size = 16384';
export const ACTIVITY_EVENTS_BY_TRADER_DDL = [
  `CREATE TABLE IF NOT EXISTS $db.activity_events_by_trader (${EVENTS_COLUMNS_DDL})
  ENGINE = ReplacingMergeTree(seq) PARTITION BY grain ORDER BY (grain, traderId, start) SETTINGS ${BY_OWNER_SETTINGS}`,
  `CREATE MATERIALIZED VIEW IF NOT EXISTS $db.activity_events_by_trader_feed TO $db.activity_events_by_trader
  AS SELECT * FROM $db.activity_events`,
] as const;
export const ACTIVITY_MESSAGES_BY_SOURCE_DDL = [
  `CREATE TABLE IF NOT EXISTS $db.activity_messages_by_source (${MESSAGES_COLUMNS_DDL})
  ENGINE = ReplacingMergeTree(seq) PARTITION BY grain ORDER BY (grain, platform, sourceIdentityId, start) SETTINGS ${BY_OWNER_SETTINGS}`,
  `CREATE MATERIALIZED VIEW IF NOT EXISTS $db.activity_messages_by_source_feed TO $db.activity_messages_by_source
  AS SELECT * FROM $db.activity_messages`,
] as const;

/** The highest statement seq each roll-up has counted. */
export const ACTIVITY_ROLLUP_DDL = `CREATE TABLE IF NOT EXISTS $db.activity_rollup (source LowCardinality(String), seq UInt64)
  ENGINE = ReplacingMergeTree(seq) ORDER BY source`;
