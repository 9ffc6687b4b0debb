import {
  type PerformanceStatus,
  type PositionTimeBasedPerformance,
  TOLERANCE_MS,
  WINDOW_MS,
  type WindowName,
} from '../../schemas/api/resources.ts';

export interface PositionForEvaluation {
  assetId: number;
  openAt: number;
  openPrice: number | null;
  direction: 'long' | 'short';
}
export interface ForwardSample {
  price: number;
  at: number;
}

/** One window's evaluation of one position; the order of the checks is the contract's. */
export function evaluateWindow(
  p: PositionForEvaluation,
  window: WindowName,
  forward: ForwardSample | null,
  now: number,
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

/** An asset's live price samples, ascending by time (two parallel arrays). */
export interface PriceSeries {
  at: Float64Array;
  price: Float64Array;
}

/** The first sample at or after `t` (binary search), or null. */
export function firstSampleFrom(series: PriceSeries, t: number): ForwardSample | null {
  let lo = 0;
  let hi = series.at.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (series.at[mid]! < t) lo = mid + 1;
    else hi = mid;
  }
  return lo < series.at.length ? { at: series.at[lo]!, price: series.price[lo]! } : null;
}
