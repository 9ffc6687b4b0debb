import type { TSchema } from 'typebox';
import { RESUME_COLUMN } from '../../schemas/api/exports.ts';
import type { StreamChunk } from '../../storage/port.ts';

/**
 * An export's columns (issue 28), from the list read's item schema (schemas/api/resources.ts):
 * nested objects are flattened into dotted column names (`source.identity.handle`,
 * `timeBasedPerformances.7D.status`), arrays (a message's attachments, a feed group's events) are
 * one column of JSON text; the last column is the row's resume token. The store's statements give
 * these columns in CSV and Parquet (apps/reads/exports.ts); NDJSON rows keep the list read's own
 * JSON shape, with the token added.
 */
export interface Column {
  name: string;
  path: readonly string[];
  kind: 'int' | 'number' | 'bool' | 'time' | 'string' | 'json';
}

export function columnsOf(item: TSchema): Column[] {
  const out: Column[] = [];
  const walk = (s: any, path: string[]): void => {
    if (Array.isArray(s.anyOf)) {
      const members = s.anyOf.filter((m: any) => m.type !== 'null');
      if (members.length === 1) {
        walk(members[0], path);
        return;
      }
      // A union of string literals (a platform, a direction, an event type) is a string column.
      const strings = members.every((m: any) => typeof m.const === 'string' || m.type === 'string');
      out.push({ name: path.join('.'), path, kind: strings ? 'string' : 'json' });
      return;
    }
    if (s.type === 'object' && s.properties) {
      for (const [name, child] of Object.entries(s.properties)) walk(child, [...path, name]);
      return;
    }
    const kind: Column['kind'] =
      s.type === 'integer'
        ? 'int'
        : s.type === 'number'
          ? 'number'
          : s.type === 'boolean'
            ? 'bool'
            : s.type === 'string'
              ? s.format === 'date-time'
                ? 'time'
                : 'string'
              : 'json';
    out.push({ name: path.join('.'), path, kind });
  };
  walk(item, []);
  return out;
}

/** A CSV export's header row: the item's columns (columnsOf), then the resume token. */
export function csvHeader(item: TSchema): Buffer {
  return Buffer.from(`${[...columnsOf(item).map((c) => c.name), RESUME_COLUMN].map(csvField).join(',')}\r\n`);
}

/** RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled. */
function csvField(s: string): string {
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

/** A Parquet export's key-value metadata: whether it is complete, and its last row's token (none without rows). */
export function parquetMeta(meta: { complete: boolean; resumeToken: string | null }): [string, string][] {
  return [
    ['signalbase.complete', String(meta.complete)],
    ...(meta.resumeToken ? [[`signalbase.${RESUME_COLUMN}`, meta.resumeToken] as [string, string]] : []),
  ];
}

/** How much of a row's end is kept for its resume token (the last column: a seal and a short key). */
const END_BYTES = 1024;
const QUOTE = 34;
const COMMA = 44;
const CR = 13;
const LF = 10;
/** Whether a byte before a `"` then CRLF ends a token: not a quote, a comma or a line feed (the quote is then a doubled one's second, or a field's opening one). */
const endsToken = (b: number) => b !== QUOTE && b !== COMMA && b !== LF;

/**
 * Whole rows out of the store's NDJSON or CSV bytes as they stream (native exports), up to the
 * export's bounds: at most `rows` rows, and no row once `bytes` were sent (the first row always).
 * An NDJSON row ends at a line feed (JSON escapes one in a string). A CSV row ends with its resume
 * token, a quoted string that is never empty nor holds a quote, then CRLF (the store quotes every
 * string and doubles the quotes within): at a `"\r\n` whose quote is neither a field's opening one
 * (after a comma or at a row's start) nor the second of a doubled one. Bytes, not text: none of
 * these is ever part of a multi-byte UTF-8 character. A chunk that the store says is whole rows,
 * and that no bound reaches into, goes as it is, unread.
 */
export class StoreRows {
  /** The start of a row the last chunk ended within (no row end in it). */
  private carry: Buffer = Buffer.alloc(0);
  /** The end of the last row taken (its last column at least). */
  private end: Buffer | undefined;
  /** Rows and bytes taken. */
  rows = 0;
  bytes = 0;

  constructor(
    private readonly format: 'ndjson' | 'csv',
    private readonly bounds: { rows: number; bytes: number },
  ) {}

  /** The rows taken of a chunk, in order, up to the first a bound refuses (`stopped`): their bytes, as sent by the store. */
  push(chunk: StreamChunk): { bytes: Buffer | undefined; stopped: boolean } {
    const raw = Buffer.from(chunk.bytes.buffer, chunk.bytes.byteOffset, chunk.bytes.byteLength);
    if (
      chunk.rows !== undefined &&
      this.carry.length === 0 &&
      this.rows + chunk.rows <= this.bounds.rows &&
      this.bytes + raw.length < this.bounds.bytes
    ) {
      if (chunk.rows === 0) return { bytes: undefined, stopped: false };
      this.rows += chunk.rows;
      this.bytes += raw.length;
      this.end = raw.subarray(Math.max(0, raw.length - END_BYTES));
      return { bytes: raw, stopped: false };
    }
    const scanned = this.carry.length;
    const buf = scanned ? Buffer.concat([this.carry, raw]) : raw;
    const csv = this.format === 'csv';
    let start = 0;
    /** Where the last row taken starts (-1: none in this chunk). */
    let last = -1;
    let i = scanned;
    let stopped = false;
    for (;;) {
      const nl = buf.indexOf(LF, i);
      if (nl < 0) break;
      const next = nl + 1;
      i = next;
      // CSV: not within a quoted field (a line feed there ends no row: see above).
      if (csv && !(nl >= 3 && buf[nl - 1] === CR && buf[nl - 2] === QUOTE && endsToken(buf[nl - 3]!))) continue;
      if (this.rows >= this.bounds.rows || (this.rows > 0 && this.bytes >= this.bounds.bytes)) {
        stopped = true;
        break;
      }
      this.rows++;
      this.bytes += next - start;
      last = start;
      start = next;
    }
    if (last >= 0) this.end = buf.subarray(Math.max(last, start - END_BYTES), start);
    this.carry = stopped ? Buffer.alloc(0) : Buffer.from(buf.subarray(start));
    return { bytes: start ? buf.subarray(0, start) : undefined, stopped };
  }

  /** The resume token of the last row taken (its last column); '' before any. */
  token(): string {
    if (!this.end) return '';
    const text = this.end.toString('utf8').trimEnd();
    if (this.format === 'csv') return text.slice(text.lastIndexOf(',') + 1).replaceAll('"', '');
    // The token's key, quotes unescaped: no string value can hold it (its quotes would be escaped).
    const key = `"${RESUME_COLUMN}":"`;
    const at = text.lastIndexOf(key) + key.length;
    return text.slice(at, text.indexOf('"', at));
  }
}
