import { DIRECTIONS, EVENT_TYPES } from '../../schemas/topics/common.ts';
import type { Store } from '../store/port.ts';

/**
 * Activity rolled up by hour and by day (README "Read models"): how many current, live events each
 * trader has per type and direction, and how many current, live messages each source has, per UTC hour and UTC
 * day. The activity reads add up these rows instead of scanning the events and messages tables
 * (apps/reads/analytics/activity-rollup.ts); only the partial hours at the ends of a range are
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
const hourOf = (column: string): string => `intDiv(toUnixTimestamp64Milli(${column}), ${HOUR_MS}) * ${HOUR_MS}`;

/** Event-count columns, one per event type and direction: `n_open_long`, `n_open_short`, ... */
export const EVENT_COUNTS = EVENT_TYPES.flatMap((type) => DIRECTIONS.map((direction) => ({ type, direction, column: `n_${type}_${direction}` })));
const EVENT_COUNT_COLUMNS = EVENT_COUNTS.map((c) => c.column);

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
export const ACTIVITY_EVENTS_BY_TRADER_DDL = [`CREATE TABLE IF NOT EXISTS $db.activity_events_by_trader (${EVENTS_COLUMNS_DDL})
  ENGINE = ReplacingMergeTree(seq) PARTITION BY grain ORDER BY (grain, traderId, start) SETTINGS ${BY_OWNER_SETTINGS}`,
`CREATE MATERIALIZED VIEW IF NOT EXISTS $db.activity_events_by_trader_feed TO $db.activity_events_by_trader
  AS SELECT * FROM $db.activity_events`] as const;
export const ACTIVITY_MESSAGES_BY_SOURCE_DDL = [`CREATE TABLE IF NOT EXISTS $db.activity_messages_by_source (${MESSAGES_COLUMNS_DDL})
  ENGINE = ReplacingMergeTree(seq) PARTITION BY grain ORDER BY (grain, platform, sourceIdentityId, start) SETTINGS ${BY_OWNER_SETTINGS}`,
`CREATE MATERIALIZED VIEW IF NOT EXISTS $db.activity_messages_by_source_feed TO $db.activity_messages_by_source
  AS SELECT * FROM $db.activity_messages`] as const;

/** The highest statement seq each roll-up has counted. */
export const ACTIVITY_ROLLUP_DDL = `CREATE TABLE IF NOT EXISTS $db.activity_rollup (source LowCardinality(String), seq UInt64)
  ENGINE = ReplacingMergeTree(seq) ORDER BY source`;


interface RollUp {
  /** The statement table rolled up, its time column, and the roll-up table. */
  source: 'events' | 'messages'; time: string; target: string;
  /** The bucket's owner: columns of both tables. */
  owner: readonly string[];
  /** The counts of one statement row (current and live), as SELECT expressions in `counts` order. */
  counted: readonly string[];
  counts: readonly string[];
}

const ROLLUPS: Record<'events' | 'messages', RollUp> = {
  events: {
    source: 'events', time: 'timeOfEvent', target: 'activity_events', owner: ['traderId'],
    counted: EVENT_COUNTS.map((c) => `toUInt32(type = '${c.type}' AND direction = '${c.direction}')`), counts: EVENT_COUNT_COLUMNS,
  },
  messages: {
    source: 'messages', time: 'writtenAt', target: 'activity_messages', owner: ['platform', 'sourceIdentityId'],
    counted: ['toUInt32(1)'], counts: ['n'],
  },
};

/**
 * Rolls up what the statement table `source` got since the last roll-up. Returns the number of
 * hour buckets counted again.
 */
export async function rollUpActivity(store: Store, source: 'events' | 'messages'): Promise<number> {
  const r = ROLLUPS[source];
  const [mark] = await store.query<{ seq: number }>('SELECT max(seq) AS seq FROM $db.activity_rollup WHERE source = {source:String}', { source });
  const since = Number(mark?.seq ?? 0);
  const [fresh] = await store.query<{ top: number; buckets: number }>(
    `SELECT max(seq) AS top, uniqExact(${r.owner.join(', ')}, ${hourOf(r.time)}) AS buckets FROM $db.${source} WHERE seq > {since:UInt64}`, { since });
  const top = Number(fresh?.top ?? 0);
  if (!fresh || !Number(fresh.buckets) || top <= since) return 0;
  const owner = r.owner.join(', ');
  const zeros = r.counts.map(() => 'toUInt32(0)').join(', ');
  const sums = r.counts.map((c) => `sum(${c}) AS ${c}`).join(', ');
  const params = { since, top };
  // Hours: the current, live statements of each bucket with a row written since the mark, and a
  // zero row per such bucket (so a bucket left empty still gets its row).
  await store.exec(`
    INSERT INTO $db.${r.target} (grain, start, ${owner}, ${r.counts.join(', ')}, firstAt, lastAt, seq)
    SELECT 'hour', h, ${owner}, ${sums}, minIf(at, c = 1), maxIf(at, c = 1), {top:UInt64} FROM (
      SELECT ${hourOf(r.time)} AS h, ${owner}, ${r.counted.map((e, i) => `${e} AS ${r.counts[i]}`).join(', ')},
        toUnixTimestamp64Milli(${r.time}) AS at, 1 AS c
      FROM $db.${source} FINAL
      WHERE live = 1 AND tomb = 0
        AND (${owner}, ${hourOf(r.time)}) IN (SELECT ${owner}, ${hourOf(r.time)} FROM $db.${source} WHERE seq > {since:UInt64})
      UNION ALL
      SELECT DISTINCT ${hourOf(r.time)} AS h, ${owner}, ${zeros}, toInt64(0) AS at, 0 AS c FROM $db.${source} WHERE seq > {since:UInt64}
    )
    GROUP BY h, ${owner}`, params);
  // Days: the sum of their hour rows, for each day of those buckets.
  await store.exec(`
    INSERT INTO $db.${r.target} (grain, start, ${owner}, ${r.counts.join(', ')}, firstAt, lastAt, seq)
    SELECT 'day', d, ${owner}, ${sums}, minIf(firstAt, c = 1), maxIf(lastAt, c = 1), {top:UInt64} FROM (
      SELECT intDiv(start, ${DAY_MS}) * ${DAY_MS} AS d, ${owner}, ${r.counts.join(', ')}, firstAt, lastAt, (${r.counts.join(' + ')}) > 0 AS c
      FROM $db.${r.target} FINAL
      WHERE grain = 'hour' AND (${owner}, intDiv(start, ${DAY_MS}) * ${DAY_MS}) IN (SELECT ${owner}, intDiv(toUnixTimestamp64Milli(${r.time}), ${DAY_MS}) * ${DAY_MS} FROM $db.${source} WHERE seq > {since:UInt64})
    )
    GROUP BY d, ${owner}`, params);
  await store.insert('activity_rollup', [{ source, seq: top }]);
  return Number(fresh.buckets);
}
