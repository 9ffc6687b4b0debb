import { describe, expect, it } from 'vitest';
import { type Entry, ReadCache } from '../../apps/api/read-cache.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { ChangeLog, localChanges, TableGraph } from '../../storage/changes.ts';
import type { Store } from '../../storage/port.ts';

/**
 * Issue 26: under live ingest a commit often lands while a missed answer is being read; the
 * requests that waited for that read cannot use it (it predates the commit), and they read again
 * once for all of them, not once each (16 clients on one default first page made 16 reads).
 */
describe('issue 26: the read cache under commits', () => {
  /** A read cache at a fixed clock over a change log, and `entry(seq)`: the answer of key `k` read at `seq` from the events table. */
  const given = () => {
    const now = 1_000_000;
    const cache = new ReadCache(new MemoryCache(), () => now);
    const log = new ChangeLog();
    const changes = localChanges(log, new TableGraph([]));
    const deps = { tables: new Set(['events']), traders: null, assets: null };
    const store = {} as Store; // an answer without clock rules asks the store nothing
    const entry = (seq: number) => cache.put('k', {}, { results: [seq], meta: {} }, { now, seq, deps }, store);
    return { now, cache, log, changes, entry };
  };

  it('requests that waited for a read a commit made stale share one read again', async () => {
    const { now, cache, log, changes, entry } = given();

    let release!: () => void;
    const first = cache.fill('k', now, 0, changes, () => new Promise<void>((r) => (release = r)).then(() => entry(0)));
    // A commit that touches what the answer is read from lands while it is read.
    log.add(1, { all: false, tables: new Map([['events', { traders: null, assets: null, times: null }]]) });
    let reads = 0;
    const again = () => {
      reads++;
      return new Promise<Entry>((r) => setTimeout(() => r(entry(1)), 5));
    };
    const waiters = Array.from({ length: 8 }, () => cache.fill('k', now, 1, changes, again));
    release();
    const [stale, ...fresh] = await Promise.all([first, ...waiters]);
    expect(reads).toBe(1);
    for (const e of fresh) {
      expect(e).toBe(fresh[0]);
      expect(e).not.toBe(stale);
    }
  });

  it('a request takes the read it waited for when only commits after its own touched what it reads', async () => {
    const { now, cache, log, changes, entry } = given();
    const change = (table: string) => ({ all: false, tables: new Map([[table, { traders: null, assets: null, times: null }]]) });

    let release!: () => void;
    const first = cache.fill('k', now, 0, changes, () => new Promise<void>((r) => (release = r)).then(() => entry(0)));
    // A commit of another table: the answer being read is still the one at seq 1.
    log.add(1, change('positions'));
    let reads = 0;
    const again = () => {
      reads++;
      return entry(log.seq);
    };
    const atOne = cache.fill('k', now, 1, changes, again);
    // A commit of what it reads lands while both wait: after the request at seq 1 began, before the
    // request at seq 2 did.
    log.add(2, change('events'));
    const atTwo = cache.fill('k', now, 2, changes, again);
    release();
    const [read, one, two] = await Promise.all([first, atOne, atTwo]);
    // The request at seq 1 is answered by the read it waited for (a read of its own, under way when
    // the commit at seq 2 landed, could have missed it too); the one at seq 2 is not, and reads again.
    expect(one).toBe(read);
    expect(two).not.toBe(read);
    expect(reads).toBe(1);
  });
});
