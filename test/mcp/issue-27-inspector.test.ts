import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, REPO_ROOT, runCli, type ServerProcess, startServer } from '../helpers/cli.ts';

/**
 * Issue 27: a second real MCP client, independent of the SDK `Client` the other suites use: the
 * MCP Inspector's command-line mode (npm `@modelcontextprotocol/inspector` 2.12.0, pinned in
 * package.json) against `signalbase start` (what `npm start` runs, seeding the small demo data
 * set), with a bearer token from `signalbase tokens create`, over Streamable HTTP.
 */

const INSPECTOR = join(REPO_ROOT, 'node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');

let dataDir: string;
let server: ServerProcess;
let mcpUrl: string;
let token: string;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'sb-inspector-'));
  const port = await freePort();
  server = await startServer({ PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'silent', RATE_LIMITS: 'off' }, 180_000);
  mcpUrl = `http://127.0.0.1:${port}/mcp`;
  const minted = await runCli(['tokens', 'create', '--data-dir', dataDir, '--scopes', 'stats.read,events.read'], { PORT: String(port) });
  expect(minted.code, minted.stderr).toBe(0);
  token = minted.stdout.trim().split('\n').at(-1)!;
}, 240_000);
afterAll(async () => {
  await server?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

/** `mcp-inspector --cli URL --transport http --header 'Authorization: Bearer ...' ARGS`; its stdout parsed as JSON. */
function inspector(args: readonly string[]): Promise<{ code: number | null; json: any; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [INSPECTOR, '--cli', mcpUrl, '--transport', 'http', '--header', `Authorization: Bearer ${token}`, ...args],
      {
        cwd: REPO_ROOT,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      err += d;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      let json: any = null;
      try {
        json = JSON.parse(out.slice(out.indexOf('{')));
      } catch {
        /* left null: the assertion shows the output */
      }
      resolve({ code, json, stderr: `${err}\n${out}`.slice(0, 2000) });
    });
  });
}

describe('the MCP Inspector CLI against a started server', () => {
  it('lists the tools the token may call, with their titles and read annotations', async () => {
    const r = await inspector(['--method', 'tools/list']);
    expect(r.code, r.stderr).toBe(0);
    const tools = r.json.tools as any[];
    // stats.read and events.read (contract 4): these six tools and no other.
    expect(tools.map((t) => t.name).sort()).toEqual([
      'list_asset_stats',
      'list_events',
      'list_trader_activity',
      'list_trader_stats',
      'rank_traders',
      'summarize_message_activity',
    ]);
    for (const t of tools) expect(t.annotations, t.name).toMatchObject({ readOnlyHint: true, idempotentHint: true, openWorldHint: false });
  });

  it('calls rank_traders: ranked rows, with the applied window echoed', async () => {
    const r = await inspector([
      '--method',
      'tools/call',
      '--tool-name',
      'rank_traders',
      '--tool-arg',
      'limit=3',
      '--tool-arg',
      'metric=position_count',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.json.isError ?? false, r.stderr).toBe(false);
    const data = r.json.structuredContent;
    expect(data.results.map((x: any) => x.rank)).toEqual([1, 2, 3]);
    expect(data.results[0].metricValue).toBeGreaterThanOrEqual(data.results[2].metricValue);
    expect(data.filtersApplied).toMatchObject({ metric: 'position_count', timeBasedPerformanceWindow: '30D' });
    expect(r.json.content[0].text).toMatch(/^rank_traders: 3 results/);
  });

  it('calls list_events: a page with a cursor for more, named in the text', async () => {
    const r = await inspector(['--method', 'tools/call', '--tool-name', 'list_events', '--tool-arg', 'limit=5']);
    expect(r.code, r.stderr).toBe(0);
    const data = r.json.structuredContent;
    expect(data.results.length).toBe(5);
    const times = data.results.map((e: any) => Date.parse(e.timeOfEvent));
    expect(times).toEqual([...times].sort((a, b) => b - a));
    expect(data.meta.hasMore).toBe(true);
    expect(r.json.content[0].text).toContain(`cursor "${data.meta.nextCursor}"`);
  });
});
