// Issue 25: one typed, validated configuration for every process, with --help generated from it.
// What a user notices: a process told something it cannot use says every problem at once and
// starts nothing; each command's --help names every variable its process reads; the README's
// configuration table is the embedded mode's settings; no code reads the environment past it.
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, type ProcessKind, readSettings } from '../../apps/config.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const cli = (args: string[], env: Record<string, string> = {}) => {
  // Only what the test gives (and what node needs to run), so the machine's own variables do not leak in.
  const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'signalbase.cjs'), ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    timeout: 60_000,
  });
  return { status: r.status, out: r.stdout, err: r.stderr };
};

/** The variables `kind` reads, seen from outside: every name the loader looks up in an environment that records them. */
function namesRead(kind: ProcessKind): string[] {
  const seen = new Set<string>();
  const env = new Proxy({} as NodeJS.ProcessEnv, {
    get: (_t, k) => {
      if (typeof k === 'string') seen.add(k);
      return undefined;
    },
  });
  try {
    readSettings(kind, env);
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
  }
  return [...seen].filter((n) => /^[A-Z][A-Z0-9_]+$/.test(n)).sort();
}

describe('issue 25: one configuration', () => {
  it('a read replica given unusable values names every problem at once and exits 2 before it connects to anything', () => {
    const r = cli(['api'], { PORT: '99999', CLICKHOUSE_URL: 'ftp://clickhouse', REDIS_COMMAND_TIMEOUT_MS: 'soon' });
    expect(r.status).toBe(2);
    for (const name of ['PORT', 'CLICKHOUSE_URL', 'REDIS_COMMAND_TIMEOUT_MS', 'CURSOR_SECRET', 'REDIS_URL']) expect(r.err).toContain(name);
    expect(r.err).not.toMatch(/\n\s+at /); // a message, not a stack trace
  });

  it('the embedded mode refuses a bad value with its name and what is allowed', () => {
    expect(() => loadConfig({ PORT: '8x' })).toThrow(/PORT must be an integer 0\.\.65535/);
    expect(() => loadConfig({ LOG_LEVEL: 'loud' })).toThrow(/LOG_LEVEL must be one of/);
    expect(() => loadConfig({ CURSOR_SECRET: 'short' })).toThrow(/CURSOR_SECRET must be 32 bytes or more/);
    expect(() => loadConfig({ MCP_ALLOWED_ORIGINS: 'https://app.example/path' })).toThrow(/MCP_ALLOWED_ORIGINS/);
    // The live projector's cadence (issue 26): milliseconds within bounds, 500 unless given.
    for (const bad of ['0', '20', '10001', 'soon', '0.5'])
      expect(() => loadConfig({ LIVE_CADENCE_MS: bad }), bad).toThrow(/LIVE_CADENCE_MS must be/);
    expect(loadConfig({ LIVE_CADENCE_MS: '1000' }).liveCadenceMs).toBe(1000);
    expect(loadConfig({}).liveCadenceMs).toBe(500);
    // Unset and empty both mean the default.
    expect(loadConfig({ PORT: '' }).port).toBe(8080);
    expect(loadConfig({}).host).toBe('127.0.0.1');
  });

  it("each command's --help names every variable its process reads", () => {
    const commands: [string, ProcessKind][] = [
      ['start', 'start'],
      ['projector', 'projector'],
      ['api', 'api'],
      ['mcp', 'mcp'],
      ['topics', 'topics'],
      ['ingest', 'ingest'],
      ['keys', 'admin'],
    ];
    for (const [command, kind] of commands) {
      const help = cli([command, '--help']).out;
      const names = namesRead(kind);
      expect(names.length, command).toBeGreaterThan(0);
      for (const name of names) expect(help, `${command} --help names ${name}`).toMatch(new RegExp(`^\\s+${name}\\s`, 'm'));
    }
  });

  it("the README's configuration table lists exactly the variables `signalbase start` reads", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 5));
    const documented = [...section.matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]!).sort();
    expect(documented).toEqual(namesRead('start'));
  });

  it('no code past apps/config.ts reads a variable of the environment', () => {
    const offenders: string[] = [];
    for (const dir of ['apps', 'projectors', 'storage', 'schemas']) {
      for (const e of readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })) {
        if (!e.isFile() || !e.name.endsWith('.ts')) continue;
        const file = relative(ROOT, join(e.parentPath, e.name));
        if (file === 'apps/config.ts') continue;
        for (const m of readFileSync(join(ROOT, file), 'utf8').matchAll(
          /\b(?:process\.)?env(?:\.([A-Z][A-Z0-9_]+)|\[['"]([A-Z][A-Z0-9_]+)['"]\])/g,
        )) {
          offenders.push(`${file}: ${m[1] ?? m[2]}`);
        }
      }
    }
    expect(offenders).toEqual([]);
  });
});
