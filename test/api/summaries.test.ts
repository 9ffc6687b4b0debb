// Channel and aggregate summaries (contract sections 2, 4 and 8; issue 8): window overlap,
// includeLowSignal, newest windowStart first, pagination, visibility and the history window,
// against hand-written expectations and against the summaries oracle over random records,
// parameters and policies (every page walked). The array caps are enforced at ingest.
import { Compile } from 'typebox/compile';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ListEnvelope } from '../../schemas/api/envelope.ts';
import { AggregateSummary, ChannelSummary } from '../../schemas/api/resources.ts';
import { build, createHarness, type Harness, type TopicRecord } from '../helpers/harness.ts';
import { prng } from '../helpers/prng.ts';
import { type Policy, resolveWindow, type TopicRec } from '../oracle/oracle.ts';
import * as S from '../oracle/summaries.ts';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const NOW = Date.parse('2026-06-15T12:00:00.000Z');
const iso = (t: number) => new Date(t).toISOString();
const schemas = { channel: Compile(ListEnvelope(ChannelSummary, true)), aggregate: Compile(ListEnvelope(AggregateSummary, true)) };
const PATH = { channel: '/v2/channel-summaries', aggregate: '/v2/aggregate-summaries' } as const;
type Kind = keyof typeof PATH;

const channel = (id: string, traderId: number, start: number, end: number, over: Record<string, unknown> = {}): TopicRecord => ({
  topic: 'channel-summaries',
  value: {
    id,
    traderId,
    windowStart: iso(start),
    windowEnd: iso(end),
    generatedAt: iso(end + HOUR),
    status: 'safe',
    overview: `overview ${id}`,
    keyInsights: [`insight ${id}`],
    marketBias: 'bullish',
    mentionedAssets: [{ symbol: 'BTC', name: 'Bitcoin', stance: 'bullish', confidence: 'high' }],
    version: 1,
    ...over,
  },
});
const aggregate = (id: string, start: number, end: number, over: Record<string, unknown> = {}): TopicRecord => ({
  topic: 'aggregate-summaries',
  value: {
    id,
    windowStart: iso(start),
    windowEnd: iso(end),
    generatedAt: iso(end + HOUR),
    status: 'safe',
    headline: `headline ${id}`,
    overview: `overview ${id}`,
    dominantNarratives: ['n1'],
    contrarianTheses: [],
    marketDrivers: ['rates'],
    risks: ['r1'],
    assetSentiment: [
      {
        symbol: 'ETH',
        name: null,
        discussionRank: 1,
        sentiment: 'mixed',
        intensity: 'low',
        thesis: 't',
        drivers: [],
        contrarianAngle: null,
        confidence: 'medium',
      },
    ],
    coverage: { eligibleSourceCount: 10, activeSourceCount: 4, messageCount: 120, attachmentCount: 3 },
    version: 1,
    ...over,
  },
});

let h: Harness;
let key: string;
const records: TopicRec[] = [];

async function given(recs: TopicRecord[]) {
  records.push(...(recs as TopicRec[]));
  await h.given(recs);
}

async function page(kind: Kind, query: string, k = key) {
  const res = await h.get(`${PATH[kind]}${query}`, k);
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(schemas[kind].Check(res.body), JSON.stringify([...schemas[kind].Errors(res.body)].slice(0, 3))).toBe(true);
  return res.body.data as { results: any[]; meta: any };
}

/** Every row of a read, walking its pages. */
async function walk(kind: Kind, params: Record<string, string | number | boolean>, k = key): Promise<any[]> {
  const out: any[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 500; i++) {
    const qs = new URLSearchParams(Object.entries({ ...params, ...(cursor ? { cursor } : {}) }).map(([a, b]) => [a, String(b)]));
    const { results, meta } = await page(kind, `?${qs}`, k);
    out.push(...results);
    if (!meta.hasMore) return out;
    cursor = meta.nextCursor;
  }
  throw new Error('too many pages');
}

const ids = (rows: any[]) => rows.map((r) => r.id);

beforeAll(async () => {
  h = await createHarness({ clock: () => NOW });
  await given([
    build.source('src-1'),
    build.trader(1, { name: 'Alice' }),
    build.source('src-2', { platform: 'X' }),
    build.trader(2, { name: 'Bob', source: { platform: 'X', sourceIdentityId: 'src-2' } }),
    build.trader(3, { name: 'Carol', source: null }),
    channel('c1', 1, NOW - 3 * DAY, NOW - 2 * DAY),
    channel('c2', 2, NOW - 2 * DAY, NOW - DAY),
    channel('c3', 1, NOW - DAY, NOW, { status: 'low_signal' }),
    channel('c4', 3, NOW - 100 * DAY, NOW - 95 * DAY),
    channel('c5', 1, NOW - 2 * DAY, NOW - DAY), // ties c2 on windowStart: ids descending, c5 first
    aggregate('a1', NOW - 2 * DAY, NOW - DAY),
    aggregate('a2', NOW - DAY, NOW, { status: 'low_signal' }),
    aggregate('a3', NOW - 7 * DAY, NOW - 6 * DAY),
  ]);
  key = await h.key();
});
afterAll(async () => {
  await h?.close();
});

describe('GET /channel-summaries and /aggregate-summaries', () => {
  it('newest windowStart first (ties by id descending), only safe ones by default, over the 90-day default window', async () => {
    const c = await page('channel', '');
    expect(ids(c.results)).toEqual(['c5', 'c2', 'c1']);
    expect(c.meta.appliedTimeRange).toEqual({ startTime: iso(NOW - 90 * DAY), endTime: iso(NOW) });
    expect(ids((await page('aggregate', '')).results)).toEqual(['a1', 'a3']);
  });

  it('includeLowSignal=true adds the low_signal ones; the value must be a boolean', async () => {
    expect(ids((await page('channel', '?includeLowSignal=true')).results)).toEqual(['c3', 'c5', 'c2', 'c1']);
    expect(ids((await page('aggregate', '?includeLowSignal=true')).results)).toEqual(['a2', 'a1', 'a3']);
    expect(ids((await page('aggregate', '?includeLowSignal=false')).results)).toEqual(['a1', 'a3']);
    for (const bad of ['yes', '2', '']) expect((await h.get(`${PATH.aggregate}?includeLowSignal=${bad}`, key)).status, bad).toBe(400);
  });

  it('a window overlaps the bounds when it ends after startTime and starts before endTime (windowEnd exclusive)', async () => {
    // c1 is [NOW-3d, NOW-2d): it ends exactly at startTime = NOW-2d, so it does not overlap; c2 and c5 start at NOW-2d.
    expect(ids((await page('channel', `?startTime=${iso(NOW - 2 * DAY)}`)).results)).toEqual(['c5', 'c2']);
    expect(ids((await page('channel', `?startTime=${iso(NOW - 2 * DAY - 1)}`)).results)).toEqual(['c5', 'c2', 'c1']);
    // endTime = NOW-2d: c2 and c5 start exactly there (not before), c1 starts before.
    expect(ids((await page('channel', `?endTime=${iso(NOW - 2 * DAY)}`)).results)).toEqual(['c1', 'c4']);
    expect(ids((await page('channel', `?endTime=${iso(NOW - 2 * DAY + 1)}`)).results)).toEqual(['c5', 'c2', 'c1', 'c4']);
  });

  it('rows carry exactly the contract fields: no trader metadata or channel identity', async () => {
    const [c] = (await page('channel', `?startTime=${iso(NOW - 3 * DAY)}&endTime=${iso(NOW - 2 * DAY - 1)}`)).results;
    expect(c).toEqual({
      id: 'c1',
      traderId: 1,
      windowStart: iso(NOW - 3 * DAY),
      windowEnd: iso(NOW - 2 * DAY),
      generatedAt: iso(NOW - 2 * DAY + HOUR),
      status: 'safe',
      overview: 'overview c1',
      keyInsights: ['insight c1'],
      marketBias: 'bullish',
      mentionedAssets: [{ symbol: 'BTC', name: 'Bitcoin', stance: 'bullish', confidence: 'high' }],
    });
    const [a] = (await page('aggregate', `?startTime=${iso(NOW - 7 * DAY)}&endTime=${iso(NOW - 6 * DAY)}`)).results;
    expect(Object.keys(a).sort()).toEqual([
      'assetSentiment',
      'contrarianTheses',
      'coverage',
      'dominantNarratives',
      'generatedAt',
      'headline',
      'id',
      'marketDrivers',
      'overview',
      'risks',
      'status',
      'windowEnd',
      'windowStart',
    ]);
    expect(a.coverage).toEqual({ eligibleSourceCount: 10, activeSourceCount: 4, messageCount: 120, attachmentCount: 3 });
  });

  it("channel summaries follow message visibility and the trader's liveness; aggregate summaries need no visibility", async () => {
    const onlyX = await h.key({
      account: { messageVisibility: { mode: 'platforms', platforms: ['X'] }, signalVisibility: { mode: 'all' } },
    });
    expect(ids((await page('channel', '', onlyX)).results)).toEqual(['c2']);
    const noMessages = await h.key({ account: { messageVisibility: { mode: 'none' }, signalVisibility: { mode: 'all' } } });
    expect((await h.get(PATH.channel, noMessages)).status).toBe(403);
    expect(ids((await page('aggregate', '', noMessages)).results)).toEqual(['a1', 'a3']);
  });

  it('the history window clamps the start forward: summaries ending before it are left out', async () => {
    const twoDays = await h.key({ account: { historyWindowDays: 2 } });
    const c = await page('channel', `?startTime=${iso(NOW - 30 * DAY)}`, twoDays);
    expect(ids(c.results)).toEqual(['c5', 'c2']);
    expect(c.meta.appliedTimeRange.startTime).toBe(iso(NOW - 2 * DAY));
  });

  it('pages with keyset cursors, each row once', async () => {
    const all = await walk('channel', { includeLowSignal: true, limit: 1, startTime: iso(NOW - 200 * DAY) });
    expect(ids(all)).toEqual(['c3', 'c5', 'c2', 'c1', 'c4']);
  });

  it('a new version replaces a summary (also when its window moves); a tombstone removes it; a deleted trader takes its summaries along', async () => {
    await given([
      channel('c1', 1, NOW - 10 * DAY, NOW - 9 * DAY, { version: 2, overview: 'moved' }),
      aggregate('a3', NOW - 7 * DAY, NOW - 6 * DAY, { version: 2, deleted: true }),
    ]);
    const c = await page('channel', '');
    expect(ids(c.results)).toEqual(['c5', 'c2', 'c1']);
    expect(c.results[2]).toMatchObject({ windowStart: iso(NOW - 10 * DAY), overview: 'moved' });
    expect(ids((await page('aggregate', '')).results)).toEqual(['a1']);
    await given([build.trader(2, { name: 'Bob', source: { platform: 'X', sourceIdentityId: 'src-2' }, version: 2, deleted: true })]);
    expect(ids((await page('channel', '')).results)).toEqual(['c5', 'c1']);
  });

  it('a record over an array cap of contract section 8 is dead-lettered with its reason, never served truncated', async () => {
    const over = channel('c-over', 1, NOW - DAY, NOW - HOUR, { keyInsights: ['a', 'b', 'c', 'd'] });
    const over2 = aggregate('a-over', NOW - DAY, NOW - HOUR, { risks: ['1', '2', '3', '4', '5', '6'] });
    await h.given([over, over2]); // not oracle input: invalid records are no data
    expect(ids((await page('channel', '')).results)).not.toContain('c-over');
    expect(ids((await page('aggregate', '')).results)).not.toContain('a-over');
    const dead = await h.store.query<{ topic: string; reason: string; raw: string }>(
      "SELECT topic, reason, raw FROM $db.dead_letters FINAL WHERE topic IN ('channel-summaries', 'aggregate-summaries')",
    );
    expect(dead.map((d) => d.topic).sort()).toEqual(['aggregate-summaries', 'channel-summaries']);
    for (const d of dead) expect(d.reason).toMatch(/keyInsights|risks/);
    expect(dead.map((d) => JSON.parse(d.raw).id).sort()).toEqual(['a-over', 'c-over']);
  });
});

describe('summaries equal the oracle (random records, parameters and policies)', () => {
  it('every page walk of 60 random parameter sets under 6 policies', async () => {
    const r = prng(8);
    const recs: TopicRecord[] = [];
    for (let i = 0; i < 150; i++) {
      const start = NOW - r.int(0, 200) * DAY - r.int(0, 23) * HOUR;
      const end = start + r.pick([HOUR, DAY, 7 * DAY]);
      const over = { status: r.chance(0.25) ? 'low_signal' : 'safe', version: 1 };
      // Windows often share a start: ties go by id.
      recs.push(channel(`r-c${i % 7}-${i}`, r.int(1, 3), r.chance(0.2) ? NOW - 5 * DAY : start, end + (r.chance(0.2) ? 5 * DAY : 0), over));
      recs.push(aggregate(`r-a${i}`, start, end, over));
      if (r.chance(0.1)) recs.push(aggregate(`r-a${i}`, start, end, { ...over, version: 2, deleted: true }));
    }
    await given(recs);
    const policies: Policy[] = [
      { messageVisibility: { mode: 'all' }, signalVisibility: { mode: 'all' }, historyWindowDays: null },
      { messageVisibility: { mode: 'traders', traderIds: [1] }, signalVisibility: { mode: 'none' }, historyWindowDays: null },
      { messageVisibility: { mode: 'platforms', platforms: ['TELEGRAM'] }, signalVisibility: { mode: 'all' }, historyWindowDays: 30 },
      { messageVisibility: { mode: 'all' }, signalVisibility: { mode: 'all' }, historyWindowDays: 120 },
      { messageVisibility: { mode: 'traders', traderIds: [2, 3] }, signalVisibility: { mode: 'all' }, historyWindowDays: 7 },
      { messageVisibility: { mode: 'platforms', platforms: ['X'] }, signalVisibility: { mode: 'none' }, historyWindowDays: null },
    ];
    const keys = await Promise.all(policies.map((p) => h.key({ account: p as any })));
    let compared = 0;
    for (let i = 0; i < 60; i++) {
      const q: Record<string, string | number | boolean> = { limit: r.pick([1, 3, 10, 200]) };
      const t = () => NOW - r.int(-5, 210) * DAY + r.int(0, 23) * HOUR;
      if (r.chance(0.6)) q.startTime = iso(t());
      if (r.chance(0.5)) q.endTime = iso(t());
      if (q.startTime && q.endTime && Date.parse(q.startTime as string) > Date.parse(q.endTime as string))
        [q.startTime, q.endTime] = [q.endTime, q.startTime];
      if (r.chance(0.5)) q.includeLowSignal = r.chance(0.7);
      const p = r.int(0, policies.length - 1);
      const window = resolveWindow(q as any, NOW, false, policies[p]!.historyWindowDays);
      const f = { window, includeLowSignal: q.includeLowSignal === true, policy: policies[p]! };
      expect(await walk('channel', q, keys[p]), `channel ${JSON.stringify(q)} policy ${p}`).toEqual(S.channelSummaries(records, f));
      expect(await walk('aggregate', q, keys[p]), `aggregate ${JSON.stringify(q)} policy ${p}`).toEqual(S.aggregateSummaries(records, f));
      compared += 2;
    }
    expect(compared).toBe(120);
    // 120 page walks, many of them a row per page: over the distributed wiring on a loaded machine, more than a minute.
  }, 180_000);
});
