// Issue 28, the long-poll failure of CI run d95fa02: a held since-poll kept a group that a change
// of its trader had removed. A group is judged by the traders, assets and identities when a poll
// reads its stamp; the API kept those facts until a commit said they changed, and took the feed's
// watermark from any commit. The projector's lanes commit apart: a messages commit made known
// before the commit of a trader's deletion carried a watermark above the deletion's stamps, so a
// poll passed them judged by facts from before it, and nothing stamped those groups again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Commit } from '../../projectors/runner.ts';
import { cachedAndFresh } from '../helpers/cached-and-fresh.ts';
import { appendGiven, build, createHarness, type Harness } from '../helpers/harness.ts';

const NOW = Date.parse('2026-06-15T12:00:00.000Z');
const clock = { now: NOW };
const iso = (t: number) => new Date(t).toISOString();
/** How long before NOW group m-n was written (the feed's order: m-4, m-2, m-3, m-1). */
const groupAge = (n: number) => [3_600_000, 1_800_000, 3_000_000, 1_200_000][n - 1]!;

/** While set, the commit of a traders batch is held back here (its writes are stored). */
let gate: { reached: () => void; release: Promise<void> } | undefined;
const beforeAnnounce = async (c: Commit) => {
  const g = gate;
  if (g && c.batches.some((b) => b.topic === 'traders')) {
    g.reached();
    await g.release;
  }
};

let h: Harness;
let apps: Awaited<ReturnType<typeof cachedAndFresh>>;
let key: string;

beforeAll(async () => {
  h = await createHarness({ clock: () => clock.now, beforeAnnounce });
  await h.given([
    build.asset(1),
    // Traders 1 and 3 on Telegram, 2 and 4 on X; each with its source and one group (m-n, event 100 + n).
    ...[1, 2, 3, 4].flatMap((n) => {
      const platform = n % 2 ? 'TELEGRAM' : 'X';
      const at = iso(NOW - groupAge(n));
      return [
        build.source(`src-${n}`, { platform }),
        build.trader(n, { source: { platform, sourceIdentityId: `src-${n}` } }),
        build.message(`m-${n}`, `src-${n}`, at, { platform }),
        build.event(100 + n, { traderId: n, assetId: 1, messageId: `m-${n}`, timeOfEvent: at }),
      ];
    }),
  ]);
  key = await h.key();
  apps = await cachedAndFresh(h, clock);
});
afterAll(async () => {
  await apps?.close();
  await h?.close();
});

async function feed(app: 'cached' | 'fresh', query: string): Promise<{ results: { id: string }[]; meta: any }> {
  const res = await apps[app].inject({ method: 'GET', url: `/v2/feed?${query}`, headers: { 'x-api-key': key } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data;
}

/** Polls the cached app from `since` until nothing is new; applies each answer to `held`. */
async function pollAll(held: Set<string>, since: string): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const { results, meta } = await feed('cached', `since=${encodeURIComponent(since)}&limit=100`);
    for (const g of results) held.add(g.id);
    for (const id of meta.removedIds) held.delete(id);
    since = meta.nextCursor;
    if (!meta.hasMore && !results.length && !meta.removedIds.length) return since;
  }
  throw new Error('the feed did not settle');
}

/**
 * Runs `during` while trader `traderId`'s deletion is stored and its commit held back, after a
 * later messages commit (an edit of `edited`, stamped after the deletion's stamps) is made known.
 */
async function whileDeletionHeld(traderId: number, edited: { id: string; source: string; at: number }, during: () => Promise<void>) {
  let reached!: () => void;
  let release!: () => void;
  const atGate = new Promise<void>((resolve) => (reached = resolve));
  gate = { reached, release: new Promise<void>((resolve) => (release = resolve)) };
  try {
    appendGiven(h.log, [build.trader(traderId, { version: 2, deleted: true })]);
    await atGate;
    const version = h.dataVersion();
    appendGiven(h.log, [build.message(edited.id, edited.source, iso(edited.at), { platform: 'X', version: 2, text: 'edited' })]);
    for (let i = 0; i < 500 && h.dataVersion() === version; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(h.dataVersion(), 'the messages commit is made known').toBeGreaterThan(version);
    await during();
  } finally {
    release();
    gate = undefined;
  }
  await h.settle();
}

describe('issue 28: a since-poll never passes a stamp judged by facts older than it', () => {
  it("a trader's deletion committed after a later messages commit still removes its groups from a poller", async () => {
    const held = new Set<string>();
    let since = await pollAll(held, '0');
    expect([...held].sort()).toEqual(['m-1', 'm-2', 'm-3', 'm-4']);

    // Trader 1 is deleted (stored, its commit held back); meanwhile the messages lane commits an
    // edit of m-2, stamped after the deletion's stamps, and the poller polls.
    await whileDeletionHeld(1, { id: 'm-2', source: 'src-2', at: NOW - groupAge(2) }, async () => {
      since = await pollAll(held, since);
    });
    await pollAll(held, since);

    // Contract 4: a deleted trader's groups leave the feed, and a poller learns it.
    const fresh = await feed('fresh', 'limit=100&startTime=2000-01-01T00:00:00.000Z');
    expect(fresh.results.map((g) => g.id)).toEqual(['m-4', 'm-2', 'm-3']);
    expect([...held].sort(), 'the groups the poller holds').toEqual(['m-2', 'm-3', 'm-4']);
  });

  it("a new partner's export and its x-feed-since, taken while a trader's deletion is not yet known, lead to its removal", async () => {
    const held = new Set<string>();
    let since = '';
    await whileDeletionHeld(3, { id: 'm-4', source: 'src-4', at: NOW - groupAge(4) }, async () => {
      const res = await apps.cached.inject({ method: 'GET', url: '/v2/exports/feed?format=ndjson', headers: { 'x-api-key': key } });
      expect(res.statusCode, res.body).toBe(200);
      for (const line of res.payload.split('\n').filter(Boolean)) held.add(JSON.parse(line).id);
      since = String(res.headers['x-feed-since']);
    });
    await pollAll(held, since);
    const fresh = await feed('fresh', 'limit=100&startTime=2000-01-01T00:00:00.000Z');
    expect(fresh.results.map((g) => g.id)).toEqual(['m-4', 'm-2']);
    expect([...held].sort(), 'the groups the partner holds').toEqual(['m-2', 'm-4']);
  });
});
