import type { Store } from '../../storage/port.ts';
import type { Table } from '../../storage/table.ts';
import {
  ACTIVITY_EVENTS_TABLE,
  ACTIVITY_MESSAGES_TABLE,
  ACTIVITY_ROLLUP_TABLE,
  DAY_MS,
  EVENT_COUNT_COLUMNS,
  EVENT_COUNTS,
  hourOf,
} from '../../storage/tables/activity.ts';
import { MESSAGES_TABLE } from '../../storage/tables/messages.ts';
import { EVENTS_TABLE } from '../../storage/tables/trading.ts';
import type { ProjectionContext } from '../projection.ts';

/**
 * Hour buckets to count again at most for a roll-up to run on one thread and to insert its rows as
 * rows, which name their owners (a live trickle); with more, it runs in the store (a catch-up).
 */
export const ROLLUP_LIMITS = { fewBuckets: 1000 };

/** Rolls the statement tables up into the activity tables (storage/tables/activity.ts says how and why). */
interface RollUp {
  /** The statement table rolled up, its time column, and the roll-up table. */
  source: Table;
  time: string;
  target: Table;
  /** The bucket's owner: columns of both tables. */
  owner: readonly string[];
  /** The counts of one statement row (current and live), as SELECT expressions in `counts` order. */
  counted: readonly string[];
  counts: readonly string[];
}

const ROLLUPS: Record<string, RollUp> = {
  [EVENTS_TABLE.name]: {
    source: EVENTS_TABLE,
    time: 'timeOfEvent',
    target: ACTIVITY_EVENTS_TABLE,
    owner: ['traderId'],
    counted: EVENT_COUNTS.map((c) => `toUInt32(type = '${c.type}' AND direction = '${c.direction}')`),
    counts: EVENT_COUNT_COLUMNS,
  },
  [MESSAGES_TABLE.name]: {
    source: MESSAGES_TABLE,
    time: 'writtenAt',
    target: ACTIVITY_MESSAGES_TABLE,
    owner: ['platform', 'sourceIdentityId'],
    counted: ['toUInt32(1)'],
    counts: ['n'],
  },
};

/**
 * Rolls up what the statement table `source` got since the last roll-up: after each batch, or on a
 * live projector at most every so often (ProjectionContext.settle): the activity reads may lag the
 * statement tables by that much, and a trickle of live batches does not pay four statements each.
 */
export function rollUpActivity(ctx: ProjectionContext, table: Table): Promise<void> {
  return ctx.settle(`roll-up ${table.name}`, async () => {
    await rollUp(ctx.store, table);
  });
}

/** Rolls up what `table` got since the last roll-up. Returns the number of hour buckets counted again. */
async function rollUp(store: Store, table: Table): Promise<number> {
  const r = ROLLUPS[table.name]!;
  const source = table.name;
  const [mark] = await store.query<{ seq: number }>(`SELECT max(seq) AS seq FROM ${ACTIVITY_ROLLUP_TABLE} WHERE source = {source:String}`, {
    source,
  });
  const since = Number(mark?.seq ?? 0);
  const [fresh] = await store.query<{ top: number; buckets: number }>(
    `SELECT max(seq) AS top, uniqExact(${r.owner.join(', ')}, ${hourOf(r.time)}) AS buckets FROM ${r.source} WHERE seq > {since:UInt64}`,
    { since },
  );
  const top = Number(fresh?.top ?? 0);
  if (!fresh || !Number(fresh.buckets) || top <= since) return 0;
  const owner = r.owner.join(', ');
  const few = Number(fresh.buckets) <= ROLLUP_LIMITS.fewBuckets;
  // A live trickle's few buckets are read on one thread (a second costs more than it saves, as in a
  // live batch's reads: projectors/runner.ts); a catch-up's many keep every thread.
  const settings = few ? 'SETTINGS max_threads = 1' : '';
  const zeros = r.counts.map(() => 'toUInt32(0)').join(', ');
  const sums = r.counts.map((c) => `sum(${c}) AS ${c}`).join(', ');
  const params = { since, top };
  const columns = ['grain', 'start', ...r.owner, ...r.counts, 'firstAt', 'lastAt', 'seq'];
  // A live trickle's rows come back and are inserted as rows, which name their owners: the commit
  // then ends only what was read of those owners' buckets (storage/changes.ts). A catch-up's many
  // stay in the store (INSERT ... SELECT: a change of every owner).
  const write = async (select: string) => {
    if (!few) return store.exec(`INSERT INTO ${r.target} (${columns.join(', ')}) ${select}`, params);
    const rows = await store.query<Record<string, unknown>>(select, params);
    await store.insertCompact(
      r.target.name,
      columns,
      rows.map((row) => columns.map((c) => row[c])),
    );
  };
  // Hours: the current, live statements of each bucket with a row written since the mark, and a
  // zero row per such bucket (so a bucket left empty still gets its row).
  await write(
    `
    SELECT 'hour' AS grain, h AS start, ${owner}, ${sums}, minIf(at, c = 1) AS firstAt, maxIf(at, c = 1) AS lastAt, {top:UInt64} AS seq FROM (
      SELECT ${hourOf(r.time)} AS h, ${owner}, ${r.counted.map((e, i) => `${e} AS ${r.counts[i]}`).join(', ')},
        toUnixTimestamp64Milli(${r.time}) AS at, 1 AS c
      FROM ${r.source} FINAL
      WHERE live = 1 AND tomb = 0
        AND (${owner}, ${hourOf(r.time)}) IN (SELECT ${owner}, ${hourOf(r.time)} FROM ${r.source} WHERE seq > {since:UInt64})
      UNION ALL
      SELECT DISTINCT ${hourOf(r.time)} AS h, ${owner}, ${zeros}, toInt64(0) AS at, 0 AS c FROM ${r.source} WHERE seq > {since:UInt64}
    )
    GROUP BY h, ${owner} ${settings}`,
  );
  // Days: the sum of their hour rows, for each day of those buckets.
  await write(
    `
    SELECT 'day' AS grain, d AS start, ${owner}, ${sums}, minIf(firstAt, c = 1) AS firstAt, maxIf(lastAt, c = 1) AS lastAt, {top:UInt64} AS seq FROM (
      SELECT intDiv(start, ${DAY_MS}) * ${DAY_MS} AS d, ${owner}, ${r.counts.join(', ')}, firstAt, lastAt, (${r.counts.join(' + ')}) > 0 AS c
      FROM ${r.target} FINAL
      WHERE grain = 'hour' AND (${owner}, intDiv(start, ${DAY_MS}) * ${DAY_MS}) IN (SELECT ${owner}, intDiv(toUnixTimestamp64Milli(${r.time}), ${DAY_MS}) * ${DAY_MS} FROM ${r.source} WHERE seq > {since:UInt64})
    )
    GROUP BY d, ${owner} ${settings}`,
  );
  await store.insert(ACTIVITY_ROLLUP_TABLE.name, [{ source, seq: top }]);
  return Number(fresh.buckets);
}
