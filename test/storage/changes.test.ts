import { describe, expect, it } from 'vitest';
import { type Dependencies, decodeChangeSet, encodeChangeSet, intersects, type TableChange, writtenTo } from '../../storage/changes.ts';

/**
 * Change sets (issue 26) as the distributed change log carries them, and what they end: a commit of
 * one source's messages leaves an answer read for other sources, whatever traders it was asked for
 * (a messages row names its source, not a trader); a commit that does not say its sources ends them all.
 */
const change = (over: Partial<TableChange>): TableChange => ({ traders: null, assets: null, times: null, ...over });
const set = (tables: Record<string, TableChange>) => ({ all: false, tables: new Map(Object.entries(tables)) });
const pageOfTrader5: Dependencies = { tables: new Set(['messages', 'traders']), traders: null, assets: null, sources: ['TELEGRAM:src-5'] };

describe('change sets by source', () => {
  it("a messages commit of another source leaves a page read for trader 5's source; one of its source ends it", () => {
    expect(intersects(set({ messages: change({ sources: new Set(['TELEGRAM:src-6']) }) }), pageOfTrader5)).toBe(false);
    expect(intersects(set({ messages: change({ sources: new Set(['TELEGRAM:src-6', 'TELEGRAM:src-5']) }) }), pageOfTrader5)).toBe(true);
  });

  it('a messages commit whose sources are not known, and a change of who holds the sources, end it', () => {
    expect(intersects(set({ messages: change({ sources: null }) }), pageOfTrader5)).toBe(true);
    expect(intersects(set({ messages: change({}) }), pageOfTrader5)).toBe(true);
    expect(intersects(set({ traders: change({}) }), pageOfTrader5)).toBe(true);
  });

  it('an answer read for every source is ended by any messages commit', () => {
    const all: Dependencies = { tables: new Set(['messages']), traders: null, assets: null };
    expect(intersects(set({ messages: change({ sources: new Set(['TELEGRAM:src-6']) }) }), all)).toBe(true);
  });

  it('sources travel through the shared change log as they were, and a table without them stays without', () => {
    const before = set({
      messages: change({ sources: new Set(['TELEGRAM:src-6']), times: { lo: 1, hi: 2 } }),
      events: change({ traders: new Set([3]), assets: new Set([1]) }),
      feed_groups: change({ sources: null }),
    });
    const after = decodeChangeSet(encodeChangeSet(before));
    expect(after).toEqual(before);
    expect('sources' in after.tables.get('events')!).toBe(false);
    expect(intersects(after, pageOfTrader5)).toBe(false);
  });
});

describe('change sets by mark (a sequence only written upwards)', () => {
  it('the highest mark a commit wrote travels through the shared change log; an unknown one stays unknown, and a table without marks stays without', () => {
    const before = set({
      feed_watermark: change({ mark: 812 }),
      prices: change({ times: { lo: 5, hi: 9 } }),
    });
    const after = decodeChangeSet(encodeChangeSet(before));
    expect(after).toEqual(before);
    expect('mark' in after.tables.get('prices')!).toBe(false);
    const unknown = decodeChangeSet(encodeChangeSet(set({ feed_watermark: change({ mark: null }) })));
    expect(unknown.tables.get('feed_watermark')!.mark).toBeNull();
  });

  it('what several commits wrote into a table is the highest of their marks, or not known when one of them does not say', () => {
    const wrote = (...marks: (number | null)[]) =>
      writtenTo(
        marks.map((mark) => set({ feed_watermark: change({ mark }) })),
        'feed_watermark',
      );
    expect(wrote(4, 9, 7)?.mark).toBe(9);
    expect(wrote(4, null, 7)?.mark).toBeNull();
  });
});
