import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../projectors/log/embedded.ts';
import { applyBatch, type Commit, ensureSchema, runProjector } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import { ChdbStore } from '../../storage/chdb.ts';
import { POSITION_PERFORMANCES_TABLE, POSITION_SAMPLES_TABLE } from '../../storage/tables/performance.ts';
import { batchOf } from '../helpers/batches.ts';
import { event } from './records.ts';

/**
 * Issue 26: position_samples (what rankings, trader stats, asset stats and trader activity
 * aggregate) was written with every round's evaluations, and each commit that wrote it had the
 * kept analytics of the traders it named read again: under 20 records/s, five patch reads a commit,
 * 1.7 commits a second (bench/live.ts: 0.48x live/static with them, 0.60x without). A live
 * projector now copies position_performances' rows into position_samples with its settled work,
 * as it rolls up activity, so the analytics trail the position pages by that much at most. Here:
 * the copy covers every evaluation once caught up, fewer commits write position_samples than write
 * position_performances, and rows a stopped projector left uncopied are copied when the next one starts.
 */
const chdbDir = join(tmpdir(), `signalbase-test-${process.pid}`);
afterAll(() => rmSync(chdbDir, { recursive: true, force: true }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Key = { positionId: number; window: string; seq: number };
/** The newest row of each (positionId, window) of a table (the highest seq), when it is live. */
async function newestRows(store: ChdbStore, table: string): Promise<Key[]> {
  const rows = await store.query<{ positionId: number; w: string; newest: number }>(
    `SELECT positionId, toString(window) AS w, max(seq) AS newest, argMax(live, seq) AS live FROM $db.${table}
     GROUP BY positionId, window HAVING live = 1 ORDER BY positionId, w`,
  );
  return rows.map((r) => ({ positionId: Number(r.positionId), window: r.w, seq: Number(r.newest) }));
}

const opens = (from: number, n: number) =>
  Array.from({ length: n }, (_, i) =>
    event(from + i, { traderId: 1 + ((from + i) % 3), timeOfEvent: new Date(Date.UTC(2026, 2, 1, 0, from + i)).toISOString() }),
  );

async function withStore<T>(name: string, f: (store: ChdbStore, dir: string) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'signalbase-samples-'));
  const store = await new ChdbStore(chdbDir, `${name}_${process.pid}`).init();
  await ensureSchema(store);
  try {
    return await f(store, dir);
  } finally {
    await store.drop();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('issue 26: a live projector copies evaluations into position_samples with its settled work', () => {
  it('every evaluation is in position_samples once caught up, and fewer commits write position_samples than position_performances', async () => {
    await withStore('samples_live', async (store, dir) => {
      const log = new EmbeddedLog(dir, 20);
      const commits: Commit[] = [];
      const sub = runProjector(log, store, { cadenceMs: 100, onCommit: (c) => void commits.push(c) });
      try {
        // A trickle: a few positions opened every 150 ms for 3 s (more than one settle's 2 s).
        for (let i = 0; i < 20; i++) {
          for (const e of opens(1 + i * 2, 2)) log.appendSync(e.topic, [{ key: String(e.value.id), value: e.value }]);
          await sleep(150);
        }
        await sub.caughtUp();
        const performances = await newestRows(store, POSITION_PERFORMANCES_TABLE.name);
        expect(performances.length).toBe(40 * 3);
        expect(await newestRows(store, POSITION_SAMPLES_TABLE.name)).toEqual(performances);
        const writing = (t: string) => commits.filter((c) => c.changes.tables.has(t)).length;
        expect(writing(POSITION_SAMPLES_TABLE.name)).toBeGreaterThan(0);
        expect(writing(POSITION_SAMPLES_TABLE.name)).toBeLessThan(writing(POSITION_PERFORMANCES_TABLE.name));
      } finally {
        await sub.stop();
      }
    });
  });

  it('what a stopped projector left uncopied is copied when the next live projector starts, also when no record comes', async () => {
    await withStore('samples_resume', async (store, dir) => {
      // A session whose settled work never runs: a projector stopped (killed) before it.
      const stopped = new ProjectorSession(store);
      stopped.onPending = () => {};
      const records = opens(1, 6);
      await applyBatch(stopped, batchOf(records, 1));
      const performances = await newestRows(store, POSITION_PERFORMANCES_TABLE.name);
      expect(performances.length).toBe(6 * 3);
      expect(await newestRows(store, POSITION_SAMPLES_TABLE.name)).toEqual([]);
      // Twice over: a second start finds nothing left to copy and copies nothing twice.
      for (let i = 0; i < 2; i++) {
        const sub = runProjector(new EmbeddedLog(dir, 20), store, { cadenceMs: 100 });
        try {
          await sub.caughtUp();
          expect(await newestRows(store, POSITION_SAMPLES_TABLE.name)).toEqual(performances);
          const [n] = await store.query<{ n: number }>(`SELECT count() AS n FROM $db.${POSITION_SAMPLES_TABLE.name}`);
          expect(Number(n!.n)).toBe(6 * 3);
        } finally {
          await sub.stop();
        }
      }
    });
  });
});
