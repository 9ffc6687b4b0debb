import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../../projectors/log/embedded.ts';
import type { LogBatch, LogSubscription } from '../../../projectors/log/port.ts';

/**
 * Issue 26, commit cadence: while records trickle in, a subscription with a cadence takes them in
 * rounds at most that often (a record waits at most about the cadence), so a trickle of many
 * appends makes few batches; a backlog is read without pause; records of upstream topics are
 * handled before those of downstream ones in each round.
 */
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

function subscribe(
  cadenceMs: number,
  maxBatch = 1000,
): { log: EmbeddedLog; batches: { topic: string; n: number; at: number }[]; sub: LogSubscription } {
  const dir = mkdtempSync(join(tmpdir(), 'signalbase-cadence-'));
  const log = new EmbeddedLog(dir, 20);
  const batches: { topic: string; n: number; at: number }[] = [];
  const sub = log.subscribe(
    'g',
    ['up', 'down'],
    async (b: LogBatch) => {
      batches.push({ topic: b.topic, n: b.records.length, at: Date.now() });
    },
    { cadenceMs, maxBatch },
  );
  cleanup.push(async () => {
    await sub.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  return { log, batches, sub };
}

const rec = (i: number) => ({ key: String(i), value: { i } });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('issue 26: live commit cadence', () => {
  it('takes a trickle of 40 appends over 1 s in rounds at most every 250 ms, and loses none', async () => {
    const { log, batches, sub } = subscribe(250);
    const t0 = Date.now();
    for (let i = 0; i < 40; i++) {
      log.appendSync(i % 2 ? 'down' : 'up', [rec(i)]);
      await sleep(25);
    }
    await sub.caughtUp();
    expect(batches.reduce((n, b) => n + b.n, 0)).toBe(40);
    // 1 s of appends in rounds of 250 ms: a handful of rounds of two topics, not 40 batches.
    expect(batches.length).toBeLessThanOrEqual(2 * Math.ceil((Date.now() - t0) / 250) + 2);
    const ups = batches.filter((b) => b.topic === 'up').map((b) => b.at);
    for (let i = 1; i < ups.length; i++) expect(ups[i]! - ups[i - 1]!).toBeGreaterThanOrEqual(240);
  });

  it('reads a backlog without pausing between its batches', async () => {
    const { log, batches, sub } = subscribe(1000, 10);
    log.appendSync(
      'up',
      Array.from({ length: 100 }, (_, i) => rec(i)),
    );
    const t0 = Date.now();
    await sub.caughtUp();
    expect(batches.length).toBe(10);
    // Ten batches of a backlog in far less than ten cadences.
    expect(Date.now() - t0).toBeLessThan(2000);
  });

  it('without a cadence, each append is taken as soon as it is seen (the default)', async () => {
    const { log, batches, sub } = subscribe(0);
    for (let i = 0; i < 6; i++) {
      log.appendSync('up', [rec(i)]);
      await sleep(60);
    }
    await sub.caughtUp();
    expect(batches.length).toBe(6);
  });

  it('with lanes, says when every lane is between rounds (each batch before it handled, none under way), before caught-up resolves', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'signalbase-cadence-'));
    const log = new EmbeddedLog(dir, 20);
    let handling = 0;
    let handled = 0;
    const rests: { handling: number; handled: number }[] = [];
    const sub = log.subscribe(
      'g',
      ['up', 'down', 'side'],
      async () => {
        handling++;
        await sleep(15);
        handling--;
        handled++;
      },
      { cadenceMs: 100, lanes: [['side']], onRest: async () => void rests.push({ handling, handled }) },
    );
    cleanup.push(async () => {
      await sub.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    for (let i = 0; i < 12; i++) {
      log.appendSync('up', [rec(i)]);
      log.appendSync('side', [rec(i)]);
      await sleep(40);
    }
    await sub.caughtUp();
    const last = rests.at(-1);
    // Caught up: the last rest came after the last batch.
    expect(last?.handled).toBe(handled);
    for (const r of rests) expect(r.handling).toBe(0);
    // One rest per round of the lanes together, not one per batch.
    expect(rests.length).toBeLessThan(handled);
    expect(rests.length).toBeGreaterThan(1);
  });

  it('a live lane goes on while another lane reads a backlog: its records are not held until the backlog is read', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'signalbase-cadence-'));
    const log = new EmbeddedLog(dir, 20);
    const handled: { topic: string; values: number[] }[] = [];
    const sub = log.subscribe(
      'g',
      ['up', 'side'],
      async (b: LogBatch) => {
        // The side lane's batches take a while: its backlog takes about a second.
        if (b.topic === 'side') await sleep(30);
        handled.push({ topic: b.topic, values: b.records.map((r) => (JSON.parse(r.value) as { i: number }).i) });
      },
      { cadenceMs: 100, maxBatch: 10, lanes: [['side']] },
    );
    cleanup.push(async () => {
      await sub.stop();
      rmSync(dir, { recursive: true, force: true });
    });
    // Both lanes live, taking rounds together.
    for (let i = 0; i < 3; i++) {
      log.appendSync('up', [rec(i)]);
      log.appendSync('side', [rec(i)]);
      await sleep(60);
    }
    await sub.caughtUp();
    log.appendSync(
      'side',
      Array.from({ length: 300 }, (_, i) => rec(1000 + i)),
    );
    // The up lane's next record comes once the side lane is well into its backlog.
    await sleep(250);
    log.appendSync('up', [rec(99)]);
    await sub.caughtUp();
    const up = handled.findIndex((b) => b.topic === 'up' && b.values.includes(99));
    const lastSide = handled.findLastIndex((b) => b.topic === 'side');
    expect(handled.filter((b) => b.topic === 'side').reduce((n, b) => n + b.values.length, 0)).toBe(303);
    expect(up).toBeGreaterThan(-1);
    // Well before the backlog's last batch (about thirty of them), not after it.
    expect(up).toBeLessThan(lastSide - 10);
  });
});
