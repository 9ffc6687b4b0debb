// Regression (issue 6: the CI run of stop 18, and crash seeds 1, 4 and 60906 after the first
// fix): a kill inside a trade batch lost or kept an open position, or kept counting a position at
// a key it had left, for good. open_positions was fed by a materialized view on positions, whose
// part lands after the table's: the kill fell in between, and the replay found the position's
// statement already in positions and wrote nothing. Written by the projector before positions
// instead, a killed batch left there what never reached positions (a position opened in it), and
// the replay, cutting the records into other batches (the open and its close in one), never
// stated that key again. The same held for position_samples: performance rows are written before
// positions, and a position opened in a killed batch stayed counted at the key it had there when
// the replay stated it directly at another. Now each batch reads back the open_positions rows and
// the position_samples keys of the positions it touches and writes what makes them agree with
// each position's current statement. Here the store goes down at each write of a batch in turn (as
// a kill leaves it: what landed stays), the records come again (the same batch, one record per
// batch from lower log positions, or a larger batch than the stopped one; in the same process or
// after a restart), and the first page of open positions must equal the oracle's
// (test/oracle/oracle.ts), read from open_positions (no filter) and from positions (a trader
// filter) alike, and trader stats the analytics oracle's (test/oracle/analytics.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CursorCodec } from '../../apps/reads/cursor.ts';
import { OPERATIONS } from '../../apps/registry.ts';
import { applyBatch, ensureSchema } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import { ChdbStore } from '../../storage/chdb.ts';
import type { Store } from '../../storage/port.ts';
import { batchOf, OPEN_PRINCIPAL } from '../helpers/batches.ts';
import { build, type TopicRecord } from '../helpers/harness.ts';
import { openSchemaStore } from '../helpers/spec.ts';
import * as A from '../oracle/analytics.ts';
import * as O from '../oracle/oracle.ts';

let db: Awaited<ReturnType<typeof openSchemaStore>>;
let store: ChdbStore;
beforeAll(async () => {
  db = await openSchemaStore('openstop');
  store = db.store;
});
afterAll(() => db?.close());

const HOUR = 3_600_000;
const at = (h: number) => new Date(Date.UTC(2026, 5, 1) + h * HOUR).toISOString();

const BASE: TopicRecord[] = [
  build.trader(1),
  build.trader(2),
  build.asset(1),
  build.asset(2),
  build.price(1, at(0), 100),
  build.price(2, at(0), 90),
  ...[1, 2, 3, 4].map((p) => build.event(p * 10, { positionId: p, traderId: 1, assetId: 1, price: 100, timeOfEvent: at(p) })),
  build.event(70, { positionId: 7, traderId: 2, assetId: 2, price: 100, timeOfEvent: at(7) }),
];
/**
 * One batch that closes 2, moves 3's open to another trader, asset and time, moves 7's to another
 * trader and asset at the same time (a page resolves the rows of one time and id together),
 * deletes 4's open, opens 5, closes 1 then reopens it, opens 6 and closes it, and opens 8 that
 * its last record moves to another trader, asset and time.
 */
const CHANGE: TopicRecord[] = [
  build.event(70, { positionId: 7, traderId: 1, assetId: 1, price: 100, timeOfEvent: at(7), version: 2 }),
  build.event(21, { positionId: 2, traderId: 1, assetId: 1, type: 'close', price: 110, timeOfEvent: at(20) }),
  build.event(30, { positionId: 3, traderId: 2, assetId: 2, price: 90, timeOfEvent: at(30), version: 2 }),
  build.event(40, { positionId: 4, traderId: 1, assetId: 1, price: 100, timeOfEvent: at(4), version: 2, deleted: true }),
  build.event(50, { positionId: 5, traderId: 2, assetId: 1, price: 120, timeOfEvent: at(50) }),
  build.event(11, { positionId: 1, traderId: 1, assetId: 1, type: 'close', price: 105, timeOfEvent: at(60) }),
  build.event(11, { positionId: 1, traderId: 1, assetId: 1, type: 'close', price: 105, timeOfEvent: at(60), version: 2, deleted: true }),
  build.event(60, { positionId: 6, traderId: 2, assetId: 2, price: 80, timeOfEvent: at(70) }),
  build.event(80, { positionId: 8, traderId: 1, assetId: 1, direction: 'short', price: 100, timeOfEvent: at(80) }),
  build.event(61, { positionId: 6, traderId: 2, assetId: 2, type: 'close', price: 85, timeOfEvent: at(71) }),
  build.event(80, { positionId: 8, traderId: 2, assetId: 2, direction: 'short', price: 90, timeOfEvent: at(81), version: 2 }),
];

/** The store, going down at its `k`-th write (the write does not land) until `up()`. */
function stoppingAt(k: number): { store: Store; stopped: () => boolean; up: () => void } {
  let writes = 0;
  let down = false;
  let revived = false;
  const write = <T>(f: () => Promise<T>): Promise<T> => {
    if (!down && !revived && ++writes === k) down = true;
    return down ? Promise.reject(new Error('store down')) : f();
  };
  const read = <T>(f: () => Promise<T>): Promise<T> => (down ? Promise.reject(new Error('store down')) : f());
  return {
    stopped: () => down,
    up: () => {
      down = false;
      revived = true;
    },
    store: {
      get database() {
        return store.database;
      },
      query: (sql, params) => read(() => store.query(sql, params)),
      exec: (sql, params) => (/^\s*INSERT/i.test(sql) ? write(() => store.exec(sql, params)) : read(() => store.exec(sql, params))),
      insert: (table, rows) => write(() => store.insert(table, rows)),
      insertCompact: (table, columns, rows) => write(() => store.insertCompact(table, columns, rows)),
      close: async () => {},
    },
  };
}

const NOW = new Date(Date.UTC(2026, 6, 1));
const OPEN_POSITIONS = OPERATIONS.find((o) => o.tool === 'list_open_positions' && o.versions.includes('v2'))!;
const principal = OPEN_PRINCIPAL;

const TRADER_STATS = OPERATIONS.find((o) => o.tool === 'list_trader_stats' && o.versions.includes('v2'))!;
/** Trader stats as the read serves them (figures from position_samples). */
async function traderStats(traderIds: string): Promise<{ results: unknown[] }> {
  return (await TRADER_STATS.handler({ store, principal, now: NOW, cursors: CursorCodec.random() }, { traderIds })) as {
    results: unknown[];
  };
}

/**
 * The ids on the first page of open positions, as the read serves it: without a filter (from
 * open_positions) and for traders 1 and 2 (a filter the positions table's projection serves).
 */
async function openPage(traderIds?: string): Promise<number[]> {
  const ctx = { store, principal, now: NOW, cursors: CursorCodec.random() };
  const page = (await OPEN_POSITIONS.handler(ctx, { limit: 200, ...(traderIds ? { traderIds } : {}) })) as { results: { id: number }[] };
  return page.results.map((p) => p.id).sort((a, b) => a - b);
}

describe('a trade batch stopped at any of its writes, then delivered again', () => {
  const expected = O.openPositions([...BASE, ...CHANGE] as O.TopicRec[], {}, NOW.getTime())
    .map((p) => p.id)
    .sort((a, b) => a - b);
  const expectedStats = A.traderStats([...BASE, ...CHANGE] as O.TopicRec[], { traderIds: '1,2' }, A.policies.OPEN, NOW.getTime());
  const FROM = 100; // the change's log positions (BASE takes 1 to BASE.length)

  // What was stopped, and how the records come again: retried as the same batch in the same
  // process (the runner retries a failed batch), or after a restart (a new store object, as a new
  // process has) as the same batch, one record per batch (so from lower log positions than the
  // stopped batch's last), or a larger batch than the stopped one (a batch cut elsewhere).
  const REPLAYS = {
    'retried in the same process': { stopped: CHANGE, again: [CHANGE], restart: false },
    'after a restart as the same batch': { stopped: CHANGE, again: [CHANGE], restart: true },
    'after a restart one record per batch': { stopped: CHANGE, again: CHANGE.map((r) => [r]), restart: true },
    'after a restart in a larger batch': { stopped: CHANGE.slice(0, -1), again: [CHANGE], restart: true },
  } as const;
  for (const [replay, { stopped, again, restart }] of Object.entries(REPLAYS)) {
    it(`leaves the open positions and trader stats of the records (delivered again ${replay})`, async () => {
      expect(expected).toEqual([1, 3, 5, 7, 8]); // the records say so: 2 closed, 4 without an open, 6 closed
      expect(expectedStats.status).toBe(200);
      let stops = 0;
      for (let k = 1; ; k++) {
        await store.drop();
        await store.init();
        await ensureSchema(store);
        for (const [i, r] of BASE.entries()) await applyBatch(db.session, batchOf([r], i + 1));
        const s = stoppingAt(k);
        const stopping = new ProjectorSession(s.store);
        const failed = await applyBatch(stopping, batchOf(stopped, FROM)).then(
          () => false,
          () => true,
        );
        if (!failed) break; // the batch has fewer than k writes: every stop was tried
        expect(s.stopped()).toBe(true);
        stops++;
        // Delivered again (at least once), from the same log positions.
        s.up();
        const projector = restart ? await new ChdbStore(store.path, store.database).init() : s.store;
        const session = restart ? new ProjectorSession(projector) : stopping;
        let offset = FROM;
        for (const records of again) {
          await applyBatch(session, batchOf(records, offset));
          offset += records.length;
        }
        if (restart) await projector.close();
        expect({ k, open: await openPage() }).toEqual({ k, open: expected });
        expect({ k, open: await openPage('1,2') }).toEqual({ k, open: expected });
        // The analytics sample (position_samples) too: no position counted at a key it left.
        expect({ k, stats: A.diff((await traderStats('1,2')).results, (expectedStats as { data: any }).data.results) }).toEqual({
          k,
          stats: null,
        });
      }
      expect(stops).toBeGreaterThanOrEqual(4); // performances, open positions, positions, events at least
    }, 180_000);
  }
});
