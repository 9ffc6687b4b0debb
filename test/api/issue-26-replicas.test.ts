import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

/**
 * Issue 26: a commit ends exactly the cached answers it touches, on every API replica. In the
 * distributed wiring (DISTRIBUTED in vitest.config.ts) the harness serves its requests from two
 * replicas in turn, which learn each commit's changes through Redis; in the embedded wiring, from
 * the one process.
 */

const MIN = 60_000;
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
let h: Harness;
let key: string;

beforeAll(async () => {
  h = await createHarness();
  await h.given([
    ...[1, 2].flatMap((t) => [build.source(`src-${t}`), build.trader(t)]),
    build.asset(1),
    build.event(1, { traderId: 1, timeOfEvent: ago(10 * MIN) }),
    build.event(2, { traderId: 2, timeOfEvent: ago(10 * MIN) }),
  ]);
  key = await h.key();
});
afterAll(async () => {
  await h?.close();
});

const ids = async (url: string) => ((await h.get(url, key)).body.data.results as { id: number }[]).map((e) => e.id);

describe('issue 26: change tracking across replicas', () => {
  it("a commit of trader 1's event keeps trader 2's cached page on every replica and shows the event on every replica", async () => {
    const t1 = '/v2/events?traderIds=1&limit=5';
    const t2 = '/v2/events?traderIds=2&limit=5';
    // Each replica reads both pages once (the second replica finds them in the shared cache).
    for (let i = 0; i < 4; i++) await ids(i % 2 ? t2 : t1);
    await h.given([build.event(3, { traderId: 1, timeOfEvent: ago(MIN) })]);
    const spy = vi.spyOn(h.store, 'query');
    expect(await ids(t2)).toEqual([2]);
    expect(await ids(t2)).toEqual([2]);
    // The reads' queries (a key's answer, kept 5 s, may be looked up again on a slow machine).
    expect(spy.mock.calls.map(([sql]) => sql).filter((sql) => !/\$db\.(api_keys|accounts)\b/.test(sql))).toEqual([]);
    spy.mockRestore();
    expect(await ids(t1)).toEqual([3, 1]);
    expect(await ids(t1)).toEqual([3, 1]);
  });

  it('an event moved from trader 2 to trader 1 leaves the cached pages of both on every replica', async () => {
    const t1 = '/v2/events?traderIds=1&limit=5';
    const t2 = '/v2/events?traderIds=2&limit=5';
    for (let i = 0; i < 4; i++) await ids(i % 2 ? t2 : t1);
    await h.given([build.event(2, { traderId: 1, version: 2, timeOfEvent: ago(10 * MIN) })]);
    for (let i = 0; i < 2; i++) {
      expect(await ids(t2)).toEqual([]);
      expect(await ids(t1)).toEqual([3, 2, 1]);
    }
  });
});
