import type { TObject } from 'typebox';
import { MCP_BUDGET, OPERATIONS, type Operation } from '../registry.ts';

/** A tool as `tools/list` shows it (MCP 2025-06-18 and later). */
export interface ToolDefinition {
  name: string;
  title: string;
  description: string;
  inputSchema: { type: 'object'; properties: Record<string, unknown>; required?: string[]; additionalProperties: false };
  outputSchema: Record<string, unknown>;
  annotations: { title: string; readOnlyHint: true; destructiveHint: false; idempotentHint: true; openWorldHint: false };
}

/** JSON Schema keywords a tool's input keeps from a REST query parameter (the rest are REST's own: x-list*, pattern of comma lists). */
const KEPT = [
  'type',
  'enum',
  'const',
  'format',
  'minimum',
  'maximum',
  'minLength',
  'maxLength',
  'default',
  'description',
  'anyOf',
] as const;

function keep(schema: Record<string, any>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of KEPT) if (schema[k] !== undefined) out[k] = schema[k];
  return out;
}

/**
 * A REST query parameter as a JSON type (issue 9): a comma-separated list becomes an array of its
 * item type (`x-list`), with the list's bounds; everything else keeps its JSON Schema, so a
 * string with a pattern (never a list) keeps the pattern.
 */
export function toolParameter(schema: Record<string, any>): Record<string, unknown> {
  const item = schema['x-list'];
  if (!item) return { ...keep(schema), ...(schema.pattern ? { pattern: schema.pattern } : {}) };
  // A member of a REST list cannot hold a comma; an array member may not either, so both say the same.
  const items = { ...keep(item), ...(item.type === 'string' && !item.enum ? { minLength: 1, pattern: '^[^,]*$' } : {}) };
  return {
    type: 'array',
    items,
    ...(schema['x-list-empty'] ? {} : { minItems: 1 }),
    ...(schema['x-list-max'] !== undefined ? { maxItems: schema['x-list-max'] } : {}),
    description:
      String(schema.description ?? '')
        .replace(/\s*\(comma-separated[^)]*\)|comma-separated /g, '')
        .trim() || undefined,
  };
}

const n = (x: number) => x.toLocaleString('en-US');

/** How a tool sizes its results (issue 27), as its `limit` description and the agent guide say it. */
export function sizingNote(op: Operation): string {
  const limit = (op.query as any).properties.limit;
  const budget = `a result stays within ${n(MCP_BUDGET.default)} tokens${limit ? ` (${n(MCP_BUDGET.asked)} with an explicit limit)` : ''}`;
  if (!limit) return `${budget}: past it, the rows of the first ids come back and the text names the ids to ask for next`;
  return `${budget}: past it, fewer rows come back with meta.nextCursor for the rest${(op.query as any).properties.cursor ? '' : ' (no cursor here: narrow the question)'}`;
}

export function toolInputSchema(query: TObject, op?: Operation): ToolDefinition['inputSchema'] {
  const props = (query as any).properties as Record<string, any>;
  const required = ((query as any).required ?? []) as string[];
  const param = (name: string, s: any) => {
    const p = toolParameter(s);
    // The MCP default page size: what an assistant can read whole (REST keeps the contract's default).
    if (name === 'limit' && op?.mcp.limit !== undefined) {
      return {
        ...p,
        default: op.mcp.limit,
        description: `page size, ${s.minimum} to ${s.maximum} (default ${op.mcp.limit} here, ${s.default} on REST); ${sizingNote(op)}`,
      };
    }
    return p;
  };
  return {
    type: 'object',
    // A REST-only parameter (a long-poll's `wait`: an assistant pages, it does not hold a call open) is not the tool's.
    properties: Object.fromEntries(
      Object.entries(props)
        .filter(([, s]) => !s['x-rest-only'])
        .map(([name, s]) => [name, param(name, s)]),
    ),
    ...(required.length ? { required } : {}),
    additionalProperties: false,
  };
}

/** Title Case of the contract's purpose, from the tool name: `rank_traders` -> `Rank traders`. */
const titleOf = (name: string) => name.charAt(0).toUpperCase() + name.slice(1).replaceAll('_', ' ');

/** The `data` member of the REST success envelope: the tool's structuredContent is exactly it. */
export const dataSchema = (op: Operation): Record<string, unknown> => JSON.parse(JSON.stringify((op.response as any).properties.data));

export function toolDefinition(op: Operation): ToolDefinition {
  const title = titleOf(op.tool);
  const errors = op.unprocessable ? ` Can fail with ${op.unprocessable.code} (a tool error with code, message and details).` : '';
  return {
    name: op.tool,
    title,
    description: `${op.summary} ${op.guidance} Follow-up: ${op.mcp.next}. Size: ${sizingNote(op)}. Needs the ${op.scope} scope.${errors}`,
    inputSchema: toolInputSchema(op.query, op),
    outputSchema: dataSchema(op),
    annotations: { title, readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  };
}

/** One tool per REST read (contract 4), in the registry's order. */
export const TOOLS: readonly { op: Operation; definition: ToolDefinition }[] = OPERATIONS.map((op) => ({
  op,
  definition: toolDefinition(op),
}));
export const toolByName = new Map(TOOLS.map((t) => [t.op.tool, t]));

/**
 * Tool arguments as the REST query string would carry them: arrays comma-joined, numbers and
 * booleans as their decimal / literal text. The read then validates them exactly as REST does.
 */
export function argumentsAsQuery(args: Record<string, unknown>): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  for (const [k, v] of Object.entries(args)) {
    if (v === undefined || v === null) continue;
    out[k] = Array.isArray(v) ? v.map(String).join(',') : String(v);
  }
  return out;
}
