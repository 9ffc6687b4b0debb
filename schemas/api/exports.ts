import Type, { type TObject, type TSchema } from 'typebox';
import { StringEnum } from '../topics/common.ts';
import { Query } from './common-params.ts';

/**
 * Exports (issue 28, DESIGN 6 row Exports): one streaming GET per list family for bulk readers,
 * with the list read's filters, scope and policy, in the list's keyset order.
 */
export const EXPORT_FORMATS = ['ndjson', 'csv', 'parquet'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export const EXPORT_CONTENT_TYPES: Record<ExportFormat, string> = {
  ndjson: 'application/x-ndjson; charset=utf-8',
  csv: 'text/csv; charset=utf-8',
  parquet: 'application/vnd.apache.parquet',
};

/** The bounds of one export request and of an account's exports per minute (defaults; the server's options may lower them). */
export interface ExportLimits {
  /** Rows per request (also the largest `maxRows`). */
  rowsPerRequest: number;
  /** Bytes per request: the export ends at the first row boundary past it. */
  bytesPerRequest: number;
  /** Rows per minute per account, over all its exports. */
  rowsPerMinute: number;
  /** Seconds per request: no row is sent past it (a client that stops reading is cut a minute later). */
  secondsPerRequest: number;
}
export const EXPORT_LIMITS: ExportLimits = {
  rowsPerRequest: 1_000_000,
  bytesPerRequest: 512 * 1024 * 1024,
  rowsPerMinute: 5_000_000,
  secondsPerRequest: 600,
};

/** The column every exported row ends with: the token that resumes the export after that row. */
export const RESUME_COLUMN = 'resumeToken';

/**
 * An export's query: the list read's own parameters but its paging ones (`limit`, `cursor`) and
 * those that are not a result set (`drop`: the feed's `since` and `wait`), plus the format, the
 * resume token and a row bound.
 */
export function exportQuery(list: TObject, drop: readonly string[] = []): TObject {
  const props: Record<string, TSchema> = {};
  for (const [name, schema] of Object.entries(list.properties as Record<string, TSchema>))
    if (name !== 'limit' && name !== 'cursor' && !drop.includes(name)) props[name] = schema;
  return Query({
    ...props,
    format: Type.Optional(StringEnum(EXPORT_FORMATS, { default: 'ndjson', description: 'ndjson (default), csv or parquet' })),
    resume: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 4096,
        description: `the ${RESUME_COLUMN} of the last row received: the export continues after that row (same filters, same account)`,
      }),
    ),
    maxRows: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: EXPORT_LIMITS.rowsPerRequest,
        description: `at most this many rows in this request (default and largest ${EXPORT_LIMITS.rowsPerRequest}); resume for the rest`,
      }),
    ),
  });
}
