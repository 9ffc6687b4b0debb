import { topicByName } from '../../schemas/topics/index.ts';
import type { EmbeddedLog } from '../log/embedded.ts';
import { estimateDemoRecords, generateDemo, type Scale } from './generate.ts';

/** Bytes of log lines buffered per topic before they are appended. */
const FLUSH_BYTES = 4 << 20;

/**
 * Writes the deterministic demo data set through the log (the projectors then build the read
 * models exactly as for real ingest). Each record becomes the log's line `{"k":<key>,"v":<value>}`
 * (the text `EmbeddedLog.appendSync` writes), encoded straight into a per-topic buffer that is
 * appended whole lines at a time.
 */
export async function appendDemo(
  log: EmbeddedLog,
  opts: { scale: Scale; seed?: number; now: Date; onProgress?: (done: number, total: number) => void },
): Promise<number> {
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
    if (++done % 10_000 === 0) {
      opts.onProgress?.(done, Math.max(total, done));
      await new Promise((r) => setImmediate(r));
    }
  }
  for (const [topic, b] of buffers) flush(topic, b);
  opts.onProgress?.(done, done);
  return done;
}
