// Issue 6: a first page of open positions reads open_positions (the positions table's statements
// at open keys). A position that closes, reopens (its close deleted), moves or is deleted must
// leave or re-enter that page exactly as it does the positions table, whichever batch brings the
// change, also after the whole log is delivered again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness, type TopicRecord } from '../helpers/harness.ts';

let h: Harness;
/** Every record given so far, in order. */
const given: TopicRecord[] = [];
const give = async (records: TopicRecord[]) => {
  given.push(...records);
  await h.given(records);
};
let key: string;
const HOUR = 3600e3;
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

/** Ids on the first page of open positions (no filter: the page open_positions serves), and with a trader filter (the positions table). */
async function openIds(): Promise<{ all: number[]; trader1: number[] }> {
  const all = (await h.get('/v2/positions/open?limit=200', key)).body.data.results.map((p: any) => p.id);
  const trader1 = (await h.get('/v2/positions/open?traderIds=1&limit=200', key)).body.data.results.map((p: any) => p.id);
  return { all, trader1 };
}

beforeAll(async () => {
  h = await createHarness();
  await give([
    build.source('src-1'),
    build.trader(1, { name: 'Alice' }),
    build.trader(2, { name: 'Bob', source: null }),
    build.asset(1, { symbol: 'BTC' }),
    ...[10, 11, 12, 13].map((p, i) =>
      build.event(p * 10, { positionId: p, traderId: 1, assetId: 1, price: 100, timeOfEvent: ago((10 - i) * HOUR) }),
    ),
    build.price(1, ago(HOUR / 2), 110),
  ]);
  key = await h.key();
});
afterAll(async () => {
  await h?.close();
});

describe('open positions across batches', () => {
  it('lists every open position', async () => {
    expect(await openIds()).toEqual({ all: [13, 12, 11, 10], trader1: [13, 12, 11, 10] });
  });

  it('drops a position closed by a later batch, and lists it again when the close is deleted', async () => {
    await give([build.event(111, { positionId: 11, traderId: 1, assetId: 1, type: 'close', price: 105, timeOfEvent: ago(2 * HOUR) })]);
    expect(await openIds()).toEqual({ all: [13, 12, 10], trader1: [13, 12, 10] });
    await give([
      build.event(111, {
        positionId: 11,
        traderId: 1,
        assetId: 1,
        type: 'close',
        price: 105,
        timeOfEvent: ago(2 * HOUR),
        version: 2,
        deleted: true,
      }),
    ]);
    expect(await openIds()).toEqual({ all: [13, 12, 11, 10], trader1: [13, 12, 11, 10] });
  });

  it('follows a position whose open moves to another trader and time, and drops a deleted one', async () => {
    await give([
      build.event(120, { positionId: 12, traderId: 2, assetId: 1, price: 100, timeOfEvent: ago(HOUR), version: 2 }),
      build.event(130, { positionId: 13, traderId: 1, assetId: 1, price: 100, timeOfEvent: ago(7 * HOUR), version: 2, deleted: true }),
    ]);
    expect(await openIds()).toEqual({ all: [12, 11, 10], trader1: [11, 10] });
  });

  it('answers the same after the whole log is delivered again', async () => {
    const before = await openIds();
    await h.restartProjector();
    await h.given(given); // at-least-once: the log delivered again from the start
    expect(await openIds()).toEqual(before);
  });
});
