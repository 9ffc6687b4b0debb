// Regression (issue 6, CI run of stop 18): a kill inside a trade batch lost an open position for
// good. open_positions was fed by a materialized view on the positions table, whose part lands
// after the table's; the kill fell in between, and the replay found the position's statement
// already in positions, unchanged, so it wrote nothing and open_positions never got it. The
// projector now writes open_positions itself, before positions. Here the store goes down at each
// write of a batch in turn (as a kill leaves it: what landed stays), the batch is delivered again,
// and the open positions must equal the records' (brute force over test/oracle/oracle.ts's world),
// in open_positions and in positions alike.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyBatch, ensureSchema } from '../../projectors/runner.ts';
import type { ChdbStore } from '../../projectors/store/chdb.ts';
import type { Store } from '../../projectors/store/port.ts';
import { build, type TopicRecord } from '../helpers/harness.ts';
import { openSchemaStore } from '../helpers/spec.ts';
import * as O from '../oracle/oracle.ts';

let db: Awaited<ReturnType<typeof openSchemaStore>>;
let store: ChdbStore;
beforeAll(async () => { db = await openSchemaStore('openstop'); store = db.store; });
afterAll(() => db?.close());

const HOUR = 3_600_000;
const at = (h: number) => new Date(Date.UTC(2026, 5, 1) + h * HOUR).toISOString();

const BASE: TopicRecord[] = [
  build.trader(1), build.trader(2), build.asset(1), build.asset(2),
  ...[1, 2, 3, 4].map((p) => build.event(p * 10, { positionId: p, traderId: 1, assetId: 1, price: 100, timeOfEvent: at(p) })),
];
/** One batch that closes 2, moves 3's open to another trader, asset and time, deletes 4's open, opens 5 and closes 1 then reopens it. */
const CHANGE: TopicRecord[] = [
  build.event(21, { positionId: 2, traderId: 1, assetId: 1, type: 'close', price: 110, timeOfEvent: at(20) }),
  build.event(30, { positionId: 3, traderId: 2, assetId: 2, price: 90, timeOfEvent: at(30), version: 2 }),
  build.event(40, { positionId: 4, traderId: 1, assetId: 1, price: 100, timeOfEvent: at(4), version: 2, deleted: true }),
  build.event(50, { positionId: 5, traderId: 2, assetId: 1, price: 120, timeOfEvent: at(50) }),
  build.event(11, { positionId: 1, traderId: 1, assetId: 1, type: 'close', price: 105, timeOfEvent: at(60) }),
  build.event(11, { positionId: 1, traderId: 1, assetId: 1, type: 'close', price: 105, timeOfEvent: at(60), version: 2, deleted: true }),
];

let offset = 0;
const batchOf = (records: readonly TopicRecord[]) =>
  ({ topic: 'trade-events', partition: 0, records: records.map((r) => ({ key: '', value: JSON.stringify(r.value), offset: String(++offset) })) });

/** The store, going down for good at its `k`-th write (the write does not land). */
function stoppingAt(k: number): { store: Store; stopped: () => boolean } {
  let writes = 0;
  let down = false;
  const write = <T>(f: () => Promise<T>): Promise<T> => {
    if (!down && ++writes === k) down = true;
    return down ? Promise.reject(new Error('store down')) : f();
  };
  const up = <T>(f: () => Promise<T>): Promise<T> => (down ? Promise.reject(new Error('store down')) : f());
  return {
    stopped: () => down,
    store: {
      get database() { return store.database; },
      query: (sql, params) => up(() => store.query(sql, params)),
      exec: (sql, params) => (/^\s*INSERT/i.test(sql) ? write(() => store.exec(sql, params)) : up(() => store.exec(sql, params))),
      insert: (table, rows) => write(() => store.insert(table, rows)),
      insertCompact: (table, columns, rows) => write(() => store.insertCompact(table, columns, rows)),
      close: async () => {},
    },
  };
}

const ids = async (table: 'open_positions' | 'positions') => (await store.query<{ id: number }>(
  `SELECT id FROM $db.${table} FINAL WHERE tomb = 0 AND live = 1 AND isOpen = 1 ORDER BY id`)).map((r) => Number(r.id));

describe('a trade batch stopped at any of its writes, then delivered again', () => {
  it('leaves exactly the open positions of the records, in open_positions and in positions', async () => {
    const w = O.buildWorld([...BASE, ...CHANGE] as O.TopicRec[]);
    const expected = [...w.positions.values()].filter((p) => p.isOpen).map((p) => p.id).sort((a, b) => a - b);
    expect(expected).toEqual([1, 3, 5]); // the records say so: 2 closed, 4 without an open
    let stops = 0;
    for (let k = 1; ; k++) {
      await store.drop();
      await store.init();
      await ensureSchema(store);
      for (const r of BASE) await applyBatch(store, batchOf([r]));
      const change = batchOf(CHANGE);
      const s = stoppingAt(k);
      const failed = await applyBatch(s.store, change).then(() => false, () => true);
      if (!failed) break; // the batch has fewer than k writes: every stop was tried
      expect(s.stopped()).toBe(true);
      stops++;
      await applyBatch(store, change); // delivered again (at least once)
      expect({ k, open: await ids('open_positions') }).toEqual({ k, open: expected });
      expect({ k, open: await ids('positions') }).toEqual({ k, open: expected });
    }
    expect(stops).toBeGreaterThanOrEqual(4); // performances, open positions, positions, events at least
  }, 60_000);
});
