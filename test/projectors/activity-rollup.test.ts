// Issue 7: activity rolled up by hour and day (projectors/activity/rollup.ts). The rows must equal
// a count of the records' current, live events and messages (test/oracle/oracle.ts buildWorld),
// however the records change what they count for (moved in time, to another trader, type or
// direction, deleted, a position losing its open) and across batches, replays and a crash that
// stops a batch between its inserts and its roll-up.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROLLUP_LIMITS } from '../../projectors/activity/rollup.ts';
import { applyBatch } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import type { ChdbStore } from '../../storage/chdb.ts';
import type { Store } from '../../storage/port.ts';
import { build, type TopicRecord } from '../helpers/harness.ts';
import { openSchemaStore, projectionSpec } from '../helpers/spec.ts';
import * as O from '../oracle/oracle.ts';

let db: Awaited<ReturnType<typeof openSchemaStore>>;
let store: ChdbStore;
let spec: ReturnType<typeof projectionSpec>;

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
type Counts = Record<string, number>;

/** The rolled-up rows that count anything, as `grain start owner -> counts` (events: `type/direction`); by time or `byOwner`. */
async function rolledUp(byOwner = false): Promise<{ events: Record<string, Counts>; messages: Record<string, number> }> {
  const ev = await store.query<any>(`SELECT * FROM $db.${byOwner ? 'activity_events_by_trader' : 'activity_events'} FINAL`);
  const events: Record<string, Counts> = {};
  for (const r of ev) {
    const counts: Counts = {};
    for (const [k, v] of Object.entries(r)) {
      const m = /^n_(\w+)_(long|short)$/.exec(k);
      if (m && Number(v) > 0) counts[`${m[1]}/${m[2]}`] = Number(v);
    }
    if (Object.keys(counts).length) events[`${r.grain} ${new Date(Number(r.start)).toISOString()} ${r.traderId}`] = counts;
  }
  const ms = await store.query<any>(`SELECT * FROM $db.${byOwner ? 'activity_messages_by_source' : 'activity_messages'} FINAL WHERE n > 0`);
  const messages = Object.fromEntries(
    ms.map((r) => [`${r.grain} ${new Date(Number(r.start)).toISOString()} ${r.platform}:${r.sourceIdentityId}`, Number(r.n)]),
  );
  return { events, messages };
}

/** The same from the records, by brute force: live events of live positions, live messages. */
function expected(records: readonly TopicRecord[]): Awaited<ReturnType<typeof rolledUp>> {
  const w = O.buildWorld(records as O.TopicRec[]);
  const events: Record<string, Counts> = {};
  const messages: Record<string, number> = {};
  const bump = <T>(into: Record<string, T>, key: string, f: (v: T | undefined) => T) => {
    into[key] = f(into[key]);
  };
  for (const e of w.events.values()) {
    if (!w.positions.has(e.positionId)) continue;
    const t = Date.parse(e.timeOfEvent);
    for (const [grain, size] of [
      ['hour', HOUR],
      ['day', DAY],
    ] as const) {
      bump(events, `${grain} ${new Date(Math.floor(t / size) * size).toISOString()} ${e.traderId}`, (c: Counts | undefined) => ({
        ...c,
        [`${e.type}/${e.direction}`]: ((c ?? {})[`${e.type}/${e.direction}`] ?? 0) + 1,
      }));
    }
  }
  for (const m of w.messages.values()) {
    const t = Date.parse(m.writtenAt);
    for (const [grain, size] of [
      ['hour', HOUR],
      ['day', DAY],
    ] as const) {
      bump(
        messages,
        `${grain} ${new Date(Math.floor(t / size) * size).toISOString()} ${m.platform}:${m.sourceIdentityId}`,
        (n: number | undefined) => (n ?? 0) + 1,
      );
    }
  }
  return { events, messages };
}

// Traders 71-73, positions 710-713, events 7100-7199, messages r-*: apart from the other specs' ids.
const RECORDS: TopicRecord[] = [
  build.event(7101, { positionId: 710, traderId: 71, type: 'open', direction: 'long', timeOfEvent: '2026-03-01T10:15:00.000Z' }),
  build.event(7102, { positionId: 710, traderId: 71, type: 'increase', direction: 'long', timeOfEvent: '2026-03-01T10:45:00.000Z' }),
  build.event(7103, { positionId: 710, traderId: 71, type: 'close', direction: 'long', timeOfEvent: '2026-03-01T23:59:59.999Z' }),
  build.event(7111, { positionId: 711, traderId: 72, type: 'open', direction: 'short', timeOfEvent: '2026-03-01T10:20:00.000Z' }),
  build.event(7112, { positionId: 711, traderId: 72, type: 'decrease', direction: 'short', timeOfEvent: '2026-03-02T00:00:00.000Z' }),
  // Far in the future: past 2106, where a 32-bit DateTime would wrap.
  build.event(7121, { positionId: 712, traderId: 73, type: 'open', direction: 'long', timeOfEvent: '2250-06-01T05:30:00.000Z' }),
  build.message('r-1', 'src-71', '2026-03-01T10:01:00.000Z'),
  build.message('r-2', 'src-71', '2026-03-01T10:59:59.999Z'),
  build.message('r-3', 'src-72', '2026-03-01T11:00:00.000Z'),
  build.message('r-4', 'src-72', '2299-12-31T23:59:59.999Z'),
];

const CHANGES: TopicRecord[] = [
  // Moved to another hour, then to another day and trader.
  build.event(7102, {
    positionId: 710,
    traderId: 71,
    type: 'increase',
    direction: 'long',
    timeOfEvent: '2026-03-01T12:00:00.000Z',
    version: 2,
  }),
  build.event(7102, {
    positionId: 710,
    traderId: 72,
    type: 'increase',
    direction: 'long',
    timeOfEvent: '2026-03-03T08:00:00.000Z',
    version: 3,
  }),
  // Another type and direction at the same time (same hour, another count column).
  build.event(7103, {
    positionId: 710,
    traderId: 71,
    type: 'decrease',
    direction: 'short',
    timeOfEvent: '2026-03-01T23:59:59.999Z',
    version: 2,
  }),
  // Deleted: its hour keeps the other events.
  build.event(7112, {
    positionId: 711,
    traderId: 72,
    type: 'decrease',
    direction: 'short',
    timeOfEvent: '2026-03-02T00:00:00.000Z',
    version: 2,
    deleted: true,
  }),
  // The open of position 712 deleted: the position is gone and none of its events count; its hour is left empty.
  build.event(7122, { positionId: 712, traderId: 73, type: 'increase', direction: 'long', timeOfEvent: '2250-06-01T06:00:00.000Z' }),
  build.event(7121, {
    positionId: 712,
    traderId: 73,
    type: 'open',
    direction: 'long',
    timeOfEvent: '2250-06-01T05:30:00.000Z',
    version: 2,
    deleted: true,
  }),
  // An older version arriving late changes nothing.
  build.event(7101, {
    positionId: 710,
    traderId: 71,
    type: 'open',
    direction: 'long',
    timeOfEvent: '2026-04-01T00:00:00.000Z',
    version: 0,
  }),
  // A message moved to another hour, one to another source, one deleted.
  build.message('r-1', 'src-71', '2026-03-01T09:00:00.000Z', { version: 2 }),
  build.message('r-2', 'src-73', '2026-03-01T10:59:59.999Z', { version: 2 }),
  build.message('r-3', 'src-72', '2026-03-01T11:00:00.000Z', { version: 2, deleted: true }),
];

// Both ways a roll-up writes: a live trickle's rows inserted as rows, a catch-up's INSERT ... SELECT.
describe.each([
  { way: 'rows inserted as rows', fewBuckets: ROLLUP_LIMITS.fewBuckets },
  { way: 'INSERT ... SELECT', fewBuckets: 0 },
])('activity roll-up (issue 7): $way', ({ fewBuckets }) => {
  const before = ROLLUP_LIMITS.fewBuckets;
  beforeAll(async () => {
    ROLLUP_LIMITS.fewBuckets = fewBuckets;
    db = await openSchemaStore(`rollup${fewBuckets}`);
    store = db.store;
    spec = projectionSpec(db.session);
  });
  afterAll(async () => {
    ROLLUP_LIMITS.fewBuckets = before;
    await db?.close();
  });

  it('counts each hour and day of the current, live events (per type and direction) and messages, a batch at a time', () =>
    spec
      .given(RECORDS)
      .when(async () => [await rolledUp(), await rolledUp(true)])
      .then(([actual, byOwner]) => {
        expect(actual).toEqual(expected(RECORDS));
        expect(byOwner).toEqual(actual);
        // The far-future records are in their own hour and day.
        expect(actual.events['hour 2250-06-01T05:00:00.000Z 73']).toEqual({ 'open/long': 1 });
        expect(actual.messages['day 2299-12-31T00:00:00.000Z TELEGRAM:src-72']).toBe(1);
      }));

  it('counts buckets again when events and messages move, change, are deleted or lose their position; late old versions change nothing', () =>
    spec
      .given(CHANGES)
      .when(async () => [await rolledUp(), await rolledUp(true)])
      .then(([actual, byOwner]) => {
        const all = [...RECORDS, ...CHANGES];
        expect(actual).toEqual(expected(all));
        expect(byOwner).toEqual(actual);
        // Buckets that were left empty hold zeros, not their old counts.
        expect(actual.events['hour 2250-06-01T05:00:00.000Z 73']).toBeUndefined();
        expect(actual.events['hour 2026-03-02T00:00:00.000Z 72']).toBeUndefined();
        expect(actual.messages['hour 2026-03-01T11:00:00.000Z TELEGRAM:src-72']).toBeUndefined();
      }));

  it("a batch stopped after its inserts, before its roll-up, is counted by the next batch's roll-up", async () => {
    const moved = build.event(7111, {
      positionId: 711,
      traderId: 72,
      type: 'open',
      direction: 'short',
      timeOfEvent: '2026-03-05T15:00:00.000Z',
      version: 2,
    });
    const next = build.event(7131, {
      positionId: 713,
      traderId: 71,
      type: 'open',
      direction: 'long',
      timeOfEvent: '2026-03-06T01:00:00.000Z',
    });
    // A store that goes down at the batch's first roll-up insert: the batch has written its statements and writes nothing more (as a crash would leave it).
    let down = false;
    const up = <T>(f: () => Promise<T>): Promise<T> => (down ? Promise.reject(new Error('store down')) : f());
    // A live roll-up's few rows are inserted as rows, a catch-up's by INSERT ... SELECT: either is its first write.
    const rollUpInsert = (table: string) =>
      up(() => {
        down = true;
        return Promise.reject(new Error(`store down at ${table}`));
      });
    const stopping: Store = {
      get database() {
        return store.database;
      },
      query: (sql, params) => up(() => store.query(sql, params)),
      exec: (sql, params) =>
        up(() => {
          if (/INSERT INTO \$db\.activity_/.test(sql)) {
            down = true;
            return Promise.reject(new Error('store down'));
          }
          return store.exec(sql, params);
        }),
      insert: (table, rows) => (table.startsWith('activity_') ? rollUpInsert(table) : up(() => store.insert(table, rows))),
      insertCompact: (table, columns, rows) =>
        table.startsWith('activity_') ? rollUpInsert(table) : up(() => store.insertCompact(table, columns, rows)),
      close: async () => {},
    };
    const batch = (r: TopicRecord, offset: number) => ({
      topic: r.topic,
      partition: 0,
      records: [{ key: '', value: JSON.stringify(r.value), offset: String(offset) }],
    });
    await expect(applyBatch(new ProjectorSession(stopping), batch(moved, 900_001))).rejects.toThrow();
    const all = [...RECORDS, ...CHANGES, moved];
    // The old hour still counts the moved open: nothing was rolled up yet.
    expect((await rolledUp()).events['hour 2026-03-01T10:00:00.000Z 72']).toEqual({ 'open/short': 1 });
    await applyBatch(db.session, batch(next, 900_002));
    expect(await rolledUp()).toEqual(expected([...all, next]));
    expect(await rolledUp(true)).toEqual(expected([...all, next]));
    expect((await rolledUp()).events['hour 2026-03-05T15:00:00.000Z 72']).toEqual({ 'open/short': 1 });
  });
});
