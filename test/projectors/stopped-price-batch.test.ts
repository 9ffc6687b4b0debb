// Regression (issue 6, found by the CI run of stop 36: crash seed 60906, and once in three runs of
// the stop 35 build): a projector killed while a price batch wrote its evaluations left them in
// position_performances but not in position_samples (its materialized view's part lands after the
// table's), and when the batch came again it compared its evaluations with position_performances,
// found them written, and wrote nothing: the positions stayed unscored in the analytics for good.
// Here the evaluations' insert lands in position_performances alone (the view's rows are taken
// back, as the kill left them), the store goes down, the batch comes again, and trader stats (read
// from position_samples) must equal the analytics oracle's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CursorCodec } from '../../apps/reads/cursor.ts';
import { OPERATIONS } from '../../apps/registry.ts';
import { applyBatch, ensureSchema } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import type { ChdbStore } from '../../storage/chdb.ts';
import type { Store } from '../../storage/port.ts';
import { POSITION_PERFORMANCES_TABLE, POSITION_SAMPLES_TABLE } from '../../storage/tables/performance.ts';
import { batchOf, OPEN_PRINCIPAL } from '../helpers/batches.ts';
import { build, type TopicRecord } from '../helpers/harness.ts';
import { openSchemaStore } from '../helpers/spec.ts';
import * as A from '../oracle/analytics.ts';
import type * as O from '../oracle/oracle.ts';

let db: Awaited<ReturnType<typeof openSchemaStore>>;
let store: ChdbStore;
beforeAll(async () => {
  db = await openSchemaStore('pricestop');
  store = db.store;
});
afterAll(() => db?.close());

const HOUR = 3_600_000;
const at = (h: number) => new Date(Date.UTC(2026, 5, 1) + h * HOUR).toISOString();
const NOW = new Date(Date.UTC(2026, 6, 1));

// Positions of trader 1 opened at hours 1..4 on asset 1; their 1D windows come of age at 25..28.
const BASE: TopicRecord[] = [
  build.trader(1),
  build.asset(1),
  build.price(1, at(0), 100),
  ...[1, 2, 3, 4].map((p) => build.event(p * 10, { positionId: p, traderId: 1, assetId: 1, price: 100, timeOfEvent: at(p) })),
];
// Their forward prices: every 1D window becomes ready.
const PRICES: TopicRecord[] = [25, 26, 27, 28].map((h, i) => build.price(1, at(h), 110 + i));

/** The store as a kill between position_performances' part and its view's leaves it: the evaluations land in the table only, then the store goes down. */
function losingTheViewPart(): { store: Store; lost: () => boolean } {
  let lost = false;
  const down = () => Promise.reject(new Error('store down'));
  return {
    lost: () => lost,
    store: {
      get database() {
        return store.database;
      },
      query: (sql, params) => (lost ? down() : store.query(sql, params)),
      exec: (sql, params) => (lost ? down() : store.exec(sql, params)),
      insert: (table, rows) => (lost ? down() : store.insert(table, rows)),
      insertCompact: async (table, columns, rows) => {
        if (lost) return down();
        await store.insertCompact(table, columns, rows);
        if (table !== POSITION_PERFORMANCES_TABLE.name) return;
        const seq = rows[0]![columns.indexOf('seq')];
        await store.exec(`ALTER TABLE ${POSITION_SAMPLES_TABLE} DELETE WHERE seq = {seq:UInt64} SETTINGS mutations_sync = 2`, { seq });
        lost = true;
        return down();
      },
      close: async () => {},
    },
  };
}

const TRADER_STATS = OPERATIONS.find((o) => o.tool === 'list_trader_stats' && o.versions.includes('v2'))!;
const principal = OPEN_PRINCIPAL;

describe('a price batch killed between its evaluations and their view, then delivered again', () => {
  it('scores the positions whose forward prices it brought, as the analytics oracle does', async () => {
    const expected = A.traderStats([...BASE, ...PRICES] as O.TopicRec[], { traderIds: '1' }, A.policies.OPEN, NOW.getTime());
    expect((expected as { data: any }).data.results[0].summary.timeBasedPerformances['1D'].positionsCount).toBe(4);
    await ensureSchema(store);
    for (const [i, r] of BASE.entries()) await applyBatch(db.session, batchOf([r], i + 1));
    const s = losingTheViewPart();
    await expect(applyBatch(new ProjectorSession(s.store), batchOf(PRICES, 100))).rejects.toThrow('store down');
    expect(s.lost()).toBe(true);
    // Delivered again from the same log positions, by a new session (a restarted projector).
    await applyBatch(new ProjectorSession(store), batchOf(PRICES, 100));
    const stats = await TRADER_STATS.handler({ store, principal, now: NOW, cursors: CursorCodec.random() }, { traderIds: '1' });
    expect(A.diff((stats as { results: unknown[] }).results, (expected as { data: any }).data.results)).toBeNull();
  }, 60_000);
});
