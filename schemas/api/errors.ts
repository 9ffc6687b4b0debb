import Type from 'typebox';

/** Stable machine-readable error codes and their HTTP statuses (contract section 7, DESIGN section 6). */
export const ERROR_STATUS = {
  VALIDATION_ERROR: 400,
  INVALID_CURSOR: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  URI_TOO_LONG: 414,
  HEADERS_TOO_LARGE: 431,
  PERFORMANCE_WINDOW_NOT_ELAPSED: 422,
  BUCKET_LIMIT_EXCEEDED: 422,
  QUERY_TOO_LARGE: 422,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  AUTHENTICATION_UNAVAILABLE: 503,
  OVERLOADED: 503,
  STORE_UNAVAILABLE: 503,
} as const;
export type ErrorCode = keyof typeof ERROR_STATUS;

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: unknown = null,
  ) {
    // An answer, not a fault: no stack to capture (a flood of refusals should cost little).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.status = ERROR_STATUS[code];
  }
}

export const ValidationDetail = Type.Object({ param: Type.String(), message: Type.String() });
export type ValidationDetail = Type.Static<typeof ValidationDetail>;

export const ErrorEnvelope = Type.Object({
  success: Type.Literal(false),
  error: Type.Object({
    code: Type.String({ enum: Object.keys(ERROR_STATUS) }),
    message: Type.String(),
    details: Type.Optional(Type.Union([Type.Any(), Type.Null()])),
  }),
  requestId: Type.String(),
});

/** What a caller (a program or an assistant) does about each error: the agent guide and llms.txt say it. */
export const ERROR_RECOVERY: Record<ErrorCode, string> = {
  VALIDATION_ERROR:
    '`details` lists each bad parameter as `{ param, message }`: fix those parameters and call again; nothing else was wrong.',
  INVALID_CURSOR:
    'The cursor was edited, belongs to other filters or another account, or the account policy changed: start again from the first page (no cursor) with the same filters.',
  UNAUTHORIZED: 'The credential is missing, invalid or revoked: get a new API key (REST) or sign in again (MCP).',
  FORBIDDEN:
    "The credential lacks the read's scope, or the account is blocked, unverified or has no visibility of the needed kind: retrying will not help; ask the account owner.",
  NOT_FOUND: 'No such path (the v2-only reads answer 404 under /v1): check the base address and path.',
  METHOD_NOT_ALLOWED: 'Every read is a GET.',
  URI_TOO_LONG: 'The URL is over 32 KiB: split long id lists over several calls.',
  HEADERS_TOO_LARGE: 'Send smaller request headers.',
  PERFORMANCE_WINDOW_NOT_ELAPSED:
    'No position of the resolved sample has reached its evaluation window yet. Do not substitute figures: retry with one of `details.alternatives`: `preserve_sample` keeps the sample and uses a shorter timeBasedPerformanceWindow; `preserve_evaluation` keeps the window and starts earlier (pass its startTime and endTime).',
  BUCKET_LIMIT_EXCEEDED:
    'The range holds more than 168 buckets of the interval per group: use a larger interval (hour -> day -> week) or a shorter startTime..endTime.',
  QUERY_TOO_LARGE:
    'The read would cost more than its bounds (store time, memory or rows read, the handler deadline, or the answer size): narrow it and call again: a shorter startTime..endTime, fewer ids per list parameter, a smaller limit, or a larger interval. `details.bound` names the bound that was hit.',
  RATE_LIMITED: 'The key spent its requests per minute: wait `Retry-After` seconds (also `details.retryAfterSeconds`), then call again.',
  INTERNAL_ERROR: 'A fault on the server: retry once; if it persists, report it with the requestId.',
  AUTHENTICATION_UNAVAILABLE: 'Authentication could not be checked just now: retry in a few seconds.',
  OVERLOADED:
    'The server is answering as many reads as it can (or this account already has its share in flight): wait `Retry-After` seconds (also `details.retryAfterSeconds`) and call again; send fewer concurrent requests.',
  STORE_UNAVAILABLE:
    'The data store is not answering just now: wait `Retry-After` seconds (also `details.retryAfterSeconds`) and call again; `/healthz` says `degraded` meanwhile.',
};
