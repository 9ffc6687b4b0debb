// Issue 28: the embedded store's streams (the exports' rows) are written by the store's own writer
// into a pipe, and started off the service's event loop. What a reader relies on: a stream is the
// statement's whole answer with its parameters bound, in chunks as the reader asks; a reader that
// stops early ends it and leaves nothing behind for the next stream; a failure is an error that
// names the bound it met; streams side by side each get their own rows.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChdbStore, openChdbStore } from '../../storage/chdb.ts';
import { storeFailure } from '../../storage/port.ts';

const NUMBERS = 'SELECT number AS n, toString(number * {k:UInt64}) AS s FROM numbers({rows:UInt64})';

/** A stream's whole CSV lines and its chunks, as a reader takes them (at most `chunks` chunks; a chunk may end within a line). */
async function read(store: ChdbStore, params: { k: number; rows: number }, chunks = Number.POSITIVE_INFINITY, settings = {}) {
  const bytes: Buffer[] = [];
  let taken = 0;
  for await (const chunk of store.stream(NUMBERS, params, 'CSV', { settings })) {
    bytes.push(Buffer.from(chunk.bytes));
    if (++taken >= chunks) break;
  }
  const text = Buffer.concat(bytes).toString('utf8');
  return {
    lines: text
      .slice(0, text.lastIndexOf('\n') + 1)
      .split('\n')
      .filter(Boolean),
    taken,
  };
}

/** The lines the statement's answer has, computed here. */
const expected = (k: number, rows: number) => Array.from({ length: rows }, (_, n) => `${n},"${n * k}"`);

describe("issue 28: the chdb store streams its own writer's bytes", () => {
  let dir: string;
  let store: ChdbStore;
  /** The pipes' directory of a process that is gone (killed before its exit handler ran). */
  let gone: string;
  beforeAll(async () => {
    const pid = spawnSync(process.execPath, ['-e', '']).pid!;
    gone = join(tmpdir(), `signalbase-streams-${pid}-test`);
    mkdirSync(join(gone, 'x.pipe'), { recursive: true });
    dir = mkdtempSync(join(tmpdir(), 'sb-streams-'));
    store = await openChdbStore(join(dir, 'chdb'), 'streams', { ownSession: true, sessions: 2 });
  }, 60_000);
  afterAll(async () => {
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("gives the statement's whole answer, its parameters bound, in chunks", async () => {
    const got = await read(store, { k: 3, rows: 300_000 });
    expect(got.taken).toBeGreaterThan(1);
    expect(got.lines).toEqual(expected(3, 300_000));
  });

  // Ten billion rows take minutes to write: the stream ends within the test's time only if the
  // statement is cancelled (the store writes on past a broken pipe).
  it('a reader that stops after the first chunk cancels the statement (of ten billion rows); the next stream is its own answer whole', async () => {
    const first = await read(store, { k: 5, rows: 10_000_000_000 }, 1);
    expect(first.taken).toBe(1);
    expect(first.lines).toEqual(expected(5, first.lines.length));
    expect(first.lines.length).toBeLessThan(1_000_000);
    const next = await read(store, { k: 7, rows: 1_000 });
    expect(next.lines).toEqual(expected(7, 1_000));
  }, 20_000);

  it('a statement that meets a bound fails with an error that names it, and the next stream works', async () => {
    const failed = await read(store, { k: 1, rows: 1_000_000 }, Number.POSITIVE_INFINITY, {
      max_rows_to_read: 1_000,
      read_overflow_mode: 'throw',
    }).catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(Error);
    expect(storeFailure(failed)).toEqual({ kind: 'too_large', bound: 'rows' });
    expect((await read(store, { k: 2, rows: 10 })).lines).toEqual(expected(2, 10));
  });

  it('binds parameters whatever their text (quotes, backslashes, NUL, line breaks): the answer says them back as given', async () => {
    const s = 'it\'s \\ a "test"\0 with\nlines\tand \' OR 1=1 -- é';
    const a = [s, "'", '\\', '', '[1]', "', 'x"];
    const chunks: Buffer[] = [];
    const sql = 'SELECT {s:String} AS s, {a:Array(String)} AS a, {n:Nullable(Int64)} AS n, {ids:Array(UInt64)} AS ids';
    for await (const chunk of store.stream(sql, { s, a, n: null, ids: [1, 2, 3] }, 'JSONEachRow')) chunks.push(Buffer.from(chunk.bytes));
    expect(JSON.parse(Buffer.concat(chunks).toString('utf8'))).toEqual({ s, a, n: null, ids: [1, 2, 3] });
    await expect(read(store, { k: 1 } as never)).rejects.toThrow(/query parameter rows is not bound/);
  });

  it('streams side by side each get their own rows', async () => {
    const all = await Promise.all([1, 2, 3].map((k) => read(store, { k, rows: 100_000 + k })));
    for (const [i, got] of all.entries()) expect(got.lines).toEqual(expected(i + 1, 100_001 + i));
  });

  it("removes the pipes of a process that is gone, not this process's own", () => {
    expect(existsSync(gone)).toBe(false);
    expect(readdirSync(tmpdir()).filter((n) => n.startsWith(`signalbase-streams-${process.pid}-`))).toHaveLength(1);
  });
});
