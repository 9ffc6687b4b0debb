import Type from 'typebox';
import { SuccessEnvelope } from '../../schemas/api/envelope.ts';
import { ErrorEnvelope } from '../../schemas/api/errors.ts';
import { EXPORT_CONTENT_TYPES, EXPORT_LIMITS, RESUME_COLUMN } from '../../schemas/api/exports.ts';
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

/** Every read's 503. */
const UNAVAILABLE = {
  description:
    "error envelope with code OVERLOADED (too many reads at once, or this account's share is taken), STORE_UNAVAILABLE (the store is not answering) or AUTHENTICATION_UNAVAILABLE; Retry-After says when to retry",
  headers: { 'retry-after': { schema: { type: 'integer' } } },
  content: { 'application/json': { schema: ErrorEnvelope } },
};

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
          503: UNAVAILABLE,
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
  // Exports (issue 28): v2 only, REST only; a streaming 200 in the format asked for.
  for (const op of version === 'v2' ? OPERATIONS.filter((o) => o.export) : []) {
    const ex = op.export!;
    const props = (ex.query as any).properties as Record<string, any>;
    const row = Type.Object({ ...(ex.item as any).properties, [RESUME_COLUMN]: Type.String() });
    const errors = (codes: number[]) =>
      Object.fromEntries(
        codes.map((s) => [s, { description: 'error envelope', content: { 'application/json': { schema: ErrorEnvelope } } }]),
      );
    paths[ex.path] = {
      get: {
        operationId: `export_${ex.path.split('/').pop()}`,
        summary: `Export: every row of \`${op.tool}\` for these filters in one streaming response (NDJSON, CSV or Parquet).`,
        description:
          `Scope: \`${op.scope}\`. The rows of ${op.path} with the same filters, visibility and history window, in its order, as one ` +
          `stream: NDJSON rows are the list rows; CSV and Parquet columns are their fields, nested objects flattened with dotted names, ` +
          `arrays as JSON text. Every row ends with \`${RESUME_COLUMN}\`: pass the last one received as \`resume\` to continue after it ` +
          `(after a cut connection too). An export that ends at a limit (maxRows, ${EXPORT_LIMITS.rowsPerRequest} rows or ` +
          `${EXPORT_LIMITS.bytesPerRequest / 1024 / 1024} MiB per request, ${EXPORT_LIMITS.rowsPerMinute} rows per minute per account) ` +
          'says so in the trailers `x-export-complete: false` and `x-resume-token` (Parquet: the key-value metadata `signalbase.complete` ' +
          `and \`signalbase.${RESUME_COLUMN}\`); a resume that returns no rows is the end in any format. Not an MCP tool.` +
          (ex.headers ? ' The `x-feed-since` header is the watermark to since-poll from afterwards (with the same filters).' : ''),
        security: [{ apiKey: [] }],
        'x-scope': op.scope,
        parameters: Object.entries(props).map(([name, schema]) => ({
          name,
          in: 'query',
          required: false,
          description: schema.description,
          schema,
        })),
        responses: {
          200: {
            description: 'the rows, streamed',
            headers: {
              'x-export-complete': { description: 'trailer: false when a limit ended the export', schema: { type: 'string' } },
              'x-resume-token': { description: "trailer: the last row's resume token", schema: { type: 'string' } },
              ...(ex.headers
                ? { 'x-feed-since': { description: 'the since-poll watermark taken before the first row', schema: { type: 'string' } } }
                : {}),
            },
            content: {
              [EXPORT_CONTENT_TYPES.ndjson.split(';')[0]!]: { schema: row, itemSchema: row },
              [EXPORT_CONTENT_TYPES.csv.split(';')[0]!]: { schema: { type: 'string' } },
              [EXPORT_CONTENT_TYPES.parquet]: { schema: { type: 'string', format: 'binary' } },
            },
          },
          ...errors([400, 401, 403, 405, 414, 422, 500]),
          429: {
            description:
              "error envelope with code RATE_LIMITED: the account's requests or exported rows per minute are spent; Retry-After says when to retry",
            headers: { 'retry-after': { schema: { type: 'integer' } } },
            content: { 'application/json': { schema: ErrorEnvelope } },
          },
          503: UNAVAILABLE,
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
