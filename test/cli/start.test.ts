// Issue 5: `start` listens within seconds whatever the log holds; /healthz says `starting` (503)
// with the projector's lag until the first catch-up, then `ok` (DESIGN 6 Health).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { EmbeddedLog } from '../../projectors/log/embedded.ts';
import { freePort, pollUntil, type ServerProcess, sleep, startServer } from '../helpers/cli.ts';

const dirs: string[] = [];
let server: ServerProcess | undefined;
afterAll(async () => {
  await server?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const PRICES = 300_000;

describe('issue 5: start listens before it has caught up with the log', () => {
  it('answers healthz 503 starting with a lag, then 200 ok with lag 0, and serves the data', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'signalbase-start-'));
    dirs.push(dataDir);
    // A log that takes the projector seconds to apply: 300k price samples of one asset.
    const log = new EmbeddedLog(dataDir);
    const t0 = Date.UTC(2026, 0, 1);
    for (let i = 0; i < PRICES; i += 10_000) {
      log.appendSync(
        'prices',
        Array.from({ length: 10_000 }, (_, j) => ({
          key: '1',
          value: { assetId: 1, at: new Date(t0 + (i + j) * 60_000).toISOString(), price: 100 + j, version: 1 },
        })),
      );
    }
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const started = Date.now();
    // The helper waits for healthz ok; read the banner and the first healthz answer ourselves first.
    const pending = startServer({ PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'silent' }, 120_000);
    let first: { status: number; body: any } | undefined;
    while (!first) {
      first = await fetch(`${base}/healthz`).then(
        async (r) => ({ status: r.status, body: await r.json() }),
        () => undefined,
      );
      if (!first) await sleep(20);
    }
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(first.status).toBe(503);
    expect(first.body).toEqual({
      success: true,
      data: {
        results: [{ status: 'starting', dataVersion: expect.any(Number), projectorLag: expect.any(Number) }],
        meta: { serverTime: expect.any(String) },
      },
      requestId: expect.any(String),
    });
    expect(first.body.data.results[0].projectorLag).toBeGreaterThan(0);
    server = await pending;
    // The first start also seeds the demo set: the lag is bounded by every line the log holds.
    const lines = readdirSync(join(dataDir, 'log'))
      .filter((f) => f.endsWith('.ndjson'))
      .reduce((n, f) => n + readFileSync(join(dataDir, 'log', f), 'utf8').split('\n').length - 1, 0);
    expect(lines).toBeGreaterThan(PRICES);
    expect(first.body.data.results[0].projectorLag).toBeLessThanOrEqual(lines);
    const ok = await pollUntil(
      (): Promise<any> => fetch(`${base}/v2/healthz`).then((r) => r.json()),
      (b: any) => b.data.results[0].status === 'ok',
      60_000,
    );
    expect(ok.ok).toBe(true);
    expect(ok.value.data.results[0].projectorLag).toBe(0);
    expect(server.stdout()).toMatch(/read models up to date \(\d+ records projected/);
    // The first compaction check's end is logged whatever it found (bench/live.ts waits for it before it measures).
    const checked = await pollUntil(
      async () => server!.stdout(),
      (out: string) => /compaction check done: \d+ tables compacted in \d+\.\d s/.test(out),
      60_000,
    );
    expect(checked.ok).toBe(true);
    const key = readFileSync(join(dataDir, 'demo-api-key.txt'), 'utf8').trim();
    const events: any = await fetch(`${base}/v2/events?limit=5`, { headers: { 'x-api-key': key } }).then((r) => r.json());
    expect(events.data.results).toHaveLength(5);
  }, 180_000);
});
