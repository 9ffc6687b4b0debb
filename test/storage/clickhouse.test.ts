// Issue 10, item 2: the Store port on a ClickHouse server through @clickhouse/client runs the very
// SQL the embedded chdb store runs, with the same answers. Each case runs on both adapters: chdb
// in process, and the real client over real HTTP against a ClickHouse server (CLICKHOUSE_URL) or,
// without one, the test peer that speaks ClickHouse's HTTP interface on chdb
// (test/helpers/clickhouse-peer.ts). Expected values come from the cases themselves (what was
// inserted), and both adapters must give them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ChdbStore } from '../../storage/chdb.ts';
import { ClickHouseStore } from '../../storage/clickhouse.ts';
import type { Store } from '../../storage/port.ts';
import { type ClickHousePeer, startClickHousePeer } from '../helpers/clickhouse-peer.ts';

const dir = mkdtempSync(join(tmpdir(), 'signalbase-chstore-'));
let peer: ClickHousePeer | undefined;
const stores: { name: string; store: Store & { drop(): Promise<void> } }[] = [];

beforeAll(async () => {
  const url = process.env.CLICKHOUSE_URL ?? (peer = await startClickHousePeer(dir)).url;
  stores.push({ name: 'chdb', store: await new ChdbStore(dir, `chdb_${process.pid}`).init() });
  stores.push({
    name: process.env.CLICKHOUSE_URL ? 'clickhouse server' : 'clickhouse peer',
    store: await new ClickHouseStore({ url, database: `ch_${process.pid}` }).init(),
  });
  for (const { store } of stores) {
    await store.exec(`CREATE TABLE IF NOT EXISTS $db.things (
      id UInt64, at DateTime64(3, 'UTC'), name String, tags Array(String), score Nullable(Float64), kind Enum8('a' = 1, 'b' = 2), n Int64
    ) ENGINE = MergeTree ORDER BY id`);
  }
});
afterAll(async () => {
  for (const { store } of stores) {
    await store.drop();
    await store.close();
  }
  await peer?.close();
  rmSync(dir, { recursive: true, force: true });
});

const TRICKY = ["it's", 'back\\slash', 'new\nline', 'tab\tand\r', '{curly}', "quote ' and \\' both", 'ünïcødé ✓', ''];
const BIG = '18446744073709551615'; // 2^64 - 1: no JS number holds it
const SAFE = Number.MAX_SAFE_INTEGER; // the largest id ingest takes (schemas/topics/common.ts)

/** Runs `f` on each adapter and returns the answers by adapter name. */
async function each<T>(f: (s: Store) => Promise<T>): Promise<Record<string, T>> {
  const out: Record<string, T> = {};
  for (const { name, store } of stores) out[name] = await f(store);
  return out;
}
const same = <T>(answers: Record<string, T>, expected: T) => {
  for (const [name, a] of Object.entries(answers)) expect(a, name).toEqual(expected);
};

describe('the ClickHouse server store answers as the chdb store does', () => {
  it('inserts rows as objects and as value arrays, and reads them back with every column type', async () => {
    await each(async (s) => {
      await s.insert('things', [
        { id: 1, at: '2026-05-04T10:05:00.123Z', name: TRICKY[0], tags: TRICKY, score: 1.5, kind: 'a', n: -5 },
        { id: BIG, at: '2299-12-31T23:59:59.999Z', name: 'max', tags: [], score: null, kind: 'b', n: SAFE },
      ]);
      await s.insertCompact(
        'things',
        ['id', 'at', 'name', 'tags', 'score', 'kind', 'n'],
        [[3, '1970-01-01T00:00:00.000Z', TRICKY[2], ['x'], -0.25, 'a', 0]],
      );
    });
    same(
      await each(
        (s) =>
          s.query(
            'SELECT toString(id) AS id, toUnixTimestamp64Milli(at) AS at, name, tags, score, kind, n FROM $db.things ORDER BY id',
          ) /* by the string alias */,
      ),
      [
        { id: '1', at: Date.parse('2026-05-04T10:05:00.123Z'), name: TRICKY[0], tags: TRICKY, score: 1.5, kind: 'a', n: -5 },
        { id: BIG, at: Date.parse('2299-12-31T23:59:59.999Z'), name: 'max', tags: [], score: null, kind: 'b', n: SAFE },
        { id: '3', at: 0, name: TRICKY[2], tags: ['x'], score: -0.25, kind: 'a', n: 0 },
      ],
    );
    // 64-bit integers come as JSON numbers on both, exact up to the largest id ingest takes; 2^64 - 1 is stored exactly and found by a parameter.
    same(
      await each((s) =>
        s.query('SELECT n, toString(id) AS bigId FROM $db.things WHERE n = {safe:Int64} AND id = {big:UInt64}', { safe: SAFE, big: BIG }),
      ),
      [{ n: SAFE, bigId: BIG }],
    );
  });

  it('binds parameters of every type the reads use, tricky strings included, never as SQL', async () => {
    const q = (s: Store) =>
      s.query(
        `
      SELECT {s:String} AS s, {xs:Array(String)} AS xs, toString({u:UInt64}) AS u, {i:Int64} AS i, {u32:UInt32} AS u32,
             {ids:Array(UInt64)} AS ids, {lows:Array(UInt16)} AS lows, {none:Array(String)} AS none,
             (SELECT count() FROM $db.things WHERE name IN {xs:Array(String)}) AS matched`,
        {
          s: "x'; DROP TABLE things; --\\",
          xs: TRICKY,
          u: BIG,
          i: -9007199254740991,
          u32: 4294967295,
          ids: [1, 3, 9007199254740991],
          lows: [0, 65535],
          none: [],
        },
      );
    same(await each(q), [
      {
        s: "x'; DROP TABLE things; --\\",
        xs: TRICKY,
        u: BIG,
        i: -9007199254740991,
        u32: 4294967295,
        ids: [1, 3, 9007199254740991],
        lows: [0, 65535],
        none: [],
        matched: 2,
      },
    ]);
    same(await each((s) => s.query('SELECT count() AS n FROM $db.things')), [{ n: 3 }]);
  });

  it('binds lists of thousands of ids, in a query and in a statement without an answer', async () => {
    const ids = Array.from({ length: 5000 }, (_, i) => i + 1);
    same(await each((s) => s.query('SELECT length({ids:Array(UInt64)}) AS n, has({ids:Array(UInt64)}, 4999) AS found', { ids })), [
      { n: 5000, found: 1 },
    ]);
    await each((s) => s.exec('CREATE TABLE IF NOT EXISTS $db.many (id UInt64) ENGINE = MergeTree ORDER BY id'));
    await each((s) => s.exec('INSERT INTO $db.many SELECT arrayJoin({ids:Array(UInt64)})', { ids }));
    same(await each((s) => s.query('SELECT count() AS n, sum(id) AS total FROM $db.many')), [{ n: 5000, total: (5000 * 5001) / 2 }]);
  });

  it('runs statements without an answer: DDL, INSERT ... SELECT with parameters, ALTER', async () => {
    await each(async (s) => {
      await s.exec('CREATE TABLE IF NOT EXISTS $db.copies (id UInt64, name String) ENGINE = ReplacingMergeTree ORDER BY id');
      await s.exec('INSERT INTO $db.copies SELECT id, name FROM $db.things WHERE id IN {ids:Array(UInt64)}', { ids: [1, 3] });
      await s.exec('OPTIMIZE TABLE $db.copies FINAL');
    });
    same(await each((s) => s.query('SELECT toString(id) AS id, name FROM $db.copies FINAL ORDER BY id')), [
      { id: '1', name: TRICKY[0] },
      { id: '3', name: TRICKY[2] },
    ]);
  });

  it("rejects a bad statement with the engine's code and message, and goes on answering", async () => {
    const errors = await each(async (s) => {
      const bad = await s.query('SELECT nope FROM $db.things').then(
        () => null,
        (e: Error) => e.message,
      );
      const badParam = await s.query('SELECT {n:UInt8} AS n', { n: 'not a number' }).then(
        () => null,
        (e: Error) => e.message,
      );
      return { bad, badParam };
    });
    for (const [name, e] of Object.entries(errors)) {
      expect(e.bad, name).toMatch(/nope|UNKNOWN_IDENTIFIER|Unknown expression/i);
      expect(e.badParam, name).not.toBeNull();
    }
    same(await each((s) => s.query('SELECT 1 AS one')), [{ one: 1 }]);
  });

  it('reuses no socket the server may have closed: requests after an idle pause still answer', async () => {
    const ch = stores[1]!.store;
    expect(await ch.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    await new Promise((r) => setTimeout(r, 3_200)); // past the client's idle socket TTL and the peer's 3 s keep-alive
    expect(await ch.query('SELECT 2 AS two')).toEqual([{ two: 2 }]);
  });
});
