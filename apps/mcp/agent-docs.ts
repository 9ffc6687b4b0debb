import { ERROR_RECOVERY, ERROR_STATUS, type ErrorCode } from '../../schemas/api/errors.ts';
import { SCOPES } from '../../schemas/topics/index.ts';
import { DAY_MS, DEFAULT_WINDOW_MS } from '../reads/window.ts';
import { MCP_BUDGET } from '../registry.ts';
import { renderText } from './results.ts';
import { dataSchema, TOOLS } from './tools.ts';

/**
 * Agent-facing documentation (issue 9), generated from the registry, the tools' schemas and the
 * error table: nothing here is written a second time. Served as /llms.txt and /agent-guide.md,
 * and the MCP server's `instructions` are the guide's evidence rules.
 */

const EVIDENCE = [
  'Exact facts (counts, volumes, rankings, trends, open-position skew) come from list_trader_stats, list_asset_stats, rank_traders, summarize_message_activity and list_trader_activity, and item by item from events, messages, positions and open positions.',
  'Never count by paging a raw list (events, messages, positions): use the stats and activity tools, which count everything in one call.',
  'Channel and aggregate summaries are generated narrative: never evidence for exact trade counts, public activity rankings or current open-position skew.',
  "Rows outside the account's access are omitted silently; a missing id in a stats read is listed in meta.missingTraderIds or meta.missingAssetIds, not raised as an error.",
  'Relative phrases (today, this week, the last 7 days) are resolved against meta.serverTime of the answer; meta.appliedTimeRange says which bounds were used.',
];

/** The MCP server's `instructions`: what an assistant should know before its first call. */
export function agentInstructions(): string {
  return `signalbase: read-only trading-signal data (traders, trade events, positions, source messages, narrative summaries, stats and rankings). Every tool is a read.\n${EVIDENCE.map((e) => `- ${e}`).join('\n')}\nErrors are tool results with isError and a JSON {"error": {code, message, details}}; the agent guide (/agent-guide.md) says how to recover from each.`;
}

const typeOf = (s: any): string => {
  if (s.type === 'array') return `array of ${typeOf(s.items)}${s.maxItems ? ` (at most ${s.maxItems})` : ''}`;
  if (s.enum) return s.enum.map((v: string) => `\`${v}\``).join(' \\| ');
  if (s.format === 'date-time') return 'date-time';
  if (s.type === 'integer' && (s.minimum !== undefined || s.maximum !== undefined)) return `integer ${s.minimum ?? ''}..${s.maximum ?? ''}`;
  return String(s.type ?? 'any');
};
/**
 * A made-up value of a JSON Schema, for the example results: row `i` of a list (two rows, so the
 * table shows what differs); the second row takes null where null is allowed and true for flags.
 */
function exampleOf(s: any, name: string, i: number): unknown {
  if (s.anyOf) {
    const values = s.anyOf.filter((b: any) => b.type !== 'null');
    if (i === 1 && values.length < s.anyOf.length && name !== 'nextCursor') return null;
    return exampleOf(values[i % values.length] ?? values[0], name, i);
  }
  if (s.const !== undefined) return s.const;
  if (s.enum) return s.enum[i % s.enum.length];
  switch (s.type) {
    case 'object':
      return Object.fromEntries(Object.entries(s.properties ?? {}).map(([k, v]) => [k, exampleOf(v, k, i)]));
    case 'array':
      return name === 'results' ? [0, 1].map((j) => exampleOf(s.items, name, j)) : [exampleOf(s.items, name, i)];
    case 'boolean':
      return name === 'hasMore' || (i === 1 && name !== 'isEdited');
    case 'integer':
      return /Ids?$|^id$/.test(name) ? 100 + i : 7 + i;
    case 'number':
      return 1.5 + i;
    case 'string':
      if (s.format === 'date-time') return `2026-01-0${i + 1}T09:30:00.000Z`;
      if (name === 'nextCursor') return 'CURSOR';
      if (/url$/i.test(name)) return `https://example.com/${name}/${i + 1}`;
      return `${name}-${i + 1}`;
    default:
      return null;
  }
}

/** One compact example result of a tool: its text as a call returns it, for made-up rows of its output schema. */
export function exampleResult(t: (typeof TOOLS)[number]): string {
  return renderText(t.op, exampleOf(dataSchema(t.op), 'data', 0) as Record<string, any>);
}

const cell = (s: string) => s.replaceAll('|', '\\|').replaceAll('\n', ' ');

function toolSection(t: (typeof TOOLS)[number]): string {
  const { op, definition } = t;
  const props = definition.inputSchema.properties as Record<string, any>;
  const required = new Set(definition.inputSchema.required ?? []);
  const rows = Object.entries(props).map(
    ([name, s]) =>
      `| \`${name}\` | ${cell(typeOf(s))}${required.has(name) ? ' (required)' : ''} | ${s.default === undefined ? '' : `\`${JSON.stringify(s.default)}\``} | ${cell(s.description ?? '')} |`,
  );
  return [
    `### ${op.tool}`,
    '',
    `${op.summary}`,
    '',
    `**When to use it.** ${op.guidance}`,
    '',
    `Scope \`${op.scope}\`; REST \`GET ${op.versions.includes('v2') ? '/v2' : '/v1'}${op.path}\`. ${op.unprocessable ? `May fail with \`${op.unprocessable.code}\` (see Errors).` : ''}${op.export ? ` The whole result set in one response (NDJSON, CSV or Parquet, for programs, not a tool): REST \`GET /v2${op.export.path}\`.` : ''}`.trimEnd(),
    '',
    '| parameter | type | default | meaning |',
    '|---|---|---|---|',
    ...rows,
    '',
    `**Follow-up.** ${op.mcp.next}.`,
    '',
    "Example result (the text; structuredContent is the same answer as JSON, as REST's `data`; values made up):",
    '',
    '```',
    exampleResult(t),
    '```',
    '',
  ].join('\n');
}

/** The Markdown agent guide: what each tool is for, defaults, how to recover from each error, what is and is not evidence. */
export function agentGuide(origin: string): string {
  const errors = (Object.keys(ERROR_STATUS) as ErrorCode[]).map((c) => `| \`${c}\` | ${ERROR_STATUS[c]} | ${cell(ERROR_RECOVERY[c])} |`);
  return [
    '# signalbase agent guide',
    '',
    'signalbase serves read-only trading-signal data: trader and asset directories, trade events, positions with fixed-window (1D/7D/30D) performance, open positions with live marks, source messages (Telegram, X), generated narrative summaries, and exact stats, rankings and activity counts.',
    '',
    `MCP: connect to \`${origin}/mcp\` (Streamable HTTP). The client discovers the OAuth server from \`${origin}/.well-known/oauth-protected-resource/mcp\`, registers itself, and the user signs in and approves scopes in the browser. REST: the same reads under \`${origin}/v2\` with an \`x-api-key\` header (OpenAPI: \`${origin}/v2/openapi.json\`).`,
    '',
    '## What is evidence',
    '',
    ...EVIDENCE.map((e) => `- ${e}`),
    '',
    '## Defaults that apply to several tools',
    '',
    `- Events, messages and positions without startTime and endTime cover the last ${DEFAULT_WINDOW_MS / DAY_MS} days up to serverTime (not for id hydration: \`ids\`, \`positionIds\`). An account's history window moves startTime forward; it also bounds list_open_positions and list_assets with traderIds (positions opened within it), with no appliedTimeRange.`,
    `- List tools return at most \`limit\` rows (each tool's default is sized for an assistant: see its \`limit\`; 1 to 200, the feed counts groups, at most 100). When \`meta.hasMore\` is true, call again with \`cursor\` set to \`meta.nextCursor\` and the same other arguments.`,
    `- Every result stays within ${MCP_BUDGET.default.toLocaleString('en-US')} tokens (${MCP_BUDGET.asked.toLocaleString('en-US')} when the call gives \`limit\`): a page that would be larger comes back with fewer rows, says so in its text, and carries \`meta.nextCursor\` for the rest; list_trader_stats and list_asset_stats answer the first ids and name the others to ask for next.`,
    "- The text of a result is compact: a header (count, time range, what to call next), then the rows as a table (` | `-separated) with flags only when true and nulls left out; a value shared by every row is said once above the table. structuredContent carries the full answer as JSON, exactly as REST's `data`.",
    "- rank_traders: endTime defaults to serverTime, startTime to 1 January 00:00 UTC of endTime's year; limit 1 to 50 (default 10).",
    '- summarize_message_activity: endTime defaults to serverTime, startTime to 7 days before it; at most 168 buckets per group.',
    '- Bounds are inclusive ISO-8601 date-times with a time zone, e.g. `2026-01-31T00:00:00Z`. Ids are positive integers.',
    '',
    '## Scopes',
    '',
    `A token carries some of: ${SCOPES.map((s) => `\`${s}\``).join(', ')}. tools/list shows only the tools the token may call; calling another answers HTTP 403 with \`WWW-Authenticate: Bearer error="insufficient_scope", scope="..."\`: sign in again and approve that scope.`,
    '',
    '## Tools',
    '',
    ...TOOLS.map(toolSection),
    '## Errors',
    '',
    'A failed read is a tool result with `isError: true` whose text is `{"error": {"code", "message", "details"}}`, the same code and details as the REST error envelope (REST answers the HTTP status below).',
    '',
    '| code | REST status | what to do |',
    '|---|---|---|',
    ...errors,
    '',
  ].join('\n');
}

/** /llms.txt (llmstxt.org): the short index an assistant reads first. */
export function llmsTxt(origin: string): string {
  return [
    '# signalbase',
    '',
    '> Read-only trading-signal data service: trader directory, trade events, positions with 1D/7D/30D performance, open positions, source messages, narrative summaries, and exact stats, rankings and activity counts. REST (API key) and MCP (OAuth) with one tool per read.',
    '',
    ...EVIDENCE.slice(0, 3).map((e) => `- ${e}`),
    '',
    '## Docs',
    '',
    `- [Agent guide](${origin}/agent-guide.md): every tool, its parameters and defaults, what is evidence, how to recover from each error`,
    `- [MCP endpoint](${origin}/mcp): Streamable HTTP, OAuth 2.0 (metadata at ${origin}/.well-known/oauth-protected-resource/mcp)`,
    `- [OpenAPI v2](${origin}/v2/openapi.json): the REST reads, x-api-key`,
    '',
    '## Tools',
    '',
    ...TOOLS.map(({ op }) => `- \`${op.tool}\` (${op.scope}): ${op.summary} Follow-up: ${op.mcp.next}.`),
    '',
    '## Example results',
    '',
    'One per tool, as the text of a call returns it (values made up); structuredContent carries the same answer as JSON.',
    '',
    ...TOOLS.flatMap((t) => [`### ${t.op.tool}`, '', '```', exampleResult(t), '```', '']),
  ].join('\n');
}
