import { closeSync, fstatSync, mkdirSync, openSync, readFileSync, readSync, renameSync, statSync, writeFileSync, writeSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import type { AppendRecord, Log, LogBatch, LogRecord, LogSubscription, SubscribeOptions } from './port.ts';

/**
 * Embedded append-only log under `DATA_DIR/log`: one NDJSON file per topic (`{"k":key,"v":value}`
 * per line), offsets are byte positions, and each consumer group commits its offsets to
 * `DATA_DIR/log/offsets/<group>.json` (written atomically). Several processes may append (the
 * CLI while `start` runs): each append is a single O_APPEND write of whole lines, and readers
 * only take complete lines.
 */
export class EmbeddedLog implements Log {
  private readonly dir: string;
  private readonly subs = new Set<EmbeddedSubscription>();

  constructor(dataDir: string, private readonly pollMs = 200) {
    this.dir = join(dataDir, 'log');
    mkdirSync(join(this.dir, 'offsets'), { recursive: true });
  }

  topicFile(topic: string): string {
    if (!/^[a-z][a-z0-9-]*$/.test(topic)) throw new Error(`bad topic name ${topic}`);
    return join(this.dir, `${topic}.ndjson`);
  }

  async append(topic: string, records: readonly AppendRecord[]): Promise<void> {
    this.appendSync(topic, records);
  }

  appendSync(topic: string, records: readonly AppendRecord[]): void {
    if (!records.length) return;
    let text = '';
    for (const r of records) text += JSON.stringify({ k: r.key, v: r.value }) + '\n';
    const buf = Buffer.from(text);
    const fd = openSync(this.topicFile(topic), 'a');
    try {
      let off = 0;
      while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
    } finally { closeSync(fd); }
  }

  /** Byte length of a topic file: the end offset. */
  end(topic: string): number {
    try { return statSync(this.topicFile(topic)).size; } catch { return 0; }
  }

  /** Reads every record of a topic from the start (CLI reads such as `keys list`). */
  *readAll(topic: string): Generator<{ key: string; value: unknown }> {
    const file = this.topicFile(topic);
    if (!existsSync(file)) return;
    const text = readFileSync(file, 'utf8');
    for (const line of text.split('\n')) {
      if (!line) continue;
      try { const { k, v } = JSON.parse(line); yield { key: k, value: v }; } catch { /* torn line: skipped */ }
    }
  }

  readOffsets(group: string): Record<string, number> {
    try { return JSON.parse(readFileSync(this.offsetFile(group), 'utf8')); } catch { return {}; }
  }

  writeOffsets(group: string, offsets: Record<string, number>): void {
    const file = this.offsetFile(group);
    writeFileSync(file + '.tmp', JSON.stringify(offsets));
    renameSync(file + '.tmp', file);
  }

  private offsetFile(group: string): string {
    if (!/^[a-z][a-z0-9-]*$/.test(group)) throw new Error(`bad group name ${group}`);
    return join(this.dir, 'offsets', `${group}.json`);
  }

  /** Reads complete lines from `from`, at most `max` records and about 8 MiB. */
  read(topic: string, from: number, max: number): { records: LogRecord[]; next: number } {
    let fd: number;
    try { fd = openSync(this.topicFile(topic), 'r'); } catch { return { records: [], next: from }; }
    try {
      const size = fstatSync(fd).size;
      if (size <= from) return { records: [], next: from };
      const len = Math.min(size - from, 8 << 20);
      const buf = Buffer.allocUnsafe(len);
      const got = readSync(fd, buf, 0, len, from);
      const records: LogRecord[] = [];
      let pos = 0;
      while (records.length < max) {
        const nl = buf.indexOf(10, pos);
        if (nl === -1 || nl >= got) break;
        const line = buf.toString('utf8', pos, nl);
        const offset = from + nl + 1;
        pos = nl + 1;
        let key = '';
        let value = line;
        // Split the envelope without re-parsing the value: `{"k":<json string>,"v":<value>}`.
        try {
          const m = /^\{"k":("(?:[^"\\]|\\.)*"),"v":/.exec(line);
          if (m) { key = JSON.parse(m[1]!); value = line.slice(m[0].length, -1); }
        } catch { /* leave value as the whole line: the projector dead-letters it */ }
        records.push({ key, value, offset: String(offset) });
      }
      return { records, next: from + pos };
    } finally { closeSync(fd); }
  }

  subscribe(group: string, topics: readonly string[], handle: (batch: LogBatch) => Promise<void>, opts: SubscribeOptions = {}): LogSubscription {
    const sub = new EmbeddedSubscription(this, group, topics, handle, opts, this.pollMs);
    this.subs.add(sub);
    sub.start();
    return sub;
  }

  async close(): Promise<void> {
    await Promise.all([...this.subs].map((s) => s.stop()));
    this.subs.clear();
  }
}

class EmbeddedSubscription implements LogSubscription {
  private running = true;
  private loop: Promise<void> | undefined;
  private offsets: Record<string, number>;
  private waiters: { targets: Record<string, number>; resolve: () => void }[] = [];
  private wake: (() => void) | undefined;

  constructor(
    private readonly log: EmbeddedLog,
    private readonly group: string,
    private readonly topics: readonly string[],
    private readonly handle: (batch: LogBatch) => Promise<void>,
    private readonly opts: SubscribeOptions,
    private readonly pollMs: number,
  ) {
    this.offsets = log.readOffsets(group);
  }

  start(): void { this.loop = this.run(); }

  caughtUp(): Promise<void> {
    const targets: Record<string, number> = {};
    for (const t of this.topics) targets[t] = this.log.end(t);
    if (this.reached(targets)) return Promise.resolve();
    return new Promise((resolve) => { this.waiters.push({ targets, resolve }); this.wake?.(); });
  }

  private reached(targets: Record<string, number>): boolean {
    return Object.entries(targets).every(([t, end]) => (this.offsets[t] ?? 0) >= end);
  }

  private async run(): Promise<void> {
    const max = this.opts.maxBatch ?? 5000;
    while (this.running) {
      let progressed = false;
      for (const topic of this.topics) {
        if (!this.running) break;
        const from = this.offsets[topic] ?? 0;
        const { records, next } = this.log.read(topic, from, max);
        if (!records.length) continue;
        const batch: LogBatch = { topic, partition: 0, records };
        try {
          await this.handle(batch);
        } catch (err) {
          this.opts.onError?.(err, batch);
          await this.sleep(1000);
          progressed = true;
          break; // retry from the committed offset: at-least-once
        }
        this.offsets[topic] = next;
        this.log.writeOffsets(this.group, this.offsets);
        this.opts.onCommit?.(batch);
        progressed = true;
        break; // restart from the first topic so that upstream topics stay ahead of downstream ones
      }
      this.waiters = this.waiters.filter((w) => (this.reached(w.targets) ? (w.resolve(), false) : true));
      if (!progressed) await this.sleep(this.pollMs);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => { this.wake = undefined; resolve(); }, ms);
      this.wake = () => { clearTimeout(t); this.wake = undefined; resolve(); };
    });
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
    for (const w of this.waiters) w.resolve();
    this.waiters = [];
  }
}
