// Issue 24 item 6: /metrics needs no credential, so it must not tell how many accounts and API keys
// exist or change; and it can be served on a listener of its own (METRICS_PORT, loopback unless
// METRICS_HOST says otherwise) instead of the API port.

import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApi } from '../../apps/api/server.ts';
import { ApiKeyAuthenticator } from '../../apps/auth/keys.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { loadConfig } from '../../apps/config.ts';
import { redisKeys, sharedReadApp } from '../../apps/distributed.ts';
import { Metrics, serveMetrics } from '../../apps/metrics.ts';
import { freePort } from '../helpers/cli.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import { redisPeer } from '../helpers/redis.ts';

let h: Harness;
beforeAll(async () => {
  h = await createHarness({ metrics: ({ lag }) => new Metrics({ projectorLag: lag }) });
}, 60_000);
afterAll(() => h?.close());

const scrape = async () => (await h.app.inject({ method: 'GET', url: '/metrics' })).body;

describe('issue 24: /metrics shows no account or API-key counts', () => {
  it('accounts and keys are projected, other topics counted, but no sample names the accounts or api-keys topic', async () => {
    await h.key({ account: { id: 'acme' } });
    await h.key({ account: { id: 'globex' } });
    await h.given([build.trader(1), build.source('src-1')]);
    const text = await scrape();
    expect(text).toMatch(/^signalbase_projector_records_total\{topic="traders",outcome="applied"\} 1$/m);
    expect(text).not.toMatch(/topic="(accounts|api-keys)"/);
    // Dead letters of those topics are not counted either.
    await h.given([
      { topic: 'accounts', value: { id: 'broken' } },
      { topic: 'api-keys', value: { id: 'broken' } },
    ]);
    expect(await scrape()).not.toMatch(/topic="(accounts|api-keys)"/);
  });
});

describe('issue 24: /metrics on a port of its own', () => {
  it('METRICS_PORT and METRICS_HOST from the environment: loopback by default, an integer port', () => {
    expect(loadConfig({}).metrics).toBeUndefined();
    expect(loadConfig({ METRICS_PORT: '9464' }).metrics).toEqual({ port: 9464, host: '127.0.0.1' });
    expect(loadConfig({ METRICS_PORT: '9464', HOST: '0.0.0.0' }).metrics).toEqual({ port: 9464, host: '127.0.0.1' });
    expect(loadConfig({ METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0' }).metrics).toEqual({ port: 9464, host: '0.0.0.0' });
    expect(() => loadConfig({ METRICS_PORT: 'x' })).toThrow(/METRICS_PORT/);
    expect(() => loadConfig({ METRICS_PORT: '70000' })).toThrow(/METRICS_PORT/);
  });

  it('served there (GET /metrics only), and not on the app when it is', async () => {
    const metrics = new Metrics();
    const app = buildApi({
      store: h.store,
      auth: new ApiKeyAuthenticator(h.store, new MemoryCache()),
      dataVersion: () => 0,
      metrics,
      metricsRoute: false,
    });
    const served = await serveMetrics(metrics, loadConfig({ METRICS_PORT: '0' }).metrics!);
    try {
      expect(served.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
      const res = await fetch(served.url);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('signalbase_process_cpu_user_seconds_total');
      expect((await fetch(served.url.replace('/metrics', '/v2/healthz'))).status).toBe(404);
      expect((await fetch(served.url, { method: 'POST' })).status).toBe(404);
      const onApp = await app.inject({ method: 'GET', url: '/metrics' });
      expect(onApp.statusCode).toBe(404);
      expect(onApp.json()).toMatchObject({ success: false, error: { code: 'NOT_FOUND' } });
    } finally {
      await served.close();
      await app.close();
    }
  });
});

describe('issue 24: distributed read replicas take METRICS_PORT and MCP_ALLOWED_ORIGINS', () => {
  it('signalbase api with METRICS_PORT: /metrics on its own port while the app runs, not on the app; signalbase mcp checks Origin against its list', async (ctx) => {
    const peer = await redisPeer();
    if ('skip' in peer) return ctx.skip(peer.skip);
    const redis = new Redis(peer.url);
    const secret = Buffer.alloc(32, 7);
    const port = await freePort();
    const api = sharedReadApp('api', {
      store: h.store,
      redis,
      keys: redisKeys('issue24-metrics'),
      secret,
      metricsListen: { port, host: '127.0.0.1' },
    });
    const mcp = sharedReadApp('mcp', {
      store: h.store,
      redis,
      keys: redisKeys('issue24-metrics'),
      secret,
      mcp: { mcpUrl: 'https://mcp.example/mcp', issuer: 'https://issuer.example' },
      allowedOrigins: ['https://app.example'],
    });
    try {
      await api.listen({ port: 0, host: '127.0.0.1' });
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('signalbase_data_version');
      expect((await api.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(404);
      const post = (origin?: string) =>
        mcp.inject({
          method: 'POST',
          url: '/mcp',
          headers: { 'content-type': 'application/json', ...(origin ? { origin } : {}) },
          payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' },
        });
      expect((await post('https://evil.example')).statusCode).toBe(403);
      expect((await post('https://app.example')).statusCode).toBe(401); // past the Origin check: no token
      expect((await post('https://mcp.example')).statusCode).toBe(401);
      expect((await post()).statusCode).toBe(401);
    } finally {
      await api.close();
      await mcp.close();
      redis.disconnect();
      await peer.stop();
    }
    // Closed with the app.
    expect(
      await fetch(`http://127.0.0.1:${port}/metrics`).then(
        () => 'open',
        () => 'closed',
      ),
    ).toBe('closed');
  });
});
