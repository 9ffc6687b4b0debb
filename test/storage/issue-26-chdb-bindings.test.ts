// Issue 26: chdb's own parameter binding runs one parameterised statement at a time in the whole
// process, so the API's reads and the projector queued behind each other on one core. The chdb
// store binds each statement's parameters on its session instead (SET param_name, in the same call
// as the statement); these are the promises that binding must keep: every value comes back exactly
// as sent (no value is read as SQL), a parameter an earlier statement left on the session never
// stands in for a missing one, and statements of two stores sharing one session each get their
// own values.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChdbStore, openChdbStore } from '../../storage/chdb.ts';

let dir: string;
let own: ChdbStore;
let sharedA: ChdbStore;
let sharedB: ChdbStore;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sb-bind-'));
  own = await openChdbStore(join(dir, 'chdb'), 'bind_own', { ownSession: true, sessions: 3 });
  sharedA = await openChdbStore(join(dir, 'chdb'), 'bind_a');
  sharedB = await openChdbStore(join(dir, 'chdb'), 'bind_b');
}, 60_000);
afterAll(async () => {
  await Promise.all([own?.close(), sharedA?.close(), sharedB?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

const HOSTILE = [
  "it's",
  "'; DROP DATABASE bind_own; --",
  // The SET that binds them and the statement are one call: no value may end the SET early.
  'a; SELECT 666 AS s',
  "\\'; SELECT 666 AS s; --",
  '*/; SELECT 666 AS s; /*',
  'back\\slash \\N \\t \\0 \\',
  'tab\there\nnew line\r\nCRLF',
  'nul\0inside',
  '{x:String} {y:UInt8}',
  "param_s = 'x', param_t = 'y'",
  'ünïcødé 漢字 🙂',
  '',
];

describe('issue 26: statements bind their parameters on their session', () => {
  it('gives every string back exactly as sent, alone and in arrays', async () => {
    for (const s of HOSTILE) {
      const [row] = await own.query<{ s: string; n: number; a: string[] }>(
        'SELECT {s:String} AS s, length({s:String}) AS n, {a:Array(String)} AS a',
        {
          s,
          a: [s, `${s}'`, s],
        },
      );
      expect(row).toEqual({ s, n: Buffer.byteLength(s), a: [s, `${s}'`, s] });
    }
    // The database is still there.
    expect(await own.query('SELECT 1 AS one')).toEqual([{ one: 1 }]);
  });

  it('binds numbers, 64-bit integers, booleans and nulls as their types', async () => {
    const rows = await own.query<Record<string, unknown>>(
      'SELECT toString({u:UInt64}) AS u, toString({i:Int64}) AS i, {f:Float64} AS f, {b:Bool} AS b, {n:Nullable(String)} AS n, {ids:Array(UInt64)} AS ids',
      { u: 18446744073709551615n, i: -9007199254740993n, f: 0.1, b: true, n: null, ids: [1, 2, 3] },
    );
    expect(rows).toEqual([{ u: '18446744073709551615', i: '-9007199254740993', f: 0.1, b: true, n: null, ids: [1, 2, 3] }]);
  });

  it('refuses a statement whose parameter is missing, though an earlier statement set it on the session', async () => {
    const solo = await openChdbStore(join(dir, 'chdb'), 'bind_solo', { ownSession: true });
    try {
      expect(await solo.query('SELECT {v:UInt32} AS v', { v: 41 })).toEqual([{ v: 41 }]);
      await expect(solo.query('SELECT {v:UInt32} AS v', {})).rejects.toThrow(/v/);
      expect(await solo.query('SELECT {v:UInt32} AS v', { v: 42 })).toEqual([{ v: 42 }]);
    } finally {
      await solo.close();
    }
  });

  it('gives concurrent statements of stores sharing one session their own values', async () => {
    const reads = Array.from({ length: 60 }, (_, i) =>
      (i % 2 ? sharedA : sharedB).query<{ v: string; s: string }>(
        'SELECT toString({v:UInt64}) AS v, {s:String} AS s FROM numbers(1000) LIMIT 1',
        {
          v: i,
          s: `${i}'${HOSTILE[i % HOSTILE.length]}`,
        },
      ),
    );
    expect(await Promise.all(reads)).toEqual(
      Array.from({ length: 60 }, (_, i) => [{ v: String(i), s: `${i}'${HOSTILE[i % HOSTILE.length]}` }]),
    );
  });

  it('takes parameters larger than the parser would take as SQL text', async () => {
    const ids = Array.from({ length: 200_000 }, (_, i) => i * 7);
    const [row] = await own.query<{ n: string; s: string }>(
      'SELECT length({ids:Array(UInt64)}) AS n, toString(arraySum({ids:Array(UInt64)})) AS s',
      { ids },
    );
    expect(row).toEqual({ n: 200000, s: String(ids.reduce((a, b) => a + b, 0)) });
  });

  it('an array bound again answers for the values it holds then: changed, its new ones; frozen, the same (hostile strings too)', async () => {
    const ids = [1, 2, 3];
    const read = (v: readonly unknown[]) => own.query<{ v: unknown[] }>('SELECT {v:Array(UInt64)} AS v', { v });
    expect((await read(ids))[0]!.v.map(Number)).toEqual([1, 2, 3]);
    ids.push(4);
    ids[0] = 9;
    expect((await read(ids))[0]!.v.map(Number)).toEqual([9, 2, 3, 4]);
    const frozen = Object.freeze([...HOSTILE]);
    for (let i = 0; i < 2; i++) {
      const [r] = await own.query<{ v: string[] }>('SELECT {v:Array(String)} AS v', { v: frozen });
      expect(r!.v).toEqual(HOSTILE);
    }
  });
});
