// Issue 28, native Parquet exports: the store writes the answer as one Parquet file, which reaches
// the export in pieces cut anywhere, and the export completes its footer with its own key-value
// metadata. Read back by two maintained readers (hyparquet, and ClickHouse's own through chdb),
// the file holds every row, in order, with the values the store wrote.

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Session } from 'chdb';
import { parquetMetadata, parquetReadObjects } from 'hyparquet';
import { afterAll, describe, expect, it } from 'vitest';
import { StoreParquet } from '../../apps/api/parquet-files.ts';
import { prng } from '../helpers/prng.ts';

const dir = mkdtempSync(join(tmpdir(), 'signalbase-parquet-files-'));
const session = new Session(join(dir, 'chdb'));
afterAll(() => {
  session.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The export's settings of the store's Parquet (apps/api/exports.ts), with blocks of `block` rows. */
const settings = (block: number) => `SETTINGS max_block_size = ${Math.trunc(block)}, output_format_parquet_compression_method = 'snappy',
  output_format_parquet_write_page_index = 0, output_format_parquet_write_bloom_filter = 0`;
const rowsSql = (block: number) => `
  SELECT number AS id, if(number % 7 = 0, NULL, number / 4) AS price, concat('note ', toString(number)) AS note,
    toDateTime64(1700000000 + number, 3, 'UTC') AS at, toBool(number % 2 = 0) AS even, concat('t', toString(number)) AS resumeToken
  FROM numbers({n:UInt64}) ${settings(block)}`;

/** The rows as the export takes them: one file of the store's, with row groups of `block` rows, cut in pieces of 1 byte to 100 KiB; a small hold. */
async function merged(n: number, block: number, complete: boolean) {
  const file = new StoreParquet(64 * 1024);
  const parts: Buffer[] = [];
  let chunks = 0;
  const take = (chunk: Uint8Array) => {
    chunks++;
    const out = file.push(chunk);
    if (out) parts.push(out);
  };
  const whole = Buffer.from(
    (
      await session.queryBindAsync(
        `${rowsSql(block)}, output_format_parquet_row_group_size = ${Math.trunc(block)}`,
        { n },
        { format: 'Parquet' },
      )
    ).bytes(),
  );
  const rng = prng(n + block);
  for (let i = 0; i < whole.length; ) {
    const size = rng.int(1, 100 * 1024);
    take(whole.subarray(i, i + size));
    i += size;
  }
  const last = await file.last();
  parts.push(file.end({ complete, resumeToken: last.token }));
  return { bytes: Buffer.concat(parts), chunks, last };
}

describe("issue 28: the store's Parquet file, its footer completed", () => {
  it('one file, every row in order, read back alike by hyparquet and by ClickHouse; the footer says complete and the last token', async () => {
    const { bytes, chunks, last } = await merged(50_000, 4_000, false);
    expect(chunks, 'several pieces').toBeGreaterThan(5);
    expect(last).toEqual({ rows: 50_000, token: 't49999' });
    const meta = parquetMetadata(new Uint8Array(bytes));
    expect(Number(meta.num_rows)).toBe(50_000);
    expect(Object.fromEntries((meta.key_value_metadata ?? []).map((kv) => [kv.key, kv.value]))).toMatchObject({
      'signalbase.complete': 'false',
      'signalbase.resumeToken': 't49999',
    });
    const ab = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    const rows = (await parquetReadObjects({ file: ab })) as Record<string, unknown>[];
    expect(rows.length).toBe(50_000);
    for (const i of [0, 1, 3_999, 4_000, 4_001, 27_777, 49_999]) {
      expect(rows[i], `row ${i}`).toEqual({
        id: BigInt(i),
        price: i % 7 === 0 ? null : i / 4,
        note: `note ${i}`,
        at: new Date((1_700_000_000 + i) * 1000),
        even: i % 2 === 0,
        resumeToken: `t${i}`,
      });
    }
    expect(rows.every((r, i) => r.id === BigInt(i))).toBe(true);
    const path = join(dir, 'merged.parquet');
    writeFileSync(path, bytes);
    const byClickHouse = JSON.parse(
      (
        await session.queryBindAsync(
          `SELECT count() AS n, sum(id) AS ids, countIf(price IS NULL) AS nulls, argMax(resumeToken, id) AS lastToken FROM file({path:String}, Parquet)`,
          { path },
          { format: 'JSONEachRow' },
        )
      ).text(),
    );
    expect(byClickHouse).toEqual({ n: 50_000, ids: (49_999 * 50_000) / 2, nulls: Math.ceil(50_000 / 7), lastToken: 't49999' });
  });

  it('no rows: a file with the columns and no row group, complete, with no token', async () => {
    const { bytes, last } = await merged(0, 4_000, true);
    expect(last).toEqual({ rows: 0, token: null });
    const meta = parquetMetadata(new Uint8Array(bytes));
    expect(Number(meta.num_rows)).toBe(0);
    expect(meta.schema.map((s) => s.name).slice(1)).toEqual(['id', 'price', 'note', 'at', 'even', 'resumeToken']);
    expect((meta.key_value_metadata ?? []).map((kv) => [kv.key, kv.value])).toEqual([['signalbase.complete', 'true']]);
  });
});
