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
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  AUTHENTICATION_UNAVAILABLE: 503,
} as const;
export type ErrorCode = keyof typeof ERROR_STATUS;

export class ApiError extends Error {
  readonly status: number;
  constructor(readonly code: ErrorCode, message: string, readonly details: unknown = null) {
    super(message);
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
