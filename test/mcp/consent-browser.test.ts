import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { type Browser, chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import { connect, TestOAuthProvider } from '../helpers/mcp-client.ts';

/**
 * Issue 9: the sign-in and consent page driven in a real browser (Debian's chromium, headless,
 * through playwright-core): the user signs in with the account's password, unticks a scope,
 * approves, and the browser lands on the MCP client's redirect URI with the code; the client
 * finishes the flow and holds a token with exactly the approved scopes.
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const present = existsSync(CHROMIUM);
if (!present && process.env.CI === 'true') throw new Error(`CI=true but no browser at ${CHROMIUM}: .ci/run installs Debian's chromium`);
if (!present)
  console.warn(`consent page browser test skipped: no chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`);

let h: Harness;
let browser: Browser;
let callback: Server;
let callbackUrl: string;
const received: URL[] = [];

describe.skipIf(!present)('the consent page in headless Chromium', () => {
  beforeAll(async () => {
    h = await createHarness({ mcp: true });
    await h.given([
      build.trader(1),
      build.source('src-1'),
      build.asset(1),
      build.event(1, { timeOfEvent: new Date(Date.now() - 86_400_000).toISOString() }),
    ]);
    await h.key({ account: { id: 'erin' } });
    await h.password('erin', 'erin-password-9');
    await h.listen();
    // The MCP client's redirect URI: a loopback page of the client application.
    callback = createServer((req, res) => {
      const u = new URL(req.url!, callbackUrl);
      if (u.pathname === '/callback') received.push(u); // not the browser's /favicon.ico
      res.setHeader('content-type', 'text/html');
      res.end('<title>signed in</title><p>You can close this window.</p>');
    });
    await new Promise<void>((r) => callback.listen(0, '127.0.0.1', r));
    callbackUrl = `http://127.0.0.1:${(callback.address() as AddressInfo).port}/callback`;
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      // This machine's network is closed: no background connections (they would be refused at every start).
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
  }, 120_000);
  afterAll(async () => {
    await browser?.close();
    await new Promise<void>((r) => (callback ? callback.close(() => r()) : r()));
    await h?.close();
  });

  it('sign in, a wrong password first, untick feed.read, approve: the client gets a token for the approved scopes', async () => {
    const provider = new TestOAuthProvider(callbackUrl);
    const transport = new StreamableHTTPClientTransport(new URL(h.urls().mcpUrl), { authProvider: provider });
    await expect(new Client({ name: 'browser', version: '1' }).connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);

    const page = await browser.newPage();
    await page.goto(provider.authorizationUrl!.href);
    expect(await page.title()).toBe('Sign in to signalbase');
    expect(await page.textContent('body')).toContain('signalbase test client');

    await page.fill('input[name=account]', 'erin');
    await page.fill('input[name=password]', 'wrong-password');
    await page.click('button[value=approve]');
    await expect.poll(() => page.textContent('[role=alert]')).toContain('Wrong account or password');
    expect(received).toHaveLength(0);

    await page.fill('input[name=password]', 'erin-password-9');
    await page.uncheck('input[name=scope][value="feed.read"]');
    await Promise.all([page.waitForURL((u) => u.href.startsWith(callbackUrl)), page.click('button[value=approve]')]);
    expect(await page.title()).toBe('signed in');
    await page.close();

    expect(received).toHaveLength(1);
    const back = received[0]!;
    expect(back.searchParams.get('state')).toBe('state-123');
    await transport.finishAuth(back.searchParams.get('code')!);
    expect(provider.saved!.scope!.split(' ')).not.toContain('feed.read');
    expect(provider.saved!.scope!.split(' ')).toContain('stats.read');

    const client = await connect(h.urls().mcpUrl, { provider });
    const names = (await client.listTools()).tools.map((t) => t.name);
    expect(names).not.toContain('list_feed');
    expect(names).toContain('rank_traders');
    const ranked = await client.callTool({ name: 'rank_traders', arguments: { metric: 'event_count' } });
    expect(ranked.isError).toBeFalsy();
    await client.close();
  });
});
