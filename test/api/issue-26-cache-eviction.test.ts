import { describe, expect, it } from 'vitest';
import { ReadCache } from '../../apps/api/read-cache.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { ChangeLog, localChanges, TableGraph } from '../../storage/changes.ts';
import type { Store } from '../../storage/port.ts';

/**
 * Issue 26: the mixed load asks trader stats of 20 random traders (a new question nearly every
 * time, some 30 KB each) beside list pages asked again and again. With the oldest entry evicted
 * first, the stats answers pushed the list pages out of both caches within a minute, and a third
 * of the list reads under live ingest missed for answers that had been cached and were still
 * current. A full cache now lets go of the entry used least recently.
 */
describe('issue 26: a full cache keeps the answers that are asked again', () => {
  it('the in-process cache evicts the entry used least recently, not the oldest', async () => {
    const c = new MemoryCache(2);
    await c.set('page', 'asked again', 60e3);
    await c.set('stats-1', 'asked once', 60e3);
    expect(await c.get('page')).toBe('asked again');
    await c.set('stats-2', 'asked once', 60e3);
    expect(await c.get('page')).toBe('asked again');
    expect(await c.get('stats-1')).toBeUndefined();
  });

  it('the in-process cache does so within its byte budget too', async () => {
    const c = new MemoryCache(100, 40); // two 8-character values (16 bytes each)
    await c.set('page', 'xxxxxxxx', 60e3);
    await c.set('stats-1', 'yyyyyyyy', 60e3);
    await c.get('page');
    await c.set('stats-2', 'zzzzzzzz', 60e3);
    expect([await c.get('page'), await c.get('stats-1'), await c.get('stats-2')]).toEqual(['xxxxxxxx', undefined, 'zzzzzzzz']);
  });

  it('the read cache keeps the decoded answer it answered from last, and lets go of one never asked again', async () => {
    const now = 1_000_000;
    const cache = new ReadCache(new MemoryCache(), () => now, { entries: 2, bytes: 64 << 20 });
    const changes = localChanges(new ChangeLog(), new TableGraph([]));
    const deps = { tables: new Set(['events']), traders: null, assets: null };
    const store = {} as Store; // an answer without clock rules asks the store nothing
    const put = (key: string) => cache.put(key, {}, { results: [key], meta: {} }, { now, seq: 0, deps }, store);

    await put('page');
    await put('stats-1');
    expect(cache.local('page', now, 0, changes)).toBeDefined();
    await put('stats-2');
    expect(cache.local('page', now, 0, changes)).toBeDefined();
    expect(cache.local('stats-1', now, 0, changes)).toBeUndefined();
  });
});
