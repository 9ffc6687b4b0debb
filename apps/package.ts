import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * This package's package.json, found upwards from this file: the same whether the code runs as
 * TypeScript from the checkout or compiled under dist/.
 */
function packageJson(): { name: string; version: string } {
  for (let dir = import.meta.dirname; ; dir = dirname(dir)) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version: string };
      if (pkg.name === 'signalbase') return pkg as { name: string; version: string };
    }
    if (dirname(dir) === dir) throw new Error('package.json of signalbase not found above ' + import.meta.dirname);
  }
}

export const PACKAGE_VERSION = packageJson().version;
