import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../projectors/log/embedded.ts';
import { ensureSchema, runProjector } from '../../projectors/runner.ts';
import { ChdbStore } from '../../storage/chdb.ts';
import { wrapStore } from '../../storage/port.ts';
import { FEED_CHANGES_TABLE } from '../../storage/tables/feed-groups.ts';
import { event, message } from './records.ts';

/**
 * Issue 26, live rounds of the lanes together: a source posts a message and then its trade event
 * (with the asset's prices before them, as `bench/live.ts` writes them). The messages lane and the
 * trade lane read their topics at the start of a round; when the lanes began their rounds apart,
 * or the trade lane read its events later in the round than the messages lane read the messages,
 * an event appended in between was projected a round before its message: its feed group was
 * written without the message (which no caller may see: it names no source), and a round later
 * again with it. A partner's since-poll saw the group only after that second commit, and the
 * projector wrote the group twice. A live round now takes what every topic held when it began.
 */
const chdbDir = join(tmpdir(), `signalbase-test-${process.pid}`);
afterAll(() => rmSync(chdbDir, { recursive: true, force: true }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const UNITS = 50;
/**
 * What the trade lane's inserts take on a loaded machine (bench/live.ts: 15-40 ms a statement, a
 * round up to a second): it reads the events that much later than the messages lane reads the
 * messages, and its rounds outlast the cadence (so that the lanes drift apart unless kept together).
 */
const SLOW_INSERT_MS: Record<string, number> = { prices: 60, events: 80 };

describe('issue 26: the lanes of a live projector take a round of what the log held when it began', () => {
  it("each new feed group is stamped once, with its message: an event never goes ahead of its message's round", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'signalbase-together-'));
    const log = new EmbeddedLog(dir, 20);
    const chdb = await new ChdbStore(chdbDir, `together_${process.pid}`).init();
    await ensureSchema(chdb);
    const errors: string[] = [];
    const loaded = wrapStore(chdb, {
      insert: async (table, rows) => {
        await sleep(SLOW_INSERT_MS[table] ?? 0);
        await chdb.insert(table, rows);
      },
    });
    const sub = runProjector(log, loaded, { cadenceMs: 100, onError: (err) => void errors.push(String(err)) });
    try {
      for (let i = 1; i <= UNITS; i++) {
        const at = new Date(Date.UTC(2026, 2, 1, 0, i)).toISOString();
        // Appended one topic after the other, as `signalbase ingest` appends a group of lines.
        log.appendSync('prices', [
          { key: '1', value: { assetId: 1, at, price: 100 + i, version: 1 } },
          { key: '1', value: { assetId: 1, at, price: 100 + i, version: 2 } },
        ]);
        const m = message(`m-${i}`, { writtenAt: at });
        log.appendSync(m.topic, [{ key: m.value.id, value: m.value }]);
        const e = event(i, { messageId: m.value.id, timeOfEvent: at, traderId: 1 + (i % 3) });
        log.appendSync(e.topic, [{ key: String(e.value.id), value: e.value }]);
        // Units apart by less than a cadence, at times that fall anywhere in a round.
        await sleep(11 + (i % 5) * 9);
      }
      await sub.caughtUp();
      const stamps = await chdb.query<{ id: string; n: number; withMessage: number }>(
        `SELECT id, count() AS n, countIf(platform != '') AS withMessage FROM ${FEED_CHANGES_TABLE} GROUP BY id ORDER BY id`,
      );
      expect(errors).toEqual([]);
      expect(stamps.length).toBe(UNITS);
      // Once each, and that once with the message's source: the poll that first sees the group can show it.
      expect(stamps.filter((s) => Number(s.n) !== 1 || Number(s.withMessage) !== 1)).toEqual([]);
    } finally {
      await sub.stop();
      await chdb.drop();
      await chdb.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
