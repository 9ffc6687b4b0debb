// Page walking and list comparison shared by the oracle-based API tests.
import { expect } from 'vitest';
import type { Harness } from '../helpers/harness.ts';
import { diff } from './oracle.ts';

const DAY = 86_400_000;

export type Params = Record<string, string | number | undefined>;

export function url(path: string, params: Params): string {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) qs.set(k, String(v));
  const s = qs.toString();
  return s ? `${path}?${s}` : path;
}

export { prng, type Rng } from '../helpers/prng.ts';

export interface Page {
  results: any[];
  meta: any;
}
export interface Walk {
  rows: any[];
  /** serverTime (ms) of the page each row came from. */
  rowTimes: number[];
  /** Index of the page each row came from. */
  rowPages: number[];
  /** appliedTimeRange.startTime (ms, null when open or absent) of every page. */
  pageStarts: (number | null)[];
  /** Test clock (ms) just before and just after each page's request. */
  pageClock: [number, number][];
  first: any;
  pages: number;
}

export async function page(h: Harness, key: string, path: string, params: Params): Promise<Page> {
  const res = await h.get(url(path, params), key);
  if (res.status !== 200) throw new Error(`GET ${url(path, params)} -> ${res.status} ${JSON.stringify(res.body)}`);
  expect(res.body.success).toBe(true);
  return res.body.data;
}

export interface WalkOptions {
  /**
   * The caller's account history window in days (null or absent: none). DESIGN 6 clamps the
   * window a cursor carries again on every page against that page's clock, so the start of
   * `appliedTimeRange` may move forward between pages by the time that passed; it must never
   * move backwards, never lie before the window of the moment the page was served, and move
   * only as far as that clamp requires. The end never changes.
   */
  historyWindowDays?: number | null;
}

/**
 * Walks every page of a list read and checks the page-level invariants: at most `limit` rows,
 * `hasMore` iff `nextCursor`, full pages while more follow, the same `appliedTimeRange` on every
 * page (historical reads; for an account with a history window see `WalkOptions`) and none on the
 * others.
 */
export async function walk(
  h: Harness,
  key: string,
  path: string,
  params: Params,
  limitOf: number | ((page: number) => number),
  maxPages = 5000,
  opts: WalkOptions = {},
): Promise<Walk> {
  const days = opts.historyWindowDays ?? null;
  const rows: any[] = [];
  const rowTimes: number[] = [];
  const rowPages: number[] = [];
  const pageStarts: (number | null)[] = [];
  const pageClock: [number, number][] = [];
  let first: any;
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    const limit = typeof limitOf === 'number' ? limitOf : limitOf(pages);
    const t0 = Date.now();
    const { results, meta } = await page(h, key, path, { ...params, limit, cursor });
    const t1 = Date.now();
    pages++;
    first ??= meta;
    const label = `${url(path, params)} page ${pages}`;
    expect(results.length).toBeLessThanOrEqual(limit);
    expect(meta.hasMore).toBe(meta.nextCursor !== null);
    if (meta.hasMore) expect(results.length).toBe(limit);
    expect(typeof meta.serverTime).toBe('string');
    if (!('appliedTimeRange' in first)) expect(meta.appliedTimeRange).toBeUndefined();
    else if (days === null || pages === 1) expect(meta.appliedTimeRange).toEqual(first.appliedTimeRange);
    else {
      const prev = pageStarts.at(-1)!;
      expect(meta.appliedTimeRange.endTime, `${label}: the end of the window never changes`).toBe(first.appliedTimeRange.endTime);
      expect(meta.appliedTimeRange.startTime, `${label}: a history window always bounds the start`).not.toBeNull();
      const start = Date.parse(meta.appliedTimeRange.startTime);
      expect(start, `${label}: the start never moves backwards`).toBeGreaterThanOrEqual(prev!);
      expect(start, `${label}: the start never lies before the history window of this page`).toBeGreaterThanOrEqual(t0 - days * DAY);
      expect(start, `${label}: the start moves only as far as the history window requires`).toBeLessThanOrEqual(
        Math.max(prev!, t1 - days * DAY),
      );
      // Exactly: the carried start, clamped to serverTime - days of this page.
      expect(start, `${label}: the start is max(previous start, serverTime - ${days} days)`).toBe(
        Math.max(prev!, Date.parse(meta.serverTime) - days * DAY),
      );
    }
    const startTime = meta.appliedTimeRange?.startTime;
    pageStarts.push(typeof startTime === 'string' ? Date.parse(startTime) : null);
    pageClock.push([t0, t1]);
    const t = Date.parse(meta.serverTime);
    for (const r of results) {
      rows.push(r);
      rowTimes.push(t);
      rowPages.push(pages - 1);
    }
    if (meta.nextCursor === null) break;
    cursor = meta.nextCursor;
    if (pages >= maxPages) throw new Error(`${path}: more than ${maxPages} pages`);
  }
  return { rows, rowTimes, rowPages, pageStarts, pageClock, first, pages };
}

/**
 * Compares a walked list with the oracle's answer: first the key sequence (missing, extra,
 * duplicate and misordered rows are named), then the rows deeply (floats: relative 1e-9).
 */
export function expectSameList(label: string, actual: any[], expected: any[], keyOf: (r: any) => string | number = (r) => r.id): void {
  const ak = actual.map(keyOf);
  const ek = expected.map(keyOf);
  const seen = new Set<string | number>();
  const dups = ak.filter((k) => (seen.has(k) ? true : (seen.add(k), false)));
  if (ak.length !== ek.length || ak.some((k, i) => k !== ek[i])) {
    const es = new Set(ek);
    const as = new Set(ak);
    const missing = ek.filter((k) => !as.has(k));
    const extra = ak.filter((k) => !es.has(k));
    const at = ak.findIndex((k, i) => k !== ek[i]);
    throw new Error(
      `${label}: ${ak.length} rows, expected ${ek.length}; missing ${JSON.stringify(missing.slice(0, 10))}` +
        ` (${missing.length}), extra ${JSON.stringify(extra.slice(0, 10))} (${extra.length}), duplicates ${JSON.stringify(dups.slice(0, 10))}` +
        `, first difference at index ${at}: got ${JSON.stringify(actual[at])}, expected ${JSON.stringify(expected[at])}`,
    );
  }
  const d = diff(actual, expected);
  if (d) throw new Error(`${label}: ${d}`);
}

/**
 * Compares a walk of an account with a history window with the oracle's answer `expected`,
 * computed for the window of the walk's first page. The start of later pages may have moved
 * forward (see `WalkOptions`), so the rows older than the last page's start (the oldest rows:
 * lists are newest first) may be cut off: the walk must be a prefix of `expected` holding every
 * row at or after the last page's start, and no row may be older than the start of its own page.
 * Returns how many expected rows fell in that band (normally none: it is milliseconds wide).
 */
export function expectSameClampedList(label: string, wk: Walk, expected: any[], timeOf: (r: any) => number): number {
  const last = wk.pageStarts.at(-1) ?? null;
  const must = last === null ? expected.length : expected.filter((r) => timeOf(r) >= last).length;
  wk.rows.forEach((r, i) => {
    const start = wk.pageStarts[wk.rowPages[i]!];
    if (start != null && timeOf(r) < start) {
      throw new Error(
        `${label}: row ${JSON.stringify(r.id)} at ${new Date(timeOf(r)).toISOString()} is older than its page's window start ${new Date(start).toISOString()}`,
      );
    }
  });
  const n = Math.min(Math.max(wk.rows.length, must), expected.length);
  expectSameList(label, wk.rows, expected.slice(0, n));
  return expected.length - must;
}
