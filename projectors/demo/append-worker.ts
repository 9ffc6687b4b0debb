// Worker-thread entry of `appendDemoInWorker` (apps/seed.ts): writes the demo data set to the log
// of `workerData.dataDir` and posts its progress, so that the seed's projector (on the main
// thread) projects what is written while the rest is being generated.
import { parentPort, workerData } from 'node:worker_threads';
import { EmbeddedLog } from '../log/embedded.ts';
import { appendDemo } from './append.ts';
import type { Scale } from './generate.ts';

export interface AppendWorkerData {
  dataDir: string;
  scale: Scale;
  seed?: number;
  now: string;
}
export type AppendWorkerMessage = { progress: number } | { done: number };

const data = workerData as AppendWorkerData;
const post = (m: AppendWorkerMessage) => parentPort!.postMessage(m);
const done = await appendDemo(new EmbeddedLog(data.dataDir), {
  scale: data.scale,
  seed: data.seed,
  now: new Date(data.now),
  onProgress: (n) => post({ progress: n }),
});
post({ done });
