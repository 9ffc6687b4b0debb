import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../schemas/api/errors.ts';
import { validationDetails } from '../../schemas/api/validation.ts';
import { readFailure, tooLarge } from '../reads/cost.ts';

export function sendError(reply: FastifyReply, request: FastifyRequest, err: ApiError): FastifyReply {
  reply.header('x-request-id', request.id); // also for what is refused before the onRequest hook runs
  if (
    err.code === 'RATE_LIMITED' ||
    err.code === 'OVERLOADED' ||
    err.code === 'STORE_UNAVAILABLE' ||
    err.code === 'AUTHENTICATION_UNAVAILABLE'
  )
    reply.header('retry-after', String((err.details as any)?.retryAfterSeconds ?? 1));
  return reply.code(err.status).send({
    success: false,
    error: { code: err.code, message: err.message, details: err.details ?? null },
    requestId: request.id,
  });
}

/**
 * Refusals of a flood (OVERLOADED, RATE_LIMITED) are answered after REFUSAL_PACE_MS: a client that
 * does not wait its Retry-After would otherwise turn each refusal straight into its next request
 * and keep the process busy answering refusals; a client that does wait loses nothing. At most
 * MAX_PACED are held at once (past that, answered at once).
 */
export const REFUSAL_PACE_MS = 1_000;
const MAX_PACED = 4096;
let paced = 0;
export function paceRefusal<T>(code: string, answer: () => T): T | Promise<T> {
  if ((code !== 'OVERLOADED' && code !== 'RATE_LIMITED') || paced >= MAX_PACED) return answer();
  paced++;
  return new Promise((resolve) =>
    setTimeout(() => {
      paced--;
      resolve(answer());
    }, REFUSAL_PACE_MS),
  );
}

export function errorHandler(err: FastifyError | ApiError, request: FastifyRequest, reply: FastifyReply) {
  if (err instanceof ApiError) return paceRefusal(err.code, () => sendError(reply, request, err));
  if ((err as FastifyError).validation) {
    const details = validationDetails(
      (err as FastifyError).validation ?? [],
      request.routeOptions.schema?.querystring,
      request.query as Record<string, unknown>,
    );
    const first = details[0];
    return sendError(
      reply,
      request,
      new ApiError('VALIDATION_ERROR', first ? `Invalid query parameter ${first.param}: ${first.message}` : 'Invalid request', details),
    );
  }
  // fastify's handlerTimeout: the read's deadline passed (its queries stop at their own bounds).
  if ((err as FastifyError).code === 'FST_ERR_HANDLER_TIMEOUT') return sendError(reply, request, tooLarge('deadline'));
  const status = (err as FastifyError).statusCode;
  if (status && status >= 400 && status < 500) {
    return sendError(reply, request, new ApiError(status === 404 ? 'NOT_FOUND' : 'VALIDATION_ERROR', err.message));
  }
  // A store that does not answer outside a read's bounded store (a credential look-up): 503, not a fault of ours.
  const failure = readFailure(err);
  if (failure instanceof ApiError) return sendError(reply, request, failure);
  request.log.error({ err }, 'request failed');
  return sendError(reply, request, new ApiError('INTERNAL_ERROR', 'Internal error; quote the requestId when reporting it'));
}
