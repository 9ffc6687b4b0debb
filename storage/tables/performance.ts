import { PERFORMANCE_STATUSES, WINDOWS } from '../../schemas/api/resources.ts';
import { table } from '../table.ts';

// Their rows name their trader, asset and openAt (a position that moves has its rows at the old
// trader and asset retired, projectors/performance): a commit ends the pages and figures of those only.
const EVALUATION_CHANGES = { trader: 'traderId', asset: 'assetId', time: 'openAt' } as const;
export const POSITION_PERFORMANCES_TABLE = table('position_performances', { changes: EVALUATION_CHANGES });
export const POSITION_SAMPLES_TABLE = table('position_samples', { changes: EVALUATION_CHANGES });
export const SAMPLES_COPIED_TABLE = table('position_samples_copied');
export const PRICE_SERIES_TABLE = table('price_series');

/** A ClickHouse Enum8 of these names, numbered from `first` (cheaper to insert than LowCardinality strings). */
export const enum8 = (names: readonly string[], first = 1) => `Enum8(${names.map((n, i) => `'${n}' = ${i + first}`).join(', ')})`;

export const EVALUATION_COLUMNS_DDL = `positionId UInt64, window ${enum8(WINDOWS)}, traderId UInt64, assetId UInt64, direction ${enum8(['long', 'short'])},
    openAt Int64, evaluatedAt Int64, status ${enum8(['', ...PERFORMANCE_STATUSES], 0)}, returnPercentage Nullable(Float64),
    live UInt8, seq UInt64`;

/** For pages of positions: ordered by (positionId, window) in small granules (point lookups). */
export const PERFORMANCES_DDL = `CREATE TABLE IF NOT EXISTS ${POSITION_PERFORMANCES_TABLE} (${EVALUATION_COLUMNS_DDL})
  ENGINE = ReplacingMergeTree(seq) ORDER BY (positionId, window)
    SETTINGS index_granularity = 256, min_compress_block_size = 2048, max_compress_block_size = 8192`;

/**
 * A partition of position_samples that no insert touched for this long is merged into one part by
 * the store's own merges. Reads aggregate the table with FINAL, which merges at read time every
 * partition left in more than one part, and a burst into past months (prices that re-evaluate
 * positions opened then) left each of them so until the next compaction, minutes later. The
 * partitions live ingest keeps writing are never that quiet: they keep the store's usual merges.
 */
const QUIET_PARTITIONS_MERGED = 'min_age_to_force_merge_seconds = 30, min_age_to_force_merge_on_partition_only = 1';

/**
 * The same rows for the analytics reads: by window and month, ordered by (traderId, assetId,
 * openAt, positionId) (range scans). `isReady` and `readyReturn` are what an aggregate reads of
 * status and return, worked out once at insert: a UInt8 and a plain Float64 instead of an Enum
 * compared per read and a Nullable (a `ready` window always has a finite return). `assetLow`, the
 * low 16 bits of assetId, is what a read tests asset sets on where that is exact (2 bytes a row
 * instead of 8: a read of a few hundred traders reads most rows).
 */
export const SAMPLES_DDL = `CREATE TABLE IF NOT EXISTS ${POSITION_SAMPLES_TABLE} (${EVALUATION_COLUMNS_DDL},
    isReady UInt8 MATERIALIZED status = 'ready', readyReturn Float64 MATERIALIZED ifNull(returnPercentage, 0),
    assetLow UInt16 MATERIALIZED assetId % 65536,
    PROJECTION by_position (SELECT _part_offset ORDER BY positionId))
  ENGINE = ReplacingMergeTree(seq) PARTITION BY (window, toYYYYMM(toDateTime(intDiv(openAt, 1000), 'UTC')))
    ORDER BY (traderId, assetId, openAt, positionId) SETTINGS deduplicate_merge_projection_mode = 'rebuild', ${QUIET_PARTITIONS_MERGED}`;

/** The same settings for a table made by an earlier build (a setting is not a change of layout: no rebuild). */
export const SAMPLES_SETTINGS_DDL = `ALTER TABLE ${POSITION_SAMPLES_TABLE} MODIFY SETTING ${QUIET_PARTITIONS_MERGED}`;

/**
 * The highest seq of position_performances' rows copied into position_samples (every row at or
 * below it is there): a live projector copies them a little after it writes them
 * (projectors/performance), and a projector that stopped in between copies what is above it.
 */
export const SAMPLES_COPIED_DDL = `CREATE TABLE IF NOT EXISTS ${SAMPLES_COPIED_TABLE} (k UInt8, seq UInt64)
  ENGINE = ReplacingMergeTree(seq) ORDER BY k`;

export const PRICE_SERIES_DDL = `CREATE TABLE IF NOT EXISTS ${PRICE_SERIES_TABLE} (
    assetId UInt64, hasSeries UInt8, seq UInt64
  ) ENGINE = ReplacingMergeTree(seq) ORDER BY assetId`;
