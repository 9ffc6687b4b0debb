import { describe, expect, it } from 'vitest';
import { keptFirstAfter } from '../../apps/reads/clock.ts';
import { keptUntilChanged, perDataVersion, type ReadContext } from '../../apps/reads/context.ts';
import { ChangeLog, type ChangeSet, type Changes, localChanges, TableGraph } from '../../storage/changes.ts';
import type { Store } from '../../storage/port.ts';
import { TRADERS_TABLE } from '../../storage/tables/traders.ts';
import { EVENTS_TABLE } from '../../storage/tables/trading.ts';

/**
 * Issue 26, "invalidation work does not grow with the number of commits": what a read keeps across
 * commits (facts, keyed values, the clock's next instants) is checked against each commit once,
 * not against every commit since it was made on every read. A server under a trickle of trades
 * makes about two commits a second; facts made from traders and assets outlive thousands of them.
 */

/** A change log whose checks count the commits they look at (seqs 1, 2, 3, ... as added). */
function countingChanges() {
  const log = new ChangeLog(0);
  const base = localChanges(log, new TableGraph([]));
  const counter = { looked: 0 };
  const changes: Changes = {
    ...base,
    changedSince(deps, seq, upTo) {
      counter.looked += Math.max(0, Math.min(upTo ?? log.seq, log.seq) - seq);
      return base.changedSince(deps, seq, upTo);
    },
  };
  return { log, changes, counter, commit: (set: ChangeSet) => log.add(log.seq + 1, set) };
}

/** A commit of events of trader 1 on asset 1 dated `at` (ms). */
const eventsAt = (at: number): ChangeSet => ({
  all: false,
  tables: new Map([[EVENTS_TABLE.name, { traders: new Set([1]), assets: new Set([1]), times: { lo: at, hi: at } }]]),
});
const tradersChanged = (): ChangeSet => ({
  all: false,
  tables: new Map([[TRADERS_TABLE.name, { traders: null, assets: null, times: null }]]),
});

const store = {} as Store;
const contextOf = (changes: Changes) => ({ changes, store, now: new Date(0) }) as unknown as ReadContext;

describe('issue 26: a kept value is checked against each commit once', () => {
  it('facts kept per data version: after 1,000 commits of trades, the next reads look at none of them again', async () => {
    const { changes, counter, commit } = countingChanges();
    let made = 0;
    const facts = perDataVersion(() => ++made, { tables: [TRADERS_TABLE] });
    const ctx = contextOf(changes);
    expect(await facts(ctx)).toBe(1);
    for (let i = 0; i < 1000; i++) commit(eventsAt(i));
    counter.looked = 0;
    expect(await facts(ctx)).toBe(1);
    expect(counter.looked).toBeLessThanOrEqual(1000);
    counter.looked = 0;
    for (let i = 0; i < 5; i++) expect(await facts(ctx)).toBe(1);
    expect(counter.looked).toBe(0);
    commit(eventsAt(2000));
    expect(await facts(ctx)).toBe(1);
    expect(counter.looked).toBe(1);
    // A commit that touches what the facts are made from still makes them anew.
    commit(tradersChanged());
    expect(await facts(ctx)).toBe(2);
  });

  it('a value kept by key until its dependencies change: the same', async () => {
    const { changes, counter, commit } = countingChanges();
    let made = 0;
    const ctx = contextOf(changes);
    const deps = { tables: new Set([TRADERS_TABLE.name]), traders: null, assets: null };
    const read = () => keptUntilChanged(ctx, 'k', deps, async () => ++made);
    expect(await read()).toBe(1);
    for (let i = 0; i < 1000; i++) commit(eventsAt(i));
    expect(await read()).toBe(1);
    counter.looked = 0;
    for (let i = 0; i < 5; i++) expect(await read()).toBe(1);
    expect(counter.looked).toBe(0);
    commit(tradersChanged());
    expect(await read()).toBe(2);
  });

  it("the clock's next instant: commits of rows dated before it are looked at once, and a row dated before it still ends it", async () => {
    const { changes, counter, commit, log } = countingChanges();
    let found = 0;
    const next = (now: number) =>
      keptFirstAfter(store, { table: EVENTS_TABLE, column: 'timeOfEvent' }, now, { changes, seq: log.seq }, async () => {
        found++;
        return 100_000;
      });
    expect(await next(1_000)).toBe(100_000);
    // Live rows, dated before the clock of the reads that follow them.
    for (let i = 0; i < 1000; i++) commit(eventsAt(1_000 + i));
    expect(await next(3_000)).toBe(100_000);
    counter.looked = 0;
    for (let i = 0; i < 5; i++) expect(await next(3_000 + i)).toBe(100_000);
    expect(counter.looked).toBe(0);
    commit(eventsAt(2_500));
    expect(await next(4_000)).toBe(100_000);
    expect(counter.looked).toBeLessThanOrEqual(2);
    expect(found).toBe(1);
    // A row dated between the clock and the instant kept: the instant is read again.
    commit(eventsAt(50_000));
    expect(await next(5_000)).toBe(100_000);
    expect(found).toBe(2);
  });
});
