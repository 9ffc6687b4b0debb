// Page walking and list comparison shared by the oracle-based API tests.
import { expect } from 'vitest';
import type { Harness } from '../helpers/harness.ts';
import { diff } from './oracle.ts';

export type Params = Record<string, string | number | undefined>;

export function url(path: string, params: Params): string {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) qs.set(k, String(v));
  const s = qs.toString();
  return s ? `${path}?${s}` : path;
}

export interface Page { results: any[]; meta: any }
export interface Walk {
  rows: any[];
  /** serverTime (ms) of the page each row came from. */
  rowTimes: number[];
  first: any;
  pages: number;
}

export async function page(h: Harness, key: string, path: string, params: Params): Promise<Page> {
  const res = await h.get(url(path, params), key);
  if (res.status !== 200) throw new Error(`GET ${url(path, params)} -> ${res.status} ${JSON.stringify(res.body)}`);
  expect(res.body.success).toBe(true);
  return res.body.data;
}

/**
 * Walks every page of a list read and checks the page-level invariants: at most `limit` rows,
 * `hasMore` iff `nextCursor`, full pages while more follow, the same `appliedTimeRange` on every
 * page (historical reads) and none on the others.
 */
export async function walk(h: Harness, key: string, path: string, params: Params, limitOf: number | ((page: number) => number), maxPages = 5000): Promise<Walk> {
  const rows: any[] = [];
  const rowTimes: number[] = [];
  let first: any;
  let cursor: string | undefined;
  let pages = 0;
  for (;;) {
    const limit = typeof limitOf === 'number' ? limitOf : limitOf(pages);
    const { results, meta } = await page(h, key, path, { ...params, limit, cursor });
    pages++;
    first ??= meta;
    expect(results.length).toBeLessThanOrEqual(limit);
    expect(meta.hasMore).toBe(meta.nextCursor !== null);
    if (meta.hasMore) expect(results.length).toBe(limit);
    expect(typeof meta.serverTime).toBe('string');
    if ('appliedTimeRange' in first) expect(meta.appliedTimeRange).toEqual(first.appliedTimeRange);
    else expect(meta.appliedTimeRange).toBeUndefined();
    const t = Date.parse(meta.serverTime);
    for (const r of results) { rows.push(r); rowTimes.push(t); }
    if (meta.nextCursor === null) break;
    cursor = meta.nextCursor;
    if (pages >= maxPages) throw new Error(`${path}: more than ${maxPages} pages`);
  }
  return { rows, rowTimes, first, pages };
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
    throw new Error(`${label}: ${ak.length} rows, expected ${ek.length}; missing ${JSON.stringify(missing.slice(0, 10))}`
      + ` (${missing.length}), extra ${JSON.stringify(extra.slice(0, 10))} (${extra.length}), duplicates ${JSON.stringify(dups.slice(0, 10))}`
      + `, first difference at index ${at}: got ${JSON.stringify(actual[at])}, expected ${JSON.stringify(expected[at])}`);
  }
  const d = diff(actual, expected);
  if (d) throw new Error(`${label}: ${d}`);
}
