import { ByteWriter, ParquetWriter } from 'hyparquet-writer';
import type { TSchema } from 'typebox';
import { type ExportFormat, RESUME_COLUMN } from '../../schemas/api/exports.ts';

/**
 * How an export's rows are written (issue 28). The columns come from the list read's item schema
 * (schemas/api/resources.ts): nested objects are flattened into dotted column names
 * (`source.identity.handle`), arrays (a position's `timeBasedPerformances`, a message's
 * attachments, a feed group's events) are one column of JSON text; the last column is the row's
 * resume token. NDJSON rows keep the list read's own JSON shape, with the token added.
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

function valueAt(item: unknown, path: readonly string[]): unknown {
  let v: any = item;
  for (const p of path) {
    if (v === null || v === undefined) return null;
    v = v[p];
  }
  return v ?? null;
}

/** Writes one export: its start, its rows page by page, its end. */
export interface ExportWriter {
  start(): Buffer;
  /** As many of the rows as fit in `room` bytes (at least one; Parquet: all of them, one row group), and how many those are. */
  rows(items: readonly unknown[], tokens: readonly string[], room: number): { bytes: Buffer; rows: number };
  /** The end of the file: Parquet's footer, which also says whether the export is complete and the last row's token. */
  end(meta: { complete: boolean; resumeToken: string | null }): Buffer;
}

export function exportWriter(format: ExportFormat, item: TSchema): ExportWriter {
  const columns = columnsOf(item);
  if (format === 'ndjson') return lines((row, token) => `${JSON.stringify(row).slice(0, -1)},"${RESUME_COLUMN}":"${token}"}\n`, '');
  if (format === 'csv') {
    const header = `${[...columns.map((c) => c.name), RESUME_COLUMN].map(csvField).join(',')}\r\n`;
    return lines((row, token) => {
      let line = '';
      for (const c of columns) line += `${csvValue(valueAt(row, c.path), c.kind)},`;
      return `${line}${token}\r\n`;
    }, header);
  }
  return parquet(columns);
}

function lines(line: (row: unknown, token: string) => string, header: string): ExportWriter {
  return {
    start: () => Buffer.from(header),
    rows(items, tokens, room) {
      let text = '';
      let bytes = 0;
      let n = 0;
      for (; n < items.length && (n === 0 || bytes < room); n++) {
        const l = line(items[n], tokens[n]!);
        text += l;
        bytes += Buffer.byteLength(l);
      }
      return { bytes: Buffer.from(text), rows: n };
    },
    end: () => Buffer.alloc(0),
  };
}

/** RFC 4180: a field with a comma, a quote or a line break is quoted, its quotes doubled. */
function csvField(s: string): string {
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}
function csvValue(v: unknown, kind: Column['kind']): string {
  if (v === null) return '';
  if (kind === 'json') return csvField(JSON.stringify(v));
  return kind === 'string' || kind === 'time' ? csvField(String(v)) : String(v);
}

const PARQUET_TYPES: Record<Column['kind'], { type: 'INT64' | 'DOUBLE' | 'BOOLEAN' | 'BYTE_ARRAY'; converted_type?: string }> = {
  int: { type: 'INT64' },
  number: { type: 'DOUBLE' },
  bool: { type: 'BOOLEAN' },
  time: { type: 'INT64', converted_type: 'TIMESTAMP_MILLIS' },
  string: { type: 'BYTE_ARRAY', converted_type: 'UTF8' },
  json: { type: 'BYTE_ARRAY', converted_type: 'JSON' },
};

function parquetValue(v: unknown, kind: Column['kind']): unknown {
  if (v === null) return null;
  if (kind === 'int') return BigInt(v as number);
  if (kind === 'time') return BigInt(Date.parse(v as string));
  if (kind === 'json') return JSON.stringify(v);
  return v;
}

/** A Parquet export's key-value metadata: whether it is complete, and its last row's token (none without rows). */
export function parquetMeta(meta: { complete: boolean; resumeToken: string | null }): [string, string][] {
  return [
    ['signalbase.complete', String(meta.complete)],
    ...(meta.resumeToken ? [[`signalbase.${RESUME_COLUMN}`, meta.resumeToken] as [string, string]] : []),
  ];
}

/** Parquet through hyparquet-writer: one row group per page, each handed on as soon as it is written. */
function parquet(columns: Column[]): ExportWriter {
  const written: Buffer[] = [];
  const out = new ByteWriter();
  // Each row group (and the footer) leaves the buffer as soon as it is written: the file is never held whole.
  (out as { flush?: () => void }).flush = () => {
    written.push(Buffer.from(new Uint8Array(out.buffer, 0, out.index)));
    out.index = 0;
  };
  const take = () => {
    (out as unknown as { flush: () => void }).flush();
    const b = Buffer.concat(written);
    written.length = 0;
    return b;
  };
  const all = [...columns.map((c) => ({ name: c.name, kind: c.kind })), { name: RESUME_COLUMN, kind: 'string' as const }];
  const writer = new ParquetWriter({
    writer: out,
    schema: [
      { name: 'root', num_children: all.length },
      ...all.map((c) => ({ name: c.name, repetition_type: 'OPTIONAL' as const, ...PARQUET_TYPES[c.kind] })),
    ] as any,
  });
  return {
    start: take,
    rows(items, tokens) {
      const columnData = columns.map((c) => ({ name: c.name, data: items.map((row) => parquetValue(valueAt(row, c.path), c.kind)) }));
      columnData.push({ name: RESUME_COLUMN, data: [...tokens] });
      writer.write({ columnData: columnData as any, rowGroupSize: items.length });
      return { bytes: take(), rows: items.length };
    },
    end(meta) {
      writer.kvMetadata = parquetMeta(meta).map(([key, value]) => ({ key, value }));
      writer.finish();
      return take();
    },
  };
}

/**
 * Whole rows out of the store's NDJSON or CSV bytes as they stream (native exports): a row ends at
 * a line feed, in CSV one outside quotes (a quoted field may hold one; a doubled quote toggles
 * twice). Bytes, not text: neither byte is ever part of a multi-byte UTF-8 character.
 */
export class StoreRows {
  /** The start of a row the last chunk ended within, scanned up to its end with `quoted` as the state there. */
  private carry: Buffer = Buffer.alloc(0);
  private quoted = false;

  constructor(private readonly format: 'ndjson' | 'csv') {}

  /** The rows that `keep` takes, in order, up to the first it refuses (`stopped`): their bytes, as sent by the store. */
  push(chunk: Uint8Array, keep: (row: Buffer) => boolean): { bytes: Buffer | undefined; stopped: boolean } {
    const scanned = this.carry.length;
    const buf = scanned ? Buffer.concat([this.carry, chunk]) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    const csv = this.format === 'csv';
    let start = 0;
    let i = scanned;
    let quoted = this.quoted;
    let stopped = false;
    for (;;) {
      const nl = buf.indexOf(10, i);
      const end = nl < 0 ? buf.length : nl;
      if (csv) for (let q = buf.indexOf(34, i); q >= 0 && q < end; q = buf.indexOf(34, q + 1)) quoted = !quoted;
      if (nl < 0) break;
      i = nl + 1;
      if (quoted) continue;
      if (!keep(buf.subarray(start, i))) {
        stopped = true;
        break;
      }
      start = i;
    }
    this.carry = stopped ? Buffer.alloc(0) : Buffer.from(buf.subarray(start));
    this.quoted = quoted;
    return { bytes: start ? buf.subarray(0, start) : undefined, stopped };
  }

  /** The resume token of a row (its last column). */
  static token(format: 'ndjson' | 'csv', row: Buffer): string {
    const text = row.toString('utf8').trimEnd();
    if (format === 'ndjson') return String(JSON.parse(text)[RESUME_COLUMN]);
    return text.slice(text.lastIndexOf(',') + 1).replaceAll('"', '');
  }
}
