import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Store } from '../../projectors/store/port.ts';
import { ApiError } from '../../schemas/api/errors.ts';
import type { ApiKeyAuthenticator } from '../auth/keys.ts';
import type { Principal } from '../reads/context.ts';
import { OPERATIONS, type Operation } from '../registry.ts';
import { registerDocs } from './docs.ts';
import { errorHandler, sendError } from './errors.ts';
import { openApiDocument } from './openapi.ts';
import { cacheKey, envelope, isCacheable, type ReadCache } from './read-cache.ts';

export interface ApiDeps {
  store: Store;
  auth: ApiKeyAuthenticator;
  /** Count of projector commits so far (healthz shows it; the read cache will key on it). */
  dataVersion: () => number | Promise<number>;
  logger?: FastifyServerOptions['logger'];
  /** Answers keyed by (operation, parameters, policy, data version); omit to read the store every time. */
  readCache?: ReadCache;
}

declare module 'fastify' {
  interface FastifyRequest { principal?: Principal; startedAt: Date }
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

function denyByPolicy(op: Operation, p: Principal): string | null {
  if (!p.scopes.has(op.scope)) return `This key lacks the ${op.scope} scope`;
  const none = (m: Principal['messageVisibility']) => m.mode === 'none';
  if (op.visibility === 'msg' && none(p.messageVisibility)) return 'This account has no message visibility';
  if (op.visibility === 'sig' && none(p.signalVisibility)) return 'This account has no signal visibility';
  if (op.visibility === 'either' && none(p.messageVisibility) && none(p.signalVisibility)) return 'This account has neither message nor signal visibility';
  return null;
}

/** Checks list sizes that a pattern cannot express (`x-list-max`). */
function checkListSizes(op: Operation, query: Record<string, unknown>): void {
  const props = (op.query as any).properties as Record<string, any>;
  for (const [name, value] of Object.entries(query)) {
    const max = props[name]?.['x-list-max'];
    if (typeof value === 'string' && max && new Set(value.split(',')).size > max) {
      throw new ApiError('VALIDATION_ERROR', `Invalid query parameter ${name}: at most ${max} values`, [{ param: name, message: `must have at most ${max} values` }]);
    }
  }
}

export function buildApi(deps: ApiDeps): FastifyInstance {
  const app = Fastify({
    logger: deps.logger ?? false,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    ajv: {
      customOptions: {
        removeAdditional: false, // unknown query parameters are rejected, not dropped
        coerceTypes: true,
        useDefaults: true,
        allErrors: true,
        keywords: ['x-list', 'x-list-max', 'x-list-message'],
      },
    },
  });

  app.decorateRequest('principal', undefined);
  app.decorateRequest('startedAt', null as unknown as Date);
  app.addHook('onRequest', async (req, reply) => {
    req.startedAt = new Date();
    reply.header('x-request-id', req.id);
  });
  app.setErrorHandler(errorHandler);
  app.setNotFoundHandler((req, reply) => sendError(reply, req, new ApiError('NOT_FOUND', `No route GET ${req.url.split('?')[0]}`)));

  const health = async (req: { id: string }) => ({
    success: true, data: { status: 'ok', serverTime: new Date().toISOString(), dataVersion: await deps.dataVersion() }, requestId: req.id,
  });
  app.get('/healthz', health);
  const openapi = { v1: openApiDocument('v1'), v2: openApiDocument('v2') };
  app.get('/openapi.json', async () => openapi.v1); // the host-root description is version 1 (contract 9.3)
  for (const v of ['v1', 'v2'] as const) {
    app.get(`/${v}/healthz`, health);
    app.get(`/${v}/openapi.json`, async () => openapi[v]);
  }
  registerDocs(app);

  for (const op of OPERATIONS) {
    for (const version of op.versions) {
      app.route({
        method: 'GET',
        url: `/${version}${op.path}`,
        schema: { querystring: op.query, response: { 200: op.response } },
        // Authentication runs before validation: a caller without a valid key learns nothing about parameters.
        preValidation: async (req) => {
          const principal = await deps.auth.authenticate(req.headers['x-api-key'] as string | undefined);
          const denied = denyByPolicy(op, principal);
          if (denied) throw new ApiError('FORBIDDEN', denied);
          req.principal = principal;
        },
        handler: async (req, reply) => {
          const query = req.query as Record<string, unknown>;
          checkListSizes(op, query);
          const ctx = { store: deps.store, principal: req.principal!, now: req.startedAt };
          if (!deps.readCache || !isCacheable(op.cache, query, ctx.principal)) {
            return { success: true, data: await op.handler(ctx, query), requestId: req.id };
          }
          // The data version is read before the store: an answer is never older than its key.
          const key = cacheKey(op, query, ctx.principal, await deps.dataVersion());
          const entry = (await deps.readCache.get(key))
            ?? (await deps.readCache.put(key, op.cache!, (await op.handler(ctx, query)) as any, ctx.now.getTime()));
          // A hit costs no query and no re-serialization: the stored JSON is spliced into a fresh envelope.
          return reply.type('application/json; charset=utf-8').send(envelope(entry, ctx.now.toISOString(), req.id));
        },
      });
    }
  }
  return app;
}
