// Issue 28, native exports: the store's NDJSON and CSV bytes arrive in chunks cut anywhere (within a
// row, a quoted field, a multi-byte character), and the export sends whole rows only, up to its
// bounds. The expectation comes from an independent CSV parser over the whole text, and JSON.parse.

import { parse as parseCsv } from 'csv-parse/sync';
import { describe, expect, it } from 'vitest';
import { StoreRows } from '../../apps/api/export-formats.ts';
import { prng, type Rng } from '../helpers/prng.ts';

const PIECES = ['a', 'b', ',', '"', '""', '\n', '\r\n', 'é', '€', '𝄞', ' ', 'x,y', '\\', '0'];
const text = (rng: Rng) => Array.from({ length: rng.int(0, 8) }, () => rng.pick(PIECES)).join('');

/** Rows as the store writes them: strings quoted with quotes doubled, CRLF (CSV); one JSON object a line (NDJSON); the token last. */
function storeText(format: 'csv' | 'ndjson', rows: { id: number; note: string; token: string }[]): string {
  if (format === 'ndjson') return rows.map((r) => `${JSON.stringify({ id: r.id, note: r.note, resumeToken: r.token })}\n`).join('');
  return rows.map((r) => `${r.id},"${r.note.replaceAll('"', '""')}","${r.token}"\r\n`).join('');
}

/** Cuts bytes at random places (inside characters too). */
function chunks(rng: Rng, bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; ) {
    const n = rng.int(1, 40);
    out.push(bytes.subarray(i, i + n));
    i += n;
  }
  return out;
}

describe('issue 28: whole rows out of the store stream', () => {
  for (const format of ['csv', 'ndjson'] as const)
    it(`${format}: every row whole and in order, however the bytes are cut, and no row past the first refused`, () => {
      const rng = prng(format === 'csv' ? 28 : 29);
      for (let round = 0; round < 200; round++) {
        const rows = Array.from({ length: rng.int(0, 12) }, (_, i) => ({ id: i, note: text(rng), token: `s~1.sig.k${i}` }));
        const whole = Buffer.from(storeText(format, rows));
        const expected =
          format === 'csv'
            ? (parseCsv(whole, { relax_quotes: false }) as string[][]).map((r) => ({ id: Number(r[0]), note: r[1], token: r[2] }))
            : rows;
        // An export that may take `max` rows.
        const max = rng.int(0, rows.length + 1);
        const split = new StoreRows(format);
        const taken: Buffer[] = [];
        const sent: Buffer[] = [];
        let stopped = false;
        for (const c of chunks(rng, whole)) {
          const out = split.push(c, (row) => (taken.length < max ? (taken.push(Buffer.from(row)), true) : false));
          if (out.bytes) sent.push(Buffer.from(out.bytes));
          if (out.stopped) {
            stopped = true;
            break;
          }
        }
        const n = Math.min(max, rows.length);
        expect(taken.length, `round ${round}`).toBe(n);
        expect(stopped, `round ${round}: stopped with rows left`).toBe(max < rows.length);
        // What is sent is the store's own bytes of the first n rows, each row once.
        expect(Buffer.concat(sent).equals(Buffer.concat(taken)), `round ${round}`).toBe(true);
        const got = taken.map((row) => {
          if (format === 'ndjson') {
            const o = JSON.parse(row.toString('utf8'));
            return { id: o.id, note: o.note, token: o.resumeToken };
          }
          const [r] = parseCsv(row) as string[][];
          return { id: Number(r![0]), note: r![1], token: r![2] };
        });
        expect(got, `round ${round}`).toEqual(expected.slice(0, n));
        expect(
          taken.map((row) => StoreRows.token(format, row)),
          `round ${round}: tokens`,
        ).toEqual(expected.slice(0, n).map((r) => r.token));
      }
    });
});
