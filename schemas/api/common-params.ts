import Type, { type TSchema } from 'typebox';

/**
 * Query-parameter building blocks. List-valued parameters are comma-separated strings on REST
 * (contract 1, rule 5); `x-list` records the item schema so other surfaces (MCP) can offer arrays.
 */
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

export function EnumList(values: readonly string[], opts: { allowEmpty?: boolean; description?: string } = {}) {
  const alt = `(${values.map(esc).join('|')})`;
  const body = `${alt}(,${alt})*`;
  return Type.String({
    pattern: opts.allowEmpty ? `^(${body})?$` : `^${body}$`,
    description: opts.description ?? `comma-separated list of: ${values.join(', ')}`,
    'x-list': { type: 'string', enum: [...values] },
    ...(opts.allowEmpty ? { 'x-list-empty': true } : {}),
    'x-list-message': `must be a comma-separated list of: ${values.join(', ')}`,
  });
}

export function IdList(description: string, maxItems = 1000) {
  return Type.String({
    pattern: '^[1-9][0-9]{0,17}(,[1-9][0-9]{0,17})*$',
    description: `${description} (comma-separated integers, at most ${maxItems})`,
    // ids are 1 .. 2^53-1: larger ones cannot be represented exactly (DESIGN 6)
    'x-list': { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
    'x-list-max': maxItems,
    'x-list-message': `must be a comma-separated list of positive integers (at most ${maxItems})`,
  });
}

export function StringList(description: string, maxItems = 1000) {
  return Type.String({
    minLength: 1,
    pattern: '^[^,]+(,[^,]+)*$',
    description: `${description} (comma-separated, at most ${maxItems})`,
    'x-list': { type: 'string', maxLength: 200 },
    'x-list-max': maxItems,
    'x-list-message': `must be a comma-separated list of non-empty strings (at most ${maxItems})`,
  });
}

export const Limit = (max = 200, dflt = 50) =>
  Type.Integer({ minimum: 1, maximum: max, default: dflt, description: `page size, 1 to ${max} (default ${dflt})` });
export const Cursor = Type.String({ minLength: 1, description: 'opaque `meta.nextCursor` of the previous page' });
export const StartTime = Type.String({ format: 'date-time', description: 'inclusive lower bound (ISO-8601)' });
export const EndTime = Type.String({ format: 'date-time', description: 'inclusive upper bound (ISO-8601)' });
export const Search = Type.String({ minLength: 1, maxLength: 200 });

export const PLATFORM_VALUES = ['TELEGRAM', 'X'] as const;
export const DIRECTION_VALUES = ['long', 'short'] as const;
export const EVENT_TYPE_VALUES = ['open', 'close', 'increase', 'decrease'] as const;
export const ASSET_CLASS_FILTER_VALUES = ['crypto', 'stocks', 'indices', 'commodities', 'fx'] as const;

/** Query objects reject unknown parameters (DESIGN 6); mark optional ones with `Type.Optional`. */
export const Query = <P extends Record<string, TSchema>>(props: P) => Type.Object(props, { additionalProperties: false });

/** Parameters every keyset-paginated read takes. */
export const pageParams = (max = 200, dflt = 50) => ({ limit: Type.Optional(Limit(max, dflt)), cursor: Type.Optional(Cursor) });
export const windowParams = { startTime: Type.Optional(StartTime), endTime: Type.Optional(EndTime) };

/** A validated query: `limit` is always present once its default is applied. */
export type Validated<Q> = Q & { limit: number };

/** Splits a comma-separated list parameter (validated member by member already). */
export function splitList(v: string | undefined): string[] | undefined {
  if (v === undefined || v === '') return undefined;
  return [...new Set(v.split(','))];
}
export function splitIds(v: string | undefined): number[] | undefined {
  return splitList(v)?.map(Number);
}
