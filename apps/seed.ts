import type { EmbeddedLog } from '../projectors/log/embedded.ts';
import { generateDemo, estimateDemoRecords, type Scale } from '../projectors/demo/generate.ts';
import { topicByName } from '../schemas/topics/index.ts';

/**
 * Writes the deterministic demo data set through the log (the projectors then build the read
 * models exactly as for real ingest). Records are appended per topic in chunks.
 */
export async function appendDemo(log: EmbeddedLog, opts: { scale: Scale; seed?: number; now: Date; onProgress?: (done: number, total: number) => void }): Promise<number> {
  const total = estimateDemoRecords(opts.scale);
  const buffers = new Map<string, { key: string; value: unknown }[]>();
  let done = 0;
  const flush = (topic: string) => {
    const buf = buffers.get(topic);
    if (buf?.length) { log.appendSync(topic, buf); buffers.set(topic, []); }
  };
  for (const rec of generateDemo({ scale: opts.scale, seed: opts.seed, now: opts.now })) {
    const topic = topicByName.get(rec.topic)!;
    let buf = buffers.get(rec.topic);
    if (!buf) buffers.set(rec.topic, (buf = []));
    buf.push({ key: topic.key(rec.value), value: rec.value });
    if (buf.length >= 10_000) flush(rec.topic);
    if (++done % 10_000 === 0) { opts.onProgress?.(done, Math.max(total, done)); await new Promise((r) => setImmediate(r)); }
  }
  for (const topic of buffers.keys()) flush(topic);
  opts.onProgress?.(done, done);
  return done;
}
