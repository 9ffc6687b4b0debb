// STATEMENT_LOG: the embedded store notes each statement it runs (to see where the store's time
// goes under a load, issue 26), one tab-separated line each, without the values bound to it.
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ChdbStore, openChdbStore } from '../../storage/chdb.ts';
import { StatementLog } from '../../storage/statement-log.ts';

let dir: string;
let store: ChdbStore;
let log: StatementLog;
const SECRET = 'value-of-a-caller-7f3a';

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'sb-stmtlog-'));
  log = new StatementLog(join(dir, 'statements.tsv'));
  store = await openChdbStore(join(dir, 'chdb'), 'stmtlog', { ownSession: true, sessions: 2, statementLog: { log, session: 'reads' } });
}, 60_000);
afterAll(async () => {
  await store?.close();
  await log?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the statement log', () => {
  it('has a line per statement: when it ended, its session, ms waited and run, ok or failed, its text; never a bound value', async () => {
    const before = Date.now();
    await store.exec('CREATE TABLE IF NOT EXISTS $db.notes (id UInt64, text String) ENGINE = MergeTree ORDER BY id');
    await store.insert('notes', [
      { id: 1, text: 'a' },
      { id: 2, text: 'b' },
    ]);
    const rows = await store.query<{ n: number }>('SELECT count() AS n FROM $db.notes WHERE text != {text:String}', { text: SECRET });
    expect(Number(rows[0]!.n)).toBe(2);
    await expect(store.query('SELECT * FROM $db.no_such_table')).rejects.toThrow();
    let streamed = '';
    for await (const chunk of store.stream('SELECT id FROM $db.notes ORDER BY id', {}, 'CSV'))
      streamed += Buffer.from(chunk.bytes).toString();
    expect(streamed).toBe('1\n2\n');
    await log.flush();

    const path = join(dir, 'statements.tsv');
    const text = readFileSync(path, 'utf8');
    expect(text).not.toContain(SECRET);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const lines = text
      .trimEnd()
      .split('\n')
      .map((l) => l.split('\t'));
    for (const [at, session, waited, ran, outcome, statement] of lines) {
      expect(Date.parse(at!)).toBeGreaterThanOrEqual(before - 1000);
      expect(session).toBe('reads');
      expect(Number(waited)).toBeGreaterThanOrEqual(0);
      expect(Number(ran)).toBeGreaterThanOrEqual(0);
      expect(['ok', 'failed']).toContain(outcome);
      expect(statement!.length).toBeGreaterThan(0);
      expect(statement!.length).toBeLessThanOrEqual(200);
    }
    const find = (pattern: RegExp) => lines.find((l) => pattern.test(l[5]!));
    expect(find(/^CREATE TABLE IF NOT EXISTS stmtlog\.notes/)?.[4]).toBe('ok');
    expect(find(/^INSERT INTO notes \(2 rows\)$/)?.[4]).toBe('ok');
    expect(find(/^SELECT count\(\) AS n FROM stmtlog\.notes WHERE text != \{text:String\}$/)?.[4]).toBe('ok');
    expect(find(/no_such_table/)?.[4]).toBe('failed');
    expect(find(/^SELECT id FROM stmtlog\.notes ORDER BY id$/)?.[4]).toBe('ok');
  });
});
