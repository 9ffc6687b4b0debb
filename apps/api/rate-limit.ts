import fastifyRateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { ApiError } from '../../schemas/api/errors.ts';

/**
 * Per-key rate limits (DESIGN 6: 429 RATE_LIMITED with Retry-After): requests per minute for each
 * API key, a default and overrides by key id (`signalbase keys list` shows the ids). A key with no
 * limit (no default, no override) is not limited.
 */
export interface RateLimits {
  /** Requests per minute of a key without an override; undefined: not limited. */
  perMinute?: number;
  perKey: ReadonlyMap<string, number>;
  /** Counts shared by every API replica (distributed mode); in process when omitted. */
  redis?: Redis;
}

/**
 * `RATE_LIMITS`: comma-separated `default=N` and `KEY_ID=N` (requests per minute, a positive
 * integer). Unset or empty: no limits. Anything else is an error that says what is wrong.
 */
export function parseRateLimits(spec: string | undefined): RateLimits | undefined {
  if (spec === undefined || !spec.trim()) return undefined;
  let perMinute: number | undefined;
  const perKey = new Map<string, number>();
  for (const entry of spec.split(',').map((e) => e.trim()).filter(Boolean)) {
    const m = /^([^=\s]+)=(\d{1,9})$/.exec(entry);
    const n = m ? Number(m[2]) : 0;
    if (!m || n < 1) throw new Error(`RATE_LIMITS: "${entry}" is not NAME=N with N a positive whole number of requests per minute (NAME: default or a key id)`);
    if (m[1] === 'default') perMinute = n; else perKey.set(m[1]!, n);
  }
  return { perMinute, perKey };
}

/**
 * Registers @fastify/rate-limit for the read routes and returns their preHandler: it counts the
 * authenticated key's requests (after authentication: a refused key is not counted), in a fixed
 * window of a minute. Over the limit: 429 RATE_LIMITED in the error envelope, with `Retry-After`
 * and the `RateLimit-*` headers (draft spec); under it, the same headers on the answer.
 */
export function rateLimiter(app: FastifyInstance, limits: RateLimits): (req: FastifyRequest, reply: FastifyReply) => Promise<unknown> {
  const limitOf = (key: string) => limits.perKey.get(key) ?? limits.perMinute;
  app.register(fastifyRateLimit, {
    global: false,
    timeWindow: 60_000,
    enableDraftSpec: true,
    ...(limits.redis ? { redis: limits.redis, nameSpace: 'signalbase:ratelimit:' } : {}),
    keyGenerator: (req) => req.principal!.keyId,
    allowList: (_req, key) => limitOf(key) === undefined,
    max: (_req, key) => limitOf(key) ?? 0,
    errorResponseBuilder: (_req, ctx) => new ApiError('RATE_LIMITED',
      `This key may make ${ctx.max} requests per minute; retry in ${Math.max(1, Math.ceil(ctx.ttl / 1000))} s`,
      { limit: ctx.max, retryAfterSeconds: Math.max(1, Math.ceil(ctx.ttl / 1000)) }),
  });
  // The plugin's handler exists once the plugin has loaded (app.ready), before any request.
  let handler: ((req: FastifyRequest, reply: FastifyReply) => Promise<unknown>) | undefined;
  return function (this: FastifyInstance, req, reply) {
    handler ??= app.rateLimit() as unknown as (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>;
    return handler.call(this, req, reply);
  };
}
