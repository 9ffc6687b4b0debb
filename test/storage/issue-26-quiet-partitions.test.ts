// Issue 26: analytics reads aggregate position_samples with FINAL, which merges at read time every
// partition (window and month) left in more than one part. Prices that re-evaluate positions of
// past months write into their partitions in a burst, and the store's usual merges left each such
// partition in two parts (a large one and the burst's) until the next compaction, minutes later.
// A partition no insert touched for a while is now merged into one part by the store itself, also
// in a table made by an earlier build (the setting is added on start: no rebuild, the rows kept).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { performanceProjection } from '../../projectors/performance/projection.ts';
import { ensureSchema } from '../../projectors/runner.ts';
import { newTestDatabase, openTestStore, releaseTestDatabase, type TestStore } from '../helpers/test-store.ts';

let store: TestStore;
beforeAll(async () => {
  store = await openTestStore(newTestDatabase());
  await ensureSchema(store, [performanceProjection]);
  // The table as a build before this one made it: without the store's merge of quiet partitions.
  await store.exec(
    'ALTER TABLE $db.position_samples RESET SETTING min_age_to_force_merge_seconds, min_age_to_force_merge_on_partition_only',
  );
}, 60_000);
afterAll(async () => {
  await store?.drop();
  await releaseTestDatabase();
});

const MARCH = Date.parse('2026-03-01T00:00:00Z');
const APRIL = Date.parse('2026-04-01T00:00:00Z');

/** `n` evaluation rows of window 1D opened from `from` on, one a minute, at version `seq`; every `every`-th position only. */
const insertRows = (from: number, n: number, seq: number, every = 1) =>
  store.exec(
    `INSERT INTO $db.position_samples (positionId, window, traderId, assetId, direction, openAt, evaluatedAt, status, returnPercentage, live, seq)
     SELECT {from:Int64} + number * 60000 AS positionId, '1D', number % 50 + 1, number % 7 + 1, 'long',
            {from:Int64} + number * 60000, {from:Int64} + number * 60000 + 86400000, 'ready', {seq:Float64}, 1, {seq:UInt64}
     FROM numbers({n:UInt64}) WHERE number % {every:UInt64} = 0`,
    { from, n, seq, every },
  );

const partsByPartition = async () =>
  Object.fromEntries(
    (
      await store.query<{ partition: string; n: number }>(
        `SELECT partition, count() AS n FROM system.parts WHERE database = {db:String} AND table = 'position_samples' AND active
         GROUP BY partition ORDER BY partition`,
        { db: store.database },
      )
    ).map((r) => [r.partition, Number(r.n)]),
  );

const finalRows = () =>
  store.query<{ positionId: number; seq: number }>(
    'SELECT positionId, seq, returnPercentage FROM $db.position_samples FINAL ORDER BY positionId, window',
  );

describe('partitions of position_samples that no insert touches', () => {
  it('are merged into one part each by the store, in a table made before the setting, with the same rows', async () => {
    // Two past months as a compaction leaves them (one part each), then a burst re-evaluating some of their positions.
    for (const from of [MARCH, APRIL]) await insertRows(from, 20_000, 1);
    await store.exec('OPTIMIZE TABLE $db.position_samples FINAL');
    for (const from of [MARCH, APRIL]) await insertRows(from, 20_000, 2, 40);
    expect(Object.values(await partsByPartition())).toEqual([2, 2]);
    const rows = await finalRows();
    expect(rows.filter((r) => Number(r.seq) === 2)).toHaveLength(1_000);

    await ensureSchema(store, [performanceProjection]); // a start of this build on the earlier table
    const deadline = Date.now() + 120_000;
    let parts = await partsByPartition();
    while (Object.values(parts).some((n) => n > 1) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      parts = await partsByPartition();
    }
    expect(Object.values(parts)).toEqual([1, 1]);
    expect(await finalRows()).toEqual(rows);
  }, 180_000);
});
