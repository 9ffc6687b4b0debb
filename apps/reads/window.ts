import { ApiError } from '../../schemas/api/errors.ts';
import type { AppliedTimeRange } from '../../schemas/api/envelope.ts';
import { parseDateTime } from '../../schemas/formats.ts';
import type { Principal } from './context.ts';

export const DAY_MS = 86_400_000;
export const DEFAULT_WINDOW_MS = 90 * DAY_MS;

export interface Window { start: number | null; end: number | null }

/**
 * Resolves a historical list's time bounds (DESIGN 6): both omitted -> the last 90 days ending
 * at serverTime (unless `unboundedDefault`, used for id hydration); a later page keeps the window
 * its first page resolved (carried by the cursor). Whatever the source, a start older than the
 * account's history window, or none at all, is clamped forward to it against this request's
 * clock: a cursor can never widen what its caller may read.
 */
export function resolveWindow(
  q: { startTime?: string; endTime?: string },
  now: Date,
  principal: Principal,
  opts: { fromCursor?: [number | null, number | null]; unboundedDefault?: boolean } = {},
): Window {
  let start: number | null;
  let end: number | null;
  if (opts.fromCursor) {
    [start, end] = opts.fromCursor;
  } else {
    // The query schema admitted these strings with the same strict parser, so they parse.
    start = q.startTime !== undefined ? parseDateTime(q.startTime) : null;
    end = q.endTime !== undefined ? parseDateTime(q.endTime) : null;
    if (start === null && end === null && !opts.unboundedDefault) {
      end = now.getTime();
      start = end - DEFAULT_WINDOW_MS;
    }
    if (start !== null && end !== null && start > end) {
      throw new ApiError('VALIDATION_ERROR', 'startTime must not be after endTime', [{ param: 'startTime', message: 'must not be after endTime' }]);
    }
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
