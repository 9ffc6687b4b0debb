// Issue 26 (item 5): the streaming ingest of the embedded mode. `signalbase ingest -` and
// `ingest --follow FILE` append each record once validated, as `ingest FILE` does (same check, same
// exact bytes), but a refused line is reported and skipped, not a reason to append nothing.
import { type ChildProcess, spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { IngestLines, IngestStream, ingestLine, readIngestFile } from '../../projectors/ingest.ts';
import { freePort, pollUntil, REPO_ROOT, type ServerProcess, sleep, startServer } from '../helpers/cli.ts';
import { event, eventText } from '../projectors/records.ts';

const dirs: string[] = [];
const tempDir = () => {
  const d = mkdtempSync(join(tmpdir(), 'signalbase-issue26-'));
  dirs.push(d);
  return d;
};
const servers: ServerProcess[] = [];
const children: ChildProcess[] = [];
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  await Promise.allSettled(servers.map((s) => s.stop()));
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const line = (topic: string, valueText: string) => `{"topic": "${topic}", "value": ${valueText}}`;
/** Spacing, key order and `1.50` that a re-serialisation would change. */
const handWritten = (id: number) => eventText(id, { price: '1.50' }).replace('{', '{ ').replaceAll('":', '" : ');
const logFile = (dataDir: string, topic: string) => join(dataDir, 'log', `${topic}.ndjson`);
const logText = (dataDir: string, topic: string) =>
  existsSync(logFile(dataDir, topic)) ? readFileSync(logFile(dataDir, topic), 'utf8') : '';

interface Streaming {
  child: ChildProcess;
  stderr(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}
/** `signalbase ARGS` with a pipe on its standard input that the test writes to piece by piece. */
function spawnCli(args: readonly string[], env: Record<string, string>): Streaming {
  const child = spawn(process.execPath, ['bin/signalbase.cjs', ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  let err = '';
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    err += d;
  });
  child.stdout!.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  return { child, stderr: () => err, exited };
}

describe('issue 26: one check per line for files and streams', () => {
  it('IngestLines gives the same lines whatever the chunk boundaries (a UTF-8 character split across chunks included)', () => {
    const text = Buffer.from(
      [line('trade-events', eventText(1)), '', line('messages', JSON.stringify({ ...event(2).value, text: 'é€😀' })), 'x'].join('\n'),
    );
    const whole = [...new IngestLines().push(text)];
    for (let cut = 1; cut < text.length; cut += 7) {
      const l = new IngestLines();
      const got = [...l.push(text.subarray(0, cut)), ...l.push(text.subarray(cut)), ...l.end()];
      expect(got.map((g) => ('bytes' in g ? Buffer.from(g.bytes).toString() : g))).toEqual(
        [...whole, { line: 4, bytes: Buffer.from('x') }].map((g) => ('bytes' in g ? Buffer.from(g.bytes).toString() : g)),
      );
    }
  });

  it('a line over the maximum is dropped as it arrives and refused with its full size, the next line kept', () => {
    const l = new IngestLines();
    const big = Buffer.alloc(1 << 20, 0x61);
    const out = [];
    for (let i = 0; i < 17; i++) out.push(...l.push(big));
    out.push(...l.push(Buffer.from(`\n${line('trade-events', eventText(3))}\n`)));
    expect(out).toHaveLength(2);
    expect(ingestLine(out[0]!)).toEqual({ reason: expect.stringMatching(/^record too large: 17825792 bytes/) });
    expect(ingestLine(out[1]!)).toEqual({ topic: 'trade-events', key: '3', raw: eventText(3) });
  });

  it('readIngestFile and IngestStream agree line for line', () => {
    vi.useFakeTimers();
    try {
      const lines = [
        line('trade-events', handWritten(1)),
        'not json',
        '',
        line('traders', '{"id": 6}'),
        line('trade-events', eventText(2)),
      ];
      const file = readIngestFile(Buffer.from(lines.join('\n')));
      const appended: { key: string; raw: string }[] = [];
      const refused: { line: number; reason: string }[] = [];
      const s = new IngestStream({
        append: (g) => appended.push(...(g.get('trade-events') ?? [])),
        onRefused: (l, reason) => refused.push({ line: l, reason }),
      });
      for (const c of lines.join('\n')) s.push(Buffer.from(c));
      s.end();
      expect(appended).toEqual(file.byTopic.get('trade-events'));
      expect(refused).toEqual(file.refused);
      expect([s.appended, s.refused]).toEqual([2, 2]);
    } finally {
      vi.useRealTimers();
    }
  });

  it('a group is appended maxDelayMs after its first record, or at once when it reaches maxRecords', () => {
    vi.useFakeTimers();
    try {
      const groups: number[] = [];
      const s = new IngestStream({ append: (_, n) => groups.push(n), onRefused: () => {}, maxDelayMs: 20, maxRecords: 3 });
      s.push(Buffer.from(`${line('trade-events', eventText(1))}\n`));
      vi.advanceTimersByTime(10);
      s.push(Buffer.from(`${line('trade-events', eventText(2))}\n`));
      expect(groups).toEqual([]);
      vi.advanceTimersByTime(10);
      expect(groups).toEqual([2]);
      s.push(Buffer.from([3, 4, 5].map((i) => `${line('trade-events', eventText(i))}\n`).join('')));
      expect(groups).toEqual([2, 3]);
      s.end();
      expect(groups).toEqual([2, 3]);
    } finally {
      vi.useRealTimers();
    }
  });
  it('a failed append (a full disk) stops the stream: reported once, nothing taken after it, not counted as appended', () => {
    const failures: unknown[] = [];
    let calls = 0;
    const s = new IngestStream({
      append: () => {
        calls++;
        throw new Error('ENOSPC');
      },
      onRefused: () => {},
      onFailed: (e) => failures.push(e),
      maxRecords: 1,
    });
    s.push(Buffer.from(`${line('trade-events', eventText(1))}\n${line('trade-events', eventText(2))}\n`));
    s.end();
    expect(calls).toBe(1);
    expect(failures).toHaveLength(1);
    expect(String(s.failed)).toMatch(/ENOSPC/);
    expect(s.appended).toBe(0);
  });
});

describe('issue 26: signalbase ingest - (no server on the data dir)', () => {
  it('appends valid records byte for byte as they arrive, reports and skips refused lines, exits 1, and projects them', async () => {
    const dataDir = join(tempDir(), 'data');
    const run = spawnCli(['ingest', '-', '--data-dir', dataDir], {});
    const stdin = run.child.stdin!;
    const log = () => logText(dataDir, 'trade-events');
    const until = (done: (t: string) => boolean) => pollUntil(async () => log(), done, 30_000, 20);
    // Line 1 whole; once it is on the log the process is reading, and line 2 comes in three
    // writes, cut inside a member name and inside the number 1.50.
    stdin.write(`${line('trade-events', eventText(40))}\n`);
    const one = `{"k":"40","v":${eventText(40)}}\n`;
    expect((await until((t) => t.length > 0)).value, run.stderr()).toBe(one);
    const second = `${line('trade-events', handWritten(41))}\n`;
    const cut1 = second.indexOf('direction') + 3;
    const cut2 = second.indexOf('1.50') + 2;
    stdin.write(second.slice(0, cut1));
    await sleep(150);
    stdin.write(second.slice(cut1, cut2));
    await sleep(150);
    expect(log()).toBe(one);
    const sent = Date.now();
    stdin.write(second.slice(cut2));
    // Appended while the input is still open, within tens of ms (a poll every 20 ms; slack for a loaded machine).
    const two = await until((t) => t !== one);
    expect(Date.now() - sent).toBeLessThan(2000);
    expect(two.value, run.stderr()).toBe(`${one}{"k":"41","v":${handWritten(41)}}\n`);
    stdin.write(`${line('trade-events', eventText(42, { price: '1e400' }))}\n\nnot json\n`);
    stdin.end(`${line('trade-events', eventText(43, { id: '9007199254740991' }))}`); // no newline at the end
    const { code } = await run.exited;
    const err = run.stderr();
    expect(code, err).toBe(1);
    expect(err.split('\n').filter((l) => /^line \d+: /.test(l))).toEqual([
      expect.stringMatching(/^line 3: trade-events: non-finite number at \/price/),
      expect.stringMatching(/^line 5: not JSON/),
    ]);
    expect(err).toMatch(/appended 3 records from standard input, refused 2 lines\n/);
    expect(err).toMatch(/projected 3 records\n/);
    expect(log()).toBe(`${two.value}{"k":"43","v":${eventText(43, { id: '9007199254740991' })}}\n`);
  }, 120_000);

  it('--follow FILE: the file and what is appended to it (a line split across writes waits for its end); SIGTERM appends what was validated, exit 0', async () => {
    const dir = tempDir();
    const dataDir = join(dir, 'data');
    const file = join(dir, 'records.ndjson');
    writeFileSync(file, `${line('trade-events', eventText(51))}\n`);
    const run = spawnCli(['ingest', '--follow', file, '--data-dir', dataDir], {});
    const first = await pollUntil(
      async () => logText(dataDir, 'trade-events'),
      (t) => t.length > 0,
      30_000,
      20,
    );
    expect(first.value).toBe(`{"k":"51","v":${eventText(51)}}\n`);
    const next = `${line('trade-events', handWritten(52))}\n`;
    appendFileSync(file, next.slice(0, 40));
    await sleep(300);
    expect(logText(dataDir, 'trade-events')).toBe(first.value);
    appendFileSync(file, next.slice(40));
    const second = await pollUntil(
      async () => logText(dataDir, 'trade-events'),
      (t) => t !== first.value,
      10_000,
      20,
    );
    expect(second.value).toBe(`${first.value}{"k":"52","v":${handWritten(52)}}\n`);
    run.child.kill('SIGTERM');
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(run.stderr()).toMatch(/appended 2 records from .*records\.ndjson, refused 0 lines \(stopped by a signal\)/);
    expect(run.stderr()).toMatch(/projected 2 records\n/);
  }, 120_000);

  it('--help documents the streaming modes and their exit status', async () => {
    const run = spawnCli(['ingest', '--help'], {});
    let out = '';
    run.child.stdout!.removeAllListeners('data');
    run.child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      out += d;
    });
    run.child.stdin!.end();
    expect((await run.exited).code).toBe(0);
    expect(out).toMatch(/ingest - \| ingest --follow FILE/);
    expect(out).toMatch(/reported on stderr with its number and reason/);
    expect(out).toMatch(/exits with status 1 if any line was refused/);
  });
});

describe('issue 26: signalbase ingest - while start runs', () => {
  it('a record piped in becomes visible through the API (the server projects it) while the ingest keeps running', async () => {
    const dataDir = join(tempDir(), 'data');
    const port = await freePort();
    const server = await startServer({ PORT: String(port), DATA_DIR: dataDir, LOG_LEVEL: 'silent' }, 180_000);
    servers.push(server);
    const base = `http://127.0.0.1:${port}`;
    const key = readFileSync(join(dataDir, 'demo-api-key.txt'), 'utf8').trim();
    const get = (path: string): Promise<any> => fetch(`${base}${path}`, { headers: { 'x-api-key': key } }).then((r) => r.json());
    const [sample] = (await get('/v2/events?limit=1&types=open')).data.results;
    const run = spawnCli(['ingest', '-', '--data-dir', dataDir], {});
    const id = 9_000_000_001;
    const value = {
      ...event(id).value,
      positionId: id,
      traderId: sample.traderId,
      assetId: sample.assetId,
      price: sample.price,
      timeOfEvent: new Date().toISOString(),
    };
    run.child.stdin!.write(`${JSON.stringify({ topic: 'trade-events', value })}\n`);
    const found = await pollUntil(
      () => get(`/v2/events?traderIds=${sample.traderId}&limit=5`),
      (b) => b.data.results.some((e: any) => String(e.id) === String(id)),
      30_000,
      100,
    );
    expect(found.ok, JSON.stringify(found.value).slice(0, 500)).toBe(true);
    expect(run.child.exitCode).toBeNull(); // still streaming
    run.child.stdin!.end();
    const { code } = await run.exited;
    expect(code, run.stderr()).toBe(0);
    expect(run.stderr()).toMatch(/signalbase start \(pid \d+\) is running on .*: it projects the new records itself/);
    expect(run.stderr()).toMatch(/appended 1 records from standard input, refused 0 lines/);
  }, 240_000);
});
