// What an assistant pays for one tool call (issue 27): characters and tokens (o200k_base, the
// tokenizer of current GPT models, from gpt-tokenizer) of the text content and of the
// structuredContent of one `tools/call` answer per tool, with default arguments and with the
// largest `limit`, against a running server. Usage: npx tsx bench/mcp-tokens.ts --help
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { benchArgs, printTable } from './args.ts';

const USAGE = `Usage: npx tsx bench/mcp-tokens.ts --url MCP_URL --token TOKEN

Calls every tool the token may see twice, with default arguments and with \`limit\` at the
maximum of its inputSchema (the stats tools with the first 20 ids of the directory and, as their
largest case, 200), and prints the characters and tokens (o200k_base) of the text content and of
the JSON of structuredContent, and the tokens of that JSON without nulls and false flags.

Options:
  --url URL        the MCP endpoint, e.g. http://127.0.0.1:8080/mcp (required)
  --token TOKEN    a bearer token, e.g. from 'signalbase tokens create' (required)
  -h, --help       this text`;

const { values: argv, die } = benchArgs('bench/mcp-tokens', USAGE, { url: { type: 'string' }, token: { type: 'string' } });
if (!argv.url || !argv.token) die('--url and --token are required');

const client = new Client({ name: 'signalbase-bench', version: '1.0.0' });
await client.connect(
  new StreamableHTTPClientTransport(new URL(String(argv.url)), { requestInit: { headers: { authorization: `Bearer ${argv.token}` } } }),
);
const { tools } = await client.listTools();

const ids = async (tool: string, field: string, n: number): Promise<number[]> => {
  const r = await client.callTool({ name: tool, arguments: { limit: 200 } });
  return ((r.structuredContent as any).results as any[]).map((x) => x[field]).slice(0, n);
};
const traders = await ids('list_trader_directory', 'id', 200);
const assets = await ids('list_assets', 'id', 200);

async function measure(name: string, args: Record<string, unknown>) {
  const r = await client.callTool({ name, arguments: args });
  const text = (r.content as any[]).map((c) => c.text ?? '').join('');
  const structured = r.structuredContent === undefined ? '' : JSON.stringify(r.structuredContent);
  const rows = (r.structuredContent as any)?.results?.length ?? '';
  // Choice (a) of issue 27 at its leanest: the JSON without nulls and false flags (what the output schema would have to allow).
  const lean =
    r.structuredContent === undefined ? '' : JSON.stringify(r.structuredContent, (_k, v) => (v === null || v === false ? undefined : v));
  return {
    isError: r.isError === true,
    rows,
    textChars: text.length,
    textTokens: countTokens(text),
    scChars: structured.length,
    scTokens: countTokens(structured),
    leanTokens: countTokens(lean),
  };
}

const rows: string[][] = [];
for (const t of tools) {
  const props = (t.inputSchema.properties ?? {}) as Record<string, any>;
  const cases: [string, Record<string, unknown>][] = [];
  if (t.name === 'list_trader_stats') cases.push(['20 ids', { traderIds: traders.slice(0, 20) }], ['200 ids', { traderIds: traders }]);
  else if (t.name === 'list_asset_stats') cases.push(['20 ids', { assetIds: assets.slice(0, 20) }], ['200 ids', { assetIds: assets }]);
  else {
    cases.push(['defaults', {}]);
    if (props.limit?.maximum) cases.push([`limit ${props.limit.maximum}`, { limit: props.limit.maximum }]);
  }
  for (const [label, args] of cases) {
    const m = await measure(t.name, args);
    rows.push([
      t.name,
      label,
      String(m.rows),
      m.isError ? 'error' : '',
      String(m.textChars),
      String(m.textTokens),
      String(m.scChars),
      String(m.scTokens),
      String(m.leanTokens),
    ]);
  }
}
printTable(
  ['tool', 'arguments', 'rows', '', 'text chars', 'text tokens', 'structured chars', 'structured tokens', 'lean JSON tokens'],
  rows,
);
await client.close();
