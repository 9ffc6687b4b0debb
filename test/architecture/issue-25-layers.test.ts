// Issue 25: the house's layers. `schemas/` at the bottom, then `storage/`, then `projectors/` and
// `apps/reads/` side by side, then the surfaces (`apps/` outside `reads/`), then `bin/` and
// `bench/`: nothing imports upwards or sideways between projectors and reads, and no files import
// each other in a loop. Read from the sources' own import statements (what the issue and
// ../shared/STYLE.md say the layers are), not from any list the code keeps.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');
const SOURCE_DIRS = ['schemas', 'storage', 'projectors', 'apps', 'bin', 'bench'];

function sources(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && /\.(ts|mts|mjs)$/.test(e.name))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)));
}

/** The files a file imports (relative specifiers in import/export statements and dynamic imports), as repo paths. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^'"`;]*?from\s*'(\.{1,2}\/[^']+)'|\bimport\(\s*'(\.{1,2}\/[^']+)'\s*\)/g)) {
    out.push(normalize(join(dirname(file), (m[1] ?? m[2])!)));
  }
  return out;
}

/** A file's layer: the lower the number, the further down. */
function layerOf(file: string): { name: string; level: number } {
  if (file.startsWith('schemas/')) return { name: 'schemas', level: 0 };
  if (file.startsWith('storage/')) return { name: 'storage', level: 1 };
  if (file.startsWith('projectors/')) return { name: 'projectors', level: 2 };
  if (file.startsWith('apps/reads/')) return { name: 'reads', level: 2 };
  if (file.startsWith('apps/')) return { name: 'surfaces', level: 3 };
  return { name: 'tools', level: 4 };
}

const files = SOURCE_DIRS.flatMap(sources);
const graph = new Map(files.map((f) => [f, importsOf(f).filter((t) => files.includes(t))]));

describe('issue 25: layers', () => {
  it('reads every source file and its imports', () => {
    expect(files).toContain('apps/registry.ts');
    expect(graph.get('apps/registry.ts')!.length).toBeGreaterThan(3);
  });

  it('nothing imports a file of a higher layer, and projectors and reads do not import each other', () => {
    const wrong: string[] = [];
    for (const [from, targets] of graph) {
      const a = layerOf(from);
      for (const to of targets) {
        const b = layerOf(to);
        if (b.level > a.level || (b.level === a.level && a.name !== b.name)) wrong.push(`${from} (${a.name}) -> ${to} (${b.name})`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('the projection runner knows the projections only as the list of them (projectors/index.ts), never one by name', () => {
    const named = graph.get('projectors/runner.ts')!.filter((t) => /^projectors\/[a-z-]+\/projection\.ts$/.test(t));
    expect(named).toEqual([]);
    expect(graph.get('projectors/runner.ts')).toContain('projectors/index.ts');
  });

  it('no files import each other in a loop', () => {
    const circles: string[] = [];
    const state = new Map<string, 'open' | 'done'>();
    const path: string[] = [];
    const visit = (f: string) => {
      state.set(f, 'open');
      path.push(f);
      for (const t of graph.get(f) ?? []) {
        if (state.get(t) === 'open') circles.push([...path.slice(path.indexOf(t)), t].join(' -> '));
        else if (!state.has(t)) visit(t);
      }
      path.pop();
      state.set(f, 'done');
    };
    for (const f of files) if (!state.has(f)) visit(f);
    expect(circles).toEqual([]);
  });
});

describe('issue 25: every table named in its module', () => {
  const declared = new Map<string, string>();
  for (const f of files.filter((f) => f.startsWith('storage/tables/'))) {
    for (const m of readFileSync(join(ROOT, f), 'utf8').matchAll(/\btable\('([a-z_]+)'[,)]/g)) declared.set(m[1]!, f);
  }
  const outside = files.filter(
    (f) => !f.startsWith('storage/tables/') && f !== 'storage/table.ts' && /^(apps|projectors|storage)\//.test(f),
  );
  const names = [...declared.keys()].join('|');

  it("declares the read models' tables (each once)", () => {
    for (const t of ['events', 'positions', 'messages', 'feed_groups', 'position_samples', 'activity_rollup', 'dead_letters'])
      expect(declared.has(t), t).toBe(true);
  });

  it("no code outside storage/tables/ writes a table's name: not in SQL ($db.<name>), nor as the table of an insert or a read", () => {
    const wrong: string[] = [];
    const patterns = [
      /\$db\.([a-z_]+)/g,
      new RegExp(`\\.insert(?:Compact|Lines)?\\(\\s*'(${names})'`, 'g'),
      new RegExp(`\\btable: '(${names})'`, 'g'),
      new RegExp(`\\b(?:FROM|JOIN|INTO|TABLE)\\s+(${names})\\b`, 'g'),
    ];
    for (const f of outside) {
      // Comments may name a table; code may not.
      const code = readFileSync(join(ROOT, f), 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/(^|[^:'"`])\/\/.*$/gm, '$1');
      for (const re of patterns) for (const m of code.matchAll(re)) wrong.push(`${f}: ${m[0]}`);
    }
    expect(wrong).toEqual([]);
  });

  it("every table's DDL is in the storage layer", () => {
    const ddl = outside.concat(files.filter((f) => /^(apps|projectors)\//.test(f))).filter((f) => !f.startsWith('storage/'));
    const wrong = [...new Set(ddl)].filter((f) => /CREATE (TABLE|VIEW|MATERIALIZED VIEW)\b/.test(readFileSync(join(ROOT, f), 'utf8')));
    expect(wrong).toEqual([]);
  });
});

describe('issue 25: the source key defined once', () => {
  const HOME = 'storage/tables/traders.ts';
  const code = (f: string) =>
    readFileSync(join(ROOT, f), 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/(^|[^:'"`])\/\/.*$/gm, '$1');

  it('is built, written in SQL and parsed only in the source identities table module', () => {
    expect(code(HOME)).toMatch(/export const sourceKey\b/);
    expect(code(HOME)).toMatch(/export function parseSourceKey\b/);
    expect(code(HOME)).toMatch(/export function sourceKeySql\b/);
    const patterns = [
      // In SQL: concat(platform, ':', sourceIdentityId), with or without an alias.
      /concat\([^)]*[pP]latform\s*,\s*':'/g,
      // In TS: `${platform}:${sourceIdentityId}`.
      /\$\{[^}]*[pP]latform\}:\$\{[^}]*sourceIdentityId\}/g,
      // Parsed at its colon.
      /indexOf\(':'\)/g,
    ];
    const wrong: string[] = [];
    for (const f of files.filter((f) => f !== HOME && /^(apps\/reads|projectors|storage|bench)\//.test(f))) {
      for (const re of patterns) for (const m of code(f).matchAll(re)) wrong.push(`${f}: ${m[0]}`);
    }
    expect(wrong).toEqual([]);
  });
});
