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
  it('requests that waited for a read a commit made stale share one read again', async () => {
    const now = 1_000_000;
    const cache = new ReadCache(new MemoryCache(), () => now);
    const log = new ChangeLog();
    const changes = localChanges(log, new TableGraph([]));
    const deps = { tables: new Set(['events']), traders: null, assets: null };
    const store = {} as Store; // an answer without clock rules asks the store nothing
    const entry = (seq: number) => cache.put('k', {}, { results: [seq], meta: {} }, { now, seq, deps }, store);

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
});
