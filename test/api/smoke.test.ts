import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

describe('harness smoke', () => {
  it('serves an event given through the log', async () => {
    await h.given([
      build.source('src-1'),
      build.trader(1),
      build.asset(1),
      build.event(10, { timeOfEvent: new Date(Date.now() - 3600e3).toISOString() }),
    ]);
    const key = await h.key();
    const res = await h.get('/v2/events', key);
    expect(res.status).toBe(200);
    expect(res.body.data.results.map((e: any) => e.id)).toEqual([10]);
  });
});
