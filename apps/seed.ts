import { Worker } from 'node:worker_threads';
import type { AppendWorkerData, AppendWorkerMessage } from '../projectors/demo/append-worker.ts';
import { estimateDemoRecords, type Scale } from '../projectors/demo/generate.ts';

/**
 * appendDemo on a worker thread (the log of `dataDir`, appended as the generator goes), so that
 * generating the data set takes no time from a projector running on this thread meanwhile.
 * `onProgress` gets the records written so far. Resolves with their number once all are written.
 */
export function appendDemoInWorker(
  dataDir: string,
  opts: { scale: Scale; seed?: number; now: Date; onProgress?: (done: number) => void },
): Promise<number> {
  // The worker's entry in the same form as this module: TypeScript from the checkout, or compiled JavaScript.
  const entry = new URL(`../projectors/demo/append-worker.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url).href;
  const data: AppendWorkerData = { dataDir, scale: opts.scale, seed: opts.seed, now: opts.now.toISOString() };
  // Under tsx (TypeScript run as it is), the worker registers the same loader before its entry.
  const tsx = import.meta.url.endsWith('.ts') ? import.meta.resolve('tsx/esm/api') : null;
  const worker = new Worker(
    `const { workerData } = require('node:worker_threads');
    (async () => { if (workerData.tsx) (await import(workerData.tsx)).register(); await import(workerData.entry); })()
      .catch((err) => { setImmediate(() => { throw err; }); });`,
    { eval: true, workerData: { ...data, tsx, entry } },
  );
  return new Promise((resolve, reject) => {
    let done: number | undefined;
    worker.on('message', (m: AppendWorkerMessage) => {
      if ('progress' in m) opts.onProgress?.(m.progress);
      else done = m.done;
    });
    worker.on('error', reject);
    worker.on('exit', (code) => (done !== undefined ? resolve(done) : reject(new Error(`the demo generator stopped (exit code ${code})`))));
  });
}

/** `done`: what a progress bar shows, the records projected (or written, when a running `start` projects them). */
export interface SeedProgress {
  written: number;
  projected: number;
  done: number;
  total: number;
}

/**
 * `signalbase seed`: writes the demo data set through the log on a worker thread while this
 * thread projects it (unless a `start` runs on DATA_DIR: it projects by itself), then the demo
 * account and key; resolves once everything written is projected. The projector starts at once
 * and follows the log as it grows, so the seed takes about as long as projecting does.
 */
export async function seedDemo(
  dataDir: string,
  opts: {
    scale: Scale;
    seed?: number;
    now: Date;
    onProgress?: (p: SeedProgress) => void;
    say?: (line: string) => void;
  },
): Promise<{ records: number; projected: number; dead: number; serverPid: number | null }> {
  const say = opts.say ?? (() => {});
  const { ensureDemoAccess, markSeeded, runningServerPid, storePath } = await import('./embedded.ts');
  const { EmbeddedLog } = await import('../projectors/log/embedded.ts');
  const log = new EmbeddedLog(dataDir, 50);
  const total = estimateDemoRecords(opts.scale);
  let written = 0;
  let projected = 0;
  let dead = 0;
  const serverPid = runningServerPid(dataDir);
  const report = () =>
    opts.onProgress?.({ written, projected, done: serverPid === null ? projected : written, total: Math.max(total, written) });
  let projector: { sub: import('../projectors/log/port.ts').LogSubscription; close(): Promise<void> } | null = null;
  if (serverPid === null) {
    const { counted, migrateReadModels, PROJECTOR_GROUP, runProjector } = await import('../projectors/runner.ts');
    const { openChdbStore } = await import('../storage/chdb.ts');
    // A crash mid-append may have left a torn last line: end it, so it is dead-lettered on its own.
    for (const topic of log.sealTornTails()) say(`${topic}: a torn last line (an interrupted append) goes to the dead-letter table`);
    const store = await openChdbStore(storePath(dataDir));
    await migrateReadModels(store, () => log.writeOffsets(PROJECTOR_GROUP, {}), say);
    const sub = runProjector(log, store, {
      onCommit: (c) => {
        const n = counted(c);
        projected += n.applied + n.dead;
        dead += n.dead;
        report();
      },
    });
    projector = {
      sub,
      close: async () => {
        await sub.stop();
        await store.close();
      },
    };
  } else say(`signalbase start (pid ${serverPid}) is running on ${dataDir}: it projects the new records itself.`);
  try {
    const records = await appendDemoInWorker(dataDir, {
      scale: opts.scale,
      seed: opts.seed,
      now: opts.now,
      onProgress: (n) => {
        written = n;
        report();
      },
    });
    written = records;
    ensureDemoAccess(dataDir, log);
    markSeeded(dataDir, opts.scale, records);
    report();
    await projector?.sub.caughtUp();
    return { records, projected, dead, serverPid };
  } finally {
    await projector?.close();
  }
}
