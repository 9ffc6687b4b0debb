import type { PerformanceStatus, PositionTimeBasedPerformance, WindowName } from '../../schemas/api/resources.ts';
import { WINDOWS } from '../../schemas/api/resources.ts';
import type { Store } from '../../projectors/store/port.ts';

const HOUR = 3_600_000;
/** Window lengths (1D = 24 h, 7D = 168 h, 30D = 720 h) and forward-price tolerances (DESIGN 5). */
export const WINDOW_MS: Record<WindowName, number> = { '1D': 24 * HOUR, '7D': 168 * HOUR, '30D': 720 * HOUR };
export const TOLERANCE_MS: Record<WindowName, number> = { '1D': HOUR, '7D': 6 * HOUR, '30D': 24 * HOUR };

export interface PositionForEvaluation { id: number; assetId: number; openAt: number; openPrice: number | null; direction: 'long' | 'short' }
export interface ForwardSample { price: number; at: number }

/** One window's evaluation of one position; the order of the checks is the contract's. */
export function evaluateWindow(
  p: PositionForEvaluation, window: WindowName, forward: ForwardSample | null, now: number,
): PositionTimeBasedPerformance {
  const evalAt = p.openAt + WINDOW_MS[window];
  const result = (status: PerformanceStatus, returnPercentage: number | null = null) => ({ window, status, returnPercentage });
  if (now < evalAt) return result('too_young');
  if (p.openPrice === null) return result('missing_entry_price');
  if (p.openPrice === 0) return result('zero_entry_price');
  if (!forward || forward.at < evalAt || forward.at - evalAt > TOLERANCE_MS[window]) return result('missing_forward_price');
  const ratio = forward.price / p.openPrice;
  const ret = p.direction === 'long' ? (ratio - 1) * 100 : (1 - ratio) * 100;
  if (!Number.isFinite(ret)) return result('calculation_error');
  return result('ready', ret);
}

/** Milliseconds until the first `too_young` window of a page of positions comes of age (Infinity: none will). */
export function untilNextStatusChange(data: { results: { openAt: string; timeBasedPerformances: Record<WindowName, PositionTimeBasedPerformance | null> }[] }, now: number): number {
  let next = Infinity;
  for (const p of data.results) {
    for (const w of WINDOWS) {
      if (p.timeBasedPerformances[w]?.status === 'too_young') next = Math.min(next, Date.parse(p.openAt) + WINDOW_MS[w] - now);
    }
  }
  return next;
}

/**
 * `timeBasedPerformances` for a page of positions: one query finds, per position and window,
 * the first price sample at or after the evaluation time (ASOF JOIN); a window is null only
 * when the asset has no price series at all.
 */
export async function timeBasedPerformances(store: Store, positions: readonly PositionForEvaluation[], now: number) {
  const out = new Map<number, Record<WindowName, PositionTimeBasedPerformance | null>>();
  if (!positions.length) return out;
  const assetIds = [...new Set(positions.map((p) => p.assetId))];
  const pids: number[] = []; const aids: number[] = []; const wins: string[] = []; const evals: number[] = [];
  for (const p of positions) for (const w of WINDOWS) { pids.push(p.id); aids.push(p.assetId); wins.push(w); evals.push(p.openAt + WINDOW_MS[w]); }
  const [samples, series] = await Promise.all([
    store.query<{ pid: number; win: WindowName; price: number | null; at: number | null }>(`
      SELECT q.pid AS pid, q.win AS win, p.price AS price, toUnixTimestamp64Milli(p.at) AS at
      FROM (
        SELECT tupleElement(x, 1) AS pid, tupleElement(x, 2) AS assetId, tupleElement(x, 3) AS win,
               fromUnixTimestamp64Milli(tupleElement(x, 4), 'UTC') AS evalAt
        FROM (SELECT arrayJoin(arrayZip({pids:Array(UInt64)}, {aids:Array(UInt64)}, {wins:Array(String)}, {evals:Array(Int64)})) AS x)
      ) AS q
      ASOF LEFT JOIN (SELECT assetId, at, price FROM $db.prices FINAL WHERE deleted = 0 AND assetId IN {assetIds:Array(UInt64)}) AS p
        ON q.assetId = p.assetId AND p.at >= q.evalAt
      SETTINGS join_use_nulls = 1`, { pids, aids, wins, evals, assetIds }),
    store.query<{ assetId: number }>(`SELECT DISTINCT assetId FROM $db.prices FINAL WHERE deleted = 0 AND assetId IN {assetIds:Array(UInt64)}`, { assetIds }),
  ]);
  const priced = new Set(series.map((s) => s.assetId));
  const fwd = new Map(samples.map((s) => [`${s.pid}/${s.win}`, s.price === null || s.at === null ? null : { price: s.price, at: s.at }]));
  for (const p of positions) {
    const perf = {} as Record<WindowName, PositionTimeBasedPerformance | null>;
    for (const w of WINDOWS) perf[w] = priced.has(p.assetId) ? evaluateWindow(p, w, fwd.get(`${p.id}/${w}`) ?? null, now) : null;
    out.set(p.id, perf);
  }
  return out;
}
