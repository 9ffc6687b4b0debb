import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { toolDefinition } from '../../apps/mcp/tools.ts';
import { OPERATIONS } from '../../apps/registry.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

/**
 * Issue 28, for pollers: `since=now` starts at the feed's head (no history replayed), and `wait=N`
 * holds an empty since-poll until a group the caller can see is committed, or N seconds pass.
 * While held, a poll costs no query; a commit the caller cannot see (a group on a platform its
 * account does not see) does not answer it early; every since-poll says X-Poll-Interval.
 */
const MIN = 60_000;
const T0 = Date.now() - 60 * MIN;
const iso = (t: number) => new Date(t).toISOString();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A feed group: a message of trader `trader`'s source (trader 2's is on X, the others' on TELEGRAM) and its open event. */
const platformOf = (trader: number) => (trader === 2 ? 'X' : 'TELEGRAM');
const group = (n: number, trader: number) => [
  build.message(`m-${n}`, `src-${trader}`, iso(T0 + n * MIN), { platform: platformOf(trader) }),
  build.event(100 + n, { traderId: trader, assetId: 1, messageId: `m-${n}`, timeOfEvent: iso(T0 + n * MIN) }),
];
const ids = (body: any) => (body.data.results as { id: string }[]).map((g) => g.id);
const since = (cursor: string) => encodeURIComponent(cursor);

describe('issue 28: the feed head and long-polls', () => {
  let h: Harness;
  let key: string;
  /** An account that sees TELEGRAM only (messages and signals). */
  let telegram: string;

  beforeAll(async () => {
    h = await createHarness();
    await h.given([
      build.source('src-1'),
      build.source('src-2', { platform: 'X' }),
      build.trader(1),
      build.trader(2, { source: { platform: 'X', sourceIdentityId: 'src-2' } }),
      build.asset(1),
      build.price(1, iso(T0 - MIN), 100),
      ...group(0, 1),
    ]);
    key = await h.key();
    const tg = { mode: 'platforms' as const, platforms: ['TELEGRAM' as const] };
    telegram = await h.key({ account: { id: 'telegram-only', messageVisibility: tg, signalVisibility: tg } });
  });
  afterAll(async () => {
    await h?.close();
  });

  it('since=now answers no groups and the head watermark; polling from it brings exactly the groups committed after', async () => {
    const history = await h.get('/v2/feed?since=0', key);
    expect(ids(history.body)).toEqual(['m-0']);
    const head = await h.get('/v2/feed?since=now', key);
    expect(head.status).toBe(200);
    expect(head.body.data.results).toEqual([]);
    expect(head.body.data.meta.removedIds).toEqual([]);
    expect(head.body.data.meta.hasMore).toBe(false);
    expect(head.headers['x-poll-interval']).toBe('5');
    await h.given(group(1, 1));
    const next = await h.get(`/v2/feed?since=${since(head.body.data.meta.nextCursor)}`, key);
    expect(ids(next.body)).toEqual(['m-1']);
    // The head's cursor is the watermark a since-poll from 0 ends at, once drained.
    const drained = await h.get(`/v2/feed?since=${since(history.body.data.meta.nextCursor)}`, key);
    expect(ids(drained.body)).toEqual(['m-1']);
  });

  it('wait holds an empty poll, running no query while held, and answers as soon as a group is committed', async () => {
    const head = (await h.get('/v2/feed?since=now', key)).body.data.meta.nextCursor;
    const spy = vi.spyOn(h.store, 'query');
    try {
      const t0 = Date.now();
      const held = h.get(`/v2/feed?since=${since(head)}&wait=20`, key);
      await sleep(400);
      const before = spy.mock.calls.length;
      await sleep(600);
      expect(spy.mock.calls.length, 'queries while held').toBe(before);
      await h.given(group(2, 2));
      const answer = await held;
      expect(answer.status).toBe(200);
      expect(ids(answer.body)).toEqual(['m-2']);
      expect(Date.now() - t0).toBeLessThan(15_000);
    } finally {
      spy.mockRestore();
    }
  });

  it('since=now with wait answers with the first group committed while it is held (the head is where the poll started)', async () => {
    const held = h.get('/v2/feed?since=now&wait=20', key);
    await sleep(500);
    await h.given(group(3, 1));
    const answer = await held;
    expect(answer.status).toBe(200);
    expect(ids(answer.body)).toEqual(['m-3']);
  });

  it("a poll is not answered for a group its account cannot see: it answers at the end of its wait (13 s, past the reads' 10 s deadline) with none, and misses nothing after", async () => {
    const head = (await h.get('/v2/feed?since=now', telegram)).body.data.meta.nextCursor;
    const t0 = Date.now();
    const held = h.get(`/v2/feed?since=${since(head)}&wait=13`, telegram);
    await sleep(200);
    await h.given(group(3, 2)); // on X
    const answer = await held;
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(12_900);
    expect(answer.body.data.results).toEqual([]);
    expect(answer.body.data.meta.removedIds).toEqual([]);
    await h.given(group(4, 1));
    const next = await h.get(`/v2/feed?since=${since(answer.body.data.meta.nextCursor)}&wait=5`, telegram);
    expect(ids(next.body)).toEqual(['m-4']);
  });

  it('a commit wakes 100 held polls of 20 accounts at once: every one answers with the group, none is refused by admission (64 may wait there)', async () => {
    const keys: string[] = [];
    for (let i = 0; i < 20; i++) keys.push(await h.key({ account: { id: `poller-${i}` } }));
    const heads = await Promise.all(keys.map(async (k) => (await h.get('/v2/feed?since=now', k)).body.data.meta.nextCursor as string));
    const held: Promise<{ status: number; body: any }>[] = [];
    for (let i = 0; i < 100; i++) {
      held.push(h.get(`/v2/feed?since=${since(heads[i % 20]!)}&wait=20`, keys[i % 20]));
      // Each poll's first read takes its turn at admission like any read: a few at a time.
      if (i % 5 === 4) await sleep(40);
    }
    await sleep(500);
    await h.given(group(5, 1));
    const answers = await Promise.all(held);
    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    for (const a of answers) expect(ids(a.body)).toEqual(['m-5']);
  });

  it('polls of accounts with one policy share the read a commit wakes them to; each answer carries its own cursor, and a policy of its own reads for itself', async () => {
    const keys: string[] = [];
    for (let i = 0; i < 10; i++) keys.push(await h.key({ account: { id: `sharer-${i}` } }));
    const everyone = [...keys, telegram];
    const heads = await Promise.all(everyone.map(async (k) => (await h.get('/v2/feed?since=now', k)).body.data.meta.nextCursor as string));
    const held = everyone.map((k, i) => h.get(`/v2/feed?since=${since(heads[i]!)}&wait=20`, k));
    await sleep(500);
    const spy = vi.spyOn(h.store, 'query');
    await h.given(group(7, 1));
    const answers = await Promise.all(held);
    // The stamps read after the commit: one read for the ten accounts of one policy, one for the TELEGRAM-only account.
    const stampReads = spy.mock.calls.filter(([q]) => /feed_changes AS c WHERE fseq >/.test(String(q))).length;
    spy.mockRestore();
    expect(stampReads).toBe(2);
    for (const a of answers) expect(ids(a.body)).toEqual(['m-7']);
    // Each cursor is its own account's: it polls on from the group for its account, and is refused for another.
    for (let i = 0; i < everyone.length; i++) {
      const next = answers[i]!.body.data.meta.nextCursor as string;
      const own = await h.get(`/v2/feed?since=${since(next)}`, everyone[i]);
      expect(own.status).toBe(200);
      expect(ids(own.body)).toEqual([]);
      const other = await h.get(`/v2/feed?since=${since(next)}`, everyone[(i + 1) % everyone.length]);
      expect(other.status).toBe(400);
    }
  });

  it('woken polls answer what a poll from the same cursor answers (each its own requestId; one ETag per account)', async () => {
    const keys = [await h.key({ account: { id: 'twice-0' } }), await h.key({ account: { id: 'twice-1' } })];
    const heads = await Promise.all(keys.map(async (k) => (await h.get('/v2/feed?since=now', k)).body.data.meta.nextCursor as string));
    // Two polls of each account: one answer is made per account, and sent to each of its polls.
    const held = [0, 0, 1, 1].map((i) => h.get(`/v2/feed?since=${since(heads[i]!)}&wait=20`, keys[i]));
    await sleep(500);
    await h.given(group(8, 1));
    const answers = await Promise.all(held);
    const requestIds = new Set<string>();
    for (const [n, i] of [0, 0, 1, 1].entries()) {
      const woken = answers[n]!;
      const plain = await h.get(`/v2/feed?since=${since(heads[i]!)}`, keys[i]);
      expect(woken.status).toBe(200);
      expect(woken.headers['content-type']).toMatch(/^application\/json/);
      expect(woken.body.success).toBe(true);
      expect(ids(woken.body)).toEqual(['m-8']);
      const { serverTime: _a, dataComputedAt: _b, ...meta } = woken.body.data.meta;
      const { serverTime: _c, dataComputedAt: _d, ...plainMeta } = plain.body.data.meta;
      expect(woken.body.data.results).toEqual(plain.body.data.results);
      expect(meta).toEqual(plainMeta);
      requestIds.add(woken.body.requestId);
    }
    expect(requestIds.size).toBe(4);
    expect(answers[0]!.headers.etag).toBe(answers[1]!.headers.etag);
    expect(answers[2]!.headers.etag).toBe(answers[3]!.headers.etag);
    expect(answers[0]!.headers.etag).not.toBe(answers[2]!.headers.etag);
  });

  it('a poll that has changes answers at once, wait or not', async () => {
    const t0 = Date.now();
    const answer = await h.get('/v2/feed?since=0&wait=30', key);
    expect(answer.body.data.results.length).toBeGreaterThan(0);
    expect(Date.now() - t0).toBeLessThan(5_000);
  });

  it('wait is 1..30 seconds, only with since, and a REST parameter only (not the MCP tool)', async () => {
    for (const url of ['/v2/feed?since=now&wait=0', '/v2/feed?since=now&wait=31', '/v2/feed?wait=5', '/v2/feed?since=now&wait=1.5']) {
      const res = await h.get(url, key);
      expect(res.status, url).toBe(400);
      expect(res.body.error.code, url).toBe('VALIDATION_ERROR');
    }
    // A page (no since) is not a poll: no X-Poll-Interval.
    expect((await h.get('/v2/feed', key)).headers['x-poll-interval']).toBeUndefined();
    const feed = OPERATIONS.find((o) => o.tool === 'list_feed')!;
    expect(Object.keys(toolDefinition(feed).inputSchema.properties ?? {})).not.toContain('wait');
  });
});

describe('issue 28: a server that closes', () => {
  it('answers its held polls at once (a poller retries) instead of waiting out their waits', async () => {
    const h = await createHarness();
    let closed = false;
    try {
      await h.given([build.source('src-1'), build.trader(1), build.asset(1)]);
      const key = await h.key();
      const head = (await h.get('/v2/feed?since=now', key)).body.data.meta.nextCursor;
      const t0 = Date.now();
      const held = h.get(`/v2/feed?since=${since(head)}&wait=25`, key);
      await sleep(300);
      await h.close();
      closed = true;
      const answer = await held;
      expect(answer.status).toBe(200);
      expect(answer.body.data.results).toEqual([]);
      expect(Date.now() - t0).toBeLessThan(10_000);
    } finally {
      if (!closed) await h.close();
    }
  });
});
