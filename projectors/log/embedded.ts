import { isAscii } from 'node:buffer';
import {
  closeSync,
  existsSync,
  fstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  renameSync,
  statSync,
  watch,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import {
  type AppendRecord,
  type Log,
  type LogBatch,
  type LogRecord,
  type LogSubscription,
  MAX_KEY_BYTES,
  MAX_RECORD_BYTES,
  OVERSIZE_PREFIX_BYTES,
  type SubscribeOptions,
} from './port.ts';

const NL = 10;
/** Bytes read per step (lag counting, oversized lines). */
const CHUNK = 8 << 20;
/** The most read for one batch of ordinary records. */
const BATCH_BYTES = 16 << 20;
/** The longest line delivered whole: `{"k":<key>,"v":<value>}`. */
const MAX_LINE_BYTES = MAX_RECORD_BYTES + MAX_KEY_BYTES + 16;
/** Splits the envelope without re-parsing the value. */
const ENVELOPE = /^\{"k":("(?:[^"\\]|\\.)*"),"v":/;

function readAt(fd: number, pos: number, len: number): Buffer {
  const buf = Buffer.allocUnsafe(len);
  let got = 0;
  while (got < len) {
    const n = readSync(fd, buf, got, len - got, pos + got);
    if (n === 0) break;
    got += n;
  }
  return got < len ? buf.subarray(0, got) : buf;
}

/** Whether text[start, end) holds only spaces, tabs and carriage returns. */
const isBlank = (text: string, start: number, end: number): boolean => {
  for (let i = start; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c !== 32 && c !== 9 && c !== 13) return false;
  }
  return true;
};

/** Key and value of a line; a line that is not an envelope (a torn fragment) is the value as a whole, to be dead-lettered. */
function splitEnvelope(line: string): { key: string; value: string } {
  const m = line.endsWith('}') ? ENVELOPE.exec(line) : null;
  if (!m) return { key: '', value: line };
  try {
    return { key: JSON.parse(m[1]!), value: line.slice(m[0].length, -1) };
  } catch {
    return { key: '', value: line };
  }
}

/**
 * The record of the line text[start, end) (ending before its newline). The envelope as appended,
 * `{"k":"<key without escapes>","v":<value>}`, is split by hand; anything else (escapes in the key,
 * a fragment) goes through `splitEnvelope`, with the same result.
 */
function recordOf(text: string, start: number, end: number, offset: number): LogRecord {
  // '{"k":"' = 123 34 107 34 58 34
  if (
    end - start > 12 &&
    text.charCodeAt(end - 1) === 125 &&
    text.charCodeAt(start) === 123 &&
    text.charCodeAt(start + 1) === 34 &&
    text.charCodeAt(start + 2) === 107 &&
    text.charCodeAt(start + 3) === 34 &&
    text.charCodeAt(start + 4) === 58 &&
    text.charCodeAt(start + 5) === 34
  ) {
    let i = start + 6;
    for (; i < end; i++) {
      const c = text.charCodeAt(i);
      if (c === 34 || c === 92 || c < 32) break;
    }
    // ',"v":' = 44 34 118 34 58
    if (
      text.charCodeAt(i) === 34 &&
      i + 6 < end &&
      text.charCodeAt(i + 1) === 44 &&
      text.charCodeAt(i + 2) === 34 &&
      text.charCodeAt(i + 3) === 118 &&
      text.charCodeAt(i + 4) === 34 &&
      text.charCodeAt(i + 5) === 58
    ) {
      return { key: text.slice(start + 6, i), value: text.slice(i + 6, end - 1), offset: String(offset) };
    }
  }
  const { key, value } = splitEnvelope(text.slice(start, end));
  return { key, value, offset: String(offset) };
}

/** End of `len` bytes cut back so that no UTF-8 character is split. */
function utf8Cut(buf: Buffer, start: number, len: number): number {
  let end = Math.min(buf.length, start + len);
  if (end < buf.length) while (end > start && (buf[end]! & 0xc0) === 0x80) end--;
  return end;
}

/**
 * Embedded append-only log under `DATA_DIR/log`: one NDJSON file per topic (`{"k":key,"v":value}`
 * per line), offsets are byte positions, and each consumer group commits its offsets to
 * `DATA_DIR/log/offsets/<group>.json` (written atomically). Several processes may append (the
 * CLI while `start` runs): each append is a single O_APPEND write of whole lines, and readers
 * only take complete lines.
 *
 * Nothing can stall a topic: a line up to the maximum record size is delivered, a longer one is
 * skipped in chunks and delivered as an `oversize` record (to be dead-lettered), a blank line is
 * consumed, and a torn last line (a crash mid-append) is ended by the next append or by
 * `sealTornTails()`, so that it becomes a line of its own.
 */
export class EmbeddedLog implements Log {
  private readonly dir: string;
  private readonly subs = new Set<EmbeddedSubscription<any>>();
  /** Per topic: no complete line starts at `from` in a file of `size` bytes (spares re-reading a tail that has not grown). */
  private readonly incomplete = new Map<string, { from: number; size: number }>();

  constructor(
    dataDir: string,
    private readonly pollMs = 200,
  ) {
    this.dir = join(dataDir, 'log');
    // The log holds accounts and keys (hashed): readable by the owner alone, whatever the umask.
    mkdirSync(join(this.dir, 'offsets'), { recursive: true, mode: 0o700 });
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
    for (const r of records) {
      const v = 'raw' in r ? r.raw : JSON.stringify(r.value);
      if ('raw' in r && v.includes('\n')) throw new Error('a raw record must be one line of JSON');
      text += `{"k":${JSON.stringify(r.key)},"v":${v}}\n`;
    }
    this.write(topic, text);
  }

  /**
   * Appends bytes that are whole lines `{"k":<key JSON>,"v":<value JSON>}\n` as they are (the seed
   * writes its lines straight into buffers). The caller vouches for the format; a line that is not
   * an envelope is dead-lettered by the projector like any other.
   */
  appendLines(topic: string, lines: Uint8Array): void {
    if (!lines.length) return;
    if (lines[lines.length - 1] !== NL) throw new Error('appendLines takes whole lines');
    this.write(topic, lines);
  }

  /**
   * Ends a torn last line (a crash mid-append left it without its newline) of every topic, so
   * that the fragment is read as a line of its own and dead-lettered. Call on start, before
   * subscribing. Returns the topics that had one.
   */
  sealTornTails(): string[] {
    const sealed: string[] = [];
    for (const f of readdirSync(this.dir)) {
      const topic = /^([a-z][a-z0-9-]*)\.ndjson$/.exec(f)?.[1];
      if (topic && this.write(topic, '')) sealed.push(topic);
    }
    return sealed;
  }

  /**
   * One O_APPEND write of `text`, preceded by a newline when the file does not end with one, so
   * that an append never glues itself onto a torn line. Returns whether a newline was added.
   */
  /**
   * Calls `onAppend` when a topic file changes, whichever process appended (`signalbase ingest`
   * while `start` runs): a subscription then reads at once instead of at its next poll. Where the
   * file system cannot watch, nothing is called and the poll remains. Returns the stop function.
   */
  watchAppends(onAppend: () => void): () => void {
    try {
      const w = watch(this.dir, { persistent: false }, (_event, file) => {
        if (file === null || String(file).endsWith('.ndjson')) onAppend();
      });
      w.on('error', () => w.close());
      return () => w.close();
    } catch {
      return () => {};
    }
  }

  private write(topic: string, text: string | Uint8Array): boolean {
    const fd = openSync(this.topicFile(topic), 'a+', 0o600);
    try {
      const size = fstatSync(fd).size;
      const torn = size > 0 && readAt(fd, size - 1, 1)[0] !== NL;
      const bytes = typeof text === 'string' ? Buffer.from(text) : text;
      const buf = torn ? Buffer.concat([Buffer.from('\n'), bytes]) : bytes;
      let off = 0;
      while (off < buf.length) off += writeSync(fd, buf, off, buf.length - off);
      return torn;
    } finally {
      closeSync(fd);
    }
  }

  /** Byte length of a topic file. */
  end(topic: string): number {
    try {
      return statSync(this.topicFile(topic)).size;
    } catch {
      return 0;
    }
  }

  /** The end of the last complete line of a topic: what a consumer can reach (a torn tail is not a record yet). */
  completeEnd(topic: string): number {
    let fd: number;
    try {
      fd = openSync(this.topicFile(topic), 'r');
    } catch {
      return 0;
    }
    try {
      let pos = fstatSync(fd).size;
      while (pos > 0) {
        const len = Math.min(pos, 64 * 1024);
        const nl = readAt(fd, pos - len, len).lastIndexOf(NL);
        if (nl !== -1) return pos - len + nl + 1;
        pos -= len;
      }
      return 0;
    } finally {
      closeSync(fd);
    }
  }

  /** Number of newlines in [from, to) of a topic, read asynchronously (lag counting must not block the server). */
  async countLines(topic: string, from: number, to: number): Promise<number> {
    let fh: Awaited<ReturnType<typeof open>>;
    try {
      fh = await open(this.topicFile(topic), 'r');
    } catch {
      return 0;
    }
    try {
      const buf = Buffer.allocUnsafe(Math.min(CHUNK, Math.max(to - from, 1)));
      let n = 0;
      for (let pos = from; pos < to; ) {
        const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, to - pos), pos);
        if (!bytesRead) break;
        for (let i = buf.indexOf(NL, 0); i !== -1 && i < bytesRead; i = buf.indexOf(NL, i + 1)) n++;
        pos += bytesRead;
      }
      return n;
    } finally {
      await fh.close();
    }
  }

  /** Reads every record of a topic from the start (CLI reads such as `keys list`). */
  *readAll(topic: string): Generator<{ key: string; value: unknown }> {
    const file = this.topicFile(topic);
    if (!existsSync(file)) return;
    const text = readFileSync(file, 'utf8');
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        const { k, v } = JSON.parse(line);
        yield { key: k, value: v };
      } catch {
        /* torn line: skipped */
      }
    }
  }

  readOffsets(group: string): Record<string, number> {
    try {
      return JSON.parse(readFileSync(this.offsetFile(group), 'utf8'));
    } catch {
      return {};
    }
  }

  writeOffsets(group: string, offsets: Record<string, number>): void {
    const file = this.offsetFile(group);
    writeFileSync(file + '.tmp', JSON.stringify(offsets), { mode: 0o600 });
    renameSync(file + '.tmp', file);
  }

  private offsetFile(group: string): string {
    if (!/^[a-z][a-z0-9-]*$/.test(group)) throw new Error(`bad group name ${group}`);
    return join(this.dir, 'offsets', `${group}.json`);
  }

  /**
   * Reads complete lines from `from`: at most `max` lines within BATCH_BYTES, or one line of up
   * to MAX_LINE_BYTES, or one oversized line (skipped in chunks, delivered as a bounded
   * prefix). `lines` counts the lines consumed, blank ones included; `next` is the offset after them.
   * `upTo`: only the lines that end before this offset (what the topic held at a moment).
   */
  read(topic: string, from: number, max: number, upTo = Number.POSITIVE_INFINITY): { records: LogRecord[]; next: number; lines: number } {
    const none = { records: [], next: from, lines: 0 };
    let fd: number;
    try {
      fd = openSync(this.topicFile(topic), 'r');
    } catch {
      return none;
    }
    try {
      const size = Math.min(fstatSync(fd).size, upTo);
      if (size <= from) return none;
      const seen = this.incomplete.get(topic);
      if (seen && seen.from === from && seen.size === size) return none;
      let buf = readAt(fd, from, Math.min(size - from, BATCH_BYTES));
      if (buf.indexOf(NL) === -1 && buf.length < size - from) {
        // The first line is longer than what was read: read it whole if it may be within the maximum.
        buf = readAt(fd, from, Math.min(size - from, MAX_LINE_BYTES + 1));
        if (buf.indexOf(NL) === -1 && buf.length > MAX_LINE_BYTES) {
          const head = Buffer.from(buf.subarray(0, MAX_KEY_BYTES + OVERSIZE_PREFIX_BYTES + 16)); // a copy: the big buffer can go
          buf = Buffer.alloc(0);
          const skipped = this.skipOversized(fd, from, size, head);
          if (!skipped) this.incomplete.set(topic, { from, size });
          return skipped ?? none;
        }
      }
      // The byte ends of up to `max` lines, then their text decoded at once: the i-th newline of
      // the bytes is the i-th of the text (UTF-8 never uses the newline byte inside a character,
      // and a malformed sequence decodes to U+FFFD without taking the newline with it).
      const ends: number[] = [];
      for (let nl = buf.indexOf(NL); nl !== -1 && ends.length < max; nl = buf.indexOf(NL, nl + 1)) ends.push(nl);
      const lines = ends.length;
      if (!lines) {
        this.incomplete.set(topic, { from, size });
        return none;
      }
      const bytes = ends[lines - 1]! + 1;
      const text = isAscii(buf.subarray(0, bytes)) ? buf.toString('latin1', 0, bytes) : buf.toString('utf8', 0, bytes); // ASCII: a plain copy
      const records: LogRecord[] = [];
      let start = 0;
      for (let i = 0; i < lines; i++) {
        const end = text.indexOf('\n', start);
        if (end > start && (text.charCodeAt(start) === 123 || !isBlank(text, start, end)))
          records.push(recordOf(text, start, end, from + ends[i]! + 1));
        start = end + 1;
      }
      return { records, next: from + bytes, lines };
    } finally {
      closeSync(fd);
    }
  }

  /** Finds the end of an oversized line in chunks; null while it has no newline yet (torn or being written). */
  private skipOversized(
    fd: number,
    from: number,
    size: number,
    head: Buffer,
  ): { records: LogRecord[]; next: number; lines: number } | null {
    let end = -1;
    for (let pos = from + MAX_LINE_BYTES + 1; pos < size && end === -1; ) {
      const chunk = readAt(fd, pos, Math.min(size - pos, CHUNK));
      const nl = chunk.indexOf(NL);
      if (nl !== -1) end = pos + nl;
      pos += chunk.length;
    }
    if (end === -1) return null;
    const m = ENVELOPE.exec(head.toString('latin1')); // the envelope prefix is ASCII up to the key's own bytes
    let key = '';
    let valueStart = 0;
    if (m) {
      try {
        key = JSON.parse(Buffer.from(m[1]!, 'latin1').toString('utf8'));
        valueStart = m[0].length;
      } catch {
        /* not an envelope: keep the whole line */
      }
    }
    const lineBytes = end - from;
    const valueBytes = valueStart ? lineBytes - valueStart - 1 : lineBytes;
    const value = head.toString('utf8', valueStart, utf8Cut(head, valueStart, OVERSIZE_PREFIX_BYTES));
    return { records: [{ key, value, offset: String(end + 1), oversize: valueBytes }], next: end + 1, lines: 1 };
  }

  subscribe<P = unknown>(
    group: string,
    topics: readonly string[],
    handle: (batch: LogBatch, prepared?: P) => Promise<void>,
    opts: SubscribeOptions<P> = {},
  ): LogSubscription {
    const sub = new EmbeddedSubscription<P>(this, group, topics, handle, opts, this.pollMs);
    this.subs.add(sub);
    sub.start();
    return sub;
  }

  async close(): Promise<void> {
    await Promise.all([...this.subs].map((s) => s.stop()));
    this.subs.clear();
  }
}

type Read = { records: LogRecord[]; next: number; lines: number };
/** A topic's next batch, read (and being prepared) while the current one is handled. */
interface ReadAhead<P> {
  topic: string;
  from: number;
  read: Read;
  prepared: Promise<P> | undefined;
}

class EmbeddedSubscription<P> implements LogSubscription {
  private running = true;
  private loop: Promise<unknown> | undefined;
  private offsets: Record<string, number>;
  private waiters: { targets: Record<string, number>; resolve: () => void }[] = [];
  /** The lanes' sleeps that a wake-up (new waiter, stop) cuts short. */
  private readonly sleepers = new Set<() => void>();
  private unwatch: () => void = () => {};
  private readonly pausers = new Set<(ends?: Record<string, number>) => void>();
  /** Lanes in a round that handles batches (SubscribeOptions.onRest). */
  private inRound = 0;
  /** Per lane: its last round took all there was, or found nothing (a lane reading a backlog is not live). */
  private laneLive: boolean[] = [];
  /** When the last round that handled a batch began (performance.now()): the lanes' next begins a cadence after. */
  private roundBegan = Number.NEGATIVE_INFINITY;
  /** Lanes waiting to begin their next round (nextRound): together, or each from `at` while a lane reads a backlog. */
  private aligned: { at: number; go: (ends?: Record<string, number>) => void }[] = [];
  private alignTimer: NodeJS.Timeout | undefined;
  /** Per topic: `lines` newlines counted in [committed offset, to). Kept up to date by commits and by lag(). */
  private readonly ahead: Record<string, { to: number; lines: number }> = {};

  constructor(
    private readonly log: EmbeddedLog,
    private readonly group: string,
    private readonly topics: readonly string[],
    private readonly handle: (batch: LogBatch, prepared?: P) => Promise<void>,
    private readonly opts: SubscribeOptions<P>,
    private readonly pollMs: number,
  ) {
    this.offsets = log.readOffsets(group);
  }

  start(): void {
    const laned = new Set((this.opts.lanes ?? []).flat());
    const lanes = [
      ...(this.opts.lanes ?? []).map((l) => this.topics.filter((t) => l.includes(t))),
      this.topics.filter((t) => !laned.has(t)),
    ].filter((l) => l.length);
    this.laneLive = lanes.map(() => true);
    this.unwatch = this.log.watchAppends(() => this.wake());
    this.loop = Promise.all(lanes.map((l, i) => this.run(l, i)));
  }

  private wake(): void {
    for (const w of [...this.sleepers]) w();
  }

  caughtUp(): Promise<void> {
    const targets: Record<string, number> = {};
    for (const t of this.topics) targets[t] = this.log.completeEnd(t);
    if (this.reached(targets)) return Promise.resolve();
    return new Promise((resolve) => {
      this.waiters.push({ targets, resolve });
      this.wake();
    });
  }

  /**
   * Counts only the bytes appended since the previous call (the first call counts what is not
   * yet committed): a commit subtracts the lines it consumed. A torn tail is not counted.
   */
  async lag(): Promise<number> {
    let total = 0;
    for (const t of this.topics) {
      const a = (this.ahead[t] ??= { to: this.offsets[t] ?? 0, lines: 0 });
      const size = this.log.end(t);
      while (a.to < size) {
        const from = a.to;
        const to = Math.min(size, from + CHUNK);
        const n = await this.log.countLines(t, from, to);
        if (a.to === from) {
          a.to = to;
          a.lines += n;
        } // else a commit moved past `from` meanwhile: count on from there
      }
      total += a.lines;
    }
    return total;
  }

  private reached(targets: Record<string, number>): boolean {
    return Object.entries(targets).every(([t, end]) => (this.offsets[t] ?? 0) >= end);
  }

  private commit(topic: string, next: number, lines: number): void {
    this.offsets[topic] = next;
    this.log.writeOffsets(this.group, this.offsets);
    const a = this.ahead[topic];
    if (a) {
      if (a.to >= next) a.lines -= lines;
      else {
        a.to = next;
        a.lines = 0;
      }
    }
  }

  /** Starts preparing a batch; a rejection is left for whoever awaits it (a dropped read-ahead has none). */
  private prepare(batch: LogBatch): Promise<P> | undefined {
    if (!this.opts.prepare || !batch.records.length) return undefined;
    const p = this.opts.prepare(batch);
    p.catch(() => {});
    return p;
  }

  /**
   * Handles one topic of the lane at a time, the first topic with records first, and commits a
   * batch's offset only after its handler resolved. While a batch is handled, the same topic's
   * next batch is read and prepared (read-ahead): it is used if the loop comes back to that topic
   * at that offset, dropped otherwise (an upstream topic went first, or the handler failed).
   */
  private async run(topics: readonly string[], lane: number): Promise<void> {
    const max = this.opts.maxBatch ?? 5000;
    let ahead: ReadAhead<P> | undefined;
    const cadence = this.opts.cadenceMs ?? 0;
    /** A round of the lanes together reads what the topics held when it began (nextRound), and no more. */
    let ends: Record<string, number> | undefined;
    while (this.running) {
      let progressed = false;
      // Every batch of this round took all there was (live records, not a backlog).
      let live = true;
      let handling = false;
      const roundStart = performance.now();
      for (const topic of topics) {
        if (!this.running) break;
        const from = this.offsets[topic] ?? 0;
        let read: Read;
        let prepared: Promise<P> | undefined;
        if (ahead && ahead.topic === topic && ahead.from === from) {
          ({ read, prepared } = ahead);
          ahead = undefined;
        } else read = this.log.read(topic, from, max, ends?.[topic]);
        const { records, next, lines } = read;
        if (next === from) continue;
        const batch: LogBatch = { topic, partition: 0, records };
        if (records.length) {
          if (!handling) {
            handling = true;
            // The first lane to handle a batch begins the lanes' round (a round that finds nothing is none).
            if (this.inRound++ === 0) this.roundBegan = performance.now();
          }
          try {
            prepared ??= this.prepare(batch);
            const handled = prepared ? prepared.then((p) => this.handle(batch, p)) : this.handle(batch);
            handled.catch(() => {}); // awaited below
            await null; // the handler starts (up to its first store call) before the read-ahead
            const more = this.log.read(topic, next, max, ends?.[topic]);
            if (more.next !== next) {
              live = false;
              ahead = { topic, from: next, read: more, prepared: this.prepare({ topic, partition: 0, records: more.records }) };
            }
            await handled;
          } catch (err) {
            ahead = undefined;
            this.opts.onError?.(err, batch);
            await this.sleep(1000);
            progressed = true;
            break; // retry from the committed offset: at-least-once
          }
        }
        this.commit(topic, next, lines); // blank lines only: consumed without a batch
        if (records.length) this.opts.onCommit?.(batch);
        progressed = true;
        // Live, with a cadence: the round goes on to the downstream topics (upstream ones first all the same).
        if (!cadence || !live) {
          live = false;
          break; // restart from the first topic so that upstream topics stay ahead of downstream ones
        }
      }
      // A round that found nothing is live too: the lane is not behind.
      this.laneLive[lane] = live;
      const together = cadence > 0 && this.laneLive.every(Boolean);
      if (handling && --this.inRound === 0 && cadence) await this.rest(together);
      // A lane reading a backlog: the others go on apart. Live lanes begin the next round once the
      // last of them waits for it (nextRound): released before, the first would begin it alone.
      if (cadence && !together) this.release(cadence);
      this.waiters = this.waiters.filter((w) => (this.reached(w.targets) ? (w.resolve(), false) : true));
      ends = undefined;
      if (!progressed) {
        await this.sleep(this.pollMs);
        if (together && this.running) ends = await this.nextRound(cadence, performance.now());
      }
      // What arrives during the cadence is taken together next round: fewer, larger commits. Live
      // lanes begin their rounds together, so that one rest (one commit) ends a round of each.
      else if (live && together) ends = await this.nextRound(cadence, roundStart + cadence);
      else if (live) await this.pause(roundStart + cadence - performance.now());
    }
    await ahead?.prepared?.catch(() => {});
  }

  /** Every lane is between rounds: the handler's put-off work (SubscribeOptions.onRest), whose failure is its own to report. */
  private async rest(together: boolean): Promise<void> {
    try {
      await this.opts.onRest?.(together);
    } catch {
      /* the handler reports and retries it */
    }
  }

  /**
   * Waits for the next round of the live lanes together: it begins once no lane is in a round and
   * a cadence has passed since the last one began (cut short by stop only). Lanes whose rounds
   * began apart ended them apart, and were between rounds together only now and then (issue 26:
   * under load, a round's commit waited up to a cadence for the other lane's round to end).
   */
  private nextRound(cadence: number, at: number): Promise<Record<string, number> | undefined> {
    if (!this.running) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const done = (ends?: Record<string, number>) => {
        this.pausers.delete(done);
        resolve(ends);
      };
      this.aligned.push({ at, go: done });
      this.pausers.add(done);
      this.release(cadence);
    });
  }

  /**
   * Lets the waiting lanes begin a round together when they may (nextRound), or when they may
   * later. While a lane reads a backlog, the others go on apart, each when its own cadence is over
   * (`at`, reading to the topics' ends): they are not held until the backlog is read.
   */
  private release(cadence: number): void {
    clearTimeout(this.alignTimer);
    if (!this.aligned.length) return;
    const now = performance.now();
    if (!this.laneLive.every(Boolean)) {
      const due = this.aligned.filter((w) => w.at <= now);
      this.aligned = this.aligned.filter((w) => w.at > now);
      for (const w of due) w.go();
      if (this.aligned.length) this.alignTimer = setTimeout(() => this.release(cadence), Math.min(...this.aligned.map((w) => w.at)) - now);
      return;
    }
    if (this.inRound > 0) return;
    const wait = this.roundBegan + cadence - now;
    if (wait > 0) {
      this.alignTimer = setTimeout(() => this.release(cadence), wait);
      return;
    }
    const go = this.aligned;
    this.aligned = [];
    // Where each topic ends now, downstream topics first: a record a round takes has the records
    // appended before it (a trade event's message, its prices) in that round too, whichever lane
    // reads them. The trade lane reads its events after the prices, later than the messages lane
    // reads the messages: an event appended in between went a round ahead of its message, and its
    // feed group was written twice, first without the message, which no poll may show (issue 26).
    const ends: Record<string, number> = {};
    for (const t of [...this.topics].reverse()) ends[t] = this.log.end(t);
    for (const w of go) w.go(ends);
  }

  /** Waits `ms` (cut short by stop only: not by appends, which is the point). */
  private pause(ms: number): Promise<void> {
    if (ms <= 0 || !this.running) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.pausers.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.pausers.add(done);
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.sleepers.delete(done);
        resolve();
      };
      const t = setTimeout(done, ms);
      this.sleepers.add(done);
    });
  }

  async stop(): Promise<void> {
    this.running = false;
    this.unwatch();
    this.wake();
    clearTimeout(this.alignTimer);
    for (const p of [...this.pausers]) p();
    await this.loop;
    for (const w of this.waiters) w.resolve();
    this.waiters = [];
  }
}
