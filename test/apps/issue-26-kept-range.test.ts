// Issue 26: a count over a trailing range kept from one request to the next
// (apps/reads/analytics/kept-range.ts). Under random commits (live rows written seconds after
// their time, rows among old ones, rows leaving and entering), clock steps and ranges, every kept
// count equals the brute-force count over the rows as they stand; under a trickle of live rows a
// later request reads only seconds of rows, not its buckets again.
import { describe, expect, it } from 'vitest';
import { EDGE_MS, keptRange } from '../../apps/reads/analytics/kept-range.ts';
import type { ReadContext } from '../../apps/reads/context.ts';
import { ChangeLog, localChanges, TableGraph } from '../../storage/changes.ts';
import type { Store } from '../../storage/port.ts';
import { EVENTS_TABLE } from '../../storage/tables/trading.ts';
import { prng } from '../helpers/prng.ts';

const SEC = 1000;
const MIN = 60 * SEC;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const T0 = Date.UTC(2026, 10, 27, 15, 40, 12, 345);

/** Counts per bucket start. */
type Counts = Map<number, number>;

/** Rows as a store holds them (times, ms), the reads made of them, and the commits' log. */
function world() {
  const rows: number[] = [];
  const log = new ChangeLog();
  const changes = localChanges(log, new TableGraph([]));
  const reads: { byInstant: boolean; start: number; end: number }[] = [];
  const store = {} as Store;
  let seq = 0;
  return {
    rows,
    reads,
    /** Rows written (and times of rows taken out), told as one commit of the events table. */
    commit(added: number[], removed: number[] = []) {
      for (const t of added) rows.push(t);
      for (const t of removed) rows.splice(rows.indexOf(t), 1);
      const times = [...added, ...removed];
      log.add(++seq, {
        all: false,
        tables: new Map([[EVENTS_TABLE.name, { traders: null, assets: null, times: { lo: Math.min(...times), hi: Math.max(...times) } }]]),
      });
    },
    /** The count over [start, end] in `size` buckets, kept by `key`. */
    count(now: number, key: string, start: number, end: number, size: number): Promise<Counts> {
      const bucketStart = (t: number) => Math.floor(t / size) * size;
      const countRows = (s: number, e: number, bucket: (t: number) => number): Counts => {
        const out: Counts = new Map();
        for (const t of rows) if (t >= s && t <= e) out.set(bucket(t), (out.get(bucket(t)) ?? 0) + 1);
        return out;
      };
      const ctx = { store, changes, now: new Date(now) } as ReadContext;
      return keptRange<Counts>(ctx, {
        key,
        tables: [EVENTS_TABLE],
        start,
        end,
        read: async (s, e) => {
          reads.push({ byInstant: false, start: s, end: e });
          return countRows(s, e, bucketStart);
        },
        readByInstant: async (s, e) => {
          reads.push({ byInstant: true, start: s, end: e });
          return countRows(s, e, (t) => t);
        },
        empty: () => new Map(),
        latest: async () => Math.max(...rows),
        bucketed: (v) => {
          const out: Counts = new Map();
          for (const [t, n] of v) out.set(bucketStart(t), (out.get(bucketStart(t)) ?? 0) + n);
          return out;
        },
        add: (a, b, sign) => {
          const out = new Map(a);
          for (const [k, n] of b) out.set(k, (out.get(k) ?? 0) + sign * n);
          return out;
        },
        within: (v, from, to) => new Map([...v].filter(([k]) => k >= from && k < to)),
        bucketStart,
      });
    },
  };
}

/** The brute-force count: every row in [start, end], per bucket (empty buckets left out). */
function oracle(rows: readonly number[], start: number, end: number, size: number): Counts {
  const out: Counts = new Map();
  for (const t of rows) {
    if (t < start || t > end) continue;
    const b = Math.floor(t / size) * size;
    out.set(b, (out.get(b) ?? 0) + 1);
  }
  return out;
}

const nonZero = (c: Counts) => new Map([...c].filter(([, n]) => n !== 0).sort(([a], [b]) => a - b));

describe('issue 26: a kept count over a trailing range', () => {
  for (const seed of [1, 2, 3, 4, 5, 6]) {
    it(`equals a fresh count under random commits, clock steps and ranges (seed ${seed})`, async () => {
      const rng = prng(20261127 + seed);
      const w = world();
      let now = T0;
      // A week of history, denser lately, and a few rows in the future.
      for (let i = 0; i < 400; i++) w.rows.push(now - rng.int(0, 9 * DAY));
      for (let i = 0; i < 50; i++) w.rows.push(now - rng.int(0, 10 * MIN));
      for (let i = 0; i < 5; i++) w.rows.push(now + rng.int(1, 3 * HOUR));
      const questions = [
        { key: 'day', size: DAY, range: (t: number) => [t - 7 * DAY, t] },
        { key: 'hour', size: HOUR, range: (t: number) => [Math.floor(t / HOUR) * HOUR - 167 * HOUR, t] },
        { key: 'week', size: 7 * DAY, range: (t: number) => [t - 3 * DAY, t] },
        { key: 'fixed', size: DAY, range: () => [T0 - 2 * DAY, T0 + 2 * HOUR] },
      ];
      for (let step = 0; step < 600; step++) {
        const r = rng.next();
        if (r < 0.3) {
          // Live rows, dated up to 10 s before now (the projector's lag); now and then one among old rows, one taken out, or one in the future.
          const added = Array.from({ length: rng.int(1, 4) }, () => now - rng.int(0, 10 * SEC));
          if (rng.chance(0.1)) added.push(now - rng.int(0, 8 * DAY));
          if (rng.chance(0.05)) added.push(now + rng.int(1, 2 * HOUR));
          const removed = rng.chance(0.1) && w.rows.length ? [rng.pick(w.rows)] : [];
          w.commit(added, removed);
        } else if (r < 0.55) {
          const big = rng.next();
          now += big < 0.85 ? rng.int(1, 3 * SEC) : big < 0.97 ? rng.int(1, 20 * MIN) : rng.int(1, 3 * HOUR);
        } else {
          const q = rng.pick(questions);
          const [start, end] = q.range(now) as [number, number];
          const got = await w.count(now, q.key, start, end, q.size);
          expect(nonZero(got), `step ${step}: ${q.key} at ${new Date(now).toISOString()}`).toEqual(
            nonZero(oracle(w.rows, start, end, q.size)),
          );
        }
      }
    });
  }

  it('under a trickle of live rows, a later request reads seconds of rows by instant, never its buckets again', async () => {
    const rng = prng(26);
    const w = world();
    let now = T0;
    for (let i = 0; i < 2000; i++) w.rows.push(now - rng.int(0, 8 * DAY));
    const range = (t: number) => [t - 7 * DAY, t] as const;
    await w.count(now, 'q', ...range(now), DAY);
    w.reads.length = 0;
    // 20 minutes of requests every 2 s, each after a commit of rows dated up to 5 s earlier.
    for (let i = 0; i < 600; i++) {
      now += 2 * SEC;
      w.commit([now - rng.int(0, 5 * SEC), now - rng.int(0, 5 * SEC)]);
      const [start, end] = range(now);
      expect(nonZero(await w.count(now, 'q', start, end, DAY))).toEqual(nonZero(oracle(w.rows, start, end, DAY)));
    }
    expect(w.reads.filter((r) => !r.byInstant)).toEqual([]);
    // The rows written since the last answer (a few seconds, within the tail), and now and then the rows about to leave at the start.
    const spans = w.reads.map((r) => r.end - r.start);
    expect(Math.max(...spans.filter((s) => s < EDGE_MS))).toBeLessThanOrEqual(10 * SEC);
    expect(w.reads.filter((r) => r.end - r.start >= 10 * SEC).length).toBeLessThanOrEqual(Math.ceil((600 * 2 * SEC) / EDGE_MS) + 1);

    // Then a quiet minute: the clock alone moves the end past every row stored, which reads nothing there.
    const quietFrom = now;
    w.reads.length = 0;
    for (let i = 0; i < 30; i++) {
      now += 2 * SEC;
      const [start, end] = range(now);
      expect(nonZero(await w.count(now, 'q', start, end, DAY))).toEqual(nonZero(oracle(w.rows, start, end, DAY)));
    }
    expect(w.reads.filter((r) => r.end > quietFrom)).toEqual([]);
  });
});
