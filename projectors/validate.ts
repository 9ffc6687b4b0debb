import { Compile } from 'typebox/compile';
import { TOPICS, TOPIC_NAMES, topicByName } from '../schemas/topics/index.ts';
import { MAX_RECORD_BYTES, OVERSIZE_PREFIX_BYTES } from './log/port.ts';

export { MAX_RECORD_BYTES } from './log/port.ts';

/**
 * The one record validator, used at both edges: by `signalbase ingest` before it appends and by
 * the projector before it applies (a record can reach the log by other paths). Same text, same
 * verdict: what the CLI accepted is what the projector applies.
 */
export type Validation = { ok: true; value: unknown; key: string } | { ok: false; reason: string };

const validators = new Map(TOPICS.map((t) => [t.name as string, Compile(t.schema)]));

/** A number can only overflow with an exponent of 3+ digits or 309+ digits: most records skip the walk. */
const MAYBE_HUGE = /[eE]\+?0*[1-9]\d{2}|\d{309}/;

interface Node { v: unknown; key: string | number; parent: Node | null }

/**
 * JSON pointer of the first non-finite number (JSON.parse turns 1e400 into Infinity), or null.
 * Iterative, so that a deeply nested record cannot overflow the stack.
 */
function nonFinite(root: unknown): string | null {
  const stack: Node[] = [{ v: root, key: '', parent: null }];
  while (stack.length) {
    const n = stack.pop()!;
    if (typeof n.v === 'number' && !Number.isFinite(n.v)) {
      let path = '';
      for (let p: Node | null = n; p?.parent; p = p.parent) path = '/' + String(p.key).replaceAll('~', '~0').replaceAll('/', '~1') + path;
      return path || '/';
    }
    if (n.v === null || typeof n.v !== 'object') continue;
    const entries = Array.isArray(n.v) ? [...n.v.entries()] : Object.entries(n.v);
    for (let i = entries.length - 1; i >= 0; i--) stack.push({ v: entries[i]![1], key: entries[i]![0], parent: n });
  }
  return null;
}

export const tooLargeReason = (bytes: number, kept?: number): string =>
  `record too large: ${bytes} bytes, over the maximum record size of ${MAX_RECORD_BYTES} bytes`
  + (kept === undefined ? '' : `; raw keeps only its first ${kept} bytes`);

/** Reason of a record the log delivered as oversized (its value holds only a prefix). */
export const oversizeReason = (bytes: number): string => tooLargeReason(bytes, OVERSIZE_PREFIX_BYTES);

/** Validates the raw JSON text of a record of `topic`: the parsed value and its key, or why it is refused. */
export function validateRecord(topic: string, raw: string): Validation {
  const check = validators.get(topic);
  if (!check) return { ok: false, reason: `unknown topic ${JSON.stringify(topic)}; topics: ${TOPIC_NAMES.join(', ')}` };
  // A UTF-8 byte is at most one UTF-16 unit and a unit at most three bytes: count only when it may matter.
  if (raw.length * 3 > MAX_RECORD_BYTES) {
    const bytes = Buffer.byteLength(raw);
    if (bytes > MAX_RECORD_BYTES) return { ok: false, reason: tooLargeReason(bytes) };
  }
  let value: unknown;
  try { value = JSON.parse(raw); } catch (e) { return { ok: false, reason: `invalid JSON: ${(e as Error).message}` }; }
  const inf = MAYBE_HUGE.test(raw) ? nonFinite(value) : null;
  if (inf) return { ok: false, reason: `non-finite number at ${inf}: beyond the range of a 64-bit float` };
  if (!check.Check(value)) {
    const errs = [...check.Errors(value)].slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message}`);
    return { ok: false, reason: `schema: ${errs.join('; ')}` };
  }
  return { ok: true, value, key: topicByName.get(topic)!.key(value) };
}
