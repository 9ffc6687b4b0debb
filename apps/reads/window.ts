import type { AppliedTimeRange } from '../../schemas/api/envelope.ts';
import { ApiError } from '../../schemas/api/errors.ts';
import { parseDateTime } from '../../schemas/formats.ts';
import type { Principal } from './principal.ts';

export const DAY_MS = 86_400_000;
export const DEFAULT_WINDOW_MS = 90 * DAY_MS;

export interface Window {
  start: number | null;
  end: number | null;
}

/**
 * A historical list's window as a rule over the clock: what the request fixed (bounds given or
 * carried by a cursor), and what follows serverTime (the default window's end, and a start that
 * trails serverTime: the default window's 90 days, the account's history window). The window of
 * a request is `windowAt(rule, serverTime)`; the read cache keeps the rule to answer later
 * requests with their own window, and to know when a row leaves it.
 */
export interface WindowRule {
  /** Bounds fixed by the request (parameters or cursor); null: none. */
  start: number | null;
  end: number | null;
  /** The end is serverTime (the default window). */
  endAtNow: boolean;
  /** The start is at least serverTime minus this many ms; null: it does not move with the clock. */
  startLagMs: number | null;
}

/**
 * Resolves a historical list's time bounds (DESIGN 6): both omitted -> the last 90 days ending
 * at serverTime (unless `unboundedDefault`, used for id hydration); a later page keeps the window
 * its first page resolved (carried by the cursor). Whatever the source, a start older than the
 * account's history window, or none at all, is clamped forward to it against each request's
 * clock: a cursor can never widen what its caller may read.
 */
export function windowRule(
  q: { startTime?: string; endTime?: string },
  principal: Principal,
  opts: { fromCursor?: [number | null, number | null]; unboundedDefault?: boolean } = {},
): WindowRule {
  let start: number | null;
  let end: number | null;
  let endAtNow = false;
  let startLagMs: number | null = null;
  if (opts.fromCursor) {
    [start, end] = opts.fromCursor;
  } else {
    ({ start, end } = explicitBounds(q));
    if (start === null && end === null && !opts.unboundedDefault) {
      endAtNow = true;
      startLagMs = DEFAULT_WINDOW_MS;
    }
  }
  if (principal.historyWindowDays != null) startLagMs = Math.min(startLagMs ?? Infinity, principal.historyWindowDays * DAY_MS);
  return { start, end, endAtNow, startLagMs };
}

/**
 * The account's history window alone, for reads without a time window of their own that it still
 * bounds by their time field (open positions by openAt, `/assets?traderIds=` by the positions'
 * openAt; DESIGN 6 "History window scope"): a start trailing serverTime, no end. Null: no window.
 */
export function historyRule(principal: Principal): WindowRule | null {
  return principal.historyWindowDays == null
    ? null
    : { start: null, end: null, endAtNow: false, startLagMs: principal.historyWindowDays * DAY_MS };
}

/** The bounds a request gives (null: omitted); two in the wrong order are a 400. */
export function explicitBounds(q: { startTime?: string; endTime?: string }): Window {
  // The query schema admitted these strings with the same strict parser, so they parse.
  const start = q.startTime !== undefined ? parseDateTime(q.startTime) : null;
  const end = q.endTime !== undefined ? parseDateTime(q.endTime) : null;
  if (start !== null && end !== null && start > end) {
    throw new ApiError('VALIDATION_ERROR', 'startTime must not be after endTime', [
      { param: 'startTime', message: 'must not be after endTime' },
    ]);
  }
  return { start, end };
}

/** The window a rule gives at `now` (ms). */
export function windowAt(r: WindowRule, now: number): Window {
  let start = r.start;
  if (r.startLagMs !== null) {
    const floor = now - r.startLagMs;
    if (start === null || start < floor) start = floor;
  }
  return { start, end: r.endAtNow ? now : r.end };
}

/** Whether the window of this rule moves with the clock. */
export const slides = (r: WindowRule): boolean => r.endAtNow || r.startLagMs !== null;

/**
 * The first instant at which a row at time `t`, inside the window now, is outside it: its start
 * (inclusive) has passed `t`. Infinity when the start does not move. The end only moves later.
 */
export const leavesAt = (r: WindowRule, t: number): number => (r.startLagMs === null ? Infinity : t + r.startLagMs + 1);

export function resolveWindow(
  q: { startTime?: string; endTime?: string },
  now: Date,
  principal: Principal,
  opts: { fromCursor?: [number | null, number | null]; unboundedDefault?: boolean } = {},
): Window {
  return windowAt(windowRule(q, principal, opts), now.getTime());
}

export const appliedTimeRange = (w: Window): AppliedTimeRange => ({
  startTime: w.start === null ? null : new Date(w.start).toISOString(),
  endTime: w.end === null ? null : new Date(w.end).toISOString(),
});
