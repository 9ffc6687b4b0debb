import Type from 'typebox';
import { SuccessEnvelope } from '../../schemas/api/envelope.ts';
import { ErrorEnvelope } from '../../schemas/api/errors.ts';
import { Health } from '../../schemas/api/resources.ts';
import { DateTime } from '../../schemas/topics/common.ts';
import { OPERATIONS, type Operation, type Version } from '../registry.ts';

/** The error envelope of a read's 422: its code, and its `details` schema. */
function unprocessableEnvelope(u: NonNullable<Operation['unprocessable']>) {
  return Type.Object({
    success: Type.Literal(false),
    error: Type.Object({ code: Type.Literal(u.code), message: Type.String(), details: u.details ?? Type.Null() }),
    requestId: Type.String(),
  });
}

/** The machine-readable description of one version, generated from the operations registry. */
export function openApiDocument(version: Version, serverUrl = ''): Record<string, unknown> {
  const paths: Record<string, unknown> = {};
  for (const op of OPERATIONS.filter((o) => o.versions.includes(version))) {
    const props = (op.query as any).properties as Record<string, any>;
    const required = new Set<string>((op.query as any).required ?? []);
    paths[op.path] = {
      get: {
        operationId: op.tool,
        summary: op.summary,
        description: `Scope: \`${op.scope}\`. MCP tool: \`${op.tool}\`.`,
        security: [{ apiKey: [] }],
        'x-scope': op.scope,
        parameters: Object.entries(props).map(([name, schema]) => ({
          name,
          in: 'query',
          required: required.has(name),
          description: schema.description,
          schema,
        })),
        responses: {
          200: { description: 'success envelope', content: { 'application/json': { schema: op.response } } },
          ...Object.fromEntries(
            [400, 401, 403, 405, 414, 500].map((s) => [
              s,
              { description: 'error envelope', content: { 'application/json': { schema: ErrorEnvelope } } },
            ]),
          ),
          503: {
            description:
              "error envelope with code OVERLOADED (too many reads at once, or this account's share is taken), STORE_UNAVAILABLE (the store is not answering) or AUTHENTICATION_UNAVAILABLE; Retry-After says when to retry",
            headers: { 'retry-after': { schema: { type: 'integer' } } },
            content: { 'application/json': { schema: ErrorEnvelope } },
          },
          429: {
            description:
              'error envelope with code RATE_LIMITED: the account (or the client address) spent its requests per minute (RATE_LIMITS; 600 per account and 6000 per address unless configured); Retry-After says when to retry',
            headers: {
              'retry-after': { schema: { type: 'integer' } },
              'ratelimit-limit': { schema: { type: 'integer' } },
              'ratelimit-remaining': { schema: { type: 'integer' } },
              'ratelimit-reset': { schema: { type: 'integer' } },
            },
            content: { 'application/json': { schema: ErrorEnvelope } },
          },
          // Every read may be QUERY_TOO_LARGE (issue 24: its cost bounds); some have a contract code of their own too.
          422: op.unprocessable
            ? {
                description: `error envelope with code ${op.unprocessable.code}, or QUERY_TOO_LARGE (the read exceeds its cost bounds: narrow it)`,
                content: { 'application/json': { schema: Type.Union([unprocessableEnvelope(op.unprocessable), ErrorEnvelope]) } },
              }
            : {
                description:
                  'error envelope with code QUERY_TOO_LARGE: the read exceeds its cost bounds (store time, memory, rows read, the deadline or the answer size); narrow it',
                content: { 'application/json': { schema: ErrorEnvelope } },
              },
        },
      },
    };
  }
  const health = {
    content: {
      'application/json': {
        schema: SuccessEnvelope(Type.Object({ results: Type.Array(Health), meta: Type.Object({ serverTime: DateTime }) })),
      },
    },
  };
  paths['/healthz'] = {
    get: {
      operationId: 'healthz',
      summary: 'Health check (no key needed)',
      security: [],
      responses: {
        200: { description: 'ok', ...health },
        503: {
          description: 'starting: read models are still catching up with the log; degraded: the store does not answer (distributed mode)',
          ...health,
        },
      },
    },
  };
  return {
    openapi: '3.1.0',
    info: {
      title: `signalbase API ${version}`,
      version,
      description: 'Read-only trading-signal data service. Authenticate with the `x-api-key` header.',
    },
    servers: [{ url: `${serverUrl}/${version}` }],
    components: { securitySchemes: { apiKey: { type: 'apiKey', in: 'header', name: 'x-api-key' } } },
    paths,
  };
}
