import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import { specStart } from '../helpers/spec-clock.ts';

/**
 * Issue 28: the positions export reads each position's latest evaluation per window. When a
 * correction takes the forward price away, the position's 1D evaluation goes from `ready` with a
 * return to `missing_forward_price` with none: the export must then say null, as the list read
 * does, never the return of the evaluation it replaced (the store's argMax skips NULL values).
 */

const MIN = 60_000;
const DAY = 24 * 60 * MIN;
const NOW = specStart();
const iso = (ms: number) => new Date(ms).toISOString();
const OPEN = NOW - 3 * DAY;
const FORWARD = iso(OPEN + DAY + 5 * MIN);

describe('the positions export after a forward price is deleted (issue 28)', () => {
  let h: Harness;
  let key: string;
  beforeAll(async () => {
    h = await createHarness({ clock: () => NOW });
    await h.given([
      build.source('src-1'),
      build.trader(1),
      build.asset(1),
      build.price(1, iso(OPEN - DAY), 90),
      build.price(1, FORWARD, 125),
      build.event(1, { traderId: 1, assetId: 1, price: 100, timeOfEvent: iso(OPEN) }),
    ]);
    key = await h.key();
  }, 120_000);
  afterAll(async () => {
    await h?.close();
  });

  const get = async (url: string) => {
    const res = await h.app.inject({ method: 'GET', url, headers: { 'x-api-key': key } });
    expect(res.statusCode, res.body).toBe(200);
    return res;
  };
  const exported = async () => {
    const lines = (await get(`/v2/exports/positions?startTime=${iso(OPEN - DAY)}`)).body.split('\n').filter(Boolean);
    return lines.map((l) => JSON.parse(l));
  };
  const listed = async () => (await get(`/v2/positions?startTime=${iso(OPEN - DAY)}`)).json().data.results;

  it('says the 1D return is null once its forward price is gone, as the list read says', async () => {
    const [before] = await exported();
    // 125 against an entry of 100: a 25 % return.
    expect(before.timeBasedPerformances['1D']).toMatchObject({ window: '1D', status: 'ready', returnPercentage: 25 });

    await h.given([build.price(1, FORWARD, 125, { version: 2, deleted: true })]);
    const [after] = await exported();
    expect(after.timeBasedPerformances['1D']).toMatchObject({ window: '1D', status: 'missing_forward_price', returnPercentage: null });
    const [row] = await listed();
    const { resumeToken: _token, ...item } = after;
    expect(item).toEqual(row);
  });
});
