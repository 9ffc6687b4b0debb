// Trade events skip the read-back of ids above the largest stored (projectors/trading/projection.ts,
// upper bounds kept per Store object). These cases state, from first principles, what a position
// and its events must be when positions span batches, events move to positions above the bounds,
// ids below the bounds arrive that were never stored, and a batch fails between its writes: once
// replayed by the same store object (bounds left too high) and once by a fresh one (bounds read
// from the store), every case converges to the same statements.

import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogBatch } from '../../projectors/log/port.ts';
import { applyBatch, ensureSchema } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import { ChdbStore } from '../../storage/chdb.ts';
import type { Store } from '../../storage/port.ts';
import { event } from './records.ts';

const dir = join(tmpdir(), `signalbase-bounds-${process.pid}`);
const stores: ChdbStore[] = [];
afterAll(async () => {
  for (const s of stores) {
    await s.drop();
    await s.close();
  }
  rmSync(dir, { recursive: true, force: true });
});

async function freshStore(db: string): Promise<ChdbStore> {
  const s = await new ChdbStore(dir, db).init();
  await s.drop();
  await s.init();
  await ensureSchema(s);
  stores.push(s);
  return s;
}

let offset = 0;
/** A log batch of trade events at the next offsets. */
function batch(values: ReturnType<typeof event>['value'][]): LogBatch {
  return {
    topic: 'trade-events',
    partition: 0,
    records: values.map((v) => ({ key: String(v.positionId), value: JSON.stringify(v), offset: String((offset += 100)) })),
  };
}

const at = (day: number) => `2026-01-${String(day).padStart(2, '0')}T00:00:00.000Z`;
const ms = (day: number) => Date.parse(at(day));

/**
 * Batches: positions 10 and 11 open in the first; the second closes 10 (a position across batches),
 * moves event 3 from 11 to position 21 (above every position id stored) and opens 20 with event 50
 * (above every event id stored); the third brings event 7 (below the largest id stored, never
 * stored itself) into 10 and deletes 10's open, reopens 11 with event 8, and moves event 50 (the
 * largest id stored) from 20 to 22.
 */
function batches(): LogBatch[] {
  return [
    batch([
      event(1, { positionId: 10, type: 'open', price: 100, timeOfEvent: at(1) }).value,
      event(2, { positionId: 10, type: 'increase', price: 105, timeOfEvent: at(2) }).value,
      event(3, { positionId: 11, type: 'open', price: 200, timeOfEvent: at(3), assetId: 2 }).value,
    ]),
    batch([
      event(4, { positionId: 10, type: 'close', price: 110, timeOfEvent: at(5) }).value,
      event(3, { positionId: 21, type: 'open', price: 200, timeOfEvent: at(3), assetId: 2, version: 2 }).value,
      event(50, { positionId: 20, type: 'open', price: 300, timeOfEvent: at(4), direction: 'short' }).value,
    ]),
    batch([
      event(7, { positionId: 10, type: 'decrease', price: 107, timeOfEvent: at(4) }).value,
      event(1, { positionId: 10, type: 'open', price: 100, timeOfEvent: at(1), version: 2, deleted: true }).value,
      event(8, { positionId: 11, type: 'open', price: 210, timeOfEvent: at(6), assetId: 2 }).value,
      event(50, { positionId: 22, type: 'open', price: 300, timeOfEvent: at(4), direction: 'short', version: 2 }).value,
    ]),
  ];
}

/** What the batches state, worked out by hand. */
const EXPECTED_POSITIONS = [
  // 10: its only open (event 1) is deleted: deleted where its earliest event put it.
  { id: 10, assetId: 1, direction: 'long', openAt: ms(1), openPrice: null, isOpen: 0, closedAt: null, deleted: 1, live: 0 },
  // 11: event 3 left it, event 8 opened it again.
  { id: 11, assetId: 2, direction: 'long', openAt: ms(6), openPrice: 210, isOpen: 1, closedAt: null, deleted: 0, live: 1 },
  // 20: event 50 left it, none is left: deleted where it was.
  { id: 20, assetId: 1, direction: 'short', openAt: ms(4), openPrice: 300, isOpen: 1, closedAt: null, deleted: 1, live: 0 },
  { id: 21, assetId: 2, direction: 'long', openAt: ms(3), openPrice: 200, isOpen: 1, closedAt: null, deleted: 0, live: 1 },
  { id: 22, assetId: 1, direction: 'short', openAt: ms(4), openPrice: 300, isOpen: 1, closedAt: null, deleted: 0, live: 1 },
];
/** Events: [id, positionId, deleted, live] (an event is live when it and its position are). */
const EXPECTED_EVENTS = [
  [1, 10, 1, 0],
  [2, 10, 0, 0],
  [3, 21, 0, 1],
  [4, 10, 0, 0],
  [7, 10, 0, 0],
  [8, 11, 0, 1],
  [50, 22, 0, 1],
];

async function statements(store: Store) {
  const positions = await store.query<any>(`SELECT id, assetId, direction, toUnixTimestamp64Milli(openAt) AS openAt, openPrice, isOpen,
    if(closedAt IS NULL, NULL, toUnixTimestamp64Milli(closedAt)) AS closedAt, deleted, live FROM $db.positions_current ORDER BY id`);
  const events = (await store.query<any>('SELECT id, positionId, deleted, live FROM $db.events_current ORDER BY id')).map((e) => [
    e.id,
    e.positionId,
    e.deleted,
    e.live,
  ]);
  // Every live row of a position's sorting keys is its current one (no stale statement left live).
  const liveRows = await store.query<any>(`SELECT id, count() AS n FROM (SELECT id, argMax(live, seq) AS live FROM $db.positions
    GROUP BY openAt, id, traderId, assetId, direction, isOpen, priced) WHERE live = 1 GROUP BY id HAVING n > 1`);
  return { positions, events, liveRows };
}

/**
 * A Store object of its own over `store` (its cached state, such as the bounds, is its own) whose
 * non-empty writes fail from the `failAt`-th on while `dying` (the process died there: nothing
 * after it lands), and pass again once revived.
 */
function mortal(store: Store, failAt: number) {
  let n = 0;
  let dying = false;
  let dead = false;
  // Once dead, queries fail too: the failure is an outage (retried whole), not a record the store refuses.
  const alive = () => {
    if (dead) throw new Error('killed');
  };
  const guard = (rows: readonly unknown[]) => {
    alive();
    if (dying && rows.length && ++n >= failAt) {
      dead = true;
      alive();
    }
  };
  const s: Store = {
    get database() {
      return store.database;
    },
    async query(sql, params) {
      alive();
      return store.query(sql, params);
    },
    async exec(sql, params) {
      alive();
      await store.exec(sql, params);
    },
    close: () => store.close(),
    async insert(table, rows) {
      guard(rows);
      await store.insert(table, rows);
    },
    async insertCompact(table, columns, rows) {
      guard(rows);
      await store.insertCompact(table, columns, rows);
    },
  };
  return {
    store: s,
    arm: () => {
      dying = true;
    },
    revive: () => {
      dying = false;
      dead = false;
    },
  };
}

describe('trade events above the stored ids are not read back, exactly', () => {
  let plain: ChdbStore;
  let session: ProjectorSession;
  beforeAll(async () => {
    plain = await freshStore(`bounds_plain_${process.pid}`);
    session = new ProjectorSession(plain);
  });

  it('folds positions across batches, moves to new positions and never-stored ids below the bounds', async () => {
    for (const b of batches()) await applyBatch(session, b);
    const s = await statements(plain);
    expect(s.positions).toEqual(EXPECTED_POSITIONS);
    expect(s.events).toEqual(EXPECTED_EVENTS);
    expect(s.liveRows).toEqual([]);
  });

  it('applying the whole log again changes nothing', async () => {
    for (const b of batches()) await applyBatch(session, b);
    const s = await statements(plain);
    expect(s.positions).toEqual(EXPECTED_POSITIONS);
    expect(s.events).toEqual(EXPECTED_EVENTS);
  });

  // A trade-events batch writes performance rows, positions and events: a failure before each.
  for (const failAt of [1, 2, 3]) {
    for (const replayBy of ['the same store object (bounds too high)', 'a fresh store object (bounds read again)'] as const) {
      it(`a failure at write ${failAt} of the second batch, replayed by ${replayBy}, converges`, async () => {
        const db = `bounds_${failAt}_${replayBy.startsWith('the same') ? 's' : 'f'}_${process.pid}`;
        const store = await freshStore(db);
        const [b1, b2, b3] = batches();
        const first = mortal(store, failAt);
        const firstSession = new ProjectorSession(first.store);
        await applyBatch(firstSession, b1!);
        first.arm();
        await expect(applyBatch(firstSession, b2!)).rejects.toThrow('killed');
        // The same object keeps the bounds it raised before the failed writes; a new one reads them from the store.
        const next = replayBy.startsWith('the same') ? first : mortal(store, failAt);
        const nextSession = next === first ? firstSession : new ProjectorSession(next.store);
        next.revive();
        await applyBatch(nextSession, b2!);
        await applyBatch(nextSession, b3!);
        const s = await statements(store);
        expect(s.positions).toEqual(EXPECTED_POSITIONS);
        expect(s.events).toEqual(EXPECTED_EVENTS);
        expect(s.liveRows).toEqual([]);
      });
    }
  }
});
