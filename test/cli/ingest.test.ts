import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, runCli } from '../helpers/cli.ts';
import { eventText } from '../projectors/records.ts';

/**
 * `signalbase ingest` as a real process (issue 5): it validates every line as the projector does,
 * refuses the whole file when a line is bad (naming each one), and appends exactly the value
 * text it validated. The runs start together in beforeAll; each test checks one.
 */
const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'signalbase-ingest-test-'));
  dirs.push(d);
  return d;
};
const line = (topic: string, valueText: string) => `{"topic": "${topic}", "value": ${valueText}}`;

/** A value as a producer may write it: spacing, key order and `1.50` that a re-serialisation would change. */
const HAND_WRITTEN = eventText(41, { price: '1.50' }).replace('{', '{ ').replaceAll('":', '" : ');

interface Run {
  dir: string;
  file: string;
  result: Promise<CliResult>;
}
function ingest(lines: readonly string[] | Buffer, prepare?: (dataDir: string) => void): Run {
  const dir = tempDir();
  const file = join(dir, 'records.ndjson');
  writeFileSync(file, Buffer.isBuffer(lines) ? lines : lines.join('\n') + '\n');
  const dataDir = join(dir, 'data');
  prepare?.(dataDir);
  return { dir: dataDir, file, result: runCli(['ingest', file], { DATA_DIR: dataDir }, 120_000) };
}
const logFile = (dataDir: string, topic: string) => join(dataDir, 'log', `${topic}.ndjson`);

let bad: Run;
let good: Run;
let torn: Run;
let huge: Run;
let help: Promise<CliResult>;
const TORN = `{"k":"40","v":${eventText(40).slice(0, 30)}`;

beforeAll(() => {
  bad = ingest([
    line('trade-events', eventText(1)),
    line('trade-events', eventText(2, { price: '1e400' })),
    line('trade-events', eventText(3, { timeOfEvent: '"0000-01-01T00:00:00Z"' })),
    line('trade-events', eventText(4, { timeOfEvent: '"2016-12-31T23:59:60Z"' })),
    line('trade-events', eventText(5, { id: '9007199254740993' })),
    line('traders', '{"id": 6}'),
  ]);
  good = ingest([line('trade-events', HAND_WRITTEN), '', line('trade-events', eventText(42, { id: '9007199254740991' }))]);
  torn = ingest([line('trade-events', eventText(43))], (dataDir) => {
    mkdirSync(join(dataDir, 'log'), { recursive: true });
    writeFileSync(logFile(dataDir, 'trade-events'), `{"k":"39","v":${eventText(39)}}\n${TORN}`); // a crash mid-append
  });
  const text = JSON.stringify('x'.repeat(17 << 20));
  huge = ingest([line('trade-events', eventText(44)), line('trade-events', eventText(45, { messageId: text }))]);
  help = runCli(['ingest', '--help']);
  for (const p of [bad.result, good.result, torn.result, huge.result, help]) p.catch(() => undefined); // awaited by the tests
}, 10_000);

afterAll(async () => {
  await Promise.allSettled([bad, good, torn, huge].map((r) => r.result).concat(help));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('signalbase ingest', () => {
  it('issue 5: refuses the whole file, naming each bad line and its reason; nothing reaches the log', async () => {
    const r = await bad.result;
    expect(r.code, r.stderr).toBe(1);
    const refused = r.stderr.split('\n').filter((l) => /^line \d+: /.test(l));
    expect(refused).toEqual([
      expect.stringMatching(/^line 2: trade-events: non-finite number at \/price/),
      expect.stringMatching(/^line 3: trade-events: schema: \/timeOfEvent /),
      expect.stringMatching(/^line 4: trade-events: schema: \/timeOfEvent /),
      expect.stringMatching(/^line 5: trade-events: schema: \/id /),
      expect.stringMatching(/^line 6: traders: schema: /),
    ]);
    expect(r.stderr).toMatch(/nothing was appended: 5 line\(s\) of .* refused/);
    expect(existsSync(logFile(bad.dir, 'trade-events'))).toBe(false);
  });

  it('issue 5: the log line holds byte-for-byte the value text of the file, and it is projected', async () => {
    const r = await good.result;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/appended 2 records/);
    expect(r.stderr).toMatch(/projected 2 records\n/);
    expect(readFileSync(logFile(good.dir, 'trade-events'), 'utf8')).toBe(
      `{"k":"41","v":${HAND_WRITTEN}}\n{"k":"42","v":${eventText(42, { id: '9007199254740991' })}}\n`,
    );
  });

  it('issue 5: after a torn last line the append starts on a fresh line: the fragment is dead-lettered, the record projected', async () => {
    const r = await torn.result;
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(logFile(torn.dir, 'trade-events'), 'utf8')).toBe(
      `{"k":"39","v":${eventText(39)}}\n${TORN}\n{"k":"43","v":${eventText(43)}}\n`,
    );
    expect(r.stderr).toMatch(/projected 3 records, 1 went to the dead-letter table/);
  });

  it('issue 5: a line over the maximum record size is refused with its size', async () => {
    const r = await huge.result;
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/^line 2: record too large: \d+ bytes, over the maximum record size of 16777216 bytes/m);
    expect(r.stderr).not.toMatch(/^line 1:/m);
    expect(existsSync(logFile(huge.dir, 'trade-events'))).toBe(false);
  });

  it('--help states the validation, the maximum size and that a bad line refuses the file', async () => {
    const r = await help;
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/Usage: signalbase ingest/);
    expect(r.stdout).toMatch(/16777216 bytes \(16 MiB\)/);
    expect(r.stdout).toMatch(/If any line is refused, nothing is appended/);
    expect(r.stdout).toMatch(/exactly as written/);
  });
});
