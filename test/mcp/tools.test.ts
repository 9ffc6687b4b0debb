import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import { connect, rawMcp } from '../helpers/mcp-client.ts';

/**
 * What an assistant sees of the tools (issue 9 item 1, contract sections 1, 4, 7): one per REST
 * read, named as in the contract, read-only, list parameters as arrays, and documentation for
 * agents at /llms.txt and /agent-guide.md.
 */

// Contract section 4: tool, scope; section 1 rule 5: the list-valued parameters.
const CONTRACT: Record<string, string> = {
  list_trader_directory: 'directory.read',
  list_trader_activity: 'stats.read',
  list_traders: 'directory.read',
  list_assets: 'directory.read',
  list_feed: 'feed.read',
  list_events: 'events.read',
  list_messages: 'messages.read',
  list_channel_summaries: 'summaries.read',
  list_aggregate_summaries: 'summaries.read',
  list_positions: 'positions.read',
  list_open_positions: 'positions.read',
  list_trader_stats: 'stats.read',
  list_asset_stats: 'stats.read',
  rank_traders: 'stats.read',
  summarize_message_activity: 'stats.read',
};
const LIST_PARAMS = ['traderIds', 'assetIds', 'positionIds', 'ids', 'sourcePlatforms', 'directions', 'types', 'assetClass', 'eventTypes'];
const ERROR_CODES = [
  'INVALID_CURSOR',
  'UNAUTHORIZED',
  'FORBIDDEN',
  'AUTHENTICATION_UNAVAILABLE',
  'PERFORMANCE_WINDOW_NOT_ELAPSED',
  'BUCKET_LIMIT_EXCEEDED',
];

let h: Harness;
let origin: string;
let client: Client;

beforeAll(async () => {
  h = await createHarness({ mcp: true });
  await h.given([build.trader(1), build.source('src-1'), build.asset(1)]);
  await h.key({ account: { id: 'frank' } });
  origin = await h.listen();
  client = await connect(h.urls().mcpUrl, { token: await h.token({ account: 'frank' }) });
});
afterAll(async () => {
  await client.close();
  await h.close();
});

describe('tools/list', () => {
  it('one read-only tool per contract row, described, with list parameters as arrays and an object outputSchema', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(Object.keys(CONTRACT).sort());
    for (const t of tools) {
      expect(t.annotations?.readOnlyHint, t.name).toBe(true);
      expect(t.annotations?.destructiveHint, t.name).toBe(false);
      expect(t.description!.length, t.name).toBeGreaterThan(80);
      expect(t.description, t.name).toContain(CONTRACT[t.name]);
      expect(t.outputSchema?.type, t.name).toBe('object');
      expect(t.inputSchema.type).toBe('object');
      for (const [name, s] of Object.entries(t.inputSchema.properties ?? {}) as [string, any][]) {
        if (LIST_PARAMS.includes(name)) expect(s.type, `${t.name}.${name}`).toBe('array');
        if (name === 'limit') expect(s.type, `${t.name}.${name}`).toBe('integer');
      }
    }
  });

  it('narrative summaries say they are not evidence; the analytics tools say what they are evidence for', async () => {
    const { tools } = await client.listTools();
    const d = Object.fromEntries(tools.map((t) => [t.name, t.description!]));
    expect(d.list_channel_summaries).toMatch(/not evidence/);
    expect(d.list_aggregate_summaries).toMatch(/not evidence/);
    expect(d.summarize_message_activity).toMatch(/evidence for counts/);
    expect(d.list_events).toMatch(/do not page through events to count/i);
  });

  it('an unknown tool is a protocol error; arguments of the wrong type are a VALIDATION_ERROR tool result naming them', async () => {
    const token = await h.token({ account: 'frank' });
    const unknown = await rawMcp(
      h.urls().mcpUrl,
      { authorization: `Bearer ${token}` },
      { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'drop_tables', arguments: {} } },
    );
    expect(unknown.status).toBe(200);
    expect(unknown.json.error.code).toBe(-32602);
    const bad = await client.callTool({ name: 'list_events', arguments: { traderIds: 'one', limit: 1000, extra: true } });
    expect(bad.isError).toBe(true);
    const { error } = JSON.parse((bad.content as any)[0].text);
    expect(error.code).toBe('VALIDATION_ERROR');
    expect(error.details.map((d: any) => d.param).sort()).toEqual(['extra', 'limit', 'traderIds']);
  });

  it('a body that is not JSON-RPC gets a JSON-RPC error, never a 500', async () => {
    const token = await h.token({ account: 'frank' });
    for (const body of [
      '{not json',
      '{"jsonrpc":"2.0"}',
      JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 42 } }),
      '"x"',
      'null',
    ]) {
      const r = await rawMcp(h.urls().mcpUrl, { authorization: `Bearer ${token}` }, body);
      expect(r.status, body).toBeLessThan(500);
      expect(r.json?.jsonrpc, body).toBe('2.0');
      expect(r.json?.error?.code, body).toEqual(expect.any(Number));
    }
    // Issue 24: batches left MCP in its 2025-06-18 revision; any array, even an empty one, is refused with a JSON-RPC error.
    const batch = await rawMcp(h.urls().mcpUrl, { authorization: `Bearer ${token}` }, '[]');
    expect(batch.status).toBe(400);
    expect(batch.json).toMatchObject({ jsonrpc: '2.0', error: { code: -32600 } });
  });
});

describe('documentation for agents', () => {
  it('/llms.txt lists every tool and links the agent guide and the MCP URL', async () => {
    const res = await fetch(`${origin}/llms.txt`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text.startsWith('# signalbase')).toBe(true);
    for (const tool of Object.keys(CONTRACT)) expect(text).toContain(`\`${tool}\``);
    expect(text).toContain(`${origin}/agent-guide.md`);
    expect(text).toContain(`${origin}/mcp`);
  });

  it('/agent-guide.md: a section per tool with its parameters, each contract error with what to do, and the evidence rule', async () => {
    const res = await fetch(`${origin}/agent-guide.md`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/markdown/);
    const md = await res.text();
    const { tools } = await client.listTools();
    for (const t of tools) {
      const section = md.split(`### ${t.name}\n`)[1]?.split('\n### ')[0];
      expect(section, t.name).toBeDefined();
      for (const p of Object.keys(t.inputSchema.properties ?? {})) expect(section, `${t.name}.${p}`).toContain(`| \`${p}\` |`);
    }
    for (const code of ERROR_CODES) expect(md).toMatch(new RegExp(`\\| \`${code}\` \\| \\d+ \\| \\S`));
    expect(md).toMatch(/alternatives/);
    expect(md).toMatch(/never evidence for exact trade counts/);
  });

  it("the MCP server's instructions carry the evidence rule", () => {
    expect(client.getInstructions()).toMatch(/never evidence for exact trade counts/);
  });
});
