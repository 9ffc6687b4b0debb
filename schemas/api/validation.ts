import type { ValidationDetail } from './errors.ts';

/** What an Ajv error says (the members used here; ajv's ErrorObject has them). */
export interface SchemaError {
  keyword: string;
  instancePath?: string;
  params?: Record<string, unknown>;
  message?: string;
}

/**
 * Schema errors as the contract's `[{ param, message }]` details, for REST query strings and MCP
 * tool arguments alike: the parameter named, in the schema's own wording where it has one (list
 * formats), a date-time's expected form, a list given twice in a query string, and the member of
 * an array argument that is wrong.
 */
export function validationDetails(errors: readonly SchemaError[], schema?: any, values: Record<string, unknown> = {}): ValidationDetail[] {
  const out: ValidationDetail[] = [];
  for (const e of errors) {
    const params = (e.params ?? {}) as Record<string, string>;
    const path = (e.instancePath ?? '').replace(/^\//, '').split('/');
    const param = params.additionalProperty ?? params.missingProperty ?? path[0] ?? '';
    const property = schema?.properties?.[param];
    let message: string;
    if (e.keyword === 'additionalProperties') message = 'unknown parameter';
    else if (Array.isArray(values[param]) && property?.type !== 'array')
      message = 'given more than once; pass it once (lists are comma-separated)';
    else if (e.keyword === 'required') message = 'is required';
    else if (e.keyword === 'pattern' && property?.['x-list-message']) message = property['x-list-message'];
    else if (e.keyword === 'format' && params.format === 'date-time')
      message = 'must be an ISO-8601 date-time with a time zone, e.g. 2026-01-31T00:00:00Z';
    else message = `${path.length > 1 ? `member ${path[1]} ` : ''}${e.message ?? 'is invalid'}`;
    if (!out.some((d) => d.param === param && d.message === message)) out.push({ param, message });
  }
  return out;
}
