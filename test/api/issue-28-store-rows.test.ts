// Issue 28, native exports: the store's NDJSON and CSV bytes arrive in chunks cut anywhere (within a
// row, a quoted field, a multi-byte character: a ClickHouse server's body) or in blocks of whole rows
// that say how many (chdb), and the export sends whole rows only, up to its bounds. The expectation comes from an independent CSV parser over the whole text, and JSON.parse.

import { parse as parseCsv } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { StoreRows } from '../../apps/api/export-formats.ts';
import type { StreamChunk } from '../../storage/port.ts';
import { prng, type Rng } from '../helpers/prng.ts';

const PIECES = ['a', 'b', ',', '"', '""', '\n', '\r\n', 'é', '€', '𝄞', ' ', 'x,y', '\\', '0'];
const text = (rng: Rng) => Array.from({ length: rng.int(0, 8) }, () => rng.pick(PIECES)).join('');

/** Rows as the store writes them: strings quoted with quotes doubled, CRLF (CSV); one JSON object a line (NDJSON); the token last. */
function storeText(format: 'csv' | 'ndjson', rows: { id: number; note: string; token: string }[]): string {
  if (format === 'ndjson') return rows.map((r) => `${JSON.stringify({ id: r.id, note: r.note, resumeToken: r.token })}\n`).join('');
  return rows.map((r) => `${r.id},"${r.note.replaceAll('"', '""')}","${r.token}"\r\n`).join('');
}

/** Cuts bytes at random places (inside characters too): pieces that do not say how many rows they hold. */
function chunks(rng: Rng, bytes: Buffer): StreamChunk[] {
  const out: StreamChunk[] = [];
  for (let i = 0; i < bytes.length; ) {
    const n = rng.int(1, 40);
    out.push({ bytes: bytes.subarray(i, i + n) });
    i += n;
  }
  return out;
}

/** Rows in blocks, as chdb streams them: each chunk whole rows, with their count. */
function blocks(rng: Rng, rows: Buffer[]): StreamChunk[] {
  const out: StreamChunk[] = [];
  for (let i = 0; i < rows.length; ) {
    const n = rng.int(0, 4);
    out.push({ bytes: Buffer.concat(rows.slice(i, i + n)), rows: Math.min(n, rows.length - i) });
    i += n;
  }
  return out;
}

describe('issue 28: whole rows out of the store stream', () => {
  for (const format of ['csv', 'ndjson'] as const)
    for (const framing of ['cut anywhere', 'blocks of whole rows'] as const)
      it(`${format}, ${framing}: every row whole and in order, up to the rows and bytes bounds, the last one's token`, () => {
        const rng = prng((format === 'csv' ? 28 : 29) + (framing === 'blocks of whole rows' ? 100 : 0));
        for (let round = 0; round < 200; round++) {
          const rows = Array.from({ length: rng.int(0, 12) }, (_, i) => ({ id: i, note: text(rng), token: `s~1.sig.k${i}` }));
          const each = rows.map((r) => Buffer.from(storeText(format, [r])));
          const whole = Buffer.concat(each);
          const expected =
            format === 'csv'
              ? (parseCsv(whole, { relax_quotes: false }) as string[][]).map((r) => ({ id: Number(r[0]), note: r[1], token: r[2] }))
              : rows;
          // An export that may take `max` rows, and no row once `maxBytes` are sent (the first always).
          const max = rng.int(0, rows.length + 1);
          const maxBytes = rng.chance(0.5) ? Number.POSITIVE_INFINITY : rng.int(1, whole.length + 1);
          let n = 0;
          for (let b = 0; n < Math.min(max, rows.length) && (n === 0 || b < maxBytes); n++) b += each[n]!.length;
          const split = new StoreRows(format, { rows: max, bytes: maxBytes });
          const sent: Buffer[] = [];
          let stopped = false;
          for (const c of framing === 'cut anywhere' ? chunks(rng, whole) : blocks(rng, each)) {
            const out = split.push(c);
            if (out.bytes) sent.push(Buffer.from(out.bytes));
            if (out.stopped) {
              stopped = true;
              break;
            }
          }
          expect(split.rows, `round ${round}`).toBe(n);
          expect(stopped, `round ${round}: stopped with rows left`).toBe(n < rows.length);
          // What is sent is the store's own bytes of the first n rows, each row once.
          const got = Buffer.concat(sent);
          expect(got.equals(Buffer.concat(each.slice(0, n))), `round ${round}`).toBe(true);
          expect(split.bytes, `round ${round}`).toBe(got.length);
          const parsed =
            format === 'ndjson'
              ? got
                  .toString('utf8')
                  .split('\n')
                  .filter((l) => l)
                  .map((l) => JSON.parse(l))
                  .map((o) => ({ id: o.id, note: o.note, token: o.resumeToken }))
              : (parseCsv(got) as string[][]).map((r) => ({ id: Number(r[0]), note: r[1], token: r[2] }));
          expect(parsed, `round ${round}`).toEqual(expected.slice(0, n));
          expect(split.token(), `round ${round}: the last row's token`).toBe(n ? expected[n - 1]!.token : '');
        }
      });
});
