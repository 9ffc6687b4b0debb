import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../projectors/log/embedded.ts';
import { type Commit, ensureSchema, runProjector } from '../../projectors/runner.ts';
import { ChdbStore } from '../../storage/chdb.ts';
import { MESSAGES_TABLE } from '../../storage/tables/messages.ts';
import { EVENTS_TABLE } from '../../storage/tables/trading.ts';
import { event, message } from './records.ts';

/**
 * Issue 26, commit cadence: each commit ends the cached answers its changes touch, so a live
 * projector announces one commit per round of its lanes (the messages lane and the trade lane),
 * not one per batch, and at most one per cadence (LIVE_CADENCE_MS says so: rounds of the two lanes
 * that end apart were a commit each, 2.2 commits a second at a cadence of 500 ms in bench/live.ts).
 * Every batch is in exactly one commit, a commit says everything its batches
 * wrote, a caught-up projector has announced all it applied, and an announcement that fails is
 * made again with the batches after it.
 */
const chdbDir = join(tmpdir(), `signalbase-test-${process.pid}`);
afterAll(() => rmSync(chdbDir, { recursive: true, force: true }));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const TRADERS = [1, 2, 3, 4, 5];

const CADENCE_MS = 100;

async function trickle(failFirst: boolean): Promise<{ commits: Commit[]; errors: string[]; written: number; gaps: number[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'signalbase-rounds-'));
  const log = new EmbeddedLog(dir, 20);
  const chdb = await new ChdbStore(chdbDir, `rounds_${failFirst ? 'f' : 'ok'}_${process.pid}`).init();
  await ensureSchema(chdb);
  const commits: Commit[] = [];
  const errors: string[] = [];
  // When each announcement was made while records arrived (the caught-up's last one is made at once).
  const times: number[] = [];
  let trickling = true;
  let calls = 0;
  const sub = runProjector(log, chdb, {
    cadenceMs: CADENCE_MS,
    onCommit: (c) => {
      if (trickling) times.push(performance.now());
      if (failFirst && calls++ === 0) throw new Error('announcement failed');
      commits.push(c);
    },
    onError: (_err, topic) => void errors.push(topic),
  });
  let written = 0;
  try {
    // 24 pairs, 1.2 s; on a loaded machine, where a round of the lanes takes a few hundred ms, on
    // until the lanes' rounds are several (at most 120 pairs).
    const messageRounds = () => commits.flatMap((c) => c.batches).filter((b) => b.topic === 'messages').length;
    for (let i = 1; i <= 24 || (messageRounds() < 3 && i <= 120); i++) {
      // A message and its trade event, as a source posts them: one append each, on the two lanes.
      const m = message(`m-${i}`, { writtenAt: new Date(Date.UTC(2026, 2, 1, 0, i)).toISOString() });
      const e = event(i, { traderId: TRADERS[i % TRADERS.length], messageId: `m-${i}`, timeOfEvent: m.value.writtenAt });
      // A trickle, not a backlog: on a machine so loaded that a round takes longer than the pairs
      // arrive, the lanes would read a backlog, apart, and announce their batches apart (as they
      // should); the writer waits while 8 pairs are unannounced.
      for (let waited = 0; written - applied(commits) >= 16 && waited < 5_000; waited += 10) await sleep(10);
      log.appendSync(m.topic, [{ key: m.value.id, value: m.value }]);
      log.appendSync(e.topic, [{ key: String(e.value.id), value: e.value }]);
      written += 2;
      await sleep(50);
    }
    trickling = false;
    await sub.caughtUp();
    // Caught up: everything applied was announced by then.
    return { commits: [...commits], errors, written, gaps: times.slice(1).map((t, i) => t - times[i]!) };
  } finally {
    await sub.stop();
    await chdb.drop();
    await chdb.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const applied = (commits: readonly Commit[]) => commits.flatMap((c) => c.batches).reduce((n, b) => n + b.applied + b.dead, 0);

describe('issue 26: one commit per round of the lanes', () => {
  it('a trickle on both lanes is announced as few commits of both lanes, each record once, with every trader it wrote', async () => {
    const { commits, written } = await trickle(false);
    const batches = commits.flatMap((c) => c.batches);
    expect(applied(commits)).toBe(written);
    // Rounds of both lanes, several (the trickle goes on until they are).
    expect(batches.filter((b) => b.topic === 'messages').length).toBeGreaterThan(1);
    // Fewer commits than batches: the lanes' batches of a round are announced together.
    expect(commits.length).toBeLessThan(batches.length);
    const bothLanes = commits.filter(
      (c) => c.batches.some((b) => b.topic === 'messages') && c.batches.some((b) => b.topic === 'trade-events'),
    );
    expect(bothLanes.length).toBeGreaterThan(0);
    // What the commits say they changed covers every trader the events were written for.
    const traders = new Set<number>();
    for (const c of commits) {
      const ch = c.changes.tables.get(EVENTS_TABLE.name);
      if (ch?.traders === null) throw new Error('a commit of 24 events names no traders');
      for (const t of ch?.traders ?? []) traders.add(t);
    }
    expect([...traders].sort()).toEqual(TRADERS);
    expect(commits.some((c) => c.changes.tables.has(MESSAGES_TABLE.name))).toBe(true);
  });

  it('commits are announced at most once per cadence, also when the lanes end their rounds apart', async () => {
    const { gaps, commits, written } = await trickle(false);
    expect(gaps.length).toBeGreaterThan(1);
    // The lanes begin their rounds together at most once per cadence and a round is announced as it
    // ends, so two announcements may come closer than a cadence (a long round, then a short one),
    // but never more of them than rounds: over the trickle, one per cadence and one more at most,
    // give or take timers' slack (libuv's clock counts whole milliseconds). Lanes announcing a
    // round each made about twice as many.
    const span = gaps.reduce((a, b) => a + b, 0);
    expect(gaps.length + 1).toBeLessThanOrEqual(Math.floor(span / (CADENCE_MS - 2)) + 2);
    expect(applied(commits)).toBe(written);
  });

  it('a failed announcement is made again with what came after it: no batch is lost', async () => {
    const { commits, errors, written } = await trickle(true);
    expect(errors).toContain('commit');
    expect(applied(commits)).toBe(written);
  });
});
