// Issue 24: the embedded API's short reads do not wait behind long ones; issue 26: nor does any
// parameterised statement wait behind another's (chdb's own binding runs one at a time in the
// whole process): a store with sessions of its own binds each statement's parameters on its
// session; a read that fails leaves nothing behind on its session, and names its bound.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChdbStore, openChdbStore } from '../../storage/chdb.ts';
import { storeFailure } from '../../storage/port.ts';

describe('issue 24: a chdb store with sessions of its own', () => {
  let dir: string;
  let store: ChdbStore;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sb-lanes-'));
    store = await openChdbStore(join(dir, 'chdb'), 'lanes', { ownSession: true, sessions: 2 });
  }, 60_000);
  afterAll(async () => {
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('answers a short parameterised read while a long one runs on its other session', async () => {
    const order: string[] = [];
    const long = store
      .query('SELECT count() AS n FROM numbers(400000000) WHERE sipHash64(number) % 7 = {r:UInt8}', { r: 1 })
      .then(() => order.push('long'));
    await new Promise((r) => setTimeout(r, 50));
    const short = await store.query<{ v: number; s: string }>('SELECT {v:UInt32} AS v, {s:String} AS s', { v: 7, s: "it's" });
    order.push('short');
    expect(short).toEqual([{ v: 7, s: "it's" }]);
    await long;
    expect(order).toEqual(['short', 'long']);
  }, 60_000);

  it('binds each concurrent read its own parameters', async () => {
    const reads = Array.from({ length: 40 }, (_, i) =>
      store.query<{ v: number; a: number[] }>('SELECT {v:UInt64} AS v, {a:Array(UInt64)} AS a', { v: i, a: [i, i + 1] }),
    );
    expect(await Promise.all(reads)).toEqual(Array.from({ length: 40 }, (_, i) => [{ v: i, a: [i, i + 1] }]));
  });

  it('a read that hits its bound leaves nothing on its session, and says which bound', async () => {
    const err = await store
      .query('SELECT groupArray(number) AS a FROM numbers(20000000)', {}, { settings: { max_memory_usage: 8 * 2 ** 20 } })
      .catch((e) => e);
    expect(storeFailure(err)).toEqual({ kind: 'too_large', bound: 'memory' });
    for (let i = 0; i < 4; i++) expect(await store.query('SELECT {i:UInt8} AS i', { i })).toEqual([{ i }]);
    // The bound was this read's alone.
    expect(await store.query('SELECT length(groupArray(number)) AS n FROM numbers(3000000)')).toEqual([{ n: 3000000 }]);
  });
});
