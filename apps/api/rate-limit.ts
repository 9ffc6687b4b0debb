import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { type RateLimiterAbstract, RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import { ApiError } from '../../schemas/api/errors.ts';

/**
 * Rate limits (issue 24, DESIGN 6 rows Overload and Outages): requests per minute per account,
 * counted after authentication on REST and per tool call on MCP, and per client address before
 * authentication. On by default (DEFAULT_RATE_LIMITS). Counts are in process, or shared by every
 * replica through Redis; when Redis does not answer, the account limits fail open (the request is
 * answered, a line is logged at most every 30 s, and `failedOpen` counts it).
 */
export interface RateLimits {
  /** Requests per minute of an account without an override; undefined: not limited. */
  perMinute?: number;
  /** Overrides by account id. */
  perAccount: ReadonlyMap<string, number>;
  /** Requests per minute per client address, counted before authentication (in process); undefined: not limited. */
  perAddress?: number;
  /** Counts shared by every API replica (distributed mode); in process when omitted. */
  redis?: Redis;
  /** The deployment's key prefix in that Redis (`redisKeys`): deployments sharing one Redis keep their counts apart. */
  redisPrefix?: string;
}

/** What RATE_LIMITS means when it is not set. */
export const DEFAULT_RATE_LIMITS = 'default=600,address=6000';

/**
 * `RATE_LIMITS`: comma-separated `default=N` (each account), `address=N` (each client address,
 * before authentication) and `ACCOUNT_ID=N` (one account), requests per minute, a positive
 * integer. Unset or empty: DEFAULT_RATE_LIMITS; `off`: no limits. Anything else is an error that says what is wrong.
 */
export function parseRateLimits(spec: string | undefined): RateLimits | undefined {
  if (spec === undefined || !spec.trim()) spec = DEFAULT_RATE_LIMITS;
  if (spec.trim() === 'off') return undefined;
  let perMinute: number | undefined;
  let perAddress: number | undefined;
  const perAccount = new Map<string, number>();
  for (const entry of spec
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const m = /^([^=\s]+)=(\d{1,9})$/.exec(entry);
    const n = m ? Number(m[2]) : 0;
    if (!m || n < 1)
      throw new Error(
        `RATE_LIMITS: "${entry}" is not NAME=N with N a positive whole number of requests per minute (NAME: default, address or an account id), nor "off"`,
      );
    if (m[1] === 'default') perMinute = n;
    else if (m[1] === 'address') perAddress = n;
    else perAccount.set(m[1]!, n);
  }
  return { perMinute, perAccount, perAddress };
}

export type Decision =
  | { limited: false; headers: Record<string, string> }
  | { limited: true; headers: Record<string, string>; error: ApiError };

const WINDOW_SECONDS = 60;
const NO_LIMIT: Decision = { limited: false, headers: {} };

export class RateLimiter {
  private readonly byPoints = new Map<number, RateLimiterAbstract>();
  private readonly address?: RateLimiterMemory;
  private lastComplaint = 0;
  /** Requests answered without counting because the shared counts did not answer. */
  failedOpen = 0;

  constructor(
    private readonly limits: RateLimits,
    private readonly log: (msg: string) => void = () => {},
    private readonly failOpen: () => void = () => {},
  ) {
    if (limits.perAddress) this.address = new RateLimiterMemory({ keyPrefix: 'addr', points: limits.perAddress, duration: WINDOW_SECONDS });
  }

  get limitsAddresses(): boolean {
    return this.address !== undefined;
  }

  /** Counts one request (or tool call) of `accountId`. */
  account(accountId: string): Promise<Decision> | Decision {
    const points = this.limits.perAccount.get(accountId) ?? this.limits.perMinute;
    if (points === undefined) return NO_LIMIT;
    return this.consume(this.limiter(points), accountId, points, 'account', 'This account may make');
  }

  /** Counts one request from a client address, before its credential is looked at. */
  addressOf(ip: string): Promise<Decision> | Decision {
    if (!this.address) return NO_LIMIT;
    return this.consume(this.address, ip, this.limits.perAddress!, 'address', 'This address may make');
  }

  private limiter(points: number): RateLimiterAbstract {
    let l = this.byPoints.get(points);
    if (!l) {
      const opts = { keyPrefix: `${this.limits.redisPrefix ?? 'signalbase'}:ratelimit:${points}`, points, duration: WINDOW_SECONDS };
      // rejectIfRedisNotReady: while Redis is away, fail at once (and open) instead of queueing the command.
      l = this.limits.redis
        ? new RateLimiterRedis({ ...opts, storeClient: this.limits.redis, rejectIfRedisNotReady: true })
        : new RateLimiterMemory(opts);
      this.byPoints.set(points, l);
    }
    return l;
  }

  private async consume(l: RateLimiterAbstract, key: string, points: number, kind: string, who: string): Promise<Decision> {
    try {
      const res = await l.consume(key);
      return { limited: false, headers: headersOf(points, res) };
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        const retry = Math.max(1, Math.ceil(err.msBeforeNext / 1000));
        return {
          limited: true,
          headers: headersOf(points, err),
          error: new ApiError('RATE_LIMITED', `${who} ${points} requests per minute; retry in ${retry} s`, {
            limit: points,
            retryAfterSeconds: retry,
          }),
        };
      }
      this.failedOpen++;
      this.failOpen();
      if (Date.now() - this.lastComplaint > 30_000) {
        this.lastComplaint = Date.now();
        this.log(`rate limits: the ${kind} counts did not answer (${(err as Error).message}); answering without counting until they do`);
      }
      return NO_LIMIT;
    }
  }
}

function headersOf(points: number, res: RateLimiterRes): Record<string, string> {
  return {
    'ratelimit-limit': String(points),
    'ratelimit-remaining': String(Math.max(0, res.remainingPoints)),
    'ratelimit-reset': String(Math.max(1, Math.ceil(res.msBeforeNext / 1000))),
  };
}

/** Applies a decision to a reply: its headers, and the refusal when limited. */
export function applyDecision(reply: FastifyReply, d: Decision): ApiError | undefined {
  if (Object.keys(d.headers).length) reply.headers(d.headers);
  return d.limited ? d.error : undefined;
}

/** The preHandler of the REST reads: counts the authenticated account's request. */
export function accountLimit(limiter: RateLimiter) {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const refusal = applyDecision(reply, await limiter.account(req.principal!.accountId));
    if (refusal) throw refusal;
  };
}

/**
 * Rows an account may export per minute (issue 28, ExportLimits.rowsPerMinute), counted as they
 * are sent, over all its exports; shared by every replica through Redis when the request limits
 * are. While the counts do not answer, exports go on (fail open, as the request limits do).
 */
export class ExportRowBudget {
  private readonly limiter: RateLimiterAbstract;

  constructor(
    private readonly perMinute: number,
    shared?: { redis: Redis; prefix: string },
  ) {
    const opts = { keyPrefix: `${shared?.prefix ?? 'signalbase'}:export-rows`, points: perMinute, duration: WINDOW_SECONDS };
    this.limiter = shared
      ? new RateLimiterRedis({ ...opts, storeClient: shared.redis, rejectIfRedisNotReady: true })
      : new RateLimiterMemory(opts);
  }

  /** Rows the account may still export this minute, and the ms until its minute ends. */
  async left(accountId: string): Promise<{ rows: number; retryMs: number }> {
    try {
      const res = await this.limiter.get(accountId);
      if (!res) return { rows: this.perMinute, retryMs: 0 };
      return { rows: Math.max(0, this.perMinute - res.consumedPoints), retryMs: Math.max(0, res.msBeforeNext) };
    } catch {
      return { rows: this.perMinute, retryMs: 0 };
    }
  }

  async spend(accountId: string, rows: number): Promise<void> {
    if (rows > 0) await this.limiter.penalty(accountId, rows).catch(() => {});
  }

  /** The refusal of an export whose account has no rows left this minute. */
  refusal(retryMs: number): ApiError {
    const retry = Math.max(1, Math.ceil(retryMs / 1000));
    return new ApiError('RATE_LIMITED', `This account may export ${this.perMinute} rows per minute; retry in ${retry} s`, {
      limit: this.perMinute,
      retryAfterSeconds: retry,
    });
  }
}
