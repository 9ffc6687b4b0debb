/**
 * Keeps `x` among the `limit` first of `best` in an order (`ahead(a, b) < 0`: a goes first, and no
 * two differ by nothing), which `best` is kept in: a top of thousands of candidates without
 * sorting, or building, the rest of them (rankings, the top groups of activity summaries).
 */
export function keepBest<T>(best: T[], x: T, limit: number, ahead: (a: T, b: T) => number): void {
  if (best.length >= limit && !(ahead(x, best[best.length - 1]!) < 0)) return;
  // The place of the first one it goes ahead of.
  let lo = 0;
  let hi = best.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ahead(best[mid]!, x) < 0) lo = mid + 1;
    else hi = mid;
  }
  best.splice(lo, 0, x);
  if (best.length > limit) best.pop();
}
