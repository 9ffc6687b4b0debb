import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newTestDatabase, openTestStore, releaseTestDatabase, type TestStore } from '../helpers/test-store.ts';

/**
 * Regression (issue 26, found by bench/live.ts): a short read streams its answer, and chdb writes
 * each block of a stream with its own line of column names; the second block's names were read as
 * a row (an asset id `'assetId'`, then a 500 on /positions/open). Every row of a many-block answer
 * comes back, and nothing else.
 */
let store: TestStore;
beforeAll(async () => {
  store = await openTestStore(newTestDatabase(), true);
});
afterAll(async () => {
  await store?.drop();
  await releaseTestDatabase();
});

describe('issue 26: a streamed answer of many blocks', () => {
  it('reads every row once, and no line of column names as a row', async () => {
    const rows = await store.query<{ assetId: number; name: string }>(
      'SELECT number AS assetId, toString(number) AS name FROM numbers({n:UInt64})',
      { n: 5000 },
      { short: true, settings: { max_block_size: 700 } },
    );
    expect(rows.length).toBe(5000);
    expect(rows.map((r) => Number(r.assetId))).toEqual(Array.from({ length: 5000 }, (_, i) => i));
    expect(rows.every((r) => r.name === String(r.assetId))).toBe(true);
  });

  it('reads an empty answer as no rows', async () => {
    expect(await store.query('SELECT number FROM numbers(0)', {}, { short: true })).toEqual([]);
  });
});
