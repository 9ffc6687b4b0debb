// The five analytics reads (/traders/stats, /assets/stats, /traders/rankings, /activity-summaries,
// /traders/activity) against the independent brute-force oracle (test/oracle/analytics.ts, itself
// checked by hand in test/oracle/analytics.test.ts):
//
// 1. the hand-built record set (handRecords) served by a harness of its own, every case of the
//    oracle's unit tests asked through the API at the serverTime the case was worked out for;
// 2. the small demo data set (plus multi-byte and shared-source extras), random parameter sets
//    (seeded PRNG: the same cases on every run) under random access policies (visibility all /
//    none / platforms / traders, history windows), on a server clock the test moves forward
//    between cases. The clock starts 36 h before the data's `now`, and the events and messages of
//    those 36 h are left out, so that only price samples lie ahead of serverTime: as the clock
//    moves, positions' windows come of age and become `ready` (`too_young` while
//    serverTime < openAt + window). Some cases ask the same question at E - 1 ms and at E for such
//    a window's E (a cached answer must not outlive it), some repeat an earlier case later.
//
// Every answer is compared whole with the oracle's answer at the response's `meta.serverTime`
// (errors: status, code and details at the clock's time). Numbers: relative tolerance 1e-9 (and
// 1e-9 absolute near zero); counts, ids, order and nulls exactly, except that rankings may order
// two traders whose metric values differ only by rounding either way. A quarter of the requests go
// over a real socket (fetch), the rest through fastify's inject; trader activity is walked page by
// page with the list reads' walker. Mismatches are collected per read and reported together.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CORRECTION_LIMITS } from '../../apps/reads/analytics/activity-counts.ts';
import { SAMPLE_LIMITS } from '../../apps/reads/analytics/sample.ts';
import { generateDemo } from '../../projectors/demo/generate.ts';
import { createHarness, type Harness } from '../helpers/harness.ts';
import * as A from '../oracle/analytics.ts';
import { HAND, handRecords } from '../oracle/analytics.ts';
import * as O from '../oracle/oracle.ts';
import { EXTRA, multiByteRecords } from '../oracle/oracle-data.ts';
import { expectSameList, prng, type Rng, url, walk } from '../oracle/walk.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const iso = (t: number) => new Date(t).toISOString();
const csv = (xs: readonly (string | number)[]) => xs.join(',');

const { ALL, NONE, traders, pol, OPEN } = A.policies;
type Read = A.Read;
const READ_NAMES: Read[] = ['traderStats', 'assetStats', 'rankings', 'activity', 'traderActivity'];

// ---------------------------------------------------------------------------------------------------
// A served world: harness, clock, records, keys per policy, and the comparison of one request

interface Served {
  h: Harness;
  clock: { now: number };
  records: O.TopicRec[];
  base: string;
  keys: Map<string, string>;
}

async function serve(records: O.TopicRec[], start: number): Promise<Served> {
  const clock = { now: start };
  const h = await createHarness({ clock: () => clock.now });
  await h.given(records);
  const base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  return { h, clock, records, base, keys: new Map() };
}

async function keyFor(s: Served, p: O.Policy): Promise<string> {
  const id = JSON.stringify(p);
  let key = s.keys.get(id);
  if (key === undefined) {
    key = await s.h.key({
      account: {
        messageVisibility: p.messageVisibility as any,
        signalVisibility: p.signalVisibility as any,
        historyWindowDays: p.historyWindowDays,
      },
    });
    s.keys.set(id, key);
  }
  return key;
}

const stats = {
  comparisons: 0,
  a4Distinguishing: 0,
  bySocket: 0,
  errors: 0,
  nonEmpty: 0,
  tolerantRankingOrder: 0,
  serverTimeOffClock: 0,
  pages: 0,
  perRead: Object.fromEntries(READ_NAMES.map((r) => [r, 0])) as Record<Read, number>,
  codes: {} as Record<string, number>,
};
const failures: Record<Read, string[]> = { traderStats: [], assetStats: [], rankings: [], activity: [], traderActivity: [] };
let requestNo = 0;

async function get(s: Served, path: string, key: string): Promise<{ status: number; body: any }> {
  if (++requestNo % 4 === 0) {
    stats.bySocket++;
    const res = await fetch(s.base + path, { headers: { 'x-api-key': key } });
    return { status: res.status, body: await res.json() };
  }
  return s.h.get(path, key);
}

/** Whether the oracle's answer has something in it (rows, groups, or a row with a position). */
function nonEmpty(read: Read, ans: A.Answer): boolean {
  if (ans.status !== 200) return false;
  const d = (ans as any).data;
  switch (read) {
    case 'traderStats':
      return d.results.some((r: any) => r.summary.positionCount > 0);
    case 'assetStats':
      return d.results.some((r: any) => r.summary.marketPositioning.label !== 'none');
    case 'activity':
      return d.results.some((g: any) => g.messageCount + g.eventCount > 0);
    default:
      return d.results.length > 0;
  }
}

/**
 * Rankings: everything but the order of near-equal metric values exactly. The API's rows must be
 * in its own order exactly (its metricValue descending, nulls last, positionCount descending,
 * trader id ascending), each row must equal the oracle's row of that trader, and the i-th metric
 * value must equal (within tolerance) the oracle's i-th: so only traders whose values differ by
 * rounding may swap places.
 */
function compareRankings(actual: any, exp: any, candidates: A.RankingCandidate[]): string | null {
  const head = A.diff({ filtersApplied: actual.filtersApplied, meta: actual.meta }, { filtersApplied: exp.filtersApplied, meta: exp.meta });
  if (head) return head;
  if (actual.results.map((r: any) => r.traderId).join() === exp.results.map((r: any) => r.traderId).join())
    return A.diff(actual.results, exp.results, '$.results');
  if (actual.results.length !== exp.results.length)
    return `$.results: ${actual.results.length} rows, expected ${exp.results.length}: got ${actual.results.map((r: any) => r.traderId)}, expected ${exp.results.map((r: any) => r.traderId)}`;
  const byId = new Map(candidates.map((c) => [c.traderId, c]));
  for (let i = 0; i < actual.results.length; i++) {
    const r = actual.results[i];
    const c = byId.get(r.traderId);
    if (!c) return `$.results[${i}]: trader ${r.traderId} is not a candidate`;
    const d = A.diff(r, { ...c.row, rank: i + 1 }, `$.results[${i}]`);
    if (d) return d;
    if (!A.near(r.metricValue, exp.results[i].metricValue))
      return `$.results[${i}]: trader ${r.traderId} (${r.metricValue}) where the oracle has ${exp.results[i].traderId} (${exp.results[i].metricValue})`;
    if (i > 0 && A.compareRanked(actual.results[i - 1], r) > 0)
      return `$.results[${i}]: out of order after ${actual.results[i - 1].traderId}`;
  }
  stats.tolerantRankingOrder++;
  return null;
}

/**
 * Asks `read` with `q` as an account with policy `p` at the served world's clock and compares the
 * answer with the oracle's. Returns the oracle's answer; mismatches go to `failures[read]`.
 */
async function check(s: Served, read: Read, q: A.Query, p: O.Policy, walkLimit = 50): Promise<A.Answer> {
  const key = await keyFor(s, p);
  const path = url(A.PATHS[read], q);
  const label = `GET ${path} policy=${JSON.stringify(p)} clock=${iso(s.clock.now)}`;
  let exp: A.Answer = A.READS[read](s.records, q, p, s.clock.now);
  if (read === 'rankings' && p.historyWindowDays !== null && !A.ACTIVITY.includes(String(q.metric ?? 'event_count'))) {
    // Reading A4: evaluability by the applied startTime, not by the start the history window imposes.
    const ans = exp as any;
    const start = ans.status === 200 ? ans.data.filtersApplied.appliedTimeRange.startTime : ans.details?.resolved?.startTime;
    const W = O.WINDOW_MS[(q.timeBasedPerformanceWindow ?? '30D') as O.WindowName];
    const floor = O.historyFloor(s.clock.now, p.historyWindowDays);
    if (start && Date.parse(start) + W <= s.clock.now !== Math.max(Date.parse(start), floor) + W <= s.clock.now) stats.a4Distinguishing++;
  }
  try {
    stats.comparisons++;
    stats.perRead[read]++;
    if (read === 'traderActivity' && exp.status === 200) {
      const wk = await walk(s.h, key, A.PATHS[read], q, walkLimit, 500);
      stats.pages += wk.pages;
      const now = Date.parse(wk.first.serverTime);
      if (now !== s.clock.now) stats.serverTimeOffClock++;
      exp = A.READS[read](s.records, q, p, now);
      if (exp.status !== 200) throw new Error(`200, but the oracle answers ${JSON.stringify(exp)}`);
      const d = A.diff(wk.first.appliedTimeRange, (exp as any).data.meta.appliedTimeRange, '$.meta.appliedTimeRange');
      if (d) throw new Error(d);
      expectSameList('rows', wk.rows, (exp as any).data.results, (r) => r.traderId);
      if (nonEmpty(read, exp)) stats.nonEmpty++;
      return exp;
    }
    const res = await get(s, path, key);
    const ok = res.status === 200 && res.body?.success === true;
    const now = ok ? Date.parse(res.body.data.meta.serverTime) : s.clock.now;
    if (ok && now !== s.clock.now) stats.serverTimeOffClock++;
    exp = A.READS[read](s.records, q, p, now);
    if (exp.status !== 200) {
      const e = exp as { status: number; code: string; details?: unknown };
      stats.errors++;
      stats.codes[e.code] = (stats.codes[e.code] ?? 0) + 1;
      if (res.status !== e.status || res.body?.error?.code !== e.code) {
        throw new Error(`status ${res.status} ${JSON.stringify(res.body).slice(0, 400)}, expected ${e.status} ${e.code}`);
      }
      if ('details' in e) {
        const d = A.diff(res.body.error.details, e.details, '$.error.details');
        if (d) throw new Error(`${d}\n  got      ${JSON.stringify(res.body.error.details)}\n  expected ${JSON.stringify(e.details)}`);
      }
      return exp;
    }
    if (!ok) throw new Error(`status ${res.status} ${JSON.stringify(res.body).slice(0, 400)}, expected 200`);
    const d =
      read === 'rankings'
        ? compareRankings(res.body.data, (exp as any).data, (exp as any).candidates)
        : A.diff(res.body.data, (exp as any).data);
    if (d) throw new Error(`${d}\n${context(d, res.body.data, (exp as any).data)}`);
    if (nonEmpty(read, exp)) stats.nonEmpty++;
  } catch (e) {
    const msg = `${label}\n  ${(e as Error).message.split('\n').slice(0, 8).join('\n  ')}`;
    if (failures[read].length < 40) failures[read].push(msg);
  }
  return exp;
}

/** The top-level member (or the result row) a difference is in, as the API and the oracle have it. */
function context(d: string, actual: any, expected: any): string {
  const m = /^\$\.(results)\[(\d+)\]|^\$\.(\w+)/.exec(d);
  if (!m) return '';
  const pick = (x: any) => JSON.stringify(m[1] ? x?.results?.[Number(m[2])] : x?.[m[3]!]).slice(0, 1500);
  return `  api:    ${pick(actual)}\n  oracle: ${pick(expected)}`;
}

/** Prints and clears the mismatches collected for `reads`, then asserts there were none. */
function report(...reads: Read[]): void {
  const all: string[] = [];
  for (const read of reads) {
    const f = failures[read];
    failures[read] = [];
    if (f.length) console.error(`${A.PATHS[read]}: ${f.length} mismatch(es)${f.length >= 40 ? ' (first 40)' : ''}:\n${f.join('\n')}`);
    all.push(...f);
  }
  expect(all, `mismatches on ${reads.map((r) => A.PATHS[r]).join(', ')}`).toEqual([]);
}

// ---------------------------------------------------------------------------------------------------
// 1. The hand-built record set

describe('hand-built records through the API (the oracle unit cases)', () => {
  let s: Served;
  beforeAll(async () => {
    s = await serve(handRecords(), HAND.T);
  }, 240_000);
  afterAll(async () => {
    await s?.h.close();
  });

  const S = traders(31, 32, 33, 34, 35);
  const T = traders(41, 42, 43, 44, 45, 46, 47);
  const range = { startTime: '2025-12-28T00:00:00Z', endTime: '2026-01-05T00:00:00.000Z' };
  const q10 = { assetIds: '10', timeBasedPerformanceWindow: '1D' };
  /** [clock, read, query, policy], asked in this order (the clock only moves forward). */
  const cases: [number, Read, A.Query, O.Policy][] = [
    // T: trader activity (names in byte order, equal names by id), walked with small pages
    ...(
      [
        {},
        { minPositionCount: '0' },
        { minPositionCount: '5' },
        { minPositionCount: '0', assetIds: '11' },
        { minPositionCount: '0', assetIds: '11,12,11' },
        { minPositionCount: '1', sourcePlatforms: 'X' },
        { minPositionCount: '1', startTime: '2025-10-02T00:00:00Z', endTime: '2025-10-04T00:00:00Z' },
      ] as A.Query[]
    ).map((q) => [HAND.T, 'traderActivity', q, pol(T)] as [number, Read, A.Query, O.Policy]),
    [HAND.T, 'traderActivity', { minPositionCount: '1' }, pol(T, ALL, 10)],
    [HAND.T, 'traderActivity', { minPositionCount: '0', endTime: '2025-10-05T00:00:00Z' }, pol(T, ALL, 10)],
    [HAND.T, 'traderActivity', {}, pol(NONE)],
    [HAND.T, 'traderActivity', { minPositionCount: '0' }, OPEN],
    // P: a window coming of age exactly at openAt + 1D (2025-12-02T00:00Z)
    [Date.parse('2025-12-02T00:00:00Z') - 1, 'traderStats', { traderIds: '1', endTime: '2025-12-01T00:00:00Z' }, OPEN],
    [Date.parse('2025-12-02T00:00:00Z'), 'traderStats', { traderIds: '1', endTime: '2025-12-01T00:00:00Z' }, OPEN],
    // S: activity summaries
    [HAND.S, 'activity', { ...range, interval: 'week' }, pol(S, S)],
    [HAND.S, 'activity', range, pol(S, S)],
    [HAND.S, 'activity', { ...range, interval: 'hour' }, pol(S, S)],
    [HAND.S, 'activity', { interval: 'hour', startTime: '2026-01-04T23:00:00Z', endTime: '2026-01-05T00:00:00Z' }, pol(S, S)],
    [HAND.S, 'activity', { interval: 'hour', startTime: '2026-01-01T00:00:00Z', endTime: '2026-01-07T23:59:59.999Z' }, pol(S, S)],
    [HAND.S, 'activity', { interval: 'hour', startTime: '2026-01-01T00:00:00Z', endTime: '2026-01-08T00:00:00Z' }, pol(S, S)],
    [HAND.S, 'activity', { interval: 'day', startTime: '2025-06-01T00:00:00Z', endTime: '2025-11-15T23:59:59.999Z' }, pol(S, S)],
    [HAND.S, 'activity', { interval: 'day', startTime: '2025-06-01T00:00:00Z', endTime: '2025-11-16T00:00:00Z' }, pol(S, S)],
    [HAND.S, 'activity', { interval: 'week', startTime: '2023-01-02T00:00:00Z', endTime: '2026-03-22T23:59:59.999Z' }, pol(S, S)],
    [HAND.S, 'activity', { interval: 'week', startTime: '2023-01-02T00:00:00Z', endTime: '2026-03-23T00:00:00Z' }, pol(S, S)],
    [HAND.S, 'activity', { interval: 'hour' }, pol(S, S)],
    [HAND.S, 'activity', { ...range, interval: 'week', eventTypes: 'open' }, pol(S, S)],
    [HAND.S, 'activity', { ...range, interval: 'week', traderIds: '35,32' }, pol(S, S)],
    [HAND.S, 'activity', { ...range, interval: 'week', limit: '1' }, pol(S, S)],
    [HAND.S, 'activity', { ...range, interval: 'week', groupBy: 'none' }, pol(S, S)],
    [HAND.S, 'activity', { startTime: '2020-01-01T00:00:00Z', endTime: '2020-01-02T00:00:00Z', groupBy: 'none' }, pol(S, S)],
    [HAND.S, 'activity', { ...range, interval: 'week' }, pol(S, NONE)],
    [HAND.S, 'activity', { ...range, interval: 'week' }, pol(NONE, S)],
    [HAND.S, 'activity', { ...range, interval: 'week' }, pol(S, { mode: 'platforms', platforms: ['X'] })],
    [HAND.S, 'activity', {}, pol(NONE, NONE)],
    [HAND.S, 'activity', {}, pol(S, S)],
    [HAND.S, 'activity', { ...range, interval: 'week' }, pol(S, S, 3)],
    [HAND.S, 'activity', { startTime: '2025-01-01T00:00:00Z' }, pol(S, S, 3)],
    [HAND.S, 'activity', { startTime: '2025-01-01T00:00:00Z' }, pol(S, S)],
    [HAND.S, 'activity', { startTime: '2026-01-02T00:00:00Z', endTime: '2026-01-01T00:00:00Z' }, pol(S, S)],
    [HAND.S, 'activity', { interval: 'week' }, OPEN],
    // P: trader stats
    [HAND.P, 'traderStats', { traderIds: '1,2,3,4,5,6,7,8,999,1' }, OPEN],
    [HAND.P, 'traderStats', { traderIds: '1,7,8,6', sourcePlatforms: 'X' }, OPEN],
    [HAND.P, 'traderStats', { traderIds: '1,7,8,6', sourcePlatforms: 'TELEGRAM' }, OPEN],
    [HAND.P, 'traderStats', { traderIds: '1,2,7' }, pol(traders(1, 7))],
    [HAND.P, 'traderStats', { traderIds: '1,4,7' }, pol({ mode: 'platforms', platforms: ['X'] })],
    [HAND.P, 'traderStats', { traderIds: '1' }, pol(NONE)],
    [HAND.P, 'traderStats', { traderIds: '1', startTime: '2025-12-02T00:00:00.001Z', endTime: '2025-12-02T00:00:00Z' }, OPEN],
    [HAND.P, 'traderStats', { traderIds: '1', startTime: '2025-12-02T00:00:00Z', endTime: '2025-12-05T00:00:00Z' }, OPEN],
    [HAND.P, 'traderStats', { traderIds: '1', startTime: '2025-12-02T00:00:00Z', endTime: '2025-12-04T23:59:59.999Z' }, OPEN],
    [HAND.P, 'traderStats', { traderIds: '1' }, pol(ALL, ALL, 30)],
    [HAND.P, 'traderStats', { traderIds: '1', startTime: '2025-01-01T00:00:00Z', endTime: '2025-12-31T00:00:00Z' }, pol(ALL, ALL, 30)],
    [HAND.P, 'traderStats', { traderIds: '1', startTime: '2025-12-26T00:00:00Z' }, pol(ALL, ALL, 30)],
    [HAND.P, 'traderStats', { traderIds: '1', endTime: '2025-12-01T00:00:00Z' }, pol(ALL, ALL, 30)],
    [HAND.P, 'traderStats', { traderIds: '6,2' }, OPEN],
    [HAND.P, 'traderStats', { traderIds: '1,2,3', startTime: '2025-12-02T01:00:00+01:00' }, OPEN],
    // A: asset stats
    [HAND.P, 'assetStats', { assetIds: '7,3,7,999,2,4,5,6' }, OPEN],
    [HAND.P, 'assetStats', { assetIds: '7', direction: 'short' }, OPEN],
    [HAND.P, 'assetStats', { assetIds: '7', traderIds: '16,12,16' }, OPEN],
    [HAND.P, 'assetStats', { assetIds: '7', startTime: '2025-11-04T00:00:00Z', endTime: '2025-11-11T00:00:00Z' }, OPEN],
    [HAND.P, 'assetStats', { assetIds: '7', startTime: '2025-11-04T00:00:00.001Z', endTime: '2025-11-10T23:59:59.999Z' }, OPEN],
    [HAND.P, 'assetStats', { assetIds: '7' }, pol(traders(11, 16, 18))],
    [HAND.P, 'assetStats', { assetIds: '7', startTime: '2026-01-01T00:00:00Z' }, OPEN],
    [HAND.P, 'assetStats', { assetIds: '7' }, pol(ALL, ALL, 60)],
    [HAND.P, 'assetStats', { assetIds: '7' }, pol(NONE)],
    // R: rankings
    [HAND.R, 'rankings', { ...q10, metric: 'avg_return' }, OPEN],
    [HAND.R, 'rankings', { ...q10, metric: 'avg_return', minPositions: '2' }, OPEN],
    [HAND.R, 'rankings', { ...q10, metric: 'avg_return', minPositions: '1' }, OPEN],
    [HAND.R, 'rankings', { ...q10, metric: 'avg_return', minPositions: '0' }, OPEN],
    [HAND.R, 'rankings', { ...q10, metric: 'win_rate', minPositions: '0' }, OPEN],
    [HAND.R, 'rankings', { ...q10, metric: 'median_return', minPositions: '0', limit: '3' }, OPEN],
    [HAND.R, 'rankings', { ...q10, metric: 'sharpe_ratio', minPositions: '0' }, OPEN],
    [HAND.R, 'rankings', { assetIds: '10', timeBasedPerformanceWindow: '1D' }, OPEN],
    [HAND.R, 'rankings', { assetIds: '10', metric: 'position_count', limit: '2' }, OPEN],
    [HAND.R, 'rankings', { assetIds: '10', direction: 'short' }, OPEN],
    [HAND.R, 'rankings', { assetIds: '999', metric: 'avg_return' }, OPEN],
    [HAND.R, 'rankings', { assetIds: '10', metric: 'position_count', endTime: '2025-12-31T23:59:59.999Z' }, OPEN],
    [HAND.R, 'rankings', { assetIds: '10', endTime: '2026-01-01T00:00:00Z' }, OPEN],
    [HAND.R, 'rankings', { ...q10, metric: 'win_rate', endTime: '2026-02-28T00:00:00Z' }, OPEN],
    [HAND.R, 'rankings', { ...q10, metric: 'win_rate', startTime: '2026-02-28T00:00:00Z' }, OPEN],
    [HAND.R, 'rankings', { ...q10, metric: 'win_rate', startTime: '2026-02-28T00:00:00.001Z' }, OPEN],
    [HAND.R, 'rankings', { metric: 'sharpe_ratio', startTime: '2026-02-10T00:00:00Z', endTime: '2026-02-20T00:00:00Z' }, OPEN],
    [HAND.R, 'rankings', { metric: 'avg_return', startTime: '2026-02-24T00:00:00Z' }, OPEN],
    [HAND.R, 'rankings', { metric: 'avg_return', startTime: '2026-02-24T00:00:00.000Z', timeBasedPerformanceWindow: '30D' }, OPEN],
    [HAND.R, 'rankings', { metric: 'event_count', startTime: '2026-02-28T12:00:00Z' }, OPEN],
    [HAND.R, 'rankings', { startTime: '2026-02-02T00:00:00Z', endTime: '2026-02-01T00:00:00Z' }, OPEN],
    [HAND.R, 'rankings', {}, pol(NONE)],
    [HAND.R, 'rankings', { assetIds: '10' }, pol(ALL, ALL, 40)],
    [HAND.R, 'rankings', { ...q10, metric: 'avg_return', minPositions: '0' }, pol(ALL, ALL, 40)],
    [HAND.R, 'rankings', { ...q10, metric: 'avg_return', minPositions: '0' }, pol(traders(21, 22, 28))],
    [HAND.R, 'rankings', { metric: 'position_count', limit: '50' }, OPEN],
    [HAND.R, 'rankings', { metric: 'avg_return', minPositions: '0' }, pol(ALL, ALL, 5)], // reading A4
  ];

  it(`${cases.length} hand-built cases answer as the oracle (checked by hand) says`, async () => {
    const before = stats.comparisons;
    for (const [now, read, q, p] of cases) {
      s.clock.now = now;
      // trader activity: pages of 1 and 2 rows (keyset over equal names)
      await check(s, read, q, p, read === 'traderActivity' ? (q.minPositionCount === '0' ? 2 : 1) : 50);
    }
    expect(stats.comparisons - before).toBe(cases.length);
    report(...READ_NAMES);
  }, 240_000);

  it('a key without stats.read is refused on all five reads', async () => {
    const key = await s.h.key({ scopes: ['events.read', 'positions.read', 'messages.read', 'directory.read'] });
    for (const read of READ_NAMES) {
      const res = await s.h.get(
        url(A.PATHS[read], read === 'traderStats' ? { traderIds: '1' } : read === 'assetStats' ? { assetIds: '1' } : {}),
        key,
      );
      expect(res.status, read).toBe(403);
      expect(res.body.error.code, read).toBe('FORBIDDEN');
    }
  });
});

// ---------------------------------------------------------------------------------------------------
// 2. The demo data set, random parameter sets and policies

describe('demo data set: random parameter sets under random policies (seeded)', () => {
  let s: Served;
  let genNow: number;
  let aw: A.AWorld;
  /** Live trader ids, the busiest first; all live ids; ids with counted messages. */
  let busy: number[];
  let live: number[];
  let withMessages: number[];
  let deletedTraders: number[];
  let openTimes: number[];
  let policies: O.Policy[];
  const ASSET_IDS = [...Array.from({ length: 60 }, (_, i) => i + 1), ...Array.from({ length: 8 }, (_, i) => EXTRA.asset + i), 999];

  beforeAll(async () => {
    genNow = Math.floor(Date.now() / 1000) * 1000;
    const clockStart = genNow - 36 * HOUR;
    const demo = [...generateDemo({ scale: 'small', now: new Date(genNow) }), ...multiByteRecords(genNow)] as O.TopicRec[];
    // Only price samples may lie ahead of the clock (see the top of the file).
    const records = demo.filter(
      (r) =>
        !(r.topic === 'trade-events' && Date.parse(r.value.timeOfEvent) > clockStart) &&
        !(r.topic === 'messages' && Date.parse(r.value.writtenAt) > clockStart),
    );
    // Extras: a trader sharing deleted trader 7's source (it now owns 7's messages), one sharing
    // trader 1's source (1 keeps them: the lowest id), tags with upper-case and multi-byte names.
    const t7 = demo.find((r) => r.topic === 'traders' && r.value.id === 7 && r.value.source)!.value;
    const t1 = demo.find((r) => r.topic === 'traders' && r.value.id === 1)!.value;
    records.push(
      { topic: 'traders', value: { id: 10_100, name: 'Seven Heir', slug: null, avatarUrl: null, source: t7.source, version: 1 } },
      { topic: 'traders', value: { id: 10_101, name: 'Alpha Twin', slug: null, avatarUrl: null, source: t1.source, version: 1 } },
      {
        topic: 'trader-tags',
        value: {
          traderId: EXTRA.trader,
          version: 1,
          tags: [
            { category: 'style', name: 'scalp' },
            { category: 'thematic', name: 'Öl' },
            { category: 'region', name: 'europa' },
            { category: 'thematic', name: 'énergie' },
            { category: 'thematic', name: 'zinc' },
          ],
        },
      },
      { topic: 'trader-tags', value: { traderId: EXTRA.trader + 1, version: 1, tags: [{ category: 'thematic', name: 'gold' }] } },
      { topic: 'trader-tags', value: { traderId: EXTRA.trader + 1, version: 2, tags: [], deleted: true } },
    );
    s = await serve(records, clockStart);
    aw = A.analyticsWorld(records);
    const w = aw.w;
    const n = new Map<number, number>();
    for (const x of aw.positions) n.set(x.p.traderId, (n.get(x.p.traderId) ?? 0) + 1);
    busy = [...n.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0]).map(([id]) => id);
    live = [...w.traders.keys()].sort((a, b) => a - b);
    withMessages = [...new Set(aw.messages.map((m) => m.traderId))].sort((a, b) => a - b);
    deletedTraders = [...w.deleted.traders];
    openTimes = aw.positions.map((x) => x.p.openAt);
    // The policy pool: a few fixed ones and random ones (each gets one account and key).
    const r = prng(0xa11a);
    const visibility = (): O.Visibility => {
      const u = r.next();
      if (u < 0.2) return ALL;
      if (u < 0.45) return { mode: 'platforms', platforms: r.chance(0.8) ? [r.pick(['TELEGRAM', 'X'])] : ['TELEGRAM', 'X'] };
      const ids = [...r.subset(busy.slice(0, 40), 2, 8), ...r.subset(live, 0, 15)];
      if (r.chance(0.3)) ids.push(3, 10_004); // no assigned source
      if (r.chance(0.3)) ids.push(7); // deleted
      if (r.chance(0.3)) ids.push(EXTRA.trader, 10_100);
      return { mode: 'traders', traderIds: [...new Set(ids)] };
    };
    policies = [pol(ALL, ALL, 30), pol(ALL, ALL, 3), pol(ALL, NONE), pol(NONE, ALL), pol(NONE, NONE, 7)];
    for (let i = 0; i < 24; i++) {
      policies.push(
        pol(
          r.chance(0.1) ? NONE : visibility(),
          r.chance(0.15) ? NONE : visibility(),
          r.chance(0.5) ? r.pick([1, 3, 7, 10, 30, 45, 60, 100]) : null,
        ),
      );
    }
  }, 480_000);
  afterAll(async () => {
    await s?.h.close();
  });

  // ----- parameter generators

  /** A time in the data (the last 125 days), sometimes exactly a position's openAt; in varied RFC 3339 spellings. */
  const someTime = (r: Rng): number =>
    r.chance(0.15)
      ? r.pick(openTimes)
      : genNow - r.int(0, 125) * DAY - r.int(0, 23) * HOUR - r.int(0, 59) * MIN - (r.chance(0.3) ? r.int(0, 59_999) : 0);
  function spell(r: Rng, t: number): string {
    const u = r.next();
    if (u < 0.08) return new Date(t + 2 * HOUR).toISOString().replace('Z', '+02:00');
    if (u < 0.16 && t % 1000 === 0) return iso(t).replace('.000Z', 'Z');
    return iso(t);
  }
  function bounds(r: Rng, q: A.Query, mode?: 'both'): void {
    const u = mode === 'both' ? 0.5 : r.next();
    if (u < 0.3) return;
    const a = someTime(r);
    const b = r.chance(0.05) ? a : someTime(r);
    if (u < 0.7) {
      q.startTime = spell(r, Math.min(a, b));
      q.endTime = spell(r, Math.max(a, b));
    } else if (u < 0.85) q.startTime = spell(r, a);
    else q.endTime = spell(r, a);
  }
  /** Trader ids: some the signal visibility permits, some not, now and then a deleted, unknown or sourceless one. */
  function tradersFor(r: Rng, v: O.Visibility, pool: number[], max: number): number[] {
    const yes = pool.filter((id) => O.permits(v, aw.w.traders.get(id)));
    const no = pool.filter((id) => !O.permits(v, aw.w.traders.get(id)));
    const ids = [...(yes.length ? r.subset(yes, 1, max) : []), ...(no.length ? r.subset(no, 0, Math.ceil(max / 3)) : [])];
    if (r.chance(0.15)) ids.push(r.pick(deletedTraders));
    if (r.chance(0.1)) ids.push(99_999);
    if (r.chance(0.1) || ids.length === 0) ids.push(r.pick([3, 10_004, 10_100, EXTRA.trader]));
    return [...new Set(ids)];
  }
  const policyFor = (r: Rng): O.Policy => (r.chance(0.35) ? OPEN : r.pick(policies));
  const METRICS = ['event_count', 'position_count', 'win_rate', 'avg_return', 'median_return', 'sharpe_ratio'];

  const gen: Record<Read, (r: Rng, p: O.Policy) => A.Query> = {
    traderStats(r, p) {
      const q: A.Query = {};
      const ids = r.chance(0.06)
        ? r.subset(live, 120, 200)
        : tradersFor(r, p.signalVisibility, r.chance(0.8) ? busy.slice(0, 80) : live, 12);
      if (r.chance(0.1) && ids.length < 200) ids.push(ids[0]!);
      q.traderIds = csv(ids);
      bounds(r, q);
      if (r.chance(0.2)) q.sourcePlatforms = r.pick(['TELEGRAM', 'X', 'TELEGRAM,X']);
      return q;
    },
    assetStats(r, p) {
      const q: A.Query = { assetIds: csv(r.chance(0.1) ? ASSET_IDS : [...r.subset(ASSET_IDS, 1, 8), ...(r.chance(0.1) ? [1] : [])]) };
      if (r.chance(0.35)) q.traderIds = csv(tradersFor(r, p.signalVisibility, busy.slice(0, 80), 8));
      if (r.chance(0.3)) q.direction = r.pick(['long', 'short']);
      bounds(r, q);
      return q;
    },
    rankings(r, p) {
      const q: A.Query = {};
      if (r.chance(0.85)) q.metric = r.pick(METRICS);
      if (r.chance(0.3)) q.assetIds = csv(r.subset(ASSET_IDS, 1, 6));
      if (r.chance(0.25)) q.direction = r.pick(['long', 'short']);
      if (r.chance(0.6)) q.timeBasedPerformanceWindow = r.pick(['1D', '7D', '30D']);
      if (r.chance(0.6)) q.minPositions = r.pick([0, 0, 1, 2, 3, 5, 10, 25]);
      if (r.chance(0.5)) q.limit = r.int(1, 50);
      const u = r.next();
      const now = s.clock.now;
      if (u < 0.3) {
        // a start near serverTime: full, partial or PERFORMANCE_WINDOW_NOT_ELAPSED
        const start = now - r.pick([0, 1, 2, 6, 8, 20, 29, 31, 40]) * DAY + r.int(-3, 3) * HOUR - r.int(0, 59) * MIN;
        q.startTime = spell(r, start);
        if (r.chance(0.5)) q.endTime = spell(r, Math.min(now + r.int(-2, 2) * DAY, start + r.int(0, 30) * DAY));
        if (q.endTime !== undefined && Date.parse(String(q.endTime)) < start) q.endTime = spell(r, start);
      } else bounds(r, q);
      return q;
    },
    activity(r, p) {
      const q: A.Query = {};
      if (r.chance(0.7)) q.groupBy = r.pick(['trader', 'trader', 'none']);
      const interval = r.chance(0.25) ? undefined : r.pick(['hour', 'day', 'week']);
      if (interval) q.interval = interval;
      if (r.chance(0.3)) q.eventTypes = csv(r.subset(['open', 'close', 'increase', 'decrease'], 1, 3));
      if (r.chance(0.3))
        q.traderIds = csv(
          tradersFor(r, r.chance(0.5) ? p.messageVisibility : p.signalVisibility, r.chance(0.5) ? withMessages : busy.slice(0, 60), 8),
        );
      if (r.chance(0.5)) q.limit = r.int(1, 50);
      const u = r.next();
      if (u < 0.2) return q; // default: the 7 days before serverTime
      const span = interval === 'hour' ? HOUR : interval === 'week' ? 7 * DAY : DAY;
      if (u < 0.3) {
        q.endTime = spell(r, someTime(r));
        return q;
      }
      const start = u < 0.4 ? s.clock.now - r.int(0, 160) * span : someTime(r);
      q.startTime = spell(r, start);
      // mostly within the bucket limit, sometimes just over it
      if (u >= 0.4 || r.chance(0.5))
        q.endTime = spell(r, start + (r.chance(0.1) ? r.int(167, 175) : r.int(0, 150)) * span + r.int(0, 59) * MIN);
      return q;
    },
    traderActivity(r, p) {
      const q: A.Query = {};
      if (r.chance(0.25)) q.sourcePlatforms = r.pick(['TELEGRAM', 'X', 'TELEGRAM,X']);
      if (r.chance(0.7)) q.minPositionCount = r.pick([0, 0, 1, 2, 3, 5, 10, 50, 100, 150]);
      if (r.chance(0.3)) q.assetIds = csv(r.subset(ASSET_IDS, 1, 5));
      bounds(r, q);
      return q;
    },
  };

  it('fixed cases: tags, shared and orphaned sources, deleted traders, ineligible and unpriced assets, the overflow asset', async () => {
    const before = stats.comparisons;
    const ids = csv([EXTRA.trader, EXTRA.trader + 1, 10_100, 10_101, 7, 1, 2, 3, 10_004, 99_999]);
    await check(s, 'traderStats', { traderIds: ids }, OPEN);
    await check(s, 'traderStats', { traderIds: ids, startTime: iso(genNow - 40 * DAY) }, pol(ALL, ALL, 20));
    await check(s, 'assetStats', { assetIds: csv(ASSET_IDS) }, OPEN);
    await check(s, 'assetStats', { assetIds: '22,18,60,19,20,21,1', direction: 'short' }, OPEN);
    for (const metric of METRICS) {
      await check(s, 'rankings', { metric, minPositions: 0, limit: 50 }, OPEN);
      await check(s, 'rankings', { metric, assetIds: '22,18,60', minPositions: 0, timeBasedPerformanceWindow: '1D', limit: 50 }, OPEN);
    }
    await check(s, 'activity', { groupBy: 'none' }, OPEN);
    await check(s, 'activity', { traderIds: '10100,7,1,10101', interval: 'week', startTime: iso(genNow - 130 * DAY) }, OPEN);
    await check(s, 'traderActivity', { minPositionCount: 0 }, OPEN, 37);
    await check(s, 'traderActivity', { minPositionCount: 0, assetIds: '22,18,19' }, OPEN, 5);
    expect(stats.comparisons - before).toBe(20);
    report(...READ_NAMES);
  }, 240_000);

  /** How often each read is drawn (about 600 parameter sets in all). */
  const COUNTS: Record<Read, number> = { traderStats: 130, assetStats: 110, rankings: 160, activity: 130, traderActivity: 60 };
  const recent: [Read, A.Query, O.Policy][] = [];
  let sets = 0;
  let repeats = 0;
  let boundaryPairs = 0;
  let boundaryFlips = 0;

  /** The next instant after `after` (within `within`) at which a `ready` window of a position comes of age. */
  function nextBoundary(after: number, within: number): { x: A.PosX; win: O.WindowName; E: number } | null {
    let best: { x: A.PosX; win: O.WindowName; E: number } | null = null;
    for (const x of aw.positions) {
      for (const win of O.WINDOWS) {
        if (x.mature[win]?.status !== 'ready') continue;
        const E = x.p.openAt + O.WINDOW_MS[win];
        if (E > after + 1 && E <= after + within && (best === null || E < best.E)) best = { x, win, E };
      }
    }
    return best;
  }

  for (const read of READ_NAMES) {
    it(`${A.PATHS[read]}: ${COUNTS[read]} random parameter sets and policies`, async () => {
      const r = prng(0x5eed + READ_NAMES.indexOf(read) * 7919);
      for (let i = 0; i < COUNTS[read]; i++) {
        // The clock moves forward a few minutes between cases.
        s.clock.now += r.int(0, 12) * MIN + r.int(0, 59_999);
        if (i % 10 === 5 && recent.length) {
          // An earlier question again, later.
          const [rr, q, p] = r.pick(recent);
          await check(s, rr, q, p);
          repeats++;
        }
        if ((read === 'traderStats' || read === 'rankings') && i % 8 === 3) {
          // The same question 1 ms before and exactly when a window comes of age.
          const b = nextBoundary(s.clock.now, 6 * HOUR);
          if (b) {
            const q: A.Query =
              read === 'traderStats'
                ? { traderIds: csv([b.x.p.traderId, ...r.subset(busy.slice(0, 20), 0, 3)]) }
                : {
                    metric: r.pick(['avg_return', 'win_rate', 'median_return', 'sharpe_ratio']),
                    timeBasedPerformanceWindow: b.win,
                    minPositions: 0,
                    assetIds: String(b.x.p.assetId),
                  };
            s.clock.now = b.E - 1;
            const before = await check(s, read, q, OPEN);
            s.clock.now = b.E;
            const after = await check(s, read, q, OPEN);
            boundaryPairs++;
            if (A.diff((before as any).data?.results, (after as any).data?.results) !== null) boundaryFlips++;
          }
        }
        // Draw until the oracle says the answer has something in it (a few tries), or is an error now and then.
        let p!: O.Policy;
        let q!: A.Query;
        for (let attempt = 0; attempt < 6; attempt++) {
          p = policyFor(r);
          q = gen[read](r, p);
          const ans = A.READS[read](s.records, q, p, s.clock.now);
          if (nonEmpty(read, ans) || (ans.status !== 200 && r.chance(0.3))) break;
        }
        // Trader activity: pages that walk the list in about 2 to 12 pages.
        let limit = 50;
        if (read === 'traderActivity') {
          const exp = A.traderActivity(s.records, q, p, s.clock.now);
          const n = exp.status === 200 ? (exp as any).data.results.length : 1;
          limit = Math.min(200, Math.max(1, Math.ceil(n / r.int(2, 12))));
        }
        await check(s, read, q, p, limit);
        sets++;
        recent.push([read, q, p]);
        if (recent.length > 30) recent.shift();
      }
      report(read);
    }, 360_000);
  }

  /** `fn` with a limit of rows held in memory set to 0: the read takes them back in SQL instead. */
  async function heldInSql<L extends Record<K, number>, K extends keyof L & string>(
    limits: L,
    name: K,
    fn: () => Promise<void>,
  ): Promise<void> {
    const held = limits[name];
    (limits as Record<K, number>)[name] = 0;
    try {
      await fn();
    } finally {
      (limits as Record<K, number>)[name] = held;
    }
  }

  it('/v2/activity-summaries: 40 random parameter sets with the events on ineligible assets taken back in SQL (more of them than are held in memory)', async () => {
    const r = prng(0xc0ffee);
    await heldInSql(CORRECTION_LIMITS, 'maxHeldEvents', async () => {
      for (let i = 0; i < 40; i++) {
        s.clock.now += r.int(0, 12) * MIN;
        let p!: O.Policy;
        let q!: A.Query;
        for (let attempt = 0; attempt < 6; attempt++) {
          p = policyFor(r);
          q = gen.activity(r, p);
          if (nonEmpty('activity', A.READS.activity(s.records, q, p, s.clock.now))) break;
        }
        await check(s, 'activity', q, p);
      }
    });
    report('activity');
  }, 360_000);

  it('/v2/traders/activity: 30 random parameter sets with the positions on ineligible assets excluded in SQL (more of them than are held in memory)', async () => {
    const r = prng(0xbeef);
    await heldInSql(SAMPLE_LIMITS, 'maxHeldPositions', async () => {
      for (let i = 0; i < 30; i++) {
        s.clock.now += r.int(0, 12) * MIN;
        const p = policyFor(r);
        await check(s, 'traderActivity', gen.traderActivity(r, p), p);
      }
    });
    report('traderActivity');
  }, 360_000);

  it('totals: at least 500 random parameter sets compared, most of them with rows', () => {
    console.info(
      `analytics oracle: ${sets} random parameter sets, ${repeats} repeats, ${boundaryPairs} window boundary pairs ` +
        `(${boundaryFlips} where the answer changed at E); ${JSON.stringify(stats)}`,
    );
    expect(sets).toBeGreaterThanOrEqual(500);
    expect(stats.nonEmpty).toBeGreaterThan(0.6 * sets);
    expect(boundaryPairs).toBeGreaterThanOrEqual(20);
    expect(boundaryFlips).toBeGreaterThanOrEqual(10);
    expect(stats.codes['PERFORMANCE_WINDOW_NOT_ELAPSED'] ?? 0).toBeGreaterThanOrEqual(5);
    expect(stats.codes['BUCKET_LIMIT_EXCEEDED'] ?? 0).toBeGreaterThanOrEqual(5);
    expect(stats.codes['FORBIDDEN'] ?? 0).toBeGreaterThanOrEqual(5);
    expect(stats.serverTimeOffClock, 'answers whose serverTime is not the injected clock').toBe(0);
  });
});
