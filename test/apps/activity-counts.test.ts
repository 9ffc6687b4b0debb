// Issue 7: activity reads over the rolled-up hours and days (apps/reads/analytics/activity-counts.ts).
// How a range is cut (whole days, whole hours, partial hours at the ends) must cover it exactly,
// and a partial hour read as its whole rolled-up hour must never count a row past the bound, even
// one that lands after the table's span was looked up for the data version.
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activitySummaries } from '../../apps/reads/analytics/activity.ts';
import { type Range, segments, widen } from '../../apps/reads/analytics/activity-counts.ts';
import type { ReadContext } from '../../apps/reads/context.ts';
import { CursorCodec } from '../../apps/reads/cursor.ts';
import { READ_MODEL_GRAPH } from '../../projectors/index.ts';
import { applyBatch } from '../../projectors/runner.ts';
import { versionChanges } from '../../storage/changes.ts';
import type { ChdbStore } from '../../storage/chdb.ts';
import { OPEN_PRINCIPAL } from '../helpers/batches.ts';
import { build, type TopicRecord } from '../helpers/harness.ts';
import { openSchemaStore } from '../helpers/spec.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

describe('segments: a range as whole days, whole hours and partial hours', () => {
  it('covers [start, end] exactly, each piece aligned to its grain, partial hours only at the ends', () => {
    const t = fc.integer({ min: Date.UTC(1970, 0, 1), max: Date.UTC(2299, 11, 31) });
    // Ranges from a single ms to a few months; edges often on hour and day boundaries.
    const aligned = fc.oneof(
      t,
      t.map((x) => Math.floor(x / HOUR) * HOUR),
      t.map((x) => Math.floor(x / DAY) * DAY),
    );
    fc.assert(
      fc.property(
        aligned,
        fc.oneof(
          fc.integer({ min: 0, max: 3 * HOUR }),
          fc.integer({ min: 0, max: 120 * DAY }),
          fc.constantFrom(0, HOUR - 1, HOUR, DAY - 1, DAY),
        ),
        fc.constantFrom('hour' as const, 'day' as const),
        (start, length, coarsest) => {
          const end = start + length;
          const s = segments(start, end, coarsest);
          const all: (Range & { kind?: string })[] = [...s.raw, ...s.hour, ...s.day];
          all.sort((x, y) => x[0] - y[0]);
          // Contiguous, no overlap, from start to end inclusive.
          expect(all[0]![0]).toBe(start);
          expect(all.at(-1)![1]).toBe(end + 1);
          for (let i = 1; i < all.length; i++) expect(all[i]![0]).toBe(all[i - 1]![1]);
          for (const [a, b] of s.hour) {
            expect(a % HOUR).toBe(0);
            expect(b % HOUR).toBe(0);
            expect(b).toBeGreaterThan(a);
          }
          for (const [a, b] of s.day) {
            expect(a % DAY).toBe(0);
            expect(b % DAY).toBe(0);
            expect(b).toBeGreaterThan(a);
          }
          if (coarsest === 'hour') expect(s.day).toEqual([]);
          // With no whole hour inside, the range is read from the statements as it is; else a partial
          // hour lies at an end of the range, within one hour.
          if (!s.hour.length && !s.day.length) expect(s.raw).toEqual([[start, end + 1]]);
          else {
            for (const [a, b] of s.raw) {
              expect(a === start || b === end + 1).toBe(true);
              expect(Math.floor(a / HOUR)).toBe(Math.floor((b - 1) / HOUR));
            }
          }
        },
      ),
      { numRuns: 2000 },
    );
  });
});

describe('widen: an end with nothing stored beyond it read as its whole day or hour', () => {
  it('reads nothing outside the bounds but whole rows of a widened end, each flagged against its bound', () => {
    const t = fc.integer({ min: Date.UTC(1970, 0, 2), max: Date.UTC(2299, 11, 30) });
    const aligned = fc.oneof(
      t,
      t.map((x) => Math.floor(x / HOUR) * HOUR),
      t.map((x) => Math.floor(x / DAY) * DAY),
    );
    const length = fc.oneof(
      fc.integer({ min: 0, max: 3 * HOUR }),
      fc.integer({ min: 0, max: 10 * DAY }),
      fc.constantFrom(0, HOUR - 1, HOUR, DAY - 1, DAY),
    );
    // The stored span: around the range's ends, so that either end may or may not have rows beyond it.
    const offset = fc.integer({ min: -2 * DAY, max: 2 * DAY });
    fc.assert(
      fc.property(aligned, length, offset, offset, fc.constantFrom('hour' as const, 'day' as const), (start, len, dlo, dhi, coarsest) => {
        const q = { start, end: start + len, coarsest };
        const span = { lo: q.start + dlo, hi: q.end + dhi };
        const w = widen(q, span);
        expect(w.start).toBeLessThanOrEqual(q.start);
        expect(w.end).toBeGreaterThanOrEqual(q.end);
        // Widened only where nothing is stored beyond the bound.
        if (w.start < q.start) expect(q.start).toBeLessThanOrEqual(span.lo);
        if (w.end > q.end) expect(q.end).toBeGreaterThanOrEqual(span.hi);
        const s = segments(w.start, w.end, coarsest);
        // Statements are read within the bounds only (a statement read carries no flag).
        for (const [a, b] of s.raw) {
          expect(a).toBeGreaterThanOrEqual(q.start);
          expect(b).toBeLessThanOrEqual(q.end + 1);
        }
        // Every rolled-up row reaching outside the bounds is a flagged whole row of its grain and side.
        const rows = [
          ...s.day.flatMap(([a, b]) => Array.from({ length: (b - a) / DAY }, (_, i) => ({ grain: 'day', start: a + i * DAY, size: DAY }))),
          ...s.hour.flatMap(([a, b]) =>
            Array.from({ length: Math.min((b - a) / HOUR, 48) }, (_, i) => ({ grain: 'hour', start: a + i * HOUR, size: HOUR })),
          ),
          ...s.hour.map(([, b]) => ({ grain: 'hour', start: b - HOUR, size: HOUR })),
        ];
        for (const r of rows) {
          const before = r.start < q.start;
          const after = r.start + r.size - 1 > q.end;
          if (!before && !after) continue;
          const flagged = w.whole.filter((x) => x.grain === r.grain && x.start === r.start);
          if (before) expect(flagged.some((x) => x.side === 'start' && x.bound === q.start)).toBe(true);
          if (after) expect(flagged.some((x) => x.side === 'end' && x.bound === q.end)).toBe(true);
        }
      }),
      { numRuns: 5000 },
    );
  });

  it('reads a default range that ends now from its day rows, today included', () => {
    const now = Date.UTC(2026, 10, 23, 16, 50);
    const q = { start: Date.UTC(2026, 10, 16, 17), end: now, coarsest: 'day' as const };
    const w = widen(q, { lo: Date.UTC(2026, 0, 1), hi: now });
    expect(segments(w.start, w.end, 'day')).toEqual({
      raw: [],
      hour: [[q.start, Date.UTC(2026, 10, 17)]],
      day: [[Date.UTC(2026, 10, 17), Date.UTC(2026, 10, 24)]],
    });
    expect(w.whole).toEqual([{ grain: 'day', start: Date.UTC(2026, 10, 23), side: 'end', bound: now }]);
  });
});

describe('a partial hour read as its whole hour', () => {
  let db: Awaited<ReturnType<typeof openSchemaStore>>;
  let store: ChdbStore;
  let offset = 0;
  const apply = async (records: readonly TopicRecord[]) => {
    for (const r of records)
      await applyBatch(db.session, {
        topic: r.topic,
        partition: 0,
        records: [{ key: '', value: JSON.stringify(r.value), offset: String(++offset) }],
      });
  };
  beforeAll(async () => {
    db = await openSchemaStore('activity');
    store = db.store;
  });
  afterAll(() => db?.close());

  it('does not count an event past endTime that lands in that hour after the span was looked up (same data version)', async () => {
    await apply([
      build.asset(1),
      build.trader(1),
      build.event(1, { positionId: 1, traderId: 1, assetId: 1, timeOfEvent: '2026-05-04T10:05:00.000Z' }),
      build.message('a-1', 'src-1', '2026-05-04T10:06:00.000Z'),
    ]);
    // One data version for every call: the span of each table is looked up once, at the first call.
    const ctx: ReadContext = {
      store,
      now: new Date('2026-05-10T00:00:00.000Z'),
      cursors: CursorCodec.random(),
      changes: versionChanges(() => 1, READ_MODEL_GRAPH),
      principal: OPEN_PRINCIPAL,
    };
    const query = {
      groupBy: 'trader',
      interval: 'hour',
      limit: 10,
      startTime: '2026-05-04T09:30:00.000Z',
      endTime: '2026-05-04T10:30:00.000Z',
    } as const;
    const first = await activitySummaries(ctx, query as never);
    expect(first.results).toEqual([
      {
        traderId: 1,
        messageCount: 1,
        eventCount: 1,
        buckets: [{ start: '2026-05-04T10:00:00.000Z', end: '2026-05-04T11:00:00.000Z', messageCount: 1, eventCount: 1 }],
      },
    ]);
    // Before startTime (09:30) in its hour, then past endTime (10:30) in its hour: neither may count.
    // One side at a time, the second under a new data version whose span holds the first side's
    // rows: a row past one bound must not hide behind the other side's re-read.
    const late = [
      [
        build.event(3, { positionId: 3, traderId: 1, assetId: 1, timeOfEvent: '2026-05-04T09:10:00.000Z' }),
        build.message('a-3', 'src-1', '2026-05-04T09:29:59.999Z'),
      ],
      [
        build.event(2, { positionId: 1, traderId: 1, assetId: 1, type: 'close', timeOfEvent: '2026-05-04T10:45:00.000Z' }),
        build.message('a-2', 'src-1', '2026-05-04T10:50:00.000Z'),
      ],
    ];
    for (const [i, rows] of late.entries()) {
      const at = { ...ctx, changes: versionChanges(() => 1 + i, READ_MODEL_GRAPH) };
      expect(await activitySummaries(at, query as never)).toEqual(first);
      await apply(rows);
      expect(await activitySummaries(at, query as never)).toEqual(first);
    }
  });

  it('buckets events and messages after 2106 (where a 32-bit DateTime wraps) by hour, day and ISO week', async () => {
    await apply([
      build.event(11, { positionId: 11, traderId: 1, assetId: 1, timeOfEvent: '2250-03-10T17:20:00.000Z' }), // a Sunday
      build.message('f-1', 'src-1', '2250-03-11T00:10:00.000Z'), // the Monday after
    ]);
    const ctx: ReadContext = {
      store,
      now: new Date('2250-03-12T00:00:00.000Z'),
      cursors: CursorCodec.random(),
      changes: versionChanges(() => 2, READ_MODEL_GRAPH),
      principal: OPEN_PRINCIPAL,
    };
    const read = (interval: 'hour' | 'day' | 'week', startTime: string) =>
      activitySummaries(ctx, { groupBy: 'none', interval, limit: 10, startTime, endTime: '2250-03-11T23:59:59.999Z' } as never);
    const buckets = async (interval: 'hour' | 'day' | 'week', startTime: string) =>
      (await read(interval, startTime)).results[0]!.buckets.map((b: { start: string; messageCount: number; eventCount: number }) => [
        b.start,
        b.messageCount,
        b.eventCount,
      ]);
    expect(await buckets('hour', '2250-03-10T12:00:00.000Z')).toEqual([
      ['2250-03-10T17:00:00.000Z', 0, 1],
      ['2250-03-11T00:00:00.000Z', 1, 0],
    ]);
    expect(await buckets('day', '2250-03-01T00:00:00.000Z')).toEqual([
      ['2250-03-10T00:00:00.000Z', 0, 1],
      ['2250-03-11T00:00:00.000Z', 1, 0],
    ]);
    // 2250-03-10 is a Sunday: its ISO week began on Monday 2250-03-04; the message is in the next week.
    expect(await buckets('week', '2250-01-01T00:00:00.000Z')).toEqual([
      ['2250-03-04T00:00:00.000Z', 0, 1],
      ['2250-03-11T00:00:00.000Z', 1, 0],
    ]);
  });
});
