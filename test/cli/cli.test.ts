import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, freePort, pollUntil, runCli, type ServerProcess, startServer } from '../helpers/cli.ts';
import { connect, signIn, TestOAuthProvider } from '../helpers/mcp-client.ts';

/**
 * End to end over real processes and a real socket: `signalbase start` on a fresh DATA_DIR, the
 * admin CLI (keys, accounts) against the same DATA_DIR while it runs, a restart that must not
 * re-seed, and the CLI's help, errors and ingest.
 */

const HOUR = 3_600_000;
const tmpDirs: string[] = [];
const tempDir = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  tmpDirs.push(d);
  return d;
};

let dataDir: string;
let port: number;
let server: ServerProcess | undefined;
const servers: ServerProcess[] = [];

const env = () => ({ DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn' });

async function get(path: string, key?: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, { headers: key ? { 'x-api-key': key } : {} });
  const text = await res.text();
  let body: any = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, body };
}

/** Polls every 200 ms for up to 15 s until GET path with key answers `status` (the suite loads both CPUs: a live batch waits its turn). */
async function expectStatusWithin(path: string, key: string, status: number, timeoutMs = 15_000) {
  const r = await pollUntil(
    () => get(path, key),
    (res) => res.status === status,
    timeoutMs,
    200,
  );
  expect(r.value.status, `GET ${path} after ${r.ms} ms: ${JSON.stringify(r.value.body)}`).toBe(status);
  return r.value;
}

function logSizes(dir: string): Record<string, number> {
  const logDir = join(dir, 'log');
  if (!existsSync(logDir)) return {};
  const out: Record<string, number> = {};
  for (const f of readdirSync(logDir)
    .filter((f) => f.endsWith('.ndjson'))
    .sort())
    out[f] = statSync(join(logDir, f)).size;
  return out;
}

const lastLine = (s: string) => s.trim().split('\n').at(-1)!.trim();
const KEY_RE = /^sb_[0-9a-f]{16}_[A-Za-z0-9_-]{43}$/;

/** Every event id in [startTime, endTime], paging with the cursor. */
async function eventIdsIn(startTime: string, endTime: string, key: string): Promise<number[]> {
  const ids: number[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < 100; page++) {
    const q = new URLSearchParams({ startTime, endTime, limit: '200', ...(cursor ? { cursor } : {}) });
    const res = await get(`/v2/events?${q}`, key);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    ids.push(...res.body.data.results.map((e: any) => e.id));
    cursor = res.body.data.meta.nextCursor;
    if (!cursor) break;
  }
  return ids;
}

/**
 * CLI runs that need no server are started at once, in the background, so they overlap with the
 * server's first start (each CLI process pays a few seconds of tsx + chdb start-up); the tests
 * below await them.
 */
const HELP_CMDS = ['start', 'seed', 'ingest', 'keys', 'accounts', 'tokens'] as const;
let background: {
  mainHelp: Promise<CliResult>;
  cmdHelp: Promise<CliResult[]>;
  unknown: Promise<CliResult>;
  ingestFresh: Promise<CliResult>;
  ingestDir: string;
};

function startBackgroundRuns() {
  const dir = tempDir('signalbase-ingest-fresh-');
  const file = join(dir, 'records.ndjson');
  writeFileSync(
    file,
    [
      JSON.stringify({
        topic: 'traders',
        value: { id: 900001, name: 'Ingested', slug: 'ingested', avatarUrl: null, source: null, version: 1 },
      }),
      JSON.stringify({ topic: 'traders', value: { id: 'not-a-number', name: '', version: 1 } }),
      '',
    ].join('\n'),
  );
  background = {
    mainHelp: runCli(['--help']),
    cmdHelp: Promise.all(HELP_CMDS.map((c) => runCli([c, '--help']))),
    unknown: runCli(['no-such-command']),
    ingestFresh: runCli(['ingest', file], { DATA_DIR: join(dir, 'data') }, 90_000),
    ingestDir: dir,
  };
  for (const p of Object.values(background)) if (p instanceof Promise) p.catch(() => undefined); // awaited (and reported) by the tests
}

beforeAll(async () => {
  startBackgroundRuns();
  dataDir = tempDir('signalbase-cli-');
  port = await freePort();
  server = await startServer(env(), 120_000);
  servers.push(server);
}, 130_000);

afterAll(async () => {
  // Always stop every server we spawned, also when a test failed.
  await Promise.all(servers.map((s) => s.stop(5000).catch(() => undefined)));
  if (background) await Promise.allSettled(Object.values(background)); // no CLI process outlives the file
  for (const d of tmpDirs) rmSync(d, { recursive: true, force: true });
}, 30_000);

describe('signalbase start (first start on a fresh DATA_DIR)', () => {
  let demoKey: string;
  let roKey: string;
  let revokedKey: string;
  const fixedEnd = new Date(Math.floor((Date.now() - 2 * HOUR) / 1000) * 1000).toISOString();
  const fixedStart = new Date(Date.parse(fixedEnd) - 24 * HOUR).toISOString();
  let idsBefore: number[];

  it('seeds the demo set and prints the demo key, which equals DATA_DIR/demo-api-key.txt and works', async () => {
    const out = server!.stdout();
    expect(out).toMatch(/seeding/i);
    demoKey = readFileSync(join(dataDir, 'demo-api-key.txt'), 'utf8').trim();
    expect(demoKey).toMatch(KEY_RE);
    const printed = out
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => KEY_RE.test(l));
    expect(printed).toEqual([demoKey]);
    const res = await get('/v2/events', demoKey);
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.data.results.length).toBeGreaterThan(0);
  });

  it('serves MCP on the same port: start prints /mcp and the demo password; an MCP client signs in as demo on the consent page and calls every tool', async () => {
    const out = server!.stdout();
    const mcpUrl = `http://127.0.0.1:${port}/mcp`;
    expect(out).toContain(`MCP:      ${mcpUrl}`);
    const password = readFileSync(join(dataDir, 'demo-password.txt'), 'utf8').trim();
    expect(out).toContain(`account demo, password ${password}`);
    const provider = new TestOAuthProvider();
    expect(await auth(provider, { serverUrl: mcpUrl })).toBe('REDIRECT');
    const answer = await signIn(provider.authorizationUrl!, { account: 'demo', password });
    expect(answer.status, answer.html.slice(0, 300)).toBe(302);
    expect(await auth(provider, { serverUrl: mcpUrl, authorizationCode: new URL(answer.location!).searchParams.get('code')! })).toBe(
      'AUTHORIZED',
    );
    const client = await connect(mcpUrl, { provider });
    const { tools } = await client.listTools();
    expect(tools).toHaveLength(15);
    const traderId = (await get('/v2/traders?limit=1', demoKey)).body.data.results[0].id;
    const assetId = (await get('/v2/assets?limit=1', demoKey)).body.data.results[0].id;
    const args: Record<string, Record<string, unknown>> = {
      list_trader_stats: { traderIds: [traderId] },
      list_asset_stats: { assetIds: [assetId] },
    };
    for (const t of tools) {
      const r = await client.callTool({ name: t.name, arguments: args[t.name] ?? {} });
      expect(r.isError, `${t.name}: ${JSON.stringify(r.content).slice(0, 200)}`).toBeFalsy();
    }
    await client.close();
    expect((await fetch(`http://127.0.0.1:${port}/llms.txt`)).status).toBe(200);
  });

  it('tokens create --scopes events.read: /mcp takes the token and lists list_events only; accounts password changes the sign-in password', async () => {
    const minted = await runCli(['tokens', 'create', '--scopes', 'events.read', '--minutes', '5'], env());
    expect(minted.code, minted.stderr).toBe(0);
    const client = await connect(`http://127.0.0.1:${port}/mcp`, { token: lastLine(minted.stdout) });
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['list_events']);
    await client.close();

    const old = readFileSync(join(dataDir, 'demo-password.txt'), 'utf8').trim();
    const set = await runCli(['accounts', 'password', 'demo'], env(), 60_000, 'a-new-password-42\n');
    expect(set.code, set.stderr).toBe(0);
    expect(existsSync(join(dataDir, 'demo-password.txt'))).toBe(false); // no stale password to print at the next start
    const short = await runCli(['accounts', 'password', 'demo'], env(), 60_000, 'short\n');
    expect(short.code).not.toBe(0);
    expect(short.stderr).toMatch(/at least 8 characters/);
    const mcpUrl = `http://127.0.0.1:${port}/mcp`;
    const provider = new TestOAuthProvider();
    await auth(provider, { serverUrl: mcpUrl });
    expect((await signIn(provider.authorizationUrl!, { account: 'demo', password: old })).status).toBe(401);
    expect((await signIn(provider.authorizationUrl!, { account: 'demo', password: 'a-new-password-42' })).status).toBe(302);
  });

  it('keys create --scopes events.read: key works on /v2/events within 15 s, /v2/messages is 403; keys list shows it; keys revoke -> 401 within 15 s', async () => {
    const created = await runCli(['keys', 'create', '--scopes', 'events.read'], env());
    expect(created.code, created.stderr).toBe(0);
    const key = lastLine(created.stdout);
    expect(key).toMatch(KEY_RE);
    revokedKey = key;
    const id = key.split('_')[1]!;

    await expectStatusWithin('/v2/events', key, 200);
    const msg = await get('/v2/messages', key);
    expect(msg.status).toBe(403);
    expect(msg.body.error.code).toBe('FORBIDDEN');

    const list = await runCli(['keys', 'list'], env());
    expect(list.code, list.stderr).toBe(0);
    const line = list.stdout.split('\n').find((l) => l.startsWith(id));
    expect(line, list.stdout).toBeDefined();
    expect(line).toMatch(/scopes=events\.read\b/);
    expect(line).toMatch(/\bactive\b/);
    expect(list.stdout).not.toContain(key); // only the id is listed, never the secret

    const revoked = await runCli(['keys', 'revoke', id], env());
    expect(revoked.code, revoked.stderr).toBe(0);
    const gone = await expectStatusWithin('/v2/events', key, 401);
    expect(gone.body.error.code).toBe('UNAUTHORIZED');

    const list2 = await runCli(['keys', 'list'], env());
    expect(list2.stdout.split('\n').find((l) => l.startsWith(id))).toMatch(/REVOKED/);
  });

  it('accounts create ro --signal-visibility none + keys create --account ro -> /v2/events 403', async () => {
    const acc = await runCli(['accounts', 'create', 'ro', '--signal-visibility', 'none'], env());
    expect(acc.code, acc.stderr).toBe(0);
    const created = await runCli(['keys', 'create', '--account', 'ro'], env());
    expect(created.code, created.stderr).toBe(0);
    roKey = lastLine(created.stdout);
    expect(roKey).toMatch(KEY_RE);
    const res = await expectStatusWithin('/v2/events', roKey, 403);
    expect(res.body.error.code).toBe('FORBIDDEN');
    // message visibility stays `all`: messages are readable
    expect((await get('/v2/messages', roKey)).status).toBe(200);
  });

  it('issue 24: accounts create|set --scopes: keys and tokens beyond them are refused, and narrowing takes effect on existing keys and tokens', async () => {
    const acc = await runCli(['accounts', 'create', 'narrow', '--scopes', 'events.read,positions.read'], env());
    expect(acc.code, acc.stderr).toBe(0);
    expect((await runCli(['accounts', 'list'], env())).stdout.split('\n').find((l) => l.startsWith('narrow '))).toMatch(
      /scopes=events\.read,positions\.read$/,
    );
    const bad = await runCli(['accounts', 'create', 'badscopes', '--scopes', 'events.read,nope'], env());
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--scopes takes a comma-separated list/);

    const beyond = await runCli(['keys', 'create', '--account', 'narrow', '--scopes', 'events.read,messages.read'], env());
    expect(beyond.code).not.toBe(0);
    expect(beyond.stderr).toMatch(/account narrow does not hold messages\.read/);
    const created = await runCli(['keys', 'create', '--account', 'narrow'], env()); // default: the account's scopes
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toMatch(/with scopes events\.read,positions\.read\n/);
    const key = lastLine(created.stdout);
    await expectStatusWithin('/v2/positions', key, 200);
    expect((await get('/v2/messages', key)).status).toBe(403);

    const tokenBeyond = await runCli(['tokens', 'create', '--account', 'narrow', '--scopes', 'feed.read'], env());
    expect(tokenBeyond.code).not.toBe(0);
    expect(tokenBeyond.stderr).toMatch(/account narrow does not hold feed\.read/);
    const minted = await runCli(['tokens', 'create', '--account', 'narrow', '--minutes', '5'], env());
    expect(minted.code, minted.stderr).toBe(0);
    const tools = async () => {
      const client = await connect(`http://127.0.0.1:${port}/mcp`, { token: lastLine(minted.stdout) });
      try {
        return (await client.listTools()).tools.map((t) => t.name).sort();
      } finally {
        await client.close();
      }
    };
    expect(await tools()).toEqual(['list_events', 'list_open_positions', 'list_positions']);

    // Narrowed: the existing key and token lose positions.read within seconds.
    const set = await runCli(['accounts', 'set', 'narrow', '--scopes', 'events.read'], env());
    expect(set.code, set.stderr).toBe(0);
    const gone = await expectStatusWithin('/v2/positions', key, 403);
    expect(gone.body.error.code).toBe('FORBIDDEN');
    expect((await get('/v2/events', key)).status).toBe(200);
    expect(await tools()).toEqual(['list_events']);
    // --scopes all gives every scope back (the key had positions.read all along).
    expect((await runCli(['accounts', 'set', 'narrow', '--scopes', 'all'], env())).code).toBe(0);
    await expectStatusWithin('/v2/positions', key, 200);
  });

  it('records a fixed-bounds event page set before the restart', async () => {
    idsBefore = await eventIdsIn(fixedStart, fixedEnd, demoKey);
    expect(idsBefore.length).toBeGreaterThan(0);
    expect(new Set(idsBefore).size).toBe(idsBefore.length);
  });

  it('restart after SIGTERM: no re-seed, log unchanged, same demo key, same events, keys keep their state', async () => {
    const exit = await server!.stop(20_000);
    expect(exit.signal, `server did not exit on SIGTERM by itself`).toBeNull();
    expect(exit.code).toBe(0);
    const sizesBefore = logSizes(dataDir);
    expect(Object.keys(sizesBefore).length).toBeGreaterThan(0);

    server = await startServer(env(), 120_000);
    servers.push(server);
    expect(server.stdout()).not.toMatch(/seeding/i);
    expect(logSizes(dataDir)).toEqual(sizesBefore);
    expect(readFileSync(join(dataDir, 'demo-api-key.txt'), 'utf8').trim()).toBe(demoKey);

    const res = await get('/v2/events', demoKey);
    expect(res.status).toBe(200);
    expect(res.body.data.results.length).toBeGreaterThan(0);

    const idsAfter = await eventIdsIn(fixedStart, fixedEnd, demoKey);
    expect(new Set(idsAfter).size).toBe(idsAfter.length);
    expect(idsAfter).toEqual(idsBefore);

    expect((await get('/v2/events', revokedKey)).status).toBe(401);
    expect((await get('/v2/events', roKey)).status).toBe(403);
    expect(logSizes(dataDir)).toEqual(sizesBefore);
  });

  it('ingest of a file with one non-JSON line exits non-zero and appends nothing', async () => {
    const file = join(tempDir('signalbase-ingest-'), 'bad.ndjson');
    writeFileSync(
      file,
      [
        JSON.stringify({
          topic: 'traders',
          value: { id: 900001, name: 'Ingested', slug: null, avatarUrl: null, source: null, version: 1 },
        }),
        '{this is not json',
        '',
      ].join('\n'),
    );
    const before = logSizes(dataDir);
    const r = await runCli(['ingest', file], env());
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBeNull();
    expect(r.stderr).toMatch(/line 2/);
    expect(logSizes(dataDir)).toEqual(before);
  });
});

describe('signalbase help and usage errors', () => {
  it('--help and <cmd> --help exit 0 and print the usage', async () => {
    const main = await background.mainHelp;
    expect(main.code, main.stderr).toBe(0);
    expect(main.stdout).toMatch(/^Usage:/m);
    for (const c of HELP_CMDS) expect(main.stdout).toContain(`signalbase ${c}`);
    const each = await background.cmdHelp;
    each.forEach((r, i) => {
      expect(r.code, `${HELP_CMDS[i]} --help: ${r.stderr}`).toBe(0);
      expect(r.stdout, `${HELP_CMDS[i]} --help`).toContain(`signalbase ${HELP_CMDS[i]}`);
    });
  });

  it('<cmd> --help labels its usage with a "Usage:" line, like --help and the usage errors do', async () => {
    const each = await background.cmdHelp;
    each.forEach((r, i) => {
      expect(r.stdout, `${HELP_CMDS[i]} --help prints no "Usage:" line`).toMatch(new RegExp(`^Usage: signalbase ${HELP_CMDS[i]}\\b`, 'm'));
    });
  });

  it('an unknown command exits non-zero', async () => {
    const r = await background.unknown;
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBeNull();
    expect(r.stderr).toMatch(/unknown command/i);
  });
});

describe('signalbase ingest without a running server', () => {
  it('issue 5: a valid trader plus a schema-invalid record: the whole file is refused with the bad line, nothing appended', async () => {
    const r = await background.ingestFresh;
    const all = r.stdout + r.stderr;
    expect(r.code, all).toBe(1);
    expect(all).toMatch(/^line 2: traders: schema: /m);
    expect(all).toMatch(/nothing was appended/);
    expect(existsSync(join(background.ingestDir, 'data', 'log', 'traders.ndjson'))).toBe(false);
  });
});
