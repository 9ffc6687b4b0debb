import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { Redis } from 'ioredis';
import type { TObject } from 'typebox';
import { READ_MODEL_GRAPH } from '../../projectors/index.ts';
import { ApiError } from '../../schemas/api/errors.ts';
import { EXPORT_LIMITS, type ExportLimits } from '../../schemas/api/exports.ts';
import { MAX_WAIT_SECONDS } from '../../schemas/api/queries.ts';
import { isDateTime } from '../../schemas/formats.ts';
import { type Changes, versionChanges } from '../../storage/changes.ts';
import type { Store } from '../../storage/port.ts';
import type { DevAuthorizationServer } from '../auth/dev-server.ts';
import type { ApiKeyAuthenticator } from '../auth/keys.ts';
import { agentGuide, llmsTxt } from '../mcp/agent-docs.ts';
import type { AuthUrls, TokenVerifier } from '../mcp/bearer.ts';
import { mcpRoutes } from '../mcp/server.ts';
import type { Metrics } from '../metrics.ts';
import { type ReadContext, trackReads } from '../reads/context.ts';
import { Admission, admissionDefaults, admitted, boundedStore, MAX_ANSWER_BYTES, tooLarge, unadmitted } from '../reads/cost.ts';
import { CursorCodec } from '../reads/cursor.ts';
import type { Principal } from '../reads/principal.ts';
import { costOf, type LongPoll, OPERATIONS, type Operation, policyRefusal } from '../registry.ts';
import { registerDocs } from './docs.ts';
import { errorHandler, sendError } from './errors.ts';
import { exportRoutes, type Guards } from './exports.ts';
import { openApiDocument } from './openapi.ts';
import { parseQuery, queryProblems } from './query.ts';
import { accountLimit, applyDecision, ExportRowBudget, RateLimiter, type RateLimits } from './rate-limit.ts';
import { cacheKey, contentEtag, dependenciesOf, etagOf, isCacheable, matchesTag, type ReadCache } from './read-cache.ts';

/** Native export streams (apps/api/exports.ts) at once in one process. */
const EXPORT_STREAMS = 2;

export interface ApiDeps {
  store: Store;
  auth: ApiKeyAuthenticator;
  /** Count of projector commits so far (healthz shows it); without `changes`, every move of it ends every cached answer. */
  dataVersion: () => number | Promise<number>;
  /** The commits and what each changed (issue 26): a cached answer lasts until a commit touches what it read. */
  changes?: Changes;
  /**
   * `starting` until the projector's first catch-up after start, `degraded` while the store does
   * not answer (distributed mode); lag = log records not yet projected.
   */
  health?: () => HealthState | Promise<HealthState>;
  /** Signs keyset cursors (a key kept in DATA_DIR, or a shared secret); a random one when omitted. */
  cursors?: CursorCodec;
  /** The server's clock (ms); tests inject one. */
  clock?: () => number;
  logger?: FastifyServerOptions['logger'];
  /** Answers keyed by (operation, parameters, policy, data version); omit to read the store every time. */
  readCache?: ReadCache;
  /** Requests per minute per account and per client address (apps/api/rate-limit.ts); omit for none. */
  rateLimits?: RateLimits;
  /** Prometheus metrics of this process, served at /metrics; omit for none. */
  metrics?: Metrics;
  /** false: the metrics are served on a listener of their own (METRICS_PORT, apps/metrics.ts serveMetrics), not on this app. */
  metricsRoute?: boolean;
  /** The MCP tool server at /mcp (bearer tokens of `urls().issuer` for `urls().mcpUrl`; browser origins besides MCP_URL's); omit for none. */
  mcp?: { verifier: TokenVerifier; urls: () => AuthUrls; allowedOrigins?: readonly string[] };
  /** The dev authorization server (embedded mode, when AUTH_ISSUER is not set elsewhere). */
  devAuth?: DevAuthorizationServer;
  /** The REST reads (default true); `signalbase mcp` serves MCP alone. */
  rest?: boolean;
  /** Store slots, queue and deadline of the reads (apps/reads/cost.ts); admissionDefaults() when omitted. */
  admission?: Admission;
  /** Rows and bytes per export request, rows per account and minute (issue 28); EXPORT_LIMITS when omitted. */
  exportLimits?: ExportLimits;
  /** Where every replica counts the exported rows per minute (distributed mode: Redis, under the deployment's key prefix); in process when omitted. */
  exportRedis?: { redis: Redis; prefix: string };
}

export interface HealthState {
  status: 'ok' | 'starting' | 'degraded';
  projectorLag: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
    startedAt: Date;
  }
  /** A read route's operation (its MCP tool name): the metrics label its requests. */
  interface FastifyContextConfig {
    operation?: string;
  }
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** After authentication: the policy's refusal, or the query's problems, or nothing (and the principal is on the request). */
function admit(op: Operation, req: FastifyRequest, principal: Principal, admission: Admission, query = op.query): ApiError | undefined {
  const denied = policyRefusal(op, principal);
  if (denied) return new ApiError('FORBIDDEN', denied);
  req.principal = principal;
  const busy = admission.refusal(principal.accountId);
  if (busy) return busy;
  const problems = queryProblems(query, req.query as Record<string, string>);
  const first = problems[0];
  if (first)
    return new ApiError(
      'VALIDATION_ERROR',
      first.param ? `Invalid query parameter ${first.param}: ${first.message}` : `Invalid query: ${first.message}`,
      problems,
    );
  return undefined;
}

/** Longest request target we read (far above any valid query); longer ones get 414. */
export const MAX_URL_LENGTH = 32 * 1024;
/**
 * Node's limit for the request line plus headers; beyond it the HTTP parser refuses the request
 * before fastify sees it. Well above MAX_URL_LENGTH, so that a long URL reaches the 414 check.
 */
const MAX_HEADER_BYTES = 256 * 1024;

function errorBody(code: string, message: string, requestId: string): string {
  return JSON.stringify({ success: false, error: { code, message, details: null }, requestId });
}

/**
 * Requests Node's HTTP parser refuses before fastify sees them (a request line or headers over
 * 64 KiB, malformed HTTP) still get the error envelope (DESIGN 6), written on the raw socket.
 */
function clientErrorHandler(err: Error & { code?: string; rawPacket?: unknown; bytesParsed?: number }, socket: Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed || !socket.writable) return;
  let status = 400;
  let code = 'VALIDATION_ERROR';
  let message = 'Malformed HTTP request';
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    // Only the chunk being parsed is known: no line end before the overflow in it means the
    // parser was still in the request line (a single header that long is not told apart).
    const chunk = Buffer.isBuffer(err.rawPacket) ? err.rawPacket : Buffer.alloc(0);
    const lineEnd = chunk.indexOf('\r\n');
    if (lineEnd === -1 || lineEnd >= (err.bytesParsed ?? chunk.length)) {
      status = 414;
      code = 'URI_TOO_LONG';
      message = `URL longer than ${MAX_URL_LENGTH} bytes`;
    } else {
      status = 431;
      code = 'HEADERS_TOO_LARGE';
      message = `Request headers larger than ${MAX_HEADER_BYTES} bytes`;
    }
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return void socket.destroy();
  }
  const id = randomUUID();
  const body = errorBody(code, message, id);
  socket.end(
    `HTTP/1.1 ${status} ${status === 414 ? 'URI Too Long' : status === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
      `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nx-request-id: ${id}\r\nConnection: close\r\n\r\n${body}`,
  );
}

/** 304 Not Modified: no body (the route's schema types only its 200). */
const notModified = (reply: unknown) => (reply as FastifyReply).code(304).send();

/**
 * The REST API: the fastify instance, the hooks every request passes, the public routes, the MCP
 * routes when configured, and the reads of the registry.
 */
export function buildApi(deps: ApiDeps): FastifyInstance {
  const clock = deps.clock ?? Date.now;
  const cursors = deps.cursors ?? CursorCodec.random();
  const changes = deps.changes ?? versionChanges(deps.dataVersion, READ_MODEL_GRAPH);
  const health = deps.health ?? (() => ({ status: 'ok' as const, projectorLag: 0 }));
  const admission = deps.admission ?? new Admission(admissionDefaults());
  const limiter = deps.rateLimits
    ? new RateLimiter(
        deps.rateLimits,
        (msg) => app.log.warn(msg), // (app exists by the time a limit is counted)
        () => {
          deps.metrics?.rateLimitFailOpen.inc();
          if (deps.rateLimits?.redis) deps.metrics?.redisErrors.inc({ operation: 'rate_limit' });
        },
      )
    : undefined;
  if (deps.metrics) {
    const m = deps.metrics;
    m.watchAdmission(admission);
    admission.onRefusal = (reason) => m.readRefusals.inc({ reason });
  }
  const authenticateRead = (op: Operation, req: FastifyRequest, done: (err?: Error) => void, query = op.query) => {
    const key = req.headers['x-api-key'] as string | undefined;
    let known: Principal | undefined;
    try {
      known = deps.auth.known?.(key);
    } catch (err) {
      return done(err as ApiError);
    }
    if (known) return done(admit(op, req, known, admission, query));
    deps.auth
      .authenticate(key)
      .then((p) => admit(op, req, p, admission, query))
      .then(done, done);
  };
  const countAccount = limiter ? accountLimit(limiter) : undefined;
  /**
   * What a read route (and an export) runs before validation and before its handler: the client
   * address's count before the credential is looked at (a flood of bad keys from one address costs
   * a counter), then authentication and admission with the route's query schema; the account's
   * count once the key is known and the request admitted.
   */
  const guards = (op: Operation, query = op.query) => ({
    preValidation: (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
      if (limiter?.limitsAddresses) {
        return void Promise.resolve(limiter.addressOf(req.ip)).then((d) => {
          const refusal = applyDecision(reply, d);
          if (refusal) return done(refusal);
          authenticateRead(op, req, done, query);
        }, done);
      }
      authenticateRead(op, req, done, query);
    },
    ...(countAccount ? { preHandler: countAccount } : {}),
  });
  /** A read's context: the caller's bounded view of the store, within the request's deadline (wall time, whatever clock the answers use). */
  const readContext = (op: Operation, principal: Principal, now: Date) => {
    const deadline = Date.now() + admission.opts.deadlineMs;
    const slot = { priority: 1 };
    const reads = new Set<string>();
    const store = trackReads(boundedStore(deps.store, costOf(op), deadline, slot), changes.graph, reads);
    const ctx: ReadContext = { store, principal, now, cursors, changes, reads };
    return {
      ctx,
      run: <T>(read: () => Promise<T>) => admitted(admission, principal.accountId, deadline, read, slot),
      /** Without an admission slot (woken long-polls: their own gate bounds them). */
      unslotted: <T>(read: () => Promise<T>) => unadmitted(deadline, read),
    };
  };
  const app = createServer(deps);
  requestHooks(app, deps, clock);
  publicRoutes(app, deps, health);
  if (deps.mcp) {
    const mcp = deps.mcp;
    app.register(async (scope) =>
      mcpRoutes(scope, {
        ...mcp,
        store: deps.store,
        cursors,
        clock,
        dataVersion: deps.dataVersion,
        readContext,
        ...(limiter ? { limiter } : {}),
      }),
    );
  }
  deps.devAuth?.routes(app);

  readRoutes(app, deps, { guards, readContext, cursors, changes, slots: admission.opts.slots });
  if (deps.rest !== false) {
    const limits = deps.exportLimits ?? EXPORT_LIMITS;
    // An export holds a store session for as long as its client reads (a paused client too): few at
    // once, one per account, apart from the reads' slots so that exports never take them all. An
    // account's next exports wait their turn (each up to maxWaitMs), a few of them: every export is
    // one now, so a client that starts three at once is served one after another, not refused.
    const exportStreams = new Admission({
      ...admissionDefaults(EXPORT_STREAMS),
      perAccount: 1,
      queue: 4 * EXPORT_STREAMS,
      perAccountQueue: 4,
      shareMsPerSecond: Number.MAX_SAFE_INTEGER,
    });
    exportRoutes(app, {
      guards,
      slot: (principal) => exportStreams.acquire(principal.accountId, Date.now() + exportStreams.opts.maxWaitMs),
      readContext,
      clock,
      limits,
      budget: new ExportRowBudget(
        limits.rowsPerMinute,
        deps.exportRedis ??
          (deps.rateLimits?.redis ? { redis: deps.rateLimits.redis, prefix: deps.rateLimits.redisPrefix ?? 'signalbase' } : undefined),
      ),
    });
  }
  return app;
}

/** What the read routes share with the MCP routes: the limiter, the credential check and a read's context. */
interface ReadRouting {
  changes: Changes;
  guards: Guards;
  readContext: (
    op: Operation,
    principal: Principal,
    now: Date,
  ) => { ctx: ReadContext; run: <T>(read: () => Promise<T>) => Promise<T>; unslotted: <T>(read: () => Promise<T>) => Promise<T> };
  cursors: CursorCodec;
  /** Store slots of the process: woken long-polls read again this many at a time. */
  slots: number;
}

/** Runs what it is given at most `n` at a time, the rest in turn. */
function gate(n: number): <T>(f: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (f) => {
    if (running >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    else running++;
    try {
      return await f();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}

/** The fastify instance of the API: request ids, timeouts, the query parser and the validator (how every route reads its input). */
function createServer(deps: ApiDeps): FastifyInstance {
  return Fastify({
    logger: deps.logger ?? false,
    requestIdHeader: false,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    http: { maxHeaderSize: MAX_HEADER_BYTES },
    // A request must arrive whole within 30 s (slow senders hold no socket for long), and every
    // route answers within the reads' deadline plus a margin: fastify's own backstop behind it.
    requestTimeout: 30_000,
    handlerTimeout: (deps.admission?.opts.deadlineMs ?? admissionDefaults().deadlineMs) + 2_000,
    clientErrorHandler,
    // Every operation is a GET: HEAD and the rest get 405 with `Allow: GET`.
    exposeHeadRoutes: false,
    routerOptions: { querystringParser: parseQuery },
    // What the router refuses (bad percent-encoding in the path) answers in the error envelope too.
    frameworkErrors: (err, req, reply) => sendError(reply, req, new ApiError('VALIDATION_ERROR', `Malformed URL: ${err.message}`)),
    ajv: {
      customOptions: {
        removeAdditional: false, // unknown query parameters are rejected, not dropped
        coerceTypes: true,
        useDefaults: true,
        allErrors: true,
        keywords: ['x-list', 'x-list-max', 'x-list-message', 'x-list-empty', 'x-rest-only'],
      },
      // The same strict date-time as ingest (schemas/formats.ts), replacing ajv-formats' looser one.
      onCreate: (ajv: any) => ajv.addFormat('date-time', { type: 'string', validate: isDateTime }),
    },
  });
}

/** What every request passes: its start time and id, the URL bound, the error envelope, latency metrics, and 404/405 in the envelope. */
function requestHooks(app: FastifyInstance, deps: ApiDeps, clock: () => number): void {
  app.decorateRequest('principal', undefined);
  app.decorateRequest('startedAt', null as unknown as Date);
  // Hooks take callbacks, not promises: every request passes them, and a hot read costs little else.
  app.addHook('onRequest', (req, reply, done) => {
    req.startedAt = new Date(clock());
    reply.header('x-request-id', req.id);
    done(req.url.length > MAX_URL_LENGTH ? new ApiError('URI_TOO_LONG', `URL longer than ${MAX_URL_LENGTH} bytes`) : undefined);
  });
  app.setErrorHandler(errorHandler);
  const metrics = deps.metrics;
  if (metrics) {
    // Latency per operation and status; a request no route matched is `unmatched` (the label set stays bounded).
    app.addHook('onResponse', (req, reply, done) => {
      const operation = req.routeOptions.config?.operation ?? req.routeOptions.url ?? 'unmatched';
      metrics.requests.observe({ operation, status: String(reply.statusCode) }, reply.elapsedTime / 1000);
      done();
    });
    if (deps.metricsRoute !== false) {
      app.get('/metrics', async (_req, reply) => {
        reply.type(metrics.registry.contentType);
        return metrics.registry.metrics();
      });
    }
  }
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0]!;
    if (req.method !== 'GET' && app.hasRoute({ method: 'GET', url: path })) {
      reply.header('allow', 'GET');
      return sendError(reply, req, new ApiError('METHOD_NOT_ALLOWED', `${req.method} is not allowed on ${path}; every read is a GET`));
    }
    return sendError(reply, req, new ApiError('NOT_FOUND', `No route ${req.method} ${path}`));
  });
}

/** Health, the OpenAPI descriptions, the docs UI and the agent-facing docs: no key needed. */
function publicRoutes(app: FastifyInstance, deps: ApiDeps, health: NonNullable<ApiDeps['health']>): void {
  // DESIGN 6 Health: no key, success envelope; 503 while `starting` (before the first catch-up) or `degraded` (the store away).
  const healthz = async (req: FastifyRequest, reply: FastifyReply) => {
    const [h, dataVersion] = await Promise.all([health(), deps.dataVersion()]);
    reply.code(h.status === 'ok' ? 200 : 503);
    return {
      success: true,
      // NaN: Redis cannot tell the data version just now (distributed mode).
      data: {
        results: [{ status: h.status, dataVersion: Number.isFinite(dataVersion) ? dataVersion : null, projectorLag: h.projectorLag }],
        meta: { serverTime: req.startedAt.toISOString() },
      },
      requestId: req.id,
    };
  };
  const openapi = { v1: openApiDocument('v1'), v2: openApiDocument('v2') };
  app.get('/healthz', healthz);
  app.get('/openapi.json', async () => openapi.v1); // the host-root description is version 1 (contract 9.3)
  for (const v of ['v1', 'v2'] as const) {
    app.get(`/${v}/healthz`, healthz);
    app.get(`/${v}/openapi.json`, async () => openapi[v]);
  }
  registerDocs(app);
  // Agent-facing docs (issue 9), generated from the registry; the MCP URL's origin when there is one.
  const origin = (req: FastifyRequest) => {
    try {
      if (deps.mcp) return new URL(deps.mcp.urls().mcpUrl).origin;
    } catch {
      /* not listening yet: the request's own host */
    }
    return `${req.protocol}://${req.host}`;
  };
  app.get('/llms.txt', async (req, reply) => reply.type('text/plain; charset=utf-8').send(llmsTxt(origin(req))));
  app.get('/agent-guide.md', async (req, reply) => reply.type('text/markdown; charset=utf-8').send(agentGuide(origin(req))));
}

/** The reads of the registry, one route per operation and version: authentication, rate limit, admission, the read cache and ETags. */
function readRoutes(app: FastifyInstance, deps: ApiDeps, r: ReadRouting): void {
  const { guards, readContext, cursors, changes } = r;
  const clock = deps.clock ?? Date.now;
  // A commit wakes every held poll at once: they read again a slot's worth at a time, through a
  // gate of their own instead of admission (whose queue they overflowed, and whose per-account
  // share held them back: 503s and deadlines). Much of what they read is shared (the facts, the watermark).
  const woken = gate(r.slots);
  // The polls one commit wakes that ask the same (of the same account, or whoever asks where the
  // operation says what makes them one question: LongPoll.share) share one read, and whose it was.
  // Each account's copy of a shared answer is made once (`as`): its polls then answer one object,
  // whose ETag is hashed once (contentEtag).
  type Shared = { data: unknown; by: Principal; as: Map<string, unknown> };
  const sameWake = new Map<string, Promise<Shared>>();
  const shared = (key: string, read: () => Promise<{ data: unknown; by: Principal }>): Promise<Shared> => {
    let p = sameWake.get(key);
    if (!p) {
      p = read()
        .then((r) => ({ ...r, as: new Map() }))
        .finally(() => sameWake.delete(key));
      sameWake.set(key, p);
    }
    return p;
  };
  // Closing answers the held polls at once (a poller retries), so that a stop does not wait out their waits.
  const closing = new AbortController();
  app.addHook('preClose', async () => closing.abort());
  /**
   * A long-poll (Operation.longPoll, issue 28): reads; while the answer is empty, waits for a
   * commit that touches the read's tables (a listener and a timer: no query, no admission slot),
   * then reads again at the new serverTime; answers once the answer is not empty, the seconds have
   * passed, or the change log cannot be followed. A client that goes away ends the wait.
   */
  const held = async (
    op: Operation,
    poll: LongPoll,
    seconds: number,
    req: FastifyRequest,
    reply: FastifyReply,
    query: Record<string, unknown>,
  ) => {
    const gone = new AbortController();
    // Only a client that leaves while its poll is held ends the wait (an abort per answered poll
    // cost a thousand woken polls tens of ms).
    const left = () => gone.abort();
    reply.raw.once('close', left);
    try {
      return await holding(op, poll, seconds, req, query, AbortSignal.any([gone.signal, closing.signal]));
    } finally {
      reply.raw.off('close', left);
    }
  };
  const holding = async (
    op: Operation,
    poll: LongPoll,
    seconds: number,
    req: FastifyRequest,
    query: Record<string, unknown>,
    ended: AbortSignal,
  ) => {
    const deadline = Date.now() + seconds * 1000;
    const on = { tables: new Set(poll.tables.map((t) => t.name)), traders: null, assets: null };
    const principal = req.principal!;
    let now = req.startedAt;
    // What the poll asks at each wake: from where its last (empty) answer left it (`since=now`
    // is the head when the poll started, not at each wake).
    let asking = query;
    for (let wake = 0; ; wake++) {
      const seq = await changes.current();
      const ask = asking;
      const share = wake ? (poll.share?.(ask, principal, cursors) ?? null) : null;
      const { wait: _w, ...asked } = ask;
      const same = share ? `${op.tool}\n*\n${share.key}` : `${op.tool}\n${principal.accountId}\n${JSON.stringify(asked)}`;
      const data = await (wake
        ? shared(`${seq}\n${same}`, () =>
            woken(async () => {
              // Its deadline starts when its turn comes.
              const { ctx, unslotted } = readContext(op, principal, now);
              return { data: await unslotted(() => op.handler(ctx, ask)), by: principal };
            }),
          ).then(({ data, by, as }) => {
            if (by === principal || !share) return data;
            let mine = as.get(principal.accountId);
            if (mine === undefined) as.set(principal.accountId, (mine = share.resign(data, by, principal)));
            return mine;
          })
        : (() => {
            const { ctx, run } = readContext(op, principal, now);
            return run(() => op.handler(ctx, ask));
          })());
      const left = deadline - Date.now();
      if (!poll.empty(data) || left <= 0 || !Number.isFinite(seq) || ended.aborted) return data;
      asking = poll.next(ask, data);
      await changes.waitFor(on, seq, left, ended);
      if (ended.aborted) return data; // the server is closing (or the client left): the answer as it was
      now = new Date(clock());
    }
  };
  const heldJson = new WeakMap<object, string>();
  const metrics = deps.metrics;
  for (const op of deps.rest === false ? [] : OPERATIONS) {
    for (const version of op.versions) {
      app.route({
        method: 'GET',
        url: `/${version}${op.path}`,
        config: { operation: op.tool },
        schema: { querystring: op.query, response: { 200: op.response } },
        // A long-poll is held up to MAX_WAIT_SECONDS before its read: fastify's backstop allows for it.
        ...(op.longPoll
          ? { handlerTimeout: (deps.admission?.opts.deadlineMs ?? admissionDefaults().deadlineMs) + 2_000 + MAX_WAIT_SECONDS * 1000 }
          : {}),
        // Authentication runs before validation: a caller without a valid key learns nothing about parameters.
        ...guards(op),
        handler: async (req, reply) => {
          const query = req.query as Record<string, unknown>;
          const { ctx, run } = readContext(op, req.principal!, req.startedAt);
          const read = () => run(() => op.handler(ctx, query));
          const cache = deps.readCache;
          // Conditional requests (pollers): a weak ETag on every answer; If-None-Match naming the current one -> 304.
          const ifNoneMatch = req.headers['if-none-match'];
          const fresh = (data: unknown) => {
            const tag = contentEtag(op.tool, data, ctx.principal.accountId);
            reply.header('etag', tag);
            if (ifNoneMatch !== undefined && matchesTag(ifNoneMatch, tag)) return notModified(reply);
            return { success: true, data, requestId: req.id };
          };
          const poll = op.longPoll;
          if (poll?.polls(query)) reply.header('x-poll-interval', String(poll.intervalSeconds));
          const wait = poll?.seconds(query);
          if (poll && wait) {
            // Compiled (once per route) before the wait: not by the thousand polls a commit wakes.
            const dataJson = reply.compileSerializationSchema(
              (op.response as TObject).properties.data as unknown as Record<string, unknown>,
            );
            const data = await held(op, poll, wait, req, reply, query);
            const answer = fresh(data);
            if (answer === reply) return reply; // 304
            // The polls a commit wakes answer one object per account: its JSON is made once.
            let json = heldJson.get(data as object);
            if (json === undefined) {
              json = dataJson(data as Record<string, unknown>);
              heldJson.set(data as object, json);
            }
            return reply
              .type('application/json; charset=utf-8')
              .send(`{"success":true,"data":${json},"requestId":${JSON.stringify(req.id)}}`);
          }
          if (!cache || !isCacheable(op.cache, query, ctx.principal)) return fresh(await read());
          // The seq is taken before the store is read: an answer is never older than the commit it is kept for.
          // A since-poll whose cursor decodes for this caller asks what the others of its policy at its watermark ask.
          const share = query.since !== undefined ? poll?.share?.(query, ctx.principal, cursors) : undefined;
          const key = cacheKey(op, req.url, query, ctx.principal, share?.key);
          const seq = await changes.current();
          const now = ctx.now.getTime();
          let entry = cache.local(key, now, seq, changes) ?? (await cache.get(key, now, seq, changes));
          metrics?.readCache.inc({ result: entry ? 'hit' : 'miss' });
          // Per answer what the counter above counts (bench/live.ts reads it per read kind); an uncacheable read has none.
          reply.header('x-cache', entry ? 'hit' : 'miss');
          entry ??= await cache.fill(key, now, seq, changes, async () => {
            const data = (await read()) as any;
            const dependencies = dependenciesOf(op.cache!, query, ctx.reads!, ctx.sources);
            return cache.put(
              key,
              op.cache!,
              data,
              { now, seq, deps: dependencies, changes, accountId: ctx.principal.accountId },
              deps.store,
            );
          });
          // A hit costs no query, no parse and no re-serialization: the stored bytes, then this answer's meta,
          // in a buffer that the entry takes back once the response is out.
          const tag = etagOf(op.tool, entry, ctx.principal.accountId);
          reply.header('etag', tag);
          // A current entry answers without a query: the cached answer is the one the caller holds.
          if (ifNoneMatch !== undefined && matchesTag(ifNoneMatch, tag)) return notModified(reply);
          const { bytes, slab } = cache.body(entry, now, ctx.principal, cursors, req.id);
          if (slab) reply.raw.once('finish', () => cache.release(entry, slab));
          return reply.type('application/json; charset=utf-8').send(bytes);
        },
        // The answer-size bound (issue 24): what the contract's limits allow stays far below it.
        onSend: (req, reply, payload, done) => {
          const size = typeof payload === 'string' ? Buffer.byteLength(payload) : Buffer.isBuffer(payload) ? payload.length : 0;
          if (size <= MAX_ANSWER_BYTES || reply.statusCode !== 200) return done(null, payload);
          const err = tooLarge('answer');
          (reply as FastifyReply).code(err.status).removeHeader('etag');
          done(
            null,
            JSON.stringify({ success: false, error: { code: err.code, message: err.message, details: err.details }, requestId: req.id }),
          );
        },
      });
    }
  }
}
