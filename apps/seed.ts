import { Worker } from 'node:worker_threads';
import type { EmbeddedLog } from '../projectors/log/embedded.ts';
import type { AppendWorkerData, AppendWorkerMessage } from '../projectors/demo/append-worker.ts';
import { generateDemo, estimateDemoRecords, type Scale } from '../projectors/demo/generate.ts';
import { topicByName } from '../schemas/topics/index.ts';

/** Bytes of log lines buffered per topic before they are appended. */
const FLUSH_BYTES = 4 << 20;

/**
 * Writes the deterministic demo data set through the log (the projectors then build the read
 * models exactly as for real ingest). Each record becomes the log's line `{"k":<key>,"v":<value>}`
 * (the text `EmbeddedLog.appendSync` writes), encoded straight into a per-topic buffer that is
 * appended whole lines at a time.
 */
export async function appendDemo(log: EmbeddedLog, opts: { scale: Scale; seed?: number; now: Date; onProgress?: (done: number, total: number) => void }): Promise<number> {
  const total = estimateDemoRecords(opts.scale);
  const buffers = new Map<string, { buf: Buffer; used: number }>();
  let done = 0;
  const flush = (topic: string, b: { buf: Buffer; used: number }) => {
    if (b.used) log.appendLines(topic, b.buf.subarray(0, b.used));
    b.used = 0;
  };
  for (const rec of generateDemo({ scale: opts.scale, seed: opts.seed, now: opts.now })) {
    const line = JSON.stringify({ k: topicByName.get(rec.topic)!.key(rec.value), v: rec.value });
    let b = buffers.get(rec.topic);
    if (!b) buffers.set(rec.topic, (b = { buf: Buffer.allocUnsafe(FLUSH_BYTES), used: 0 }));
    const room = line.length * 3 + 1; // UTF-8 takes at most 3 bytes per UTF-16 unit
    if (b.used + room > b.buf.length) {
      flush(rec.topic, b);
      if (room > b.buf.length) b.buf = Buffer.allocUnsafe(room);
    }
    b.used += b.buf.write(line, b.used);
    b.buf[b.used++] = 10;
    if (++done % 10_000 === 0) { opts.onProgress?.(done, Math.max(total, done)); await new Promise((r) => setImmediate(r)); }
  }
  for (const [topic, b] of buffers) flush(topic, b);
  opts.onProgress?.(done, done);
  return done;
}

/**
 * appendDemo on a worker thread (the log of `dataDir`, appended as the generator goes), so that
 * generating the data set takes no time from a projector running on this thread meanwhile.
 * `onProgress` gets the records written so far. Resolves with their number once all are written.
 */
export function appendDemoInWorker(dataDir: string, opts: { scale: Scale; seed?: number; now: Date; onProgress?: (done: number) => void }): Promise<number> {
  const entry = new URL('../projectors/demo/append-worker.ts', import.meta.url).href;
  const data: AppendWorkerData = { dataDir, scale: opts.scale, seed: opts.seed, now: opts.now.toISOString() };
  // Under tsx (TypeScript run as it is), the worker registers the same loader before its entry.
  const tsx = import.meta.url.endsWith('.ts') ? import.meta.resolve('tsx/esm/api') : null;
  const worker = new Worker(`const { workerData } = require('node:worker_threads');
    (async () => { if (workerData.tsx) (await import(workerData.tsx)).register(); await import(workerData.entry); })()
      .catch((err) => { setImmediate(() => { throw err; }); });`, { eval: true, workerData: { ...data, tsx, entry } });
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
export interface SeedProgress { written: number; projected: number; done: number; total: number }

/**
 * `signalbase seed`: writes the demo data set through the log on a worker thread while this
 * thread projects it (unless a `start` runs on DATA_DIR: it projects by itself), then the demo
 * account and key; resolves once everything written is projected. The projector starts at once
 * and follows the log as it grows, so the seed takes about as long as projecting does.
 */
export async function seedDemo(dataDir: string, opts: {
  scale: Scale; seed?: number; now: Date; onProgress?: (p: SeedProgress) => void; say?: (line: string) => void;
}): Promise<{ records: number; projected: number; dead: number; serverPid: number | null }> {
  const say = opts.say ?? (() => {});
  const { ensureDemoAccess, markSeeded, runningServerPid, storePath } = await import('./embedded.ts');
  const { EmbeddedLog } = await import('../projectors/log/embedded.ts');
  const log = new EmbeddedLog(dataDir, 50);
  const total = estimateDemoRecords(opts.scale);
  let written = 0;
  let projected = 0;
  let dead = 0;
  const serverPid = runningServerPid(dataDir);
  const report = () => opts.onProgress?.({ written, projected, done: serverPid === null ? projected : written, total: Math.max(total, written) });
  let projector: { sub: import('../projectors/log/port.ts').LogSubscription; close(): Promise<void> } | null = null;
  if (serverPid === null) {
    const { migrateReadModels, PROJECTOR_GROUP, runProjector } = await import('../projectors/runner.ts');
    const { openChdbStore } = await import('../projectors/store/chdb.ts');
    // A crash mid-append may have left a torn last line: end it, so it is dead-lettered on its own.
    for (const topic of log.sealTornTails()) say(`${topic}: a torn last line (an interrupted append) goes to the dead-letter table`);
    const store = await openChdbStore(storePath(dataDir));
    await migrateReadModels(store, () => log.writeOffsets(PROJECTOR_GROUP, {}), say);
    const sub = runProjector(log, store, { onCommit: (c) => { projected += c.applied + c.dead; dead += c.dead; report(); } });
    projector = { sub, close: async () => { await sub.stop(); await store.close(); } };
  } else say(`signalbase start (pid ${serverPid}) is running on ${dataDir}: it projects the new records itself.`);
  try {
    const records = await appendDemoInWorker(dataDir, { scale: opts.scale, seed: opts.seed, now: opts.now, onProgress: (n) => { written = n; report(); } });
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
