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

export function readIngestFile(buf: Buffer): IngestFile {
  const out: IngestFile = { byTopic: new Map(), count: 0, refused: [] };
  let n = 0;
  for (let start = 0; start < buf.length; n++) {
    let end = buf.indexOf(10, start);
    if (end === -1) end = buf.length;
    const bytes = buf.subarray(start, end);
    start = end + 1;
    const lineNo = n + 1;
    const refuse = (reason: string) => {
      out.refused.push({ line: lineNo, reason });
    };
    if (bytes.length > MAX_RECORD_BYTES + LINE_SLACK) {
      refuse(tooLargeReason(bytes.length));
      continue;
    }
    let line: string;
    try {
      line = utf8.decode(bytes);
    } catch {
      refuse('not valid UTF-8');
      continue;
    }
    if (!line.trim()) continue;
    const split = splitLine(line);
    if ('reason' in split) {
      refuse(split.reason);
      continue;
    }
    const res = validateRecord(split.topic, split.raw);
    if (!res.ok) {
      refuse(topicByName.has(split.topic) ? `${split.topic}: ${res.reason}` : res.reason);
      continue;
    }
    if (Buffer.byteLength(JSON.stringify(res.key)) > MAX_KEY_BYTES) {
      refuse(`${split.topic}: its key (from its id) is over ${MAX_KEY_BYTES} bytes`);
      continue;
    }
    const list = out.byTopic.get(split.topic) ?? out.byTopic.set(split.topic, []).get(split.topic)!;
    list.push({ key: res.key, raw: split.raw });
    out.count++;
  }
  return out;
}
