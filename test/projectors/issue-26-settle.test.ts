import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../projectors/log/embedded.ts';
import { type Commit, ensureSchema, runProjector, SETTLE_MS } from '../../projectors/runner.ts';
import { ChdbStore } from '../../storage/chdb.ts';
import type { Store } from '../../storage/port.ts';
import { message } from './records.ts';

/**
 * Issue 26, commit cadence: a live projector (one with a cadence) puts the activity roll-ups off
 * and runs them at most every SETTLE_MS, so a trickle of small batches does not pay four
 * statements each; the roll-up goes into a commit that names the activity tables and the owners
 * whose rows it rolled up (the cached activity answers read of them end then), and a caught-up
 * waits for it.
 */
const chdbDir = join(tmpdir(), `signalbase-test-${process.pid}`);
afterAll(() => rmSync(chdbDir, { recursive: true, force: true }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `store`, counting the statements that roll messages up (one per grain). */
function countingRollUps(store: Store): { store: Store; rollUps: () => number } {
  let n = 0;
  return {
    rollUps: () => n,
    store: {
      get database() {
        return store.database;
      },
      query: (sql, params, opts) => store.query(sql, params, opts),
      exec: (sql, params) => {
        if (/INSERT INTO \$db\.activity_messages\b/.test(sql)) n++;
        return store.exec(sql, params);
      },
      insert: (table, rows) => store.insert(table, rows),
      // A live roll-up's few rows are inserted as rows (naming their sources).
      insertCompact: (table, columns, rows) => {
        if (table === 'activity_messages') n++;
        return store.insertCompact(table, columns, rows);
      },
      close: () => store.close(),
    },
  };
}

describe('issue 26: live roll-ups', () => {
  it('a trickle of 24 messages over 1.2 s is rolled up once per SETTLE_MS, not per batch; caught-up waits for the last roll-up, a commit naming the activity tables', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'signalbase-settle-'));
    const log = new EmbeddedLog(dir, 20);
    const chdb = await new ChdbStore(chdbDir, `settle_${process.pid}`).init();
    await ensureSchema(chdb);
    const { store, rollUps } = countingRollUps(chdb);
    const commits: Commit[] = [];
    const sub = runProjector(log, store, { cadenceMs: 100, onCommit: (c) => void commits.push(c) });
    try {
      const t0 = Date.now();
      for (let i = 0; i < 24; i++) {
        const m = message(`m-${i}`, { writtenAt: new Date(Date.UTC(2026, 2, 1, i % 3)).toISOString() });
        log.appendSync(m.topic, [{ key: m.value.id, value: m.value }]);
        await sleep(50);
      }
      await sub.caughtUp();
      const elapsed = Date.now() - t0;
      const batches = commits.flatMap((c) => c.batches).filter((b) => b.topic === 'messages').length;
      expect(batches).toBeGreaterThan(4);
      // Two statements per roll-up (hours, then days).
      expect(rollUps() / 2).toBeLessThanOrEqual(Math.ceil(elapsed / SETTLE_MS) + 1);
      expect(rollUps() / 2).toBeLessThan(batches);
      // Every message is counted once caught up: 8 in each of three hours.
      const hours = await chdb.query<{ start: number; n: number }>(
        `SELECT start, n FROM $db.activity_messages FINAL WHERE grain = 'hour' ORDER BY start`,
      );
      expect(hours.map((h) => Number(h.n))).toEqual([8, 8, 8]);
      const settled = commits.filter((c) => c.settled);
      expect(settled.length).toBeGreaterThan(0);
      expect(settled.at(-1)!.changes.tables.has('activity_messages')).toBe(true);
      // ... and says whose rows it rolled up: the one source's (what was read of other sources' rows stays).
      for (const c of settled) expect(c.changes.tables.get('activity_messages')?.sources).toEqual(new Set(['TELEGRAM:src']));
      // The batches themselves no longer change the roll-up tables.
      for (const c of commits.filter((c) => !c.settled)) expect(c.changes.tables.has('activity_messages')).toBe(false);
    } finally {
      await sub.stop();
      await chdb.drop();
      await chdb.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
