// Issue 25: production processes and the CLI run compiled JavaScript. The build (`npm run build`,
// tsconfig.build.json) must give a CLI that behaves as the TypeScript does: the same help, and a
// seed whose demo generator runs on a worker thread from the compiled entry.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
// Inside the checkout, so the compiled code finds node_modules and package.json as dist/ does.
const out = join(ROOT, `.tmp-build-${process.pid}`);
const dirs: string[] = [];

const run = (entry: string, args: string[], env: Record<string, string> = {}) =>
  execFileSync(process.execPath, [entry, ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });

describe('issue 25: the compiled build', () => {
  beforeAll(() => {
    execFileSync(
      process.execPath,
      [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', out],
      { cwd: ROOT, stdio: 'pipe' },
    );
  }, 120_000);
  afterAll(() => {
    rmSync(out, { recursive: true, force: true });
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('compiles every source to JavaScript', () => {
    for (const f of ['apps/cli.js', 'apps/embedded.js', 'storage/chdb.js', 'projectors/demo/append-worker.js', 'schemas/topics/index.js'])
      expect(existsSync(join(out, f)), f).toBe(true);
    // Relative imports name the compiled files, not the TypeScript ones.
    expect(readFileSync(join(out, 'apps', 'cli.js'), 'utf8')).not.toMatch(/from '\.{1,2}\/[^']*\.ts'/);
  });

  it('the compiled CLI gives the same help as the TypeScript one', () => {
    const compiled = run(join(out, 'apps', 'cli.js'), ['--help']);
    const source = run(join(ROOT, 'bin', 'signalbase.cjs'), ['--help'], { SIGNALBASE_RUN_SOURCE: '1' });
    expect(compiled).toContain('Usage:');
    expect(compiled).toBe(source);
  });

  it('the compiled CLI seeds a data directory (its demo generator runs on a worker thread)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'signalbase-compiled-'));
    dirs.push(dir);
    const r = spawnSync(process.execPath, [join(out, 'apps', 'cli.js'), 'seed', '--scale', 'small', '--data-dir', dir], {
      encoding: 'utf8',
    });
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout + r.stderr).toMatch(/wrote \d+ demo records/);
    expect(JSON.parse(readFileSync(join(dir, 'seeded.json'), 'utf8'))).toMatchObject({ scale: 'small' });
  }, 120_000);
});
