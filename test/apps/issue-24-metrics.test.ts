// Issue 24 item 6: /metrics needs no credential, so it must not tell how many accounts and API keys
// exist or change; and it can be served on a listener of its own (METRICS_PORT, loopback unless
// METRICS_HOST says otherwise) instead of the API port.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApi } from '../../apps/api/server.ts';
import { ApiKeyAuthenticator } from '../../apps/auth/keys.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { loadConfig, metricsListen } from '../../apps/config.ts';
import { Metrics, serveMetrics } from '../../apps/metrics.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

let h: Harness;
beforeAll(async () => { h = await createHarness({ metrics: ({ lag }) => new Metrics({ projectorLag: lag }) }); }, 60_000);
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
    await h.given([{ topic: 'accounts', value: { id: 'broken' } }, { topic: 'api-keys', value: { id: 'broken' } }]);
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
    expect(() => metricsListen({ METRICS_PORT: '70000' })).toThrow(/METRICS_PORT/);
  });

  it('served there (GET /metrics only), and not on the app when it is', async () => {
    const metrics = new Metrics();
    const app = buildApi({ store: h.store, auth: new ApiKeyAuthenticator(h.store, new MemoryCache()), dataVersion: () => 0, metrics, metricsRoute: false });
    const served = await serveMetrics(metrics, metricsListen({ METRICS_PORT: '0' })!);
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
