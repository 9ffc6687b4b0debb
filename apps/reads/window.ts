import { ApiError } from '../../schemas/api/errors.ts';
import type { AppliedTimeRange } from '../../schemas/api/envelope.ts';
import type { Principal } from './context.ts';

export const DAY_MS = 86_400_000;
export const DEFAULT_WINDOW_MS = 90 * DAY_MS;

export interface Window { start: number | null; end: number | null }

/**
 * Resolves a historical list's time bounds (DESIGN 6): both omitted -> the last 90 days ending
 * at serverTime (unless `unboundedDefault`, used for id hydration); an explicit start older than
 * the account's history window is clamped forward; an omitted start is held to the window too.
 */
export function resolveWindow(
  q: { startTime?: string; endTime?: string },
  now: Date,
  principal: Principal,
  opts: { fromCursor?: [number | null, number | null]; unboundedDefault?: boolean } = {},
): Window {
  if (opts.fromCursor) return { start: opts.fromCursor[0], end: opts.fromCursor[1] };
  let start = q.startTime !== undefined ? Date.parse(q.startTime) : null;
  let end = q.endTime !== undefined ? Date.parse(q.endTime) : null;
  if (start === null && end === null && !opts.unboundedDefault) {
    end = now.getTime();
    start = end - DEFAULT_WINDOW_MS;
  }
  if (start !== null && end !== null && start > end) {
    throw new ApiError('VALIDATION_ERROR', 'startTime must not be after endTime', [{ param: 'startTime', message: 'must not be after endTime' }]);
  }
  if (principal.historyWindowDays != null) {
    const floor = now.getTime() - principal.historyWindowDays * DAY_MS;
    if (start === null || start < floor) start = floor;
  }
  return { start, end };
}

export const appliedTimeRange = (w: Window): AppliedTimeRange => ({
  startTime: w.start === null ? null : new Date(w.start).toISOString(),
  endTime: w.end === null ? null : new Date(w.end).toISOString(),
});
