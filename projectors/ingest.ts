import { findNodeAtLocation, parseTree } from 'jsonc-parser';
import { topicByName } from '../schemas/topics/index.ts';
import { MAX_KEY_BYTES, MAX_RECORD_BYTES } from './log/port.ts';
import { tooLargeReason, validateRecord } from './validate.ts';

/**
 * Reads an ingest file (`signalbase ingest`): one `{"topic": "<topic>", "value": {...}}` per
 * line. Each value is validated as the projector will validate it, and what is kept is the
 * value's exact text in the file (numbers, key order and spacing as written), never a
 * re-serialisation, which would round big integers and turn 1e400 into null.
 */
export interface IngestFile {
  /** Per topic, the records to append verbatim, in file order. */
  byTopic: Map<string, { key: string; raw: string }[]>;
  count: number;
  /** Lines that cannot be appended, with their 1-based number. */
  refused: { line: number; reason: string }[];
}

/** Room for `{"topic": "...", "value": ...}` around a value of the maximum size. */
const LINE_SLACK = 4096;
/** The longest line that may hold a record; a longer one is refused as too large. */
const MAX_LINE_BYTES = MAX_RECORD_BYTES + LINE_SLACK;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The raw value text of one line and its topic, or why the line is not a record. */
function splitLine(line: string): { topic: string; raw: string } | { reason: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch (e) {
    return { reason: `not JSON (${(e as Error).message})` };
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    return { reason: 'not a {"topic": ..., "value": ...} object' };
  const root = parseTree(line)!;
  const names = root.children!.map((p) => p.children![0]!.value as string);
  const other = names.find((n) => n !== 'topic' && n !== 'value');
  if (other !== undefined) return { reason: `unknown member ${JSON.stringify(other)}; a line is {"topic": ..., "value": ...}` };
  if (new Set(names).size !== names.length) return { reason: 'a member appears twice' };
  const { topic } = parsed as { topic?: unknown };
  if (typeof topic !== 'string') return { reason: 'no "topic" string' };
  const node = findNodeAtLocation(root, ['value']);
  if (!node) return { reason: 'no "value"' };
  return { topic, raw: line.slice(node.offset, node.offset + node.length) };
}

/**
 * What one line of an ingest file or stream is: a record to append (its topic, its key, its
 * value's exact text), why it is refused, or nothing (a blank line). The one check of a line,
 * for `signalbase ingest FILE` and for the streaming ingest alike.
 */
export function ingestLine(l: IngestRawLine): IngestLine {
  if ('tooLong' in l) return { reason: tooLargeReason(l.tooLong) };
  let line: string;
  try {
    line = utf8.decode(l.bytes);
  } catch {
    return { reason: 'not valid UTF-8' };
  }
  if (!line.trim()) return null;
  const split = splitLine(line);
  if ('reason' in split) return split;
  const res = validateRecord(split.topic, split.raw);
  if (!res.ok) return { reason: topicByName.has(split.topic) ? `${split.topic}: ${res.reason}` : res.reason };
  if (Buffer.byteLength(JSON.stringify(res.key)) > MAX_KEY_BYTES)
    return { reason: `${split.topic}: its key (from its id) is over ${MAX_KEY_BYTES} bytes` };
  return { topic: split.topic, key: res.key, raw: split.raw };
}

export function readIngestFile(buf: Buffer): IngestFile {
  const out: IngestFile = { byTopic: new Map(), count: 0, refused: [] };
  const lines = new IngestLines();
  for (const l of [...lines.push(buf), ...lines.end()]) {
    const r = ingestLine(l);
    if (r === null) continue;
    if ('reason' in r) {
      out.refused.push({ line: l.line, reason: r.reason });
      continue;
    }
    const list = out.byTopic.get(r.topic) ?? out.byTopic.set(r.topic, []).get(r.topic)!;
    list.push({ key: r.key, raw: r.raw });
    out.count++;
  }
  return out;
}

/** One line of an ingest stream: its bytes, or only its length when it is over the size a line may have (the bytes are dropped). */
export type IngestRawLine = { line: number; bytes: Uint8Array } | { line: number; tooLong: number };

/** What one line is: a record to append, a refusal with its reason, or nothing (a blank line). */
export type IngestLine = { topic: string; key: string; raw: string } | { reason: string } | null;

/**
 * Cuts an NDJSON byte stream into numbered lines, whatever the chunk boundaries (a line, or a
 * UTF-8 character, may straddle chunks). A line longer than any record line may be is not kept
 * while it arrives: its bytes are dropped and only its length is reported, so a stream cannot make
 * the reader hold more than one line's maximum. `end()` gives the last line when the input does
 * not end with a newline.
 */
export class IngestLines {
  private parts: Buffer[] = [];
  private partLength = 0;
  /** The length of the current over-long line so far, or -1. */
  private dropping = -1;
  private n = 0;

  /** The complete lines the chunk ends (with the bytes held from earlier chunks); their bytes may be views of `chunk`. */
  push(chunk: Uint8Array): IngestRawLine[] {
    const out: IngestRawLine[] = [];
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let start = 0;
    for (;;) {
      const nl = buf.indexOf(10, start);
      if (nl === -1) {
        // Held past this call: a copy, the caller may reuse its buffer.
        this.take(Buffer.from(buf.subarray(start)));
        break;
      }
      this.take(buf.subarray(start, nl));
      out.push(this.cut());
      start = nl + 1;
    }
    return out;
  }

  /** The last line, if the input ended without a newline after it. */
  end(): IngestRawLine[] {
    return this.partLength > 0 || this.dropping >= 0 ? [this.cut()] : [];
  }

  /** Whether bytes of an unfinished line are held. */
  get pending(): boolean {
    return this.partLength > 0 || this.dropping >= 0;
  }

  private take(bytes: Buffer): void {
    if (!bytes.length) return;
    if (this.dropping >= 0) {
      this.dropping += bytes.length;
      return;
    }
    if (this.partLength + bytes.length > MAX_LINE_BYTES) {
      this.dropping = this.partLength + bytes.length;
      this.parts = [];
      this.partLength = 0;
      return;
    }
    this.parts.push(bytes);
    this.partLength += bytes.length;
  }

  private cut(): IngestRawLine {
    const line = ++this.n;
    let out: IngestRawLine;
    if (this.dropping >= 0) out = { line, tooLong: this.dropping };
    else out = { line, bytes: this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.partLength) };
    this.parts = [];
    this.partLength = 0;
    this.dropping = -1;
    return out;
  }
}

export interface IngestStreamOptions {
  /** Appends one group of records (per topic, in arrival order); called synchronously, one group at a time. */
  append(byTopic: Map<string, { key: string; raw: string }[]>, count: number): void;
  /** A line that cannot be appended, with its 1-based number: reported, skipped, and the stream goes on. */
  onRefused(line: number, reason: string): void;
  /** `append` failed (a full disk, ...): the stream takes nothing more; the caller ends the input. */
  onFailed?(err: unknown): void;
  /** How long the first record of a group may wait for others (ms). */
  maxDelayMs?: number;
  /** A group is appended at once when it has this many records ... */
  maxRecords?: number;
  /** ... or this many bytes of value text. */
  maxBytes?: number;
}

/**
 * The streaming ingest (`signalbase ingest -`, `--follow FILE`): the lines of `IngestLines`
 * checked by `ingestLine`, as `readIngestFile` does, and appended in small groups: what arrived
 * within `maxDelayMs` of a group's first record, or `maxRecords` records, whichever comes first.
 * A refused line is reported and skipped (a stream has no "nothing appended"). `push` handles a
 * chunk synchronously, so a reader that waits for it before the next chunk never holds more than
 * one chunk, one unfinished line and one group.
 */
export class IngestStream {
  appended = 0;
  refused = 0;
  /** Why an append failed: the group it held and whatever arrives after it are not appended. */
  failed: unknown;
  private readonly lines = new IngestLines();
  private group = new Map<string, { key: string; raw: string }[]>();
  private groupCount = 0;
  private groupBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private readonly maxDelayMs: number;
  private readonly maxRecords: number;
  private readonly maxBytes: number;

  constructor(private readonly opts: IngestStreamOptions) {
    this.maxDelayMs = opts.maxDelayMs ?? 20;
    this.maxRecords = opts.maxRecords ?? 1000;
    this.maxBytes = opts.maxBytes ?? 8 << 20;
  }

  push(chunk: Uint8Array): void {
    if (this.failed !== undefined) return;
    for (const l of this.lines.push(chunk)) this.take(l);
  }

  /** The input ended (or the command was stopped): the last line without a newline, then what is waiting. */
  end(): void {
    if (this.failed !== undefined) return;
    for (const l of this.lines.end()) this.take(l);
    this.flush();
  }

  /** Whether an unfinished line is held. */
  get partial(): boolean {
    return this.lines.pending;
  }

  /** Appends the group waiting, if any. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (!this.groupCount) return;
    const group = this.group;
    const count = this.groupCount;
    this.group = new Map();
    this.groupCount = 0;
    this.groupBytes = 0;
    try {
      this.opts.append(group, count);
    } catch (err) {
      // From a timer there is no caller to throw to: the owner hears of it and stops the input.
      this.failed = err;
      this.opts.onFailed?.(err);
      return;
    }
    this.appended += count;
  }

  private take(l: IngestRawLine): void {
    if (this.failed !== undefined) return;
    const r = ingestLine(l);
    if (r === null) return;
    if ('reason' in r) {
      this.refused++;
      this.opts.onRefused(l.line, r.reason);
      return;
    }
    const list = this.group.get(r.topic) ?? this.group.set(r.topic, []).get(r.topic)!;
    list.push({ key: r.key, raw: r.raw });
    this.groupCount++;
    this.groupBytes += r.raw.length;
    if (this.groupCount >= this.maxRecords || this.groupBytes >= this.maxBytes) this.flush();
    else this.timer ??= setTimeout(() => this.flush(), this.maxDelayMs);
  }
}
