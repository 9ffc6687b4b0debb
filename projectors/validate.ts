import { Compile } from 'typebox/compile';
import { TOPIC_NAMES, TOPICS, topicByName } from '../schemas/topics/index.ts';
import { MAX_RECORD_BYTES, OVERSIZE_PREFIX_BYTES } from './log/port.ts';

export { MAX_RECORD_BYTES } from './log/port.ts';

/**
 * The one record validator, used at both edges: by `signalbase ingest` before it appends and by
 * the projector before it applies (a record can reach the log by other paths). Same text, same
 * verdict: what the CLI accepted is what the projector applies.
 */
export type Validation = { ok: true; value: unknown; key: string } | { ok: false; reason: string };

const validators = new Map(TOPICS.map((t) => [t.name as string, Compile(t.schema)]));

/**
 * Whether a schema holds only typed values: numbers and integers (the compiled check refuses a
 * non-finite one), strings, booleans, null, constants and enums, arrays of such, objects of such
 * without additional properties, and unions of such. A record of such a schema that passes the
 * check has no non-finite number, so only a refused one needs looking for one (for its reason).
 */
function onlyTyped(schema: unknown): boolean {
  if (schema === null || typeof schema !== 'object') return false;
  const s = schema as Record<string, unknown>;
  for (const k of ['anyOf', 'oneOf', 'allOf'] as const) {
    if (k in s) return Array.isArray(s[k]) && (s[k] as unknown[]).length > 0 && (s[k] as unknown[]).every(onlyTyped);
  }
  if ('const' in s) return true;
  switch (s.type) {
    case 'number':
    case 'integer':
    case 'string':
    case 'boolean':
    case 'null':
      return true;
    case 'array':
      return onlyTyped(s.items);
    case 'object':
      return (
        s.additionalProperties === false &&
        !('patternProperties' in s) &&
        Object.values((s.properties ?? {}) as Record<string, unknown>).every(onlyTyped)
      );
    default:
      return false;
  }
}

/** Topics whose valid records could still hold a non-finite number: they are scanned for one before the check. */
const scanned = new Set(TOPICS.filter((t) => !onlyTyped(t.schema)).map((t) => t.name as string));
/** Exposed for the tests: whether a topic's records are scanned before the check. */
export const scannedBeforeCheck = (topic: string): boolean => scanned.has(topic);

/**
 * Whether the JSON text may hold a number beyond a double (JSON.parse turns 1e400 into Infinity):
 * |x| < 10^(integer digits) * 10^(exponent), so that takes 100+ digits in a row or an exponent of
 * 100+ (3+ digits after the sign and leading zeros). Most records skip the walk; one that only
 * looks so (digits in a string) just gets walked.
 */
export function mayOverflow(raw: string): boolean {
  let run = 0;
  for (let i = 0, n = raw.length; i < n; i++) {
    const c = raw.charCodeAt(i);
    if (c >= 48 && c <= 57) {
      if (++run >= 100) return true;
      continue;
    }
    if ((c === 101 || c === 69) && run > 0) {
      // e or E after a digit
      let j = i + 1;
      if (raw.charCodeAt(j) === 43) j++; // +
      while (raw.charCodeAt(j) === 48) j++;
      let k = j;
      for (let d = raw.charCodeAt(k); d >= 48 && d <= 57; d = raw.charCodeAt(++k));
      if (k - j >= 3) return true;
    }
    run = 0;
  }
  return false;
}

interface Node {
  v: unknown;
  key: string | number;
  parent: Node | null;
}

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
  `record too large: ${bytes} bytes, over the maximum record size of ${MAX_RECORD_BYTES} bytes` +
  (kept === undefined ? '' : `; raw keeps only its first ${kept} bytes`);

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
  try {
    value = JSON.parse(raw);
  } catch (e) {
    return { ok: false, reason: `invalid JSON: ${(e as Error).message}` };
  }
  // A non-finite number is named before schema errors. The check refuses one wherever the schema
  // types its values, so a record that passes needs no look (most records); others are scanned.
  const passed = scanned.has(topic) ? null : check.Check(value);
  if (!passed) {
    const inf = mayOverflow(raw) ? nonFinite(value) : null;
    if (inf) return { ok: false, reason: `non-finite number at ${inf}: beyond the range of a 64-bit float` };
    if (passed === false || !check.Check(value)) {
      const errs = [...check.Errors(value)].slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message}`);
      return { ok: false, reason: `schema: ${errs.join('; ')}` };
    }
  }
  return { ok: true, value, key: topicByName.get(topic)!.key(value) };
}
