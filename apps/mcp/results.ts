import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { MCP_BUDGET, type Operation } from '../registry.ts';

/**
 * Tool results sized for assistants (issue 27). An assistant reads every result into a context
 * window it pays for, so a result is measured in tokens (o200k_base, the tokenizer of current
 * GPT models; others count within a few per cent of it on JSON and tables) and kept within a
 * budget: a page that would exceed it is read again with fewer rows, and its cursor (or, on the
 * stats tools, the ids not yet answered) continues where it stops. The structuredContent is the
 * REST answer's `data` for those arguments, unchanged; the text is a compact rendering of it.
 */

export const tokens = (s: string): number => countTokens(s);

/** The budget of one call: the larger one only when the caller chose a page size itself. */
export const budgetOf = (args: Record<string, unknown>): number => (args.limit === undefined ? MCP_BUDGET.default : MCP_BUDGET.asked);

/** The id-list argument a stats tool answers row by row (`traderIds` of trader stats), where the read has no `limit`. */
export function idArgument(op: Operation): string | null {
  const props = (op.query as any).properties as Record<string, any>;
  if ('limit' in props) return null;
  return ((op.query as any).required ?? []).find((n: string) => props[n]?.['x-list']) ?? null;
}

/** What a shortened answer leaves for the next call. */
export interface Cut {
  rows: number;
  budget: number;
  limit?: number;
  remainingIds?: { param: string; ids: string[] };
}

// ---- The compact text rendering ---------------------------------------------------------------

/** `2026-11-19T00:00:00.000Z` -> `2026-11-19T00:00:00Z` (the same instant, four tokens fewer). */
const shortTime = (v: string) => (/^\d{4}-\d\d-\d\dT[\d:]+\.000Z$/.test(v) ? v.replace('.000Z', 'Z') : v);

/** A value as a cell: nulls and false flags are empty, lists joined, nested objects as `key=value` pairs. */
function inline(v: unknown): string {
  if (v === null || v === undefined || v === false) return '';
  if (typeof v === 'string') return shortTime(v).replace(/\s+/g, ' ').replaceAll('|', '/');
  if (typeof v !== 'object') return String(v);
  if (Array.isArray(v))
    return v
      .map(inline)
      .filter((x) => x !== '')
      .join('; ');
  return Object.entries(flatten(v as Record<string, unknown>))
    .map(([k, x]) => (x === true ? k : `${k}=${inline(x)}`))
    .filter((x) => !x.endsWith('='))
    .join(' ');
}

/** Nested objects become dotted columns (`summary.directionBias.label`); lists stay values. */
function flatten(row: Record<string, unknown>, prefix = '', out: Record<string, unknown> = {}): Record<string, unknown> {
  for (const [k, v] of Object.entries(row)) {
    if (v !== null && typeof v === 'object' && !Array.isArray(v)) flatten(v as Record<string, unknown>, `${prefix}${k}.`, out);
    else out[`${prefix}${k}`] = v;
  }
  return out;
}

/**
 * Rows as a compact table: one header line, one line per row, cells separated by ` | `. Columns
 * empty in every row are left out; a column with one value in every row is said once above the
 * table; boolean columns become one `flags` column naming the flags that are true.
 */
export function compactTable(rows: readonly Record<string, unknown>[]): { same: string; table: string[] } {
  if (!rows.length) return { same: '', table: [] };
  const flat = rows.map((r) => flatten(r));
  const columns = [...new Set(flat.flatMap((r) => Object.keys(r)))];
  const flags = columns.filter((c) => flat.every((r) => r[c] === undefined || r[c] === null || typeof r[c] === 'boolean'));
  const cells = columns.filter((c) => !flags.includes(c) && flat.some((r) => inline(r[c]) !== ''));
  const constant = flat.length > 1 ? cells.filter((c) => flat.every((r) => inline(r[c]) === inline(flat[0]![c]))) : [];
  const shown = cells.filter((c) => !constant.includes(c));
  const anyFlag = flags.filter((c) => flat.some((r) => r[c] === true));
  const header = [...shown, ...(anyFlag.length ? ['flags'] : [])];
  const lines = flat.map((r) =>
    [...shown.map((c) => inline(r[c])), ...(anyFlag.length ? [anyFlag.filter((c) => r[c] === true).join(',')] : [])].join(' | '),
  );
  return {
    same: constant.map((c) => `${c}=${inline(flat[0]![c])}`).join(', '),
    table: header.length ? [header.join(' | '), ...lines] : [],
  };
}

/** The members of `data` besides the rows and the paging (filtersApplied, totals, missing ids), as `key=value`; empty ones left out. */
function otherMembers(data: Record<string, any>): string {
  const rest: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(data)) if (k !== 'results' && k !== 'meta') rest[k] = v;
  const { hasMore: _h, nextCursor: _n, serverTime: _s, appliedTimeRange: _a, ...meta } = data.meta ?? {};
  return Object.entries(flatten({ ...rest, ...meta }))
    .filter(([, v]) => v !== null && !(Array.isArray(v) && !v.length))
    .map(([k, v]) => `${k.replace(/^filtersApplied\./, '')}=${inline(v)}`)
    .join(', ');
}

/**
 * The text of a result (choice (b) of issue 27): a short header (how many rows, the time range,
 * what to call next) and the rows as a compact table. Ids stay, so follow-up calls can name them.
 */
export function renderText(op: Operation, data: Record<string, any>, cut?: Cut): string {
  const rows: Record<string, unknown>[] = Array.isArray(data.results) ? data.results : [];
  const meta = data.meta ?? {};
  const range = meta.appliedTimeRange ?? data.filtersApplied?.appliedTimeRange;
  const head = [`${op.tool}: ${rows.length} result${rows.length === 1 ? '' : 's'}`];
  if (range)
    head.push(
      `time range ${range.startTime ? shortTime(range.startTime) : 'unbounded'} .. ${range.endTime ? shortTime(range.endTime) : 'unbounded'}`,
    );
  if (meta.serverTime) head.push(`serverTime ${shortTime(meta.serverTime)}`);
  const lines = [head.join('; ')];
  const other = otherMembers(data);
  if (other) lines.push(other);
  if (cut)
    lines.push(
      `Shortened to ${cut.rows} row${cut.rows === 1 ? '' : 's'}${cut.limit === undefined ? '' : ` (as with limit ${cut.limit})`} to stay within ${cut.budget.toLocaleString('en-US')} tokens.`,
    );
  if (cut?.remainingIds)
    lines.push(
      `Not answered yet: call ${op.tool} again with the same arguments and ${cut.remainingIds.param} [${cut.remainingIds.ids.join(',')}].`,
    );
  if (meta.hasMore) lines.push(`More: call ${op.tool} again with the same arguments and cursor "${meta.nextCursor}".`);
  lines.push(`Next: ${op.mcp.next}.`);
  const { same, table } = compactTable(rows);
  if (same) lines.push(`Every row: ${same}`);
  return [...lines, ...table].join('\n');
}

/** Tokens of the larger of the two forms an assistant may be given: the text, or the structuredContent's JSON. */
export const resultTokens = (text: string, data: unknown): number => Math.max(tokens(text), tokens(JSON.stringify(data)));

/**
 * How many leading rows fit in `budget`: the tokens of the answer without rows, then each row's
 * JSON (the larger form) in order; at least one row, since a row cannot be split.
 */
export function rowsThatFit(data: Record<string, any>, budget: number): number {
  const rows: unknown[] = data.results ?? [];
  let used = tokens(JSON.stringify({ ...data, results: [] })) + 120; // the header lines of the text
  let k = 0;
  for (const r of rows) {
    used += tokens(JSON.stringify(r)) + 1;
    if (used > budget) break;
    k++;
  }
  return Math.max(1, k);
}
