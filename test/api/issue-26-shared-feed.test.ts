// Issue 26: the partners of one policy polling the feed share its cached answers (a commit costs
// one read per policy and watermark, not one per partner), and still each get a cursor of their
// own, a dataComputedAt of their own (issue 24: never another account's moment), and the cursor
// check: another account's cursor is refused whatever the cache holds.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

const MIN = 60_000;
const DAY = 24 * 60 * MIN;
const NOW = Date.parse('2026-06-15T12:00:00.000Z');
const iso = (t: number) => new Date(t).toISOString();

let h: Harness;
let now = NOW;
let a: string;
let b: string;
let restricted: string;

async function poll(url: string, k: string) {
  const res = await h.get(url, k);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { data: res.body.data as { results: { id: string }[]; meta: any }, cache: res.headers['x-cache'] };
}
const since = (cursor: string) => `/v2/feed?since=${encodeURIComponent(cursor)}&limit=100`;

beforeAll(async () => {
  h = await createHarness({ clock: () => now });
  await h.given([
    build.source('src-1'),
    build.trader(1),
    build.asset(1),
    build.message('m1', 'src-1', iso(NOW - DAY)),
    build.event(1, { messageId: 'm1', positionId: 1, timeOfEvent: iso(NOW - DAY) }),
  ]);
  a = await h.key({ account: { id: 'partner-a' } });
  b = await h.key({ account: { id: 'partner-b' } });
  restricted = await h.key({ account: { id: 'partner-c', historyWindowDays: 1 } });
});
afterAll(() => h?.close());

describe('issue 26: partners of one policy share the feed answers they poll', () => {
  it('a since-poll at the watermark another partner of the policy just polled is served without a read, with its own cursor and moment', async () => {
    now = NOW;
    const startA = (await poll('/v2/feed?since=0&limit=100', a)).data.meta.nextCursor as string;
    const startB = (await poll('/v2/feed?since=0&limit=100', b)).data.meta.nextCursor as string;

    await h.given([
      build.message('m2', 'src-1', iso(NOW - MIN)),
      build.event(2, { messageId: 'm2', positionId: 2, timeOfEvent: iso(NOW - MIN) }),
    ]);
    now = NOW + MIN;
    const first = await poll(since(startA), a);
    expect(first.cache).toBe('miss');
    expect(first.data.results.map((g) => g.id)).toEqual(['m2']);
    expect(first.data.meta.dataComputedAt).toBe(iso(NOW + MIN));

    now = NOW + 2 * MIN;
    const second = await poll(since(startB), b);
    expect(second.cache, "b's poll is a's answer").toBe('hit');
    expect(second.data.results).toEqual(first.data.results);
    // Its own moment: the answer does not tell b when a polled.
    expect(second.data.meta.dataComputedAt).toBe(iso(NOW + 2 * MIN));
    expect(second.data.meta.nextCursor).not.toBe(first.data.meta.nextCursor);

    // Each cursor goes on for its own account, at the same watermark, and for no other.
    now = NOW + 3 * MIN;
    expect((await poll(since(second.data.meta.nextCursor), b)).data.results).toEqual([]);
    expect((await poll(since(first.data.meta.nextCursor), a)).data.results).toEqual([]);
    const stolen = await h.get(since(first.data.meta.nextCursor), b);
    expect(stolen.status).toBe(400);
    expect(stolen.body.error.code).toBe('INVALID_CURSOR');

    // A cursor with since is no since-poll, cached answer or not.
    const both = await h.get(`${since(startB)}&cursor=${encodeURIComponent(startB)}`, b);
    expect(both.status).toBe(400);
    expect(both.body.error.code).toBe('VALIDATION_ERROR');

    // Polled again, each answer says the moment of that account's own first answer.
    now = NOW + 4 * MIN;
    expect((await poll(since(startB), b)).data.meta.dataComputedAt).toBe(iso(NOW + 2 * MIN));
    expect((await poll(since(startA), a)).data.meta.dataComputedAt).toBe(iso(NOW + MIN));
  });

  it('a partner of another policy reads for itself: a one-day history window sees only the new group', async () => {
    now = NOW + 5 * MIN;
    const start = (await poll('/v2/feed?since=0&limit=100', restricted)).data;
    expect(start.results.map((g) => g.id)).toEqual(['m2']);
    const cached = await poll('/v2/feed?since=0&limit=100', a);
    expect(cached.data.results.map((g) => g.id)).toEqual(['m1', 'm2']);
  });

  it('first pages are shared too, each with its own cursor and moment, and end with the next commit', async () => {
    now = NOW + 6 * MIN;
    const pa = await poll('/v2/feed?limit=1', a);
    now = NOW + 7 * MIN;
    const pb = await poll('/v2/feed?limit=1', b);
    expect(pb.cache).toBe('hit');
    expect(pb.data.results).toEqual(pa.data.results);
    expect(pb.data.meta.dataComputedAt).toBe(iso(NOW + 7 * MIN));
    expect(pa.data.meta.dataComputedAt).toBe(iso(NOW + 6 * MIN));
    expect((await poll(`/v2/feed?limit=1&cursor=${encodeURIComponent(pb.data.meta.nextCursor)}`, b)).data.results.map((g) => g.id)).toEqual(
      ['m1'],
    );
    const stolen = await h.get(`/v2/feed?limit=1&cursor=${encodeURIComponent(pa.data.meta.nextCursor)}`, b);
    expect(stolen.status).toBe(400);

    await h.given([
      build.message('m3', 'src-1', iso(NOW + 7 * MIN)),
      build.event(3, { messageId: 'm3', positionId: 3, timeOfEvent: iso(NOW + 7 * MIN) }),
    ]);
    now = NOW + 8 * MIN;
    const after = await poll('/v2/feed?limit=1', b);
    expect(after.cache).toBe('miss');
    expect(after.data.results.map((g) => g.id)).toEqual(['m3']);
  });
});
