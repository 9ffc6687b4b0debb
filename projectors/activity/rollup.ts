import type { Store } from '../../storage/port.ts';
import { DAY_MS, EVENT_COUNT_COLUMNS, EVENT_COUNTS, hourOf } from '../../storage/tables/activity.ts';

/** Rolls the statement tables up into the activity tables (storage/tables/activity.ts says how and why). */
interface RollUp {
  /** The statement table rolled up, its time column, and the roll-up table. */
  source: 'events' | 'messages';
  time: string;
  target: string;
  /** The bucket's owner: columns of both tables. */
  owner: readonly string[];
  /** The counts of one statement row (current and live), as SELECT expressions in `counts` order. */
  counted: readonly string[];
  counts: readonly string[];
}

const ROLLUPS: Record<'events' | 'messages', RollUp> = {
  events: {
    source: 'events',
    time: 'timeOfEvent',
    target: 'activity_events',
    owner: ['traderId'],
    counted: EVENT_COUNTS.map((c) => `toUInt32(type = '${c.type}' AND direction = '${c.direction}')`),
    counts: EVENT_COUNT_COLUMNS,
  },
  messages: {
    source: 'messages',
    time: 'writtenAt',
    target: 'activity_messages',
    owner: ['platform', 'sourceIdentityId'],
    counted: ['toUInt32(1)'],
    counts: ['n'],
  },
};

/**
 * Rolls up what the statement table `source` got since the last roll-up. Returns the number of
 * hour buckets counted again.
 */
export async function rollUpActivity(store: Store, source: 'events' | 'messages'): Promise<number> {
  const r = ROLLUPS[source];
  const [mark] = await store.query<{ seq: number }>('SELECT max(seq) AS seq FROM $db.activity_rollup WHERE source = {source:String}', {
    source,
  });
  const since = Number(mark?.seq ?? 0);
  const [fresh] = await store.query<{ top: number; buckets: number }>(
    `SELECT max(seq) AS top, uniqExact(${r.owner.join(', ')}, ${hourOf(r.time)}) AS buckets FROM $db.${source} WHERE seq > {since:UInt64}`,
    { since },
  );
  const top = Number(fresh?.top ?? 0);
  if (!fresh || !Number(fresh.buckets) || top <= since) return 0;
  const owner = r.owner.join(', ');
  const zeros = r.counts.map(() => 'toUInt32(0)').join(', ');
  const sums = r.counts.map((c) => `sum(${c}) AS ${c}`).join(', ');
  const params = { since, top };
  // Hours: the current, live statements of each bucket with a row written since the mark, and a
  // zero row per such bucket (so a bucket left empty still gets its row).
  await store.exec(
    `
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
    GROUP BY h, ${owner}`,
    params,
  );
  // Days: the sum of their hour rows, for each day of those buckets.
  await store.exec(
    `
    INSERT INTO $db.${r.target} (grain, start, ${owner}, ${r.counts.join(', ')}, firstAt, lastAt, seq)
    SELECT 'day', d, ${owner}, ${sums}, minIf(firstAt, c = 1), maxIf(lastAt, c = 1), {top:UInt64} FROM (
      SELECT intDiv(start, ${DAY_MS}) * ${DAY_MS} AS d, ${owner}, ${r.counts.join(', ')}, firstAt, lastAt, (${r.counts.join(' + ')}) > 0 AS c
      FROM $db.${r.target} FINAL
      WHERE grain = 'hour' AND (${owner}, intDiv(start, ${DAY_MS}) * ${DAY_MS}) IN (SELECT ${owner}, intDiv(toUnixTimestamp64Milli(${r.time}), ${DAY_MS}) * ${DAY_MS} FROM $db.${source} WHERE seq > {since:UInt64})
    )
    GROUP BY d, ${owner}`,
    params,
  );
  await store.insert('activity_rollup', [{ source, seq: top }]);
  return Number(fresh.buckets);
}
