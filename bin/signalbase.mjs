#!/usr/bin/env node
// The signalbase CLI. Runs the compiled JavaScript under dist/ (`npm run build`; `npm start` and
// `npm ci` build it) when it is there and no source is newer than it; otherwise the TypeScript as
// it is, through tsx's loader, so a checkout being edited never runs a stale build.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

// chdb runs each statement on a thread of libuv's pool (4 by default): the API's read slots, the
// projector, compaction and each export (for as long as its client reads) take one at once.
process.env.UV_THREADPOOL_SIZE ??= '16';

const root = join(import.meta.dirname, '..');
const built = join(root, 'dist', 'apps', 'cli.js');

/** The newest modification time of the sources the build is made of (a few hundred files: about a millisecond). */
function newestSource() {
  let newest = 0;
  for (const dir of ['apps', 'projectors', 'storage', 'schemas']) {
    if (!existsSync(join(root, dir))) continue; // an image with the build alone
    for (const e of readdirSync(join(root, dir), { withFileTypes: true, recursive: true })) {
      if (e.isFile() && e.name.endsWith('.ts')) newest = Math.max(newest, statSync(join(e.parentPath, e.name)).mtimeMs);
    }
  }
  return newest;
}

if (process.env.SIGNALBASE_RUN_SOURCE !== '1' && existsSync(built) && statSync(built).mtimeMs >= newestSource()) {
  await import(pathToFileURL(built).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../apps/cli.ts');
}
