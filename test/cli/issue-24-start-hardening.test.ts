// Issue 24 item 6, as `signalbase start` runs: DATA_DIR and everything under it (log, offsets, chdb
// data, demo key and password, auth files, cursor secret) readable by its owner alone, also for a
// DATA_DIR that existed with looser permissions; with METRICS_PORT, /metrics is served there (on
// loopback) and not on the API port, and carries no account or API-key record counts.
import { chmodSync, lstatSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, type ServerProcess, startServer } from '../helpers/cli.ts';

let server: ServerProcess | undefined;
let dataDir: string;
let api: string;
let metricsPort: number;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'signalbase-start24-'));
  chmodSync(dataDir, 0o755); // a DATA_DIR made before, open to everyone
  const port = await freePort();
  metricsPort = await freePort();
  server = await startServer({ PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'silent', METRICS_PORT: String(metricsPort) }, 150_000);
  api = `http://127.0.0.1:${port}`;
  // Make the dev authorization server write its files: the signing key and a client registration.
  expect((await fetch(`${api}/.well-known/jwks.json`)).status).toBe(200);
  const reg = await fetch(`${api}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ redirect_uris: ['http://127.0.0.1:9/cb'], token_endpoint_auth_method: 'none' }),
  });
  expect(reg.status).toBe(201);
}, 180_000);
afterAll(async () => {
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/** Every path under `dir` (itself included) with its permission bits. */
function walk(dir: string): { path: string; mode: number; dir: boolean }[] {
  const out = [{ path: dir, mode: statSync(dir).mode & 0o777, dir: true }];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = lstatSync(p);
    if (st.isDirectory()) out.push(...walk(p));
    // A symbolic link's own bits mean nothing (chdb links tables into its store): what it points to counts.
    else out.push({ path: p, mode: (st.isSymbolicLink() ? statSync(p) : st).mode & 0o777, dir: false });
  }
  return out;
}

describe("issue 24: DATA_DIR is its owner's alone", () => {
  it('DATA_DIR is 0700 and nothing under it is readable, writable or searchable by group or others', () => {
    const entries = walk(dataDir);
    const names = entries.map((e) => e.path.slice(dataDir.length + 1));
    // What the brief names is there: the log and offsets, chdb, demo key and password, auth files, cursor secret.
    for (const expected of [
      'log',
      'log/offsets',
      'chdb',
      'demo-api-key.txt',
      'demo-password.txt',
      'cursor-secret',
      'auth/passwords.json',
      'auth/signing-key.json',
      'auth/clients.ndjson',
      'auth/urls.json',
    ]) {
      expect(names, expected).toContain(expected);
    }
    expect(names.some((n) => n.startsWith('log/') && n.endsWith('.ndjson'))).toBe(true);
    expect(names.filter((n) => n.startsWith('chdb/')).length).toBeGreaterThan(10);
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    const open = entries.filter((e) => (e.mode & 0o077) !== 0).map((e) => `${e.path} ${e.mode.toString(8)}`);
    expect(open).toEqual([]);
  });
});

describe('issue 24: /metrics on METRICS_PORT only, without account or key counts', () => {
  it('is served on the metrics port, bound to loopback, and not on the API port', async () => {
    expect(server!.stdout()).toContain(`metrics:  http://127.0.0.1:${metricsPort}/metrics`);
    const res = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await res.text();
    expect(text).toMatch(/^signalbase_projector_records_total\{topic="trade-events",outcome="applied"\} [1-9]\d*$/m);
    expect((await fetch(`http://127.0.0.1:${metricsPort}/other`)).status).toBe(404);
    const onApi = await fetch(`${api}/metrics`);
    expect(onApi.status).toBe(404);
  });

  it('the demo account and key were projected, but no metric counts accounts or API keys', async () => {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(text).not.toMatch(/topic="(accounts|api-keys)"/);
  });
});
