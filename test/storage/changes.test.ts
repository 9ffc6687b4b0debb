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
  it('the highest marks a commit wrote travel through the shared change log; an unknown one stays unknown, and a table without marks stays without', () => {
    const before = set({
      feed_watermark: change({ marks: { fseq: 812, facts: 790 } }),
      prices: change({ times: { lo: 5, hi: 9 } }),
    });
    const after = decodeChangeSet(encodeChangeSet(before));
    expect(after).toEqual(before);
    expect('marks' in after.tables.get('prices')!).toBe(false);
    const unknown = decodeChangeSet(encodeChangeSet(set({ feed_watermark: change({ marks: { fseq: null, facts: 3 } }) })));
    expect(unknown.tables.get('feed_watermark')!.marks).toEqual({ fseq: null, facts: 3 });
  });

  it('what several commits wrote into a table is the highest of each mark, or not known when one of them does not say it', () => {
    const wrote = (...marks: Record<string, number | null>[]) =>
      writtenTo(
        marks.map((m) => set({ feed_watermark: change({ marks: m }) })),
        'feed_watermark',
      );
    expect(wrote({ fseq: 4, facts: 2 }, { fseq: 9, facts: 2 }, { fseq: 7, facts: 6 })?.marks).toEqual({ fseq: 9, facts: 6 });
    expect(wrote({ fseq: 4, facts: 1 }, { fseq: null, facts: 1 }, { fseq: 7, facts: 1 })?.marks).toEqual({ fseq: null, facts: 1 });
    expect(wrote({ fseq: 4, facts: 1 }, { fseq: 7 })?.marks).toEqual({ fseq: 7, facts: null });
  });

  it('a change set of an older build (its one mark a number) says no mark, so what follows the marks is read again', () => {
    const older = decodeChangeSet(JSON.stringify({ all: false, tables: { feed_watermark: { t: null, a: null, s: null, m: 812 } } }));
    expect(writtenTo([older], 'feed_watermark')?.marks?.fseq).toBeUndefined();
  });
});
