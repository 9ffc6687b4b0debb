import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  type CallToolResult,
  ErrorCode,
  ListToolsRequestSchema,
  McpError,
} from '@modelcontextprotocol/sdk/types.js';
import { Ajv, type ValidateFunction } from 'ajv';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from '../../schemas/api/errors.ts';
import { validationDetails } from '../../schemas/api/validation.ts';
import { isDateTime } from '../../schemas/formats.ts';
import { SCOPES } from '../../schemas/topics/index.ts';
import type { Store } from '../../storage/port.ts';
import { queryProblems } from '../api/query.ts';
import type { RateLimiter } from '../api/rate-limit.ts';
import { PACKAGE_VERSION } from '../package.ts';
import type { ReadContext } from '../reads/context.ts';
import { MAX_ANSWER_BYTES, readFailure, tooLarge } from '../reads/cost.ts';
import type { CursorCodec } from '../reads/cursor.ts';
import type { Principal } from '../reads/principal.ts';
import { type Operation, policyRefusal } from '../registry.ts';
import { agentInstructions } from './agent-docs.ts';
import { type AuthUrls, BearerError, resourceMetadataUrl, type TokenVerifier } from './bearer.ts';
import { budgetOf, type Cut, idArgument, renderText, resultTokens, rowsThatFit, tokens } from './results.ts';
import { argumentsAsQuery, TOOLS, toolByName } from './tools.ts';

/** The server's MCP `instructions`, made once (they derive from the registry). */
const INSTRUCTIONS = agentInstructions();
const VERSION = PACKAGE_VERSION;

export interface McpDeps {
  store: Store;
  cursors: CursorCodec;
  clock: () => number;
  dataVersion: () => number | Promise<number>;
  verifier: TokenVerifier;
  /** MCP_URL and AUTH_ISSUER; read per request (an embedded server knows its port only once it listens). */
  urls: () => AuthUrls;
  /** Browser origins allowed on /mcp besides MCP_URL's own (MCP_ALLOWED_ORIGINS). */
  allowedOrigins?: readonly string[];
  /** A read's context as REST makes it: the caller's bounded, admitted view of the store and the request's deadline. */
  readContext: (op: Operation, principal: Principal, now: Date) => { ctx: ReadContext; run: <T>(read: () => Promise<T>) => Promise<T> };
  /** Rate limits: per client address before the token is checked, per account for each tool call. */
  limiter?: RateLimiter;
}

declare module 'fastify' {
  interface FastifyRequest {
    mcpPrincipal?: Principal;
  }
}

/** Tool arguments are checked against the tool's inputSchema first (JSON types), then exactly as REST checks its query. */
const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addFormat('date-time', { type: 'string', validate: isDateTime });
const inputValidators = new Map<string, ValidateFunction>(TOOLS.map((t) => [t.op.tool, ajv.compile(t.definition.inputSchema)]));

/** A tool error result (never a protocol error): the REST error's code, message and details, as JSON text. */
function toolError(err: ApiError): CallToolResult {
  return {
    isError: true,
    content: [{ type: 'text', text: JSON.stringify({ error: { code: err.code, message: err.message, details: err.details ?? null } }) }],
  };
}

/** The scopes the token would need for this body: each `tools/call` of a known tool needs its read's scope. */
function neededScopes(body: unknown): Set<string> {
  const out = new Set<string>();
  for (const m of Array.isArray(body) ? body : [body]) {
    if (m && typeof m === 'object' && (m as any).method === 'tools/call') {
      const t = toolByName.get((m as any).params?.name);
      if (t) out.add(t.op.scope);
    }
  }
  return out;
}

/** The WWW-Authenticate challenge of a refusal (RFC 6750 3, RFC 9728 5.1). */
function challenge(err: BearerError, urls: AuthUrls): string {
  const q = (s: string) => `"${s.replace(/["\\]/g, '')}"`;
  const parts = [`resource_metadata=${q(resourceMetadataUrl(urls.mcpUrl))}`];
  if (err.error && err.error !== 'temporarily_unavailable') parts.push(`error=${q(err.error)}`, `error_description=${q(err.message)}`);
  if (err.scope) parts.push(`scope=${q(err.scope)}`);
  return `Bearer ${parts.join(', ')}`;
}

function refuse(reply: FastifyReply, err: BearerError, urls: AuthUrls): FastifyReply {
  if (err.status !== 503) reply.header('www-authenticate', challenge(err, urls));
  else reply.header('retry-after', '5');
  return reply.code(err.status).send({ error: err.error ?? 'invalid_request', error_description: err.message });
}

/** The origin an `Origin` header names, as URL serializes origins (so `HTTP://Host:80` matches `http://host`); null when it names none. */
function originOf(header: string): string | null {
  if (header === 'null') return null;
  try {
    const o = new URL(header).origin;
    return o === 'null' ? null : o;
  } catch {
    return null;
  }
}

const CORS = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'www-authenticate, mcp-session-id, mcp-protocol-version',
};

/**
 * The MCP tool server (issue 9): Streamable HTTP at /mcp, stateless (every POST carries its own
 * JSON-RPC exchange, so any replica answers any request), one tool per REST read generated from
 * the registry, OAuth bearer tokens only.
 */
export async function mcpRoutes(app: FastifyInstance, deps: McpDeps): Promise<void> {
  // Errors on this surface are JSON-RPC's (a body that is not JSON, too large), not the REST envelope.
  app.setErrorHandler((err: Error & { statusCode?: number }, req, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
    if (status === 500) req.log.error({ err }, 'mcp request failed');
    const code = status === 500 ? ErrorCode.InternalError : status === 400 ? ErrorCode.ParseError : ErrorCode.InvalidRequest;
    return reply.code(status).send({ jsonrpc: '2.0', error: { code, message: status === 500 ? 'Internal error' : err.message }, id: null });
  });

  // DNS-rebinding protection (MCP Streamable HTTP transport, Security Warning): a browser page of
  // another origin must not reach /mcp through a name that resolves here. Requests without
  // `Origin` (non-browser clients) pass; with one, it must be MCP_URL's origin or an allowed one.
  // Checked before the token, so such a page learns nothing about it.
  app.addHook('onRequest', (req, reply, done) => {
    const origin = req.headers.origin;
    if (req.routeOptions.url !== '/mcp' || origin === undefined) return done();
    const given = originOf(origin);
    if (given && (given === new URL(deps.urls().mcpUrl).origin || deps.allowedOrigins?.includes(given))) return done();
    void reply.code(403).send({
      jsonrpc: '2.0',
      id: null,
      error: {
        code: -32000,
        message: `Forbidden: Origin ${origin.slice(0, 200)} is not allowed on this MCP endpoint (allowed: this server's own origin and MCP_ALLOWED_ORIGINS)`,
      },
    });
  });

  const metadata = async (_req: FastifyRequest, reply: FastifyReply) => {
    const { mcpUrl, issuer } = deps.urls();
    reply.headers(CORS);
    return {
      resource: mcpUrl,
      authorization_servers: [issuer],
      scopes_supported: [...SCOPES],
      bearer_methods_supported: ['header'],
      resource_name: 'signalbase',
      resource_documentation: `${new URL(mcpUrl).origin}/agent-guide.md`,
    };
  };
  // RFC 9728: the path form for /mcp, and the root form that current clients also probe.
  app.get('/.well-known/oauth-protected-resource/mcp', metadata);
  app.get('/.well-known/oauth-protected-resource', metadata);

  const authenticate = async (req: FastifyRequest, reply: FastifyReply) => {
    reply.headers(CORS);
    const urls = deps.urls();
    if (deps.limiter?.limitsAddresses) {
      const d = await deps.limiter.addressOf(req.ip);
      reply.headers(d.headers);
      if (d.limited) {
        reply.header('retry-after', String((d.error.details as { retryAfterSeconds: number }).retryAfterSeconds));
        return reply.code(429).send({ jsonrpc: '2.0', error: { code: ErrorCode.InvalidRequest, message: d.error.message }, id: null });
      }
    }
    try {
      const principal = await deps.verifier.verify(req.headers.authorization, req.headers['x-api-key'] as string | undefined);
      if (principal.scopes.size === 0) {
        throw new BearerError(403, 'insufficient_scope', "The token carries none of this server's scopes", SCOPES.join(' '));
      }
      req.mcpPrincipal = principal;
    } catch (err) {
      if (err instanceof BearerError) return refuse(reply, err, urls);
      throw err;
    }
  };

  app.options('/mcp', async (_req, reply) =>
    reply
      .code(204)
      .headers({
        ...CORS,
        'access-control-allow-methods': 'POST, GET, DELETE, OPTIONS',
        'access-control-allow-headers': 'authorization, content-type, accept, mcp-protocol-version, mcp-session-id, last-event-id',
        'access-control-max-age': '86400',
      })
      .send(),
  );

  // Stateless: no server-initiated stream to hold open (GET) and no session to end (DELETE).
  const noStream = async (_req: FastifyRequest, reply: FastifyReply) =>
    reply
      .code(405)
      .header('allow', 'POST')
      .send({
        jsonrpc: '2.0',
        error: {
          code: ErrorCode.ConnectionClosed,
          message: 'This server is stateless: send requests with POST; there is no stream or session to open or end',
        },
        id: null,
      });
  app.get('/mcp', { onRequest: authenticate }, noStream);
  app.delete('/mcp', { onRequest: authenticate }, noStream);

  app.post(
    '/mcp',
    {
      config: { operation: 'mcp' },
      // The token is checked before the body is read: an anonymous caller costs no parsing.
      onRequest: authenticate,
      preHandler: async (req, reply) => {
        // JSON-RPC batches left MCP in the 2025-06-18 revision: one message per POST (and one bounded answer).
        if (Array.isArray(req.body)) {
          return reply.code(400).send({
            jsonrpc: '2.0',
            error: { code: ErrorCode.InvalidRequest, message: 'JSON-RPC batches are not accepted: send one message per POST' },
            id: null,
          });
        }
        const principal = req.mcpPrincipal!;
        const missing = [...neededScopes(req.body)].filter((s) => !principal.scopes.has(s as never));
        if (missing.length) {
          const scope = [...new Set([...principal.scopes, ...missing])].join(' ');
          return refuse(
            reply,
            new BearerError(403, 'insufficient_scope', `This token lacks the ${missing.join(', ')} scope`, scope),
            deps.urls(),
          );
        }
      },
    },
    async (req, reply) => {
      const principal = req.mcpPrincipal!;
      const now = new Date(deps.clock());
      const server = new Server(
        { name: 'signalbase', version: VERSION },
        { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS },
      );
      const allowed = TOOLS.filter((t) => policyRefusal(t.op, principal, 'token') === null);
      server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: allowed.map((t) => t.definition) }));
      server.setRequestHandler(CallToolRequestSchema, async (request) => {
        const tool = toolByName.get(request.params.name);
        if (!tool) throw new McpError(ErrorCode.InvalidParams, `Unknown tool ${request.params.name}; tools/list names the tools`);
        const started = Date.now();
        // Each tool call counts against the account's requests per minute, as a REST read does.
        const counted = deps.limiter ? await deps.limiter.account(principal.accountId) : undefined;
        if (counted?.limited) return toolError(counted.error);
        const result = await callTool(tool.op, principal, request.params.arguments ?? {}, req, now, deps);
        req.log.info(
          { tool: tool.op.tool, account: principal.accountId, isError: result.isError === true, ms: Date.now() - started },
          'mcp tool call',
        );
        return result;
      });
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      reply.raw.on('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      reply.hijack();
      for (const [k, v] of Object.entries(CORS)) reply.raw.setHeader(k, v);
      await transport.handleRequest(req.raw, reply.raw, req.body);
    },
  );
}

/** Tool arguments as the read's validated query: the tool's inputSchema (JSON types) first, then exactly as REST checks its query string. */
function readQuery(op: Operation, args: Record<string, unknown>, req: FastifyRequest): Record<string, unknown> {
  const check = inputValidators.get(op.tool)!;
  if (!check(args)) {
    const details = validationDetails(check.errors ?? [], toolByName.get(op.tool)?.definition.inputSchema, args);
    throw new ApiError('VALIDATION_ERROR', `Invalid argument ${details[0]?.param}: ${details[0]?.message}`, details);
  }
  const query: Record<string, unknown> = argumentsAsQuery(args);
  const problems = queryProblems(op.query, query as Record<string, string>);
  // REST's own validator for the read's query (the same ajv, coercion and defaults as the route).
  const validate = req.compileValidationSchema(op.query, 'querystring');
  if (!problems.length && !validate(query)) problems.push(...validationDetails(validate.errors ?? [], op.query, query));
  if (problems.length) throw new ApiError('VALIDATION_ERROR', `Invalid argument ${problems[0]!.param}: ${problems[0]!.message}`, problems);
  return query;
}

/**
 * The leading requested ids whose rows fit in `budget` (at least one), for the stats tools: their
 * rows are answered per id, so the rest of the ids is what the next call asks for.
 */
function idsThatFit(data: Record<string, any>, requested: readonly unknown[], field: string, budget: number): number {
  const rowOf = new Map<string, unknown>((data.results as any[]).map((r) => [String(r[field]), r]));
  let used = tokens(JSON.stringify({ ...data, results: [] })) + 120;
  let j = 0;
  for (const id of requested) {
    const row = rowOf.get(String(id));
    used += (row ? tokens(JSON.stringify(row)) : 0) + 2;
    if (used > budget) break;
    j++;
  }
  return Math.max(1, j);
}

/**
 * A tool call: the same policy, validation and read as the REST route of the operation; failures
 * are tool errors. The tool's own default page size applies where the caller gives no `limit`, and
 * a result over its token budget is read again with fewer rows (issue 27).
 */
async function callTool(
  op: Operation,
  principal: Principal,
  args: Record<string, unknown>,
  req: FastifyRequest,
  now: Date,
  deps: McpDeps,
): Promise<CallToolResult> {
  try {
    const denied = policyRefusal(op, principal, 'token');
    if (denied) throw new ApiError('FORBIDDEN', denied);
    const { ctx, run } = deps.readContext(op, principal, now);
    const read = async (a: Record<string, unknown>) => {
      const query = readQuery(op, a, req);
      return (await run(() => op.handler(ctx, query))) as Record<string, any>;
    };
    const first = op.mcp.limit !== undefined && args.limit === undefined ? { ...args, limit: op.mcp.limit } : args;
    const budget = budgetOf(args);
    let data = await read(first);
    let cut: Cut | undefined;
    let text = renderText(op, data);
    const idParam = idArgument(op);
    const allIds = idParam ? (first[idParam] as unknown[]) : [];
    let asked = first;
    // Each pass reads a page that fits by the row sizes just seen; another covers rows that grew meanwhile.
    for (let pass = 0; pass < 3 && data.results.length > 1 && resultTokens(text, data) > budget; pass++) {
      let remainingIds: Cut['remainingIds'];
      if (idParam) {
        const ids = asked[idParam] as unknown[];
        const j = Math.min(idsThatFit(data, ids, idParam.replace(/s$/, ''), budget), ids.length - 1);
        asked = { ...first, [idParam]: ids.slice(0, j) };
        remainingIds = { param: idParam, ids: allIds.slice(j).map(String) };
      } else {
        asked = { ...first, limit: Math.min(rowsThatFit(data, budget), data.results.length - 1) };
      }
      data = await read(asked);
      cut = { rows: data.results.length, budget, ...(remainingIds ? { remainingIds } : { limit: asked.limit as number }) };
      text = renderText(op, data, cut);
    }
    // The answer-size bound, as on REST.
    if (text.length + JSON.stringify(data).length > MAX_ANSWER_BYTES) throw tooLarge('answer');
    return { structuredContent: data, content: [{ type: 'text', text }] };
  } catch (caught) {
    const err = readFailure(caught);
    if (err instanceof ApiError) return toolError(err);
    req.log.error({ err, tool: op.tool }, 'tool call failed');
    return toolError(new ApiError('INTERNAL_ERROR', 'Internal error; quote the time of the call when reporting it'));
  }
}
