import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { RESUME_COLUMN } from '../../schemas/api/exports.ts';
import { parquetMeta } from './export-formats.ts';

/**
 * Thrift's compact protocol, as much of it as a Parquet footer (FileMetaData) needs to be read,
 * changed and written again: a struct is its fields, a list its elements, an integer (i16, i32,
 * i64) its value; every other value is kept as its bytes.
 */
interface Node {
  type: number;
  int?: bigint;
  fields?: Field[];
  list?: { element: number; items: Node[] };
  raw?: Uint8Array;
}
interface Field {
  id: number;
  node: Node;
}

const BOOL_TRUE = 1;
const BOOL_FALSE = 2;
const I16 = 4;
const I64 = 6;
const LIST = 9;
const SET = 10;
const MAP = 11;
const STRUCT = 12;

function readVarint(b: Uint8Array, i: number): [bigint, number] {
  let n = 0n;
  for (let shift = 0n; ; shift += 7n) {
    const byte = b[i++]!;
    n |= BigInt(byte & 0x7f) << shift;
    if (byte < 0x80) return [n, i];
  }
}
function writeVarint(out: number[], n: bigint): void {
  for (; n >= 0x80n; n >>= 7n) out.push(Number(n & 0x7fn) | 0x80);
  out.push(Number(n));
}
const unzigzag = (n: bigint) => (n >> 1n) ^ -(n & 1n);
const zigzag = (n: bigint) => (n << 1n) ^ (n >> 63n);

/** A value of compact type `type` at `i` (a bool in a list is a byte of its own, a field's is in its header), and the index after it. */
function read(b: Uint8Array, i: number, type: number, element: boolean): [Node, number] {
  const rawTo = (end: number): [Node, number] => [{ type, raw: b.subarray(i, end) }, end];
  switch (type) {
    case BOOL_TRUE:
    case BOOL_FALSE:
      return rawTo(element ? i + 1 : i);
    case 3:
      return rawTo(i + 1);
    case I16:
    case 5:
    case I64: {
      const [z, end] = readVarint(b, i);
      return [{ type, int: unzigzag(z) }, end];
    }
    case 7:
      return rawTo(i + 8);
    case 8: {
      const [n, j] = readVarint(b, i);
      return rawTo(j + Number(n));
    }
    case LIST:
    case SET: {
      const h = b[i++]!;
      let n = h >> 4;
      if (n === 15) {
        const [size, j] = readVarint(b, i);
        n = Number(size);
        i = j;
      }
      const items: Node[] = [];
      for (let k = 0; k < n; k++) {
        const [item, j] = read(b, i, h & 15, true);
        items.push(item);
        i = j;
      }
      return [{ type, list: { element: h & 15, items } }, i];
    }
    case MAP: {
      const start = i;
      const [n, j] = readVarint(b, i);
      i = j;
      if (n > 0n) {
        const kv = b[i++]!;
        for (let k = 0n; k < n; k++) i = read(b, read(b, i, kv >> 4, true)[1], kv & 15, true)[1];
      }
      return [{ type, raw: b.subarray(start, i) }, i];
    }
    case STRUCT: {
      const fields: Field[] = [];
      for (let last = 0; ; ) {
        const h = b[i++]!;
        if (h === 0) return [{ type, fields }, i];
        let id = last + (h >> 4);
        if (h >> 4 === 0) {
          const [z, j] = readVarint(b, i);
          id = Number(unzigzag(z));
          i = j;
        }
        const [node, j] = read(b, i, h & 15, false);
        fields.push({ id, node });
        i = j;
        last = id;
      }
    }
    default:
      throw new Error(`Parquet footer: unknown thrift compact type ${type}`);
  }
}

function write(out: number[], node: Node): void {
  if (node.int !== undefined) writeVarint(out, zigzag(node.int));
  else if (node.raw) for (const x of node.raw) out.push(x);
  else if (node.list) {
    const n = node.list.items.length;
    if (n < 15) out.push((n << 4) | node.list.element);
    else {
      out.push(0xf0 | node.list.element);
      writeVarint(out, BigInt(n));
    }
    for (const item of node.list.items) write(out, item);
  } else if (node.fields) {
    let last = 0;
    for (const f of [...node.fields].sort((a, b) => a.id - b.id)) {
      const d = f.id - last;
      if (d > 0 && d <= 15) out.push((d << 4) | f.node.type);
      else {
        out.push(f.node.type);
        writeVarint(out, zigzag(BigInt(f.id)));
      }
      write(out, f.node);
      last = f.id;
    }
    out.push(0);
  }
}

const field = (s: Node, id: number): Node | undefined => s.fields?.find((f) => f.id === id)?.node;
function setField(s: Node, id: number, node: Node): void {
  s.fields = [...s.fields!.filter((f) => f.id !== id), { id, node }];
}

/** Parquet's FileMetaData fields that this file reads or changes. */
const FILE = { numRows: 3, keyValues: 5 } as const;
const MAGIC = Buffer.from('PAR1');

/** A KeyValue struct (key, value) of the footer's key-value metadata. */
function keyValue(key: string, value: string): Node {
  const binary = (s: string): Node => {
    const bytes = Buffer.from(s, 'utf8');
    const out: number[] = [];
    writeVarint(out, BigInt(bytes.length));
    return { type: 8, raw: Buffer.concat([Buffer.from(out), bytes]) };
  };
  return {
    type: STRUCT,
    fields: [
      { id: 1, node: binary(key) },
      { id: 2, node: binary(value) },
    ],
  };
}

/** The last row of a Parquet file's bytes: `tail` holds them from file offset `at` on, through the end. */
async function lastToken(tail: Buffer, at: number, rows: number): Promise<string> {
  const file = {
    byteLength: at + tail.length,
    slice: (start: number, end?: number): ArrayBuffer => {
      if (start < at) throw new Error("the last row group of an export's file is longer than the bytes held for it");
      const b = tail.subarray(start - at, end === undefined ? undefined : end - at);
      return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
    },
  };
  const metadata = parquetMetadata(tail);
  const [row] = await parquetReadObjects({ file, metadata, columns: [RESUME_COLUMN], rowStart: rows - 1, rowEnd: rows });
  return String((row as Record<string, unknown>)[RESUME_COLUMN]);
}

/** What a store's Parquet file ends with: its footer (FileMetaData) and where that starts. */
function footerOf(b: Buffer): { meta: Node; start: number } {
  if (b.length < 12 || !b.subarray(b.length - 4).equals(MAGIC)) throw new Error("the store's Parquet does not end as a file");
  const start = b.length - 8 - b.readUInt32LE(b.length - 8);
  if (start < 0) throw new Error("an export file's footer is longer than the bytes held for it");
  return { meta: read(b, start, STRUCT, false)[0], start };
}

/** How much of a store's one Parquet file is held back: its footer and its last row group (at most a few MiB: PARQUET_ROW_GROUP_BYTES). */
export const PARQUET_HOLD_BYTES = 8 * 1024 * 1024;

/**
 * The store's Parquet as it streams (native exports, issue 28): one file, in pieces, whose footer
 * also says what the pages' writer says in its key-value metadata (whether the export is
 * complete, the last row's resume token). Everything goes on but the last `hold` bytes, which keep
 * its footer and its last row group (whose last column, the tokens, ends where the footer starts);
 * at the end its footer gets the metadata. The file must have no page indexes (the store is asked
 * for none).
 */
export class StoreParquet {
  private footer: Node | undefined;
  /** Bytes passed on so far. */
  private at = 0;
  /** What is held back, and (once it has ended) the part of it before the footer. */
  private held: Buffer[] = [];
  private heldBytes = 0;
  private beforeFooter: Buffer | undefined;

  constructor(private readonly hold = PARQUET_HOLD_BYTES) {}

  /** A piece of the store's file: the bytes that go now. */
  push(chunk: Uint8Array): Buffer | undefined {
    // A copy: the store may reuse a chunk's memory, and parts of it are kept.
    const b = Buffer.from(chunk);
    this.held.push(b);
    this.heldBytes += b.length;
    const go: Buffer[] = [];
    while (this.heldBytes - this.held[0]!.length >= this.hold) {
      const first = this.held.shift()!;
      this.heldBytes -= first.length;
      this.at += first.length;
      go.push(first);
    }
    return go.length ? Buffer.concat(go) : undefined;
  }

  /** Once the store's answer has ended: the rows passed on, and the last one's resume token (null: none). */
  async last(): Promise<{ rows: number; token: string | null }> {
    const tail = Buffer.concat(this.held);
    const { meta, start } = footerOf(tail);
    this.footer = meta;
    this.beforeFooter = tail.subarray(0, start);
    const rows = Number(field(meta, FILE.numRows)?.int ?? 0n);
    return { rows, token: rows > 0 ? await lastToken(tail, this.at, rows) : null };
  }

  /** The file's end (after `last`): the one footer, with `meta` in its key-value metadata. */
  end(meta: { complete: boolean; resumeToken: string | null }): Buffer {
    if (!this.footer) throw new Error('the store sent no Parquet file');
    const footer = this.footer;
    const had = field(footer, FILE.keyValues)?.list?.items ?? [];
    setField(footer, FILE.keyValues, {
      type: LIST,
      list: { element: STRUCT, items: [...had, ...parquetMeta(meta).map(([k, v]) => keyValue(k, v))] },
    });
    const bytes: number[] = [];
    write(bytes, footer);
    const length = Buffer.alloc(4);
    length.writeUInt32LE(bytes.length);
    return Buffer.concat([this.beforeFooter ?? Buffer.alloc(0), Buffer.from(bytes), length, MAGIC]);
  }
}
