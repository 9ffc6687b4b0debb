// Issue 26: under a trickle of live prices, each price batch re-evaluates the positions whose
// evaluation time lies within its window's tolerance before the price, and compares them with
// what position_performances holds so that only the changed ones are written. Reading that back
// was the costliest statement of a live price batch. The projection keeps what it read and wrote
// last: the second price of an asset compares its positions without a read. What it keeps is this
// session's only: a restarted projector (a take-over starts a new session) reads them again.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { timeBasedPerformances } from '../../apps/reads/performance.ts';
import { applyBatch } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import { batchOf } from '../helpers/batches.ts';
import { build, type TopicRecord } from '../helpers/harness.ts';
import { openSchemaStore } from '../helpers/spec.ts';

let db: Awaited<ReturnType<typeof openSchemaStore>>;
beforeAll(async () => {
  db = await openSchemaStore('keptevals');
});
afterAll(() => db?.close());

const MIN = 60_000;
const DAY = 24 * 60 * MIN;
const T0 = Date.parse('2026-03-01T00:00:00.000Z');
const iso = (t: number) => new Date(t).toISOString();

let offset = 0;
/** Applies the records as one batch with `session`, and how many times it read evaluations back from position_performances. */
async function given(session: ProjectorSession, records: readonly TopicRecord[]): Promise<number> {
  const spy = vi.spyOn(db.store, 'query');
  try {
    await applyBatch(session, batchOf(records, ++offset));
    return spy.mock.calls.filter(([sql]) => /FROM \S*position_performances\s+WHERE positionId IN/.test(String(sql))).length;
  } finally {
    spy.mockRestore();
  }
}

/** The 1D window of position `id` as a read shows it at `now` (its return to a millionth of a percent). */
async function window1D(id: number, openAt: number, now: number) {
  const w = (await timeBasedPerformances(db.store, [{ id, openAt }], now)).get(id)?.['1D'];
  return w && { status: w.status, returnPercentage: w.returnPercentage === null ? null : Math.round(w.returnPercentage * 1e6) / 1e6 };
}

describe('evaluations kept by the projector session (issue 26)', () => {
  it('the second live price of an asset compares its positions without a read; a new session reads them again', async () => {
    const openAt = T0 - DAY + 5 * MIN; // its 1D window's evaluation time is T0 + 5 min
    await given(db.session, [build.trader(1), build.asset(1), build.price(1, iso(T0 - 2 * DAY), 90)]);
    await given(db.session, [build.event(1, { timeOfEvent: iso(openAt), price: 100 })]);
    // The first sample after the evaluation time: the window turns `ready` at +10 %.
    await given(db.session, [build.price(1, iso(T0 + 10 * MIN), 110)]);
    expect(await window1D(1, openAt, T0 + DAY)).toEqual({ status: 'ready', returnPercentage: 10 });
    // A later sample within the tolerance is not the first after it: nothing to write, and nothing read to know it.
    expect(await given(db.session, [build.price(1, iso(T0 + 20 * MIN), 150)])).toBe(0);
    expect(await window1D(1, openAt, T0 + DAY)).toEqual({ status: 'ready', returnPercentage: 10 });
    // A sample before it becomes the first: written, from what the session keeps.
    expect(await given(db.session, [build.price(1, iso(T0 + 6 * MIN), 120)])).toBe(0);
    expect(await window1D(1, openAt, T0 + DAY)).toEqual({ status: 'ready', returnPercentage: 20 });

    // Another session (a restart) keeps nothing: it reads the evaluations back once, then keeps them.
    const restarted = new ProjectorSession(db.store);
    expect(await given(restarted, [build.price(1, iso(T0 + 30 * MIN), 130)])).toBe(1);
    expect(await given(restarted, [build.price(1, iso(T0 + 5 * MIN), 140)])).toBe(0);
    expect(await window1D(1, openAt, T0 + DAY)).toEqual({ status: 'ready', returnPercentage: 40 });
  }, 60_000);
});
