import type { PerformanceStatus, PositionTimeBasedPerformance, WindowName } from '../../schemas/api/resources.ts';
import { WINDOW_MS, WINDOWS } from '../../schemas/api/resources.ts';
import type { Store } from '../../storage/port.ts';
import { POSITION_PERFORMANCES_TABLE } from '../../storage/tables/performance.ts';

/** Milliseconds until the first `too_young` window of a page of positions comes of age (Infinity: none will). */
export function untilNextStatusChange(
  data: { results: { openAt: string; timeBasedPerformances: Record<WindowName, PositionTimeBasedPerformance | null> }[] },
  now: number,
): number {
  let next = Infinity;
  for (const p of data.results) {
    for (const w of WINDOWS) {
      if (p.timeBasedPerformances[w]?.status === 'too_young') next = Math.min(next, Date.parse(p.openAt) + WINDOW_MS[w] - now);
    }
  }
  return next;
}

/**
 * `timeBasedPerformances` for a page of positions, from the evaluation rows of the read model
 * (projectors/performance), looked up by primary key: each window shows `too_young` while
 * serverTime is before its evaluation time, its stored evaluation after. A window is null when
 * the asset has no price series at all (status '') or no evaluation exists.
 */
export async function timeBasedPerformances(store: Store, positions: readonly { id: number; openAt: number }[], now: number) {
  const out = new Map<number, Record<WindowName, PositionTimeBasedPerformance | null>>();
  if (!positions.length) return out;
  const rows = await store.query<{ positionId: number; window: WindowName; status: string; returnPercentage: number | null; seq: number }>(
    `
    SELECT positionId, window, status, returnPercentage, seq FROM ${POSITION_PERFORMANCES_TABLE}
    WHERE positionId IN {ids:Array(UInt64)}`,
    { ids: positions.map((p) => p.id) },
  );
  // The newest row of each (position, window) is its evaluation (rows not merged yet may precede it).
  const found = new Map<string, [string, number | null]>();
  const seqs = new Map<string, number>();
  for (const r of rows) {
    const k = `${r.positionId}/${r.window}`;
    if ((seqs.get(k) ?? -1) < r.seq) {
      seqs.set(k, r.seq);
      found.set(k, [r.status, r.returnPercentage]);
    }
  }
  for (const p of positions) {
    const perf = {} as Record<WindowName, PositionTimeBasedPerformance | null>;
    for (const w of WINDOWS) {
      const e = found.get(`${p.id}/${w}`);
      perf[w] =
        !e || e[0] === ''
          ? null
          : now < p.openAt + WINDOW_MS[w]
            ? { window: w, status: 'too_young', returnPercentage: null }
            : { window: w, status: e[0] as PerformanceStatus, returnPercentage: e[1] };
    }
    out.set(p.id, perf);
  }
  return out;
}
