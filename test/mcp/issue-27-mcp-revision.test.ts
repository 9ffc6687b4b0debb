import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import { connect, rawMcp } from '../helpers/mcp-client.ts';

/**
 * Issue 27: MCP at the current revision. The server negotiates 2025-11-25 (the latest revision)
 * and 2025-06-18 (the one before, still in wide use): a client asking for either gets it and is
 * then served under its `MCP-Protocol-Version` header; an unknown revision is answered with the
 * latest. Every tool carries a title and the annotations of a read (readOnlyHint, idempotentHint,
 * openWorldHint false), and its description names the tool that answers the follow-up. A failed
 * read keeps its code and details under both revisions.
 */

const NOW = Date.parse('2026-06-01T00:00:00Z');
const DAY = 86_400_000;
const REVISIONS = ['2025-11-25', '2025-06-18'] as const;

let h: Harness;
let client: Client;
let token: string;

beforeAll(async () => {
  h = await createHarness({ mcp: true, clock: () => NOW });
  await h.given([
    build.trader(1),
    build.source('src-1'),
    build.asset(1),
    build.event(1, { timeOfEvent: new Date(NOW - 2 * DAY).toISOString() }),
  ]);
  await h.key({ account: { id: 'rev' } });
  await h.listen();
  token = await h.token({ account: 'rev' });
  client = await connect(h.urls().mcpUrl, { token });
});
afterAll(async () => {
  await client?.close();
  await h?.close();
});

const initialize = (protocolVersion: string) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion, capabilities: {}, clientInfo: { name: 'revision-test', version: '1.0.0' } },
});

describe('protocol version negotiation', () => {
  for (const revision of REVISIONS) {
    it(`${revision}: initialize answers it, and requests under its header are served`, async () => {
      const auth = { authorization: `Bearer ${token}` };
      const init = await rawMcp(h.urls().mcpUrl, { ...auth, 'mcp-protocol-version': revision }, initialize(revision));
      expect(init.status).toBe(200);
      expect(init.json.result.protocolVersion).toBe(revision);
      expect(init.json.result.capabilities.tools).toBeDefined();
      const headers = { ...auth, 'mcp-protocol-version': revision };
      const list = await rawMcp(h.urls().mcpUrl, headers, { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} });
      expect(list.status).toBe(200);
      expect(list.json.result.tools.length).toBe(15);
      const call = await rawMcp(h.urls().mcpUrl, headers, {
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: { name: 'list_events', arguments: {} },
      });
      expect(call.status).toBe(200);
      expect(call.json.result.structuredContent.results.map((e: any) => e.id)).toEqual([1]);
    });
  }

  it('a revision the server does not know: initialize answers the latest; a request under an unknown header is refused', async () => {
    const auth = { authorization: `Bearer ${token}` };
    const init = await rawMcp(h.urls().mcpUrl, { ...auth, 'mcp-protocol-version': '2025-11-25' }, initialize('2099-01-01'));
    expect(init.json.result.protocolVersion).toBe('2025-11-25');
    const list = await rawMcp(
      h.urls().mcpUrl,
      { ...auth, 'mcp-protocol-version': '2099-01-01' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} },
    );
    expect(list.status).toBe(400);
    expect(list.json.error.code).toEqual(expect.any(Number));
  });

  it('JSON-RPC batches stay refused', async () => {
    const batch = await rawMcp(h.urls().mcpUrl, { authorization: `Bearer ${token}`, 'mcp-protocol-version': '2025-11-25' }, [
      { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
    ]);
    expect(batch.status).toBe(400);
    expect(batch.json.error.code).toBe(-32600);
  });
});

describe('tools as a current client reads them', () => {
  it('a title, the annotations of a read, and a description naming the follow-up tool', async () => {
    const { tools } = await client.listTools();
    const names = new Set(tools.map((t) => t.name));
    for (const t of tools) {
      expect(t.title, t.name).toMatch(/\S/);
      expect(t.annotations, t.name).toMatchObject({
        readOnlyHint: true,
        idempotentHint: true,
        openWorldHint: false,
        destructiveHint: false,
      });
      const followUp = /Follow-up: ([^.]*)\./.exec(t.description ?? '')?.[1];
      expect(followUp, t.name).toBeDefined();
      const named = [...followUp!.matchAll(/\b[a-z]+(?:_[a-z]+)+\b/g)].map((m) => m[0]).filter((n) => n !== t.name);
      expect(named.length, `${t.name}: ${followUp}`).toBeGreaterThan(0);
      for (const n of named) expect(names.has(n), `${t.name} names ${n}`).toBe(true);
    }
  });

  for (const revision of REVISIONS) {
    it(`${revision}: a failed read is a tool error with its code and details`, async () => {
      const headers = { authorization: `Bearer ${token}`, 'mcp-protocol-version': revision };
      const args = { metric: 'win_rate', timeBasedPerformanceWindow: '30D', startTime: new Date(NOW - 5 * DAY).toISOString() };
      const call = await rawMcp(h.urls().mcpUrl, headers, {
        jsonrpc: '2.0',
        id: 4,
        method: 'tools/call',
        params: { name: 'rank_traders', arguments: args },
      });
      expect(call.json.result.isError).toBe(true);
      const { error } = JSON.parse(call.json.result.content[0].text);
      expect(error.code).toBe('PERFORMANCE_WINDOW_NOT_ELAPSED');
      expect(error.details.requested).toEqual({ startTime: args.startTime, endTime: null, timeBasedPerformanceWindow: '30D' });
      expect(error.details.alternatives.map((a: any) => a.strategy)).toContain('preserve_evaluation');
      const bad = await rawMcp(h.urls().mcpUrl, headers, {
        jsonrpc: '2.0',
        id: 5,
        method: 'tools/call',
        params: { name: 'list_events', arguments: { limit: 0 } },
      });
      const v = JSON.parse(bad.json.result.content[0].text).error;
      expect(v.code).toBe('VALIDATION_ERROR');
      expect(v.details.map((d: any) => d.param)).toEqual(['limit']);
    });
  }
});
