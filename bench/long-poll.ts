// Long-poll benchmark (issue 28): N since-polls at the feed's head held with `wait=30` against a
// real `signalbase start`, what the server process pays for them while they wait (memory per held
// poll, CPU while nothing happens), and how soon after a commit becomes visible they answer.
// Usage: npx tsx bench/long-poll.ts --help
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { get as httpGet } from 'node:http';
import { cpus, platform, release } from 'node:os';
import { join, resolve } from 'node:path';
import { demoKeyFile, runningServerPid } from '../apps/embedded.ts';
import { EmbeddedLog } from '../projectors/log/embedded.ts';
import { benchAccounts, benchArgs, fmtMs, freePort, pct, printTable, progress, sortNum } from './args.ts';

const USAGE = `Usage: npx tsx bench/long-poll.ts --data-dir DIR [options]

Starts 'signalbase start --no-seed' on DIR (a seeded DATA_DIR; the bench appends records to its
log: use a copy), opens --polls since-polls at the feed's head with wait=30 (spread over --accounts
accounts made through the log, a few at a time: admission takes each poll's first read), and
measures the server process while they are held: resident memory per held poll (against the same
process before) and CPU while idle. Then, --rounds times, it appends one new feed group (a message,
then once that is projected its open event, whose commit makes the group) and measures, for every
held poll, the delay from the commit (the data version on /healthz moves: asked every 2 ms, it reads
no store) to the poll's answer; the polls are held again from the new head for the next round.

Options:
  --data-dir DIR   a seeded DATA_DIR (required)
  --polls N        held polls (default 1000)
  --accounts N     accounts the polls are spread over (default 100)
  --rounds N       commits measured (default 5)
  -h, --help       this text

BENCH_SERVER_PROFILE=DIR writes the started server's CPU profile (node --cpu-prof) into DIR when it
stops. Results to stdout, progress to stderr.`;

const {
  values: argv,
  die,
  posInt,
} = benchArgs('bench/long-poll', USAGE, {
  'data-dir': { type: 'string' },
  polls: { type: 'string', default: '1000' },
  accounts: { type: 'string', default: '100' },
  rounds: { type: 'string', default: '5' },
  help: { type: 'boolean', short: 'h' },
});
if (!argv['data-dir']) die(`--data-dir is required\n\n${USAGE}`);
const dataDir = resolve(argv['data-dir']!);
if (!existsSync(join(dataDir, 'log')) || !existsSync(demoKeyFile(dataDir)))
  die(`${dataDir} is not a seeded DATA_DIR (node bin/signalbase.cjs seed --data-dir DIR)`);
if (runningServerPid(dataDir) !== null) die(`a signalbase server runs on ${dataDir}: stop it first`);
const polls = posInt('polls', argv.polls);
const accountCount = posInt('accounts', argv.accounts);
const rounds = posInt('rounds', argv.rounds);
const cli = join(import.meta.dirname, '..', 'bin', 'signalbase.cjs');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
type Json = any;

/** The server process's resident memory (bytes) and CPU time (ms), from /proc. */
function usage(pid: number): { rss: number; cpuMs: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const rss = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN) * 1024;
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { rss, cpuMs: ((Number(fields[11]) + Number(fields[12])) * 1000) / 100 };
}

let server: ChildProcess | undefined;
process.once('SIGINT', () => {
  server?.kill('SIGTERM');
  process.exit(130);
});

const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const key = readFileSync(demoKeyFile(dataDir), 'utf8').trim();
const log = new EmbeddedLog(dataDir);
const accounts = benchAccounts(log, 'bench-long-poll', accountCount);

/**
 * One held poll on a connection of its own, through node:http: answered when its response head
 * arrives (fetch took this client about 0.2 ms a response, so a thousand answers queued here for
 * 200 ms after the server had sent them all; the parse of the bodies is this client's time, not the server's).
 */
const held = (path: string, apiKey: string): Promise<{ at: number; status: number; body: Json }> =>
  new Promise((resolvePoll, reject) => {
    const req = httpGet(`${base}${path}`, { headers: { 'x-api-key': apiKey }, agent: false }, (res) => {
      const at = performance.now();
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        let body: Json = null;
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          /* not JSON: the status says what it was */
        }
        resolvePoll({ at, status: res.statusCode ?? 0, body });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
  });
const getJson = async (path: string, apiKey = key): Promise<{ status: number; body: Json }> => {
  const r = await fetch(`${base}${path}`, { headers: { 'x-api-key': apiKey } });
  return { status: r.status, body: await r.json().catch(() => null) };
};

try {
  progress(`starting signalbase start --no-seed on ${dataDir}, port ${port}`);
  const profile = process.env.BENCH_SERVER_PROFILE;
  server = spawn(process.execPath, [...(profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(profile)}`] : []), cli, 'start', '--no-seed'], {
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
      RATE_LIMITS: 'default=100000000,address=100000000',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const pid = server.pid!;
  for (let i = 0; ; i++) {
    const h = await getJson('/healthz').catch(() => null);
    if (h?.status === 200 && h.body?.data?.results?.[0]?.projectorLag === 0) break;
    if (i > 3000) throw new Error('the server did not catch up within 5 minutes');
    await sleep(100);
  }
  // Every account's key answers (the server has projected them).
  for (const a of accounts) while ((await getJson('/v2/feed?since=now', a.key)).status !== 200) await sleep(100);

  // A group to copy: a source message with a priced open event.
  const sample = (await getJson('/v2/feed?limit=20')).body.data.results.find((g: Json) => g.events?.some((e: Json) => e.price > 0));
  if (!sample) throw new Error('no feed group with a priced event to copy');
  const ev = sample.events.find((e: Json) => e.price > 0);
  const run = Date.now();
  const dataVersion = async (): Promise<number> => (await getJson('/healthz')).body.data.results[0].dataVersion;
  /** Appends a group's message, and once it is projected, returns a function that appends its event (which makes the group). */
  const appendGroup = async (n: number): Promise<() => void> => {
    const now = new Date().toISOString();
    const id = `long-poll-${run}-${n}`;
    const v0 = await dataVersion();
    log.appendSync('messages', [
      {
        key: id,
        value: {
          id,
          platform: sample.source.platform,
          sourceIdentityId: sample.source.identity.sourceIdentityId,
          writtenAt: now,
          url: null,
          text: `bench/long-poll ${n}`,
          attachments: [],
          isEdited: false,
          isReply: false,
          isQuote: false,
          isRepost: false,
          version: 1,
        },
      },
    ]);
    // Its commit, and the roll-up commit that follows it (SETTLE_MS), before the event.
    while ((await dataVersion()) === v0) await sleep(10);
    await sleep(2500);
    const eventId = run * 1000 + n;
    return () =>
      log.appendSync('trade-events', [
        {
          key: String(eventId),
          value: {
            id: eventId,
            type: 'open',
            direction: 'long',
            price: ev.price,
            timeOfEvent: now,
            assumed: false,
            retrospective: false,
            autoGenerated: false,
            positionId: eventId,
            traderId: ev.traderId,
            assetId: ev.asset?.id ?? ev.assetId,
            messageId: id,
            version: 1,
          },
        },
      ]);
  };

  await sleep(2000);
  const idle = usage(pid);
  await sleep(5000);
  const idleCpuBefore = (usage(pid).cpuMs - idle.cpuMs) / 5000;
  const rows: string[][] = [];
  const delays: number[] = [];
  const afterAppend: number[] = [];
  let heldRss = Number.NaN;
  let idleCpu = Number.NaN;
  let errors = 0;
  const misses = new Map<string, number>();
  for (let round = 1; round <= rounds; round++) {
    // One at a time, as every read here: admission queues 64 reads at most.
    const heads: string[] = [];
    for (const a of accounts) heads.push((await getJson('/v2/feed?since=now', a.key)).body.data.meta.nextCursor);
    // The polls, a few at a time (each first read takes an admission slot; the account's queue is short).
    const answers: Promise<{ at: number; ok: boolean; what: string }>[] = [];
    for (let i = 0; i < polls; i++) {
      const a = i % accountCount;
      answers.push(
        held(`/v2/feed?since=${encodeURIComponent(heads[a]!)}&wait=30`, accounts[a]!.key).then(
          ({ at, status, body }) => {
            const ok = status === 200 && body?.data?.results?.length > 0;
            const what =
              status !== 200
                ? `${status} ${body?.error?.code}`
                : ok
                  ? 'group'
                  : body?.data?.meta?.removedIds?.length
                    ? 'removals only'
                    : 'empty';
            return { at, ok, what };
          },
          (err) => ({ at: performance.now(), ok: false, what: `failed: ${(err as Error).message}` }),
        ),
      );
      if (i % 10 === 9) await sleep(100);
    }
    await sleep(2000);
    if (round === 1) {
      const before = usage(pid);
      await sleep(5000);
      const after = usage(pid);
      heldRss = after.rss;
      idleCpu = (after.cpuMs - before.cpuMs) / 5000;
    }
    // Commit a group: its message first, then its event, whose commit makes the group visible (the
    // data version on /healthz moves then: it reads no store and takes no slot, asked every 2 ms).
    const appendEvent = await appendGroup(round);
    const v0 = await dataVersion();
    const tAppend = performance.now();
    appendEvent();
    let tVisible = Number.NaN;
    while (performance.now() - tAppend < 25_000) {
      if ((await dataVersion()) !== v0) {
        tVisible = performance.now();
        break;
      }
      await sleep(2);
    }
    const done = await Promise.all(answers);
    const wakes = done.filter((d) => d.ok).map((d) => d.at - tVisible);
    errors += done.length - wakes.length;
    for (const d of done) {
      if (d.ok) continue;
      const what = `${d.what} ${d.at < tAppend ? 'before' : 'after'} the commit`;
      misses.set(what, (misses.get(what) ?? 0) + 1);
    }
    delays.push(...wakes);
    afterAppend.push(...done.filter((d) => d.ok).map((d) => d.at - tAppend));
    const s = sortNum(wakes);
    rows.push([
      String(round),
      fmtMs(tVisible - tAppend),
      String(wakes.length),
      fmtMs(pct(s, 50)),
      fmtMs(pct(s, 99)),
      fmtMs(s.at(-1) ?? Number.NaN),
    ]);
    progress(
      `round ${round}: committed ${(tVisible - tAppend).toFixed(0)} ms after the append; ${wakes.length} polls answered, p99 ${fmtMs(pct(s, 99))} ms after the commit`,
    );
  }

  console.log(`${polls} long-polls (wait=30) over ${accountCount} accounts, ${rounds} commits`);
  printTable(['round', 'commit after append ms', 'answered', 'wake p50 ms', 'wake p99 ms', 'wake max ms'], rows);
  const all = sortNum(delays);
  const fromAppend = sortNum(afterAppend);
  console.log(
    `\nwake-up after the commit: p50 ${fmtMs(pct(all, 50))} ms, p99 ${fmtMs(pct(all, 99))} ms, max ${fmtMs(all.at(-1) ?? Number.NaN)} ms (goal p99 <= 200 ms)` +
      `\nanswer after the append: p50 ${fmtMs(pct(fromAppend, 50))} ms, p99 ${fmtMs(pct(fromAppend, 99))} ms` +
      `\nserver while ${polls} polls are held: resident memory ${((heldRss - idle.rss) / polls / 1024).toFixed(1)} KiB per held poll ` +
      `(${(idle.rss / 2 ** 20).toFixed(0)} MiB before, ${(heldRss / 2 ** 20).toFixed(0)} MiB held), CPU ${(idleCpu * 100).toFixed(1)} % of a core while idle (${(idleCpuBefore * 100).toFixed(1)} % before the polls)` +
      `\npolls not answered with the new group: ${errors}${misses.size ? ` (${[...misses].map(([w, n]) => `${n} ${w}`).join(', ')})` : ''}`,
  );
  console.log(
    `machine: ${cpus().length} CPUs (${cpus()[0]?.model.trim() ?? '?'}), node ${process.version}, ${platform()} ${release()}; data ${dataDir}`,
  );
} finally {
  server?.kill('SIGTERM');
  await new Promise((r) => (server && server.exitCode === null ? server.once('exit', r) : r(null)));
}
