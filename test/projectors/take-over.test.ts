// Issue 10: projector processes taking turns at one store (Kafka, several members). A member keeps
// state of the store in process (id bounds, counters); when another member has written in between,
// it must read them again (its projector session's reset, called on a take-over), or it folds new events
// onto positions it believes do not exist. Expectation: the same positions as one writer folds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LogBatch } from '../../projectors/log/port.ts';
import { applyBatch } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import type { Store } from '../../storage/port.ts';
import { build, createHarness, type Harness, type TopicRecord } from '../helpers/harness.ts';

const T = Date.parse('2026-03-01T00:00:00Z');
const iso = (t: number) => new Date(t).toISOString();
let seq = 1_000n;
const batch = (records: TopicRecord[]): LogBatch => ({
  topic: records[0]!.topic,
  partition: 0,
  seq: ++seq,
  records: records.map((r, i) => ({ key: '', value: JSON.stringify(r.value), offset: String(Number(seq) * 100 + i) })),
});

const refs = [build.trader(1), build.source('src-1'), build.asset(1), build.price(1, iso(T - 2 * 86_400_000), 100)];
const opens = Array.from({ length: 5 }, (_, i) => build.event(100 + i, { positionId: 100 + i, timeOfEvent: iso(T + i * 60_000) }));
const closes = Array.from({ length: 5 }, (_, i) =>
  build.event(200 + i, { positionId: 100 + i, type: 'close', price: 110, timeOfEvent: iso(T + 86_400_000 + i * 60_000) }),
);
const early = [build.event(1, { positionId: 1, timeOfEvent: iso(T - 86_400_000) })];

/** Position history and open positions: the closes end the positions another process opened. */
const READS = ['/v2/positions?limit=200&startTime=2026-01-01T00:00:00Z', '/v2/positions/open?limit=200'];
const expectedReads = async () => Promise.all(READS.map(async (u) => (await reference.get(u, refKey)).body.data.results));

let reference: Harness;
let refKey: string;
beforeAll(async () => {
  reference = await createHarness();
  await reference.given([...refs, ...early, ...opens, ...closes]);
  refKey = await reference.key({ account: { id: 'r' } });
});
afterAll(async () => {
  await reference.close();
});

/** Two writers of one database: B writes first (and keeps state), A writes the opens, B the closes. */
async function twoWriters(forget: boolean): Promise<unknown> {
  const h = await createHarness();
  const a: Store = h.store;
  const b: Store = await h.openStore();
  const sa = new ProjectorSession(a);
  const sb = new ProjectorSession(b);
  for (const r of refs) await applyBatch(sa, batch([r]));
  await applyBatch(sb, batch(early)); // B now holds bounds of what the store had then
  await applyBatch(sa, batch(opens));
  if (forget) sb.reset(); // what a take-over does
  await applyBatch(sb, batch(closes));
  const key = await h.key({ account: { id: 'r' } });
  const res = await Promise.all(READS.map((u) => h.get(u, key)));
  await b.close();
  await h.close();
  return res.map((r) => r.body.data.results);
}

describe('a take-over between projector processes', () => {
  it('folds the closes onto the positions another process opened, as one writer does', async () => {
    const expected = await expectedReads();
    expect(expected[0]).toHaveLength(6);
    expect(expected[1].map((p: any) => p.id)).toEqual([1]); // only the early position is still open
    expect(await twoWriters(true)).toEqual(expected);
  });

  it('(the regression it guards against) without forgetting, the closes fold onto positions it thinks do not exist', async () => {
    expect(await twoWriters(false)).not.toEqual(await expectedReads());
  });
});
