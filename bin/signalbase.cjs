#!/usr/bin/env node
// The signalbase CLI. Runs the compiled JavaScript under dist/ (`npm run build`; `npm start` and
// `npm ci` build it) when it is there and no source is newer than it; otherwise the TypeScript as
// it is, through tsx's loader, so a checkout being edited never runs a stale build.
//
// CommonJS, so that this runs before anything uses libuv's thread pool, whose size is read when it
// is first used (reading an ES module entry uses it: the pool then had its default 4 threads).
// chdb runs each statement on a thread of it: the API's read slots, the projector's lanes,
// compaction and the reads without a slot, and password checks hash on it too.
'use strict';
process.env.UV_THREADPOOL_SIZE ??= '16';

const { existsSync, readdirSync, statSync } = require('node:fs');
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');

const root = join(__dirname, '..');
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
  import(pathToFileURL(built).href);
} else {
  import('tsx/esm/api').then(({ register }) => {
    register();
    return import(pathToFileURL(join(root, 'apps', 'cli.ts')).href);
  });
}
