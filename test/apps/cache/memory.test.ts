import { describe, expect, it, vi } from 'vitest';
import { MemoryCache, MemoryWatermarks } from '../../../apps/cache/memory.ts';

describe('in-process cache', () => {
  it('expires entries after their ttl', async () => {
    vi.useFakeTimers();
    try {
      const c = new MemoryCache();
      await c.set('a', '1', 1000);
      expect(await c.get('a')).toBe('1');
      vi.advanceTimersByTime(1001);
      expect(await c.get('a')).toBeUndefined();
    } finally {
      vi.useRealTimers();
    }
  });

  it('clears by prefix only', async () => {
    const c = new MemoryCache();
    await c.set('auth:x', '1', 60e3);
    await c.set('read:y', '2', 60e3);
    await c.clear('auth:');
    expect(await c.get('auth:x')).toBeUndefined();
    expect(await c.get('read:y')).toBe('2');
  });

  it('drops the oldest entry when full', async () => {
    const c = new MemoryCache(2);
    await c.set('a', '1', 60e3);
    await c.set('b', '2', 60e3);
    await c.set('c', '3', 60e3);
    expect([await c.get('a'), await c.get('b'), await c.get('c')]).toEqual([undefined, '2', '3']);
  });

  it('stays within its byte budget, dropping the oldest entries', async () => {
    const c = new MemoryCache(100, 40); // 40 bytes: two 8-character values (16 bytes each)
    await c.set('a', 'xxxxxxxx', 60e3);
    await c.set('b', 'yyyyyyyy', 60e3);
    await c.set('c', 'zzzzzzzz', 60e3);
    expect([await c.get('a'), await c.get('b'), await c.get('c')]).toEqual([undefined, 'yyyyyyyy', 'zzzzzzzz']);
    await c.set('huge', 'x'.repeat(100), 60e3); // larger than the whole budget: not kept
    expect(await c.get('huge')).toBeUndefined();
    expect(await c.get('c')).toBe('zzzzzzzz');
  });
});

describe('in-process watermarks', () => {
  it('only ever moves forward', async () => {
    const w = new MemoryWatermarks();
    expect(await w.get('feed')).toBe(0);
    expect(await w.advance('feed', 5)).toBe(5);
    expect(await w.advance('feed', 3)).toBe(5);
    expect(await w.get('feed')).toBe(5);
  });
});
