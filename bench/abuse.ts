// Abuse benchmark (issue 24): what one caller can do to everyone else, measured from outside
// against a real `signalbase start` (spawned from a checkout: this one, or --server for another
// version, so a run on the old code gives the "before" figures on the same data and machine).
//   noisy neighbour  a quiet account's uncached one-trader events page, at its usual rate, alone and
//                    while a noisy account sends 64 concurrent heavy traders/stats requests (200
//                    traders, 1970..2299): p50, p99 and the p99 ratio (the goal: at most 2x)
//   batch attack     one POST /mcp carrying a JSON-RPC batch of 100 list_trader_stats calls
//   heavy query      the heaviest single read: traders/stats for 200 traders over 1970..2299
//   junk keys        a request with a malformed API key against one with a valid key
//   memory           the server's peak resident memory (VmHWM) over the run
// Usage: npx tsx bench/abuse.ts --help
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { benchArgs, fmtMs, freePort, pct, printTable, progress, sortNum } from './args.ts';

const USAGE = `Usage: npx tsx bench/abuse.ts --data-dir DIR [options]

Starts 'signalbase start' on DIR (seed it first: node bin/signalbase.cjs seed --scale large
--data-dir DIR) and measures, from outside over HTTP, the noisy-neighbour p99 ratio, a JSON-RPC
batch on /mcp, the heaviest single read, junk-key requests and the server's peak memory.

Options:
  --data-dir DIR     a seeded DATA_DIR; no server may be running on it
  --server FILE      the signalbase CLI to start (default: bin/signalbase.cjs of this checkout;
                     give another checkout's to measure that version on the same data)
  --seconds S        length of each noisy-neighbour leg (default 20)
  --rate N           the quiet client's requests per second (default 20)
  --noisy N          the noisy account's concurrent requests (default 64)
  -h, --help         this text

The server runs with RATE_LIMITS=default=100000000,address=100000000 (so what is measured is
admission, not the rate limits) and LOG_LEVEL=silent. Results to stdout, progress to stderr.`;

const {
  values: argv,
  die,
  posInt,
} = benchArgs('bench/abuse', USAGE, {
  'data-dir': { type: 'string' },
  server: { type: 'string' },
  seconds: { type: 'string', default: '20' },
  rate: { type: 'string', default: '20' },
  noisy: { type: 'string', default: '64' },
  help: { type: 'boolean', short: 'h' },
});
if (!argv['data-dir']) die(`--data-dir is required\n\n${USAGE}`);
const dataDir = resolve(argv['data-dir']!);
const cli = resolve(argv.server ?? join(import.meta.dirname, '..', 'bin', 'signalbase.cjs'));
const legMs = posInt('seconds', argv.seconds) * 1000;
const rate = posInt('rate', argv.rate);
const noisyN = posInt('noisy', argv.noisy);

const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const env = {
  ...process.env,
  DATA_DIR: dataDir,
  PORT: String(port),
  HOST: '127.0.0.1',
  LOG_LEVEL: 'silent',
  RATE_LIMITS: 'default=100000000,address=100000000',
};
const run = (...args: string[]) =>
  execFileSync(process.execPath, [cli, ...args], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
    .trim()
    .split('\n')
    .at(-1)!;

let server: ChildProcess | undefined;
const stop = () => {
  server?.kill('SIGTERM');
};
process.once('SIGINT', () => {
  stop();
  process.exit(130);
});

/** The server's peak resident memory so far (VmHWM), MiB. */
const peakMiB = () => {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${server!.pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
};

async function get(path: string, key: string): Promise<{ status: number; ms: number; bytes: number }> {
  const t0 = performance.now();
  try {
    const res = await fetch(base + path, { headers: { 'x-api-key': key }, signal: AbortSignal.timeout(60_000) });
    const body = await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - t0, bytes: body.byteLength };
  } catch {
    return { status: 0, ms: performance.now() - t0, bytes: 0 };
  }
}

try {
  progress(`starting ${cli} on ${dataDir}, port ${port}`);
  server = spawn(process.execPath, [cli, 'start', '--no-seed'], { env, stdio: ['ignore', 'ignore', 'inherit'] });
  for (let i = 0; ; i++) {
    const h = await fetch(`${base}/healthz`).then(
      (r) => r.status,
      () => 0,
    );
    if (h === 200) break;
    if (i > 1200 || server.exitCode !== null) throw new Error('the server did not become healthy');
    await new Promise((r) => setTimeout(r, 500));
  }
  const suffix = String(process.pid);
  run('accounts', 'create', `quiet${suffix}`, '--message-visibility', 'all', '--signal-visibility', 'all');
  run('accounts', 'create', `noisy${suffix}`, '--message-visibility', 'all', '--signal-visibility', 'all');
  const quietKey = run('keys', 'create', '--account', `quiet${suffix}`);
  const noisyKey = run('keys', 'create', '--account', `noisy${suffix}`);
  const token = run('tokens', 'create', '--account', `noisy${suffix}`, '--scopes', 'stats.read');
  for (
    let i = 0;
    (await get('/v2/assets?limit=1', quietKey)).status !== 200 || (await get('/v2/assets?limit=1', noisyKey)).status !== 200;
    i++
  ) {
    if (i > 100) throw new Error('the new keys were not accepted');
    await new Promise((r) => setTimeout(r, 200));
  }
  const dir = (await fetch(`${base}/v2/traders?limit=200`, { headers: { 'x-api-key': quietKey } }).then((r) => r.json())) as {
    data: { results: { id: number }[] };
  };
  const traderIds = dir.data.results.map((t) => t.id);
  if (traderIds.length < 200) progress(`only ${traderIds.length} traders in the directory`);
  const heavy = `/v2/traders/stats?traderIds=${traderIds.join(',')}&startTime=1970-01-01T00:00:00Z&endTime=2299-12-31T00:00:00Z`;

  // The quiet client: an uncached one-trader events page (each request its own startTime, so no cache hit), at `rate` per second.
  let q = 0;
  const quietRefused = new Map<number, number>();
  const quietLeg = async (): Promise<number[]> => {
    const times: number[] = [];
    const end = performance.now() + legMs;
    const pending: Promise<void>[] = [];
    while (performance.now() < end) {
      const t = traderIds[q % traderIds.length]!;
      const start = new Date(Date.UTC(2020, 0, 1) + (q++ % 86_400) * 1000).toISOString();
      pending.push(
        get(`/v2/events?traderIds=${t}&limit=1&startTime=${start}`, quietKey).then((r) => {
          if (r.status === 200) times.push(r.ms);
          else quietRefused.set(r.status, (quietRefused.get(r.status) ?? 0) + 1);
        }),
      );
      await new Promise((r) => setTimeout(r, 1000 / rate));
    }
    await Promise.all(pending);
    return sortNum(times);
  };

  progress(`warm-up, then the quiet client alone for ${legMs / 1000} s`);
  await get(heavy, quietKey);
  for (let i = 0; i < 20; i++) await get(`/v2/events?traderIds=${traderIds[i]}&limit=1&startTime=2019-01-01T00:00:0${i % 10}Z`, quietKey);
  const alone = await quietLeg();

  progress(`the quiet client while the noisy account sends ${noisyN} concurrent heavy requests`);
  let noisyOn = true;
  const noisyStatus = new Map<number, number>();
  const noisyTimes: number[] = [];
  const noisy = Array.from({ length: noisyN }, async () => {
    while (noisyOn) {
      const r = await get(heavy, noisyKey);
      noisyStatus.set(r.status, (noisyStatus.get(r.status) ?? 0) + 1);
      if (r.status === 200) noisyTimes.push(r.ms);
      // An overloaded answer says when to come back: a client that retries at once is still bounded, but hammers the refusal path.
      if (r.status === 503) await new Promise((s) => setTimeout(s, 50));
    }
  });
  await new Promise((r) => setTimeout(r, 1000));
  const loaded = await quietLeg();
  noisyOn = false;
  await Promise.all(noisy);

  progress('heavy query, batch attack, junk keys');
  const single = await get(heavy, quietKey);
  const batch = Array.from({ length: 100 }, (_, i) => ({
    jsonrpc: '2.0',
    id: i + 1,
    method: 'tools/call',
    params: { name: 'list_trader_stats', arguments: { traderIds, startTime: '1970-01-01T00:00:00Z', endTime: '2299-12-31T00:00:00Z' } },
  }));
  const t0 = performance.now();
  const batchRes = await fetch(`${base}/mcp`, {
    method: 'POST',
    body: JSON.stringify(batch),
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
    },
  });
  const batchBytes = (await batchRes.arrayBuffer()).byteLength;
  const batchMs = performance.now() - t0;
  // Each junk key is new (an answer for a key seen before is cached): malformed ones, and well-formed unknown ones (a look-up each).
  const junk: number[] = [];
  const unknown: number[] = [];
  const valid: number[] = [];
  const hex = (n: number) => Array.from({ length: n }, () => Math.floor(Math.random() * 16).toString(16)).join('');
  for (let i = 0; i < 200; i++) {
    junk.push((await get('/v2/assets?limit=1', `sb_${hex(16)}_${hex(20)}`)).ms);
    unknown.push((await get('/v2/assets?limit=1', `sb_${hex(16)}_${hex(43)}`)).ms);
    valid.push((await get('/v2/assets?limit=1', quietKey)).ms);
  }

  const a99 = pct(alone, 99);
  const l99 = pct(loaded, 99);
  const ok = noisyStatus.get(200) ?? 0;
  console.log(
    `\nnoisy neighbour (${noisyN} concurrent heavy traders/stats from one account; quiet client ${rate}/s, ${legMs / 1000} s per leg)`,
  );
  printTable(
    ['quiet client', 'n', 'p50 ms', 'p99 ms', 'p99 / alone'],
    [
      ['alone', String(alone.length), fmtMs(pct(alone, 50)), fmtMs(a99), '1.00x'],
      [
        'with the noisy account',
        String(loaded.length),
        fmtMs(pct(loaded, 50)),
        fmtMs(l99),
        `${(l99 / a99).toFixed(2)}x${l99 / a99 > 2 ? ' !' : ''}`,
      ],
    ],
  );
  if (quietRefused.size)
    console.log(`quiet client not answered 200: ${[...quietRefused].map(([s, n]) => `${n} x ${s || 'no answer'}`).join(', ')}`);
  const sortedNoisy = sortNum(noisyTimes);
  console.log(
    `noisy account: ${[...noisyStatus].map(([s, n]) => `${n} x ${s || 'no answer'}`).join(', ')}; answered p50 ${fmtMs(pct(sortedNoisy, 50))} ms, p99 ${fmtMs(pct(sortedNoisy, 99))} ms, ${(ok / ((legMs + 1000) / 1000)).toFixed(1)}/s`,
  );
  console.log(
    `heavy query (traders/stats, ${traderIds.length} traders, 1970..2299): ${single.status}, ${fmtMs(single.ms)} ms, ${(single.bytes / 1024).toFixed(0)} KiB`,
  );
  console.log(
    `batch attack (POST /mcp, JSON-RPC batch of 100 list_trader_stats): ${batchRes.status}, ${(batchBytes / 1024).toFixed(1)} KiB answered in ${fmtMs(batchMs)} ms`,
  );
  console.log(
    `junk keys: a new malformed key p50 ${fmtMs(pct(sortNum(junk), 50))} ms, a new well-formed unknown key p50 ${fmtMs(pct(sortNum(unknown), 50))} ms, a valid key p50 ${fmtMs(pct(sortNum(valid), 50))} ms`,
  );
  console.log(`server peak resident memory (VmHWM): ${peakMiB().toFixed(0)} MiB; server ${cli}`);
} catch (err) {
  console.error(`bench/abuse: ${(err as Error).stack ?? err}`);
  process.exitCode = 1;
} finally {
  stop();
}
