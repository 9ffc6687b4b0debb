// Live benchmark (issue 26): a mixed read load of the three kinds of users (16 clients: lists
// filtered by random traders and assets, default first pages, feed pages and since-polls at the
// head, rankings with a random metric and window, stats of 20 random traders, asset stats,
// activity summaries, trader activity) against a real `signalbase start`, first on data that
// stands still, then while new records arrive through the streaming ingest (`signalbase ingest -`,
// one process for the whole run) at 2, 20 and 200 records/s; and how long a record takes from the
// ingest's standard input to a since-poll at the feed's head and to `/v2/events?traderIds=`.
// Usage: npx tsx bench/live.ts --help
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { cpus, platform, release } from 'node:os';
import { join, resolve } from 'node:path';
import { cursorCodec, demoKeyFile, runningServerPid } from '../apps/embedded.ts';
import { fingerprint } from '../apps/reads/cursor.ts';
import type { Principal } from '../apps/reads/principal.ts';
import { OPERATIONS } from '../apps/registry.ts';
import { EmbeddedLog } from '../projectors/log/embedded.ts';
import { benchAccounts, benchArgs, fmtMs, freePort, handlerQuery, pct, printTable, progress, sortNum } from './args.ts';

const POLL_MS = 25;
/** Concurrent probes of /v2/events, each following one sampled event at a time. */
const EVENT_PROBES = 3;
/** After a phase, how long the probes may look for what it wrote before the next phase (ms). */
const GRACE_MS = 30_000;
/** How long the bench waits for a started server's first compaction check. */
const COMPACTION_WAIT_MS = 20 * 60_000;
const USAGE = `Usage: npx tsx bench/live.ts --data-dir DIR [options]

Starts 'signalbase start --no-seed' on DIR (seed it first: node bin/signalbase.cjs seed --scale
large --data-dir DIR; the server and the ingest write to DIR: use a copy), and one streaming
'signalbase ingest - --data-dir DIR', through which it first writes one price of now for each
asset the records use (the seed's prices end when it was made; a running server's do not). Then,
per phase, --clients concurrent clients run a mixed
read load for --seconds: first static (nothing ingested), then one phase per rate of --rates
records/s piped into the ingest (per 4 records: two prices of a known asset, a new message of a
known trader's source and the open event of a new position on it). Printed per phase: req/s, p50,
p99 and cache hits (the x-cache header) in all and per read kind, the live/static ratios, the CPU
the server and the ingest used (cores: CPU seconds per second of the phase), the server's CPU by
kind of thread (its JavaScript thread, the engine's merges, the others: the store's queries; from
/proc) and how much of it was system time (in the kernel: mostly the file system creating the parts
that inserts and merges write), its CPU per answer, the projector's commits per second
(signalbase_data_version), and the freshness p50/p99/max from writing a record to the ingest's
stdin until (a) its feed group shows in a since-poll at the head and (b) its event shows in
/v2/events?traderIds=<its trader>.

Options:
  --data-dir DIR     a seeded DATA_DIR (required; the ingest appends to its log)
  --server URL       bench a server already running on DIR at URL (not started nor stopped)
  --seconds S        length of each phase (default 30)
  --rates LIST       records per second of the live phases (default 2,20,200)
  --rounds N         the static phase and the live phases N times over (default 1): each live
                     phase is compared with the static phase of its own round, and the ratios of
                     the rounds and their median are printed (runs on one machine differ by up
                     to a third in static req/s; adjacent phases share what drifts)
  --clients N        concurrent clients of the mixed load (default 16; 0: only the probes and
                     the ingest, to see what the live data costs the server by itself)
  --no-probes        no freshness probes (no freshness figures): with --clients 0, the CPU the
                     server spends on the live records alone (the projector and what it ends)
  --only KINDS       only these read kinds in the mix (comma-separated names as printed, e.g.
                     'rankings,since-poll'), to see what each costs the server (CPU per request)
  --warmup S         unmeasured load before the static phase (default 15). A server the bench
                     starts compacts its tables after its first catch-up (about a minute on a
                     fresh large seed): the bench waits for that to end before the warm-up; with
                     --server, wait for it yourself (its log says 'compaction check done')
  -h, --help         this text

BENCH_SERVER_LOG_LEVEL=error (or another pino level) runs the started server at that log level
and passes its log lines to stderr, to see what a 500 was. BENCH_SERVER_PROFILE=DIR writes the
started server's CPU profile (node --cpu-prof) into DIR when it stops.

Each client reads with an account and key of its own (bench-live-0..N-1, created through the
log at start; admission shares the server between accounts as between real users), each probe
with one more. The server runs with RATE_LIMITS=default=100000000,address=100000000 and
LOG_LEVEL=silent. Probes poll besides the clients, in every phase (static too, so that the load
is the same): a since-poll at the feed head, and ${EVENT_PROBES} probes of the events page of the
trader of a sampled event (each takes the newest event not probed yet), each every ${POLL_MS} ms; their requests are not in the figures. Results to stdout, progress to stderr.`;

const {
  values: argv,
  die,
  posInt,
} = benchArgs('bench/live', USAGE, {
  'data-dir': { type: 'string' },
  server: { type: 'string' },
  seconds: { type: 'string', default: '30' },
  rates: { type: 'string', default: '2,20,200' },
  rounds: { type: 'string', default: '1' },
  clients: { type: 'string', default: '16' },
  warmup: { type: 'string', default: '15' },
  only: { type: 'string' },
  'no-probes': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
});
if (!argv['data-dir']) die(`--data-dir is required\n\n${USAGE}`);
const dataDir = resolve(argv['data-dir']!);
if (!existsSync(join(dataDir, 'log'))) die(`${dataDir} holds no log: seed it first (node bin/signalbase.cjs seed --data-dir ${dataDir})`);
if (!existsSync(demoKeyFile(dataDir))) die(`no demo key in ${demoKeyFile(dataDir)}: seed the data dir first`);
const phaseMs = posInt('seconds', argv.seconds) * 1000;
const clients = argv.clients === '0' ? 0 : posInt('clients', argv.clients);
const warmupMs = Number(argv.warmup) * 1000;
if (!(warmupMs >= 0)) die(`--warmup takes a number of seconds (got ${argv.warmup})`);
const rates = argv.rates!.split(',').map((r) => posInt('rates', r.trim()));
const rounds = posInt('rounds', argv.rounds);
const cli = join(import.meta.dirname, '..', 'bin', 'signalbase.cjs');
const tStart = performance.now();

let server: ChildProcess | undefined;
let ingest: ChildProcess | undefined;
const children = () => [ingest, server].filter((c): c is ChildProcess => !!c && c.exitCode === null && c.signalCode === null);
process.once('SIGINT', () => {
  for (const c of children()) c.kill('SIGTERM');
  process.exit(130);
});

let base = argv.server?.replace(/\/+$/, '');
if (!base && runningServerPid(dataDir) !== null) die(`a signalbase server runs on ${dataDir}: give its URL with --server, or stop it`);
const key = readFileSync(demoKeyFile(dataDir), 'utf8').trim();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Json = any;
async function getJson(path: string, apiKey = key): Promise<Json> {
  const res = await fetch(base + path, { headers: { 'x-api-key': apiKey }, signal: AbortSignal.timeout(120_000) });
  const body = await res.json();
  if (res.status !== 200) throw new Error(`${path} answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
  return body;
}

// ---------------------------------------------------------------------------------------------
// The mixed load.

/** The first answer of each non-200 status, for the report. */
const firstErrors = new Map<number, string>();
interface Sample {
  kind: string;
  ms: number;
  status: number;
  hit: boolean;
}
interface Ids {
  traders: number[];
  assets: number[];
}
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;
const pickN = <T>(xs: readonly T[], n: number): T[] => {
  const copy = [...xs];
  for (let i = copy.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy.slice(0, n);
};
const METRICS = ['event_count', 'position_count', 'win_rate', 'avg_return', 'median_return', 'sharpe_ratio'];
const WINDOWS = ['1D', '7D', '30D'];

/** The read kinds, their weight in the mix and the path of one request (a since-poll client keeps its cursor). */
const KINDS: { kind: string; weight: number; path: (ids: Ids, c: ClientState) => string }[] = [
  { kind: 'list by trader', weight: 20, path: (ids) => `/v2/${pick(['events', 'positions', 'messages'])}?traderIds=${pick(ids.traders)}` },
  { kind: 'list by asset', weight: 12, path: (ids) => `/v2/${pick(['events', 'positions'])}?assetIds=${pick(ids.assets)}` },
  {
    kind: 'first page',
    weight: 12,
    path: () => `/v2/${pick(['events', 'positions', 'messages', 'positions/open', 'traders', 'assets'])}`,
  },
  { kind: 'feed page', weight: 6, path: () => '/v2/feed' },
  { kind: 'since-poll', weight: 14, path: (_ids, c) => `/v2/feed?since=${encodeURIComponent(c.since)}&limit=100` },
  {
    kind: 'rankings',
    weight: 8,
    path: () => `/v2/traders/rankings?metric=${pick(METRICS)}&timeBasedPerformanceWindow=${pick(WINDOWS)}`,
  },
  { kind: 'trader stats', weight: 8, path: (ids) => `/v2/traders/stats?traderIds=${pickN(ids.traders, 20).join(',')}` },
  {
    kind: 'asset stats',
    weight: 8,
    path: (ids) => `/v2/assets/stats?assetIds=${pickN(ids.assets, 1 + Math.floor(Math.random() * 5)).join(',')}`,
  },
  {
    kind: 'activity summary',
    weight: 8,
    path: () => `/v2/activity-summaries?groupBy=${pick(['trader', 'none'])}&interval=${pick(['hour', 'day'])}`,
  },
  { kind: 'trader activity', weight: 4, path: () => '/v2/traders/activity' },
];
const onlyKinds = argv.only?.split(',').map((k) => k.trim());
for (const k of onlyKinds ?? [])
  if (!KINDS.some((x) => x.kind === k)) die(`--only: no read kind '${k}' (kinds: ${KINDS.map((x) => x.kind).join(', ')})`);
const MIX = onlyKinds ? KINDS.filter((k) => onlyKinds.includes(k.kind)) : KINDS;
const TOTAL_WEIGHT = MIX.reduce((s, k) => s + k.weight, 0);
/** A client: an account of its own (admission shares the server between accounts, as between real users) and, for its since-polls, its cursor, kept from phase to phase. */
interface ClientState {
  key: string;
  since: string;
}

/** Runs the mixed load, one loop per client, until `until` (performance clock); each sample to `out` (null: warm-up). */
async function mixedLoad(ids: Ids, states: ClientState[], until: number, out: Sample[] | null): Promise<number> {
  const t0 = performance.now();
  const client = async (state: ClientState) => {
    const headers = { 'x-api-key': state.key };
    while (performance.now() < until) {
      let r = Math.random() * TOTAL_WEIGHT;
      const k = MIX.find((x) => (r -= x.weight) < 0) ?? MIX[0]!;
      const path = k.path(ids, state);
      const t = performance.now();
      let status = 0;
      let hit = false;
      try {
        const res = await fetch(base + path, { headers, signal: AbortSignal.timeout(60_000) });
        status = res.status;
        hit = res.headers.get('x-cache') === 'hit';
        if (status !== 200 && !firstErrors.has(status))
          firstErrors.set(status, `${path.slice(0, 120)}: ${(await res.text()).slice(0, 200)}`);
        else if (k.kind === 'since-poll' && status === 200) {
          const body = (await res.json()) as Json;
          state.since = body.data.meta.nextCursor ?? state.since;
        } else await res.arrayBuffer();
      } catch {
        status = 0;
      }
      out?.push({ kind: k.kind, ms: performance.now() - t, status, hit });
    }
  };
  await Promise.all(states.map(client));
  // No clients (--clients 0): the phase is the probes and the ingest alone.
  if (!states.length) await sleep(until - performance.now());
  return (performance.now() - t0) / 1000;
}

// ---------------------------------------------------------------------------------------------
// New records and freshness.

interface Writer {
  traderId: number;
  platform: string;
  sourceIdentityId: string;
  assets: { id: number; price: number }[];
}
interface Written {
  /** The phase it was written in: its freshness counts there, whenever it is seen. */
  phase: string;
  at: number;
  messageId: string;
  eventId: number;
  traderId: number;
}

/** Traders that can carry new records: a source assigned to them (from one of their messages) and assets they traded, with a price. */
async function findWriters(traders: number[], want: number): Promise<Writer[]> {
  const out: Writer[] = [];
  for (const t of pickN(traders, Math.min(traders.length, want * 4))) {
    if (out.length >= want) break;
    const msgs = (await getJson(`/v2/messages?traderIds=${t}&limit=1`)).data.results as Json[];
    const evs = (await getJson(`/v2/events?traderIds=${t}&limit=20`)).data.results as Json[];
    const assets = new Map<number, number>();
    for (const e of evs) if (typeof e.price === 'number' && e.price > 0 && e.quoteSymbol !== null) assets.set(e.assetId, e.price);
    if (!msgs.length || !assets.size) continue;
    const src = msgs[0].source;
    out.push({
      traderId: t,
      platform: src.platform,
      sourceIdentityId: src.identity.sourceIdentityId,
      assets: [...assets].map(([id, price]) => ({ id, price })),
    });
  }
  if (!out.length) throw new Error('no trader with an assigned source and a priced event: nothing to write records for');
  return out;
}

const RUN = Date.now();
let seq = 0;
/** Ids beyond any the seed uses: a run's clock in ms times 1000, plus a counter (below 2^53). */
const EVENT_BASE = RUN * 1000;
/** One unit of 4 records as NDJSON lines: two prices, a message and the open event of a new position on it. */
function unit(w: Writer): { text: string; messageId: string; eventId: number; traderId: number } {
  const n = ++seq;
  const now = new Date().toISOString();
  const a = pick(w.assets);
  const p = () => Number((a.price * (1 + (Math.random() - 0.5) * 0.002)).toPrecision(8));
  const messageId = `live-${RUN}-${n}`;
  const eventId = EVENT_BASE + n;
  const direction = Math.random() < 0.5 ? 'long' : 'short';
  const lines = [
    { topic: 'prices', value: { assetId: a.id, at: now, price: p(), version: 1 } },
    { topic: 'prices', value: { assetId: a.id, at: now, price: p(), version: 2 } },
    {
      topic: 'messages',
      value: {
        id: messageId,
        platform: w.platform,
        sourceIdentityId: w.sourceIdentityId,
        writtenAt: now,
        url: null,
        text: `${direction === 'long' ? 'Long' : 'Short'} asset ${a.id} @ ${a.price} (bench/live ${n})`,
        attachments: [],
        isEdited: false,
        isReply: false,
        isQuote: false,
        isRepost: false,
        version: 1,
      },
    },
    {
      topic: 'trade-events',
      value: {
        id: eventId,
        type: 'open',
        direction,
        price: a.price,
        timeOfEvent: now,
        assumed: false,
        retrospective: false,
        autoGenerated: false,
        positionId: eventId,
        traderId: w.traderId,
        assetId: a.id,
        messageId,
        version: 1,
      },
    },
  ];
  return { text: `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`, messageId, eventId, traderId: w.traderId };
}

/** Freshness probes: a since-poll at the feed head, and the events page of the newest unmeasured event's trader. */
class Probes {
  readonly written: Written[] = [];
  /** Message id -> written record, until its group is seen. */
  private readonly pendingGroups = new Map<string, Written>();
  /** Per record seen: from its write until seen (ms), and how long the poll that saw it took (ms). */
  feedMs: { phase: string; ms: number; pollMs: number }[] = [];
  eventMs: { phase: string; ms: number; pollMs: number }[] = [];
  private running = true;
  private loops: Promise<void>[] = [];

  /** Each probe polls with a key of its own account (the feed probe's, then each events probe's). */
  constructor(
    private since: string,
    private readonly apiKey: string,
    private readonly eventKeys: readonly string[],
  ) {}

  wrote(w: Written): void {
    this.written.push(w);
    this.unprobed.push(w);
    this.pendingGroups.set(w.messageId, w);
  }

  start(): void {
    this.running = true;
    this.loops = [this.feedLoop(), ...this.eventKeys.map((key) => this.eventLoop(key))];
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  /** The groups written in `phase` not seen, and its sampled events not seen (for the report). */
  unseen(phase: string): { groups: number; events: number } {
    return {
      groups: [...this.pendingGroups.values()].filter((w) => w.phase === phase).length,
      events: [...this.probing].filter((w) => w.phase === phase).length,
    };
  }

  /** Whether a written group or the probed event is still to be seen. */
  waiting(): boolean {
    return this.loops.length > 0 && (this.pendingGroups.size > 0 || this.probing.size > 0);
  }

  private async feedLoop(): Promise<void> {
    while (this.running) {
      let more = false;
      try {
        const sent = performance.now();
        const body = await getJson(`/v2/feed?since=${encodeURIComponent(this.since)}&limit=100`, this.apiKey);
        const now = performance.now();
        for (const g of body.data.results as Json[]) {
          const w = this.pendingGroups.get(g.id);
          if (w) {
            this.feedMs.push({ phase: w.phase, ms: now - w.at, pollMs: now - sent });
            this.pendingGroups.delete(g.id);
          }
        }
        this.since = body.data.meta.nextCursor ?? this.since;
        more = body.data.meta.hasMore === true;
      } catch (err) {
        progress(`feed probe: ${(err as Error).message}`);
        await sleep(500);
      }
      if (!more) await sleep(POLL_MS);
    }
  }

  /** Written records whose event was not probed yet, newest last; a probe takes the newest and drops the rest (sampled). */
  private unprobed: Written[] = [];
  /** The events being probed. */
  private readonly probing = new Set<Written>();

  private async eventLoop(apiKey: string): Promise<void> {
    let target: Written | undefined;
    while (this.running) {
      if (!target && this.unprobed.length) {
        target = this.unprobed.at(-1)!;
        this.unprobed = [];
        this.probing.add(target);
      }
      try {
        // With nothing to measure, the same poll (the probes' load does not depend on the phase).
        const sent = performance.now();
        const body = await getJson(`/v2/events?traderIds=${target?.traderId ?? writers[0]!.traderId}&limit=20`, apiKey);
        if (target && (body.data.results as Json[]).some((e) => String(e.id) === String(target!.eventId))) {
          const now = performance.now();
          this.eventMs.push({ phase: target.phase, ms: now - target.at, pollMs: now - sent });
          this.probing.delete(target);
          target = undefined;
          continue;
        }
      } catch (err) {
        progress(`events probe: ${(err as Error).message}`);
        await sleep(500);
      }
      await sleep(POLL_MS);
    }
    // A target still unseen stays in `probing`: the report counts it as unseen.
  }
}

// ---------------------------------------------------------------------------------------------
// Reporting.

interface PhaseResult {
  name: string;
  rate: number;
  /** Its round (--rounds): compared with the static phase of the same round. */
  round: number;
  secs: number;
  samples: Sample[];
  feedMs: number[];
  eventMs: number[];
  /** How long each seeing poll took (ms). */
  feedPollMs: number[];
  eventPollMs: number[];
  written: number;
  unseen: { groups: number; events: number };
  /** CPU seconds per second of the phase: the server's and the ingest's (null: not ours to read). */
  cpu: { server: number | null; ingest: number | null };
  /** The server's CPU seconds per second by kind of thread (threadCpu). */
  threads: ThreadCpu | null;
  /** Projector commits per second (the data version's moves). */
  commits: number | null;
}
interface Figures {
  n: number;
  rps: number;
  p50: number;
  p99: number;
  hits: number;
  errors: number;
}
function figures(samples: Sample[], secs: number): Figures {
  const ok = samples.filter((s) => s.status === 200);
  const ms = sortNum(ok.map((s) => s.ms));
  return {
    n: samples.length,
    rps: ok.length / secs,
    p50: pct(ms, 50),
    p99: pct(ms, 99),
    hits: ok.length ? ok.filter((s) => s.hit).length / ok.length : NaN,
    errors: samples.length - ok.length,
  };
}
const fmtPct = (x: number) => (Number.isFinite(x) ? `${Math.round(x * 100)} %` : '-');
const fmtRps = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '-');
const fmtX = (x: number) => (Number.isFinite(x) ? `${x.toFixed(2)}x` : '-');
const fmtS = (ms: number) => (Number.isFinite(ms) ? `${(ms / 1000).toFixed(2)} s` : '-');

/** A process's CPU time so far (user + system, s) from /proc (Linux; null elsewhere or when it is gone). */
function cpuSecs(pid: number | undefined): number | null {
  if (pid === undefined) return null;
  try {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return null;
  }
}
const perSec = (a: number | null, b: number | null, secs: number): number | null => (a === null || b === null ? null : (b - a) / secs);

/**
 * A process's CPU seconds by kind of thread (Linux /proc): its JavaScript thread (the thread whose
 * id is the process's), the engine's background merges (threads named MergeMutate), and every
 * other thread (the store's queries, which chdb runs on libuv's workers and the engine's pool, and
 * V8's helpers); null where there is no /proc.
 */
type ThreadCpu = { js: number; merges: number; other: number; kernel: number };
function threadCpu(pid: number | undefined): ThreadCpu | null {
  if (pid === undefined) return null;
  try {
    const out = { js: 0, merges: 0, other: 0, kernel: 0 };
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      let stat: string;
      let name: string;
      try {
        stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      } catch {
        continue; // the thread ended meanwhile
      }
      const f = stat.split(') ')[1]!.split(' ');
      const secs = (Number(f[11]) + Number(f[12])) / 100;
      out.kernel += Number(f[12]) / 100;
      if (tid === String(pid)) out.js += secs;
      else if (/^MergeMutate/.test(name)) out.merges += secs;
      else out.other += secs;
    }
    return out;
  } catch {
    return null;
  }
}
/** Threads' CPU per second between two readings (threads that ended between them are not counted). */
const threadsPerSec = (a: ThreadCpu | null, b: ThreadCpu | null, secs: number): ThreadCpu | null =>
  a && b
    ? {
        js: (b.js - a.js) / secs,
        merges: (b.merges - a.merges) / secs,
        other: (b.other - a.other) / secs,
        kernel: (b.kernel - a.kernel) / secs,
      }
    : null;

/** The server's data version (moves on every projector commit), from /metrics on the API port; null when not there. */
async function dataVersion(): Promise<number | null> {
  const text = await fetch(`${base}/metrics`)
    .then((r) => (r.ok ? r.text() : ''))
    .catch(() => '');
  const v = /^signalbase_data_version (\d+)/m.exec(text)?.[1];
  return v === undefined ? null : Number(v);
}

/** Waits (at most 2 minutes) until the server's projector has nothing left to project (healthz projectorLag 0). */
async function caughtUp(): Promise<void> {
  for (let i = 0; i < 1200; i++) {
    const h: Json = await fetch(`${base}/healthz`)
      .then((r) => r.json())
      .catch(() => null);
    if (h?.data?.results?.[0]?.projectorLag === 0) return;
    await sleep(100);
  }
  progress('the projector still lags after 2 minutes; measuring anyway');
}

// ---------------------------------------------------------------------------------------------

let writers: Writer[] = [];
let compactionChecked = () => {};
const firstCompactionCheck = new Promise<void>((resolve) => (compactionChecked = resolve));
try {
  if (!base) {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    progress(`starting signalbase start --no-seed on ${dataDir}, port ${port}`);
    const profile = process.env.BENCH_SERVER_PROFILE;
    server = spawn(
      process.execPath,
      [...(profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(profile)}`] : []), cli, 'start', '--no-seed'],
      {
        env: {
          ...process.env,
          DATA_DIR: dataDir,
          PORT: String(port),
          HOST: '127.0.0.1',
          LOG_LEVEL: process.env.BENCH_SERVER_LOG_LEVEL ?? 'silent',
          RATE_LIMITS: 'default=100000000,address=100000000',
        },
        // chdb reads its host process's stdin as INSERT data: the server gets none.
        stdio: ['ignore', 'pipe', 'inherit'],
      },
    );
    // The server's catch-up and compactions, in the progress (a compaction during a phase weighs on it).
    let pending = '';
    server.stdout!.setEncoding('utf8').on('data', (d: string) => {
      pending += d;
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const l of lines) {
        if (/compaction check done/.test(l)) compactionChecked();
        if (/compact|read models up to date/.test(l)) progress(`server: ${l.replace(/^\[signalbase\] /, '')}`);
        else if (process.env.BENCH_SERVER_LOG_LEVEL && l.startsWith('{')) progress(`server log: ${l.slice(0, 2000)}`);
      }
    });
  }
  for (let i = 0; ; i++) {
    const h = await fetch(`${base}/healthz`).then(
      (r) => r.status,
      () => 0,
    );
    if (h === 200) break;
    if (i > 2400 || (server && server.exitCode !== null)) throw new Error('the server did not become healthy');
    await sleep(500);
  }
  progress(`server healthy after ${((performance.now() - tStart) / 1000).toFixed(1)} s`);
  // A started server compacts the tables its catch-up loaded (OPTIMIZE ... FINAL, about a minute of
  // both cores on the large seed, once): the phases measure the server after it, not during it.
  if (server) {
    progress("waiting for the server's first compaction check (the tables a seed or catch-up left in many parts)");
    let timer: NodeJS.Timeout | undefined;
    const waited = await Promise.race([
      firstCompactionCheck.then(() => true),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), COMPACTION_WAIT_MS))),
    ]);
    clearTimeout(timer); // else the bench would not exit before it fires
    if (!waited) throw new Error(`the server's first compaction check did not end within ${COMPACTION_WAIT_MS / 60_000} minutes`);
  }
  const setupSecs = (performance.now() - tStart) / 1000;

  // Ids for the load: the directory's traders and the assets (a few pages of each).
  const ids: Ids = { traders: [], assets: [] };
  for (const [what, list] of [
    ['traders', ids.traders],
    ['assets', ids.assets],
  ] as const) {
    let cursor: string | null = null;
    for (let page = 0; page < 5; page++) {
      const body: Json = await getJson(`/v2/${what}?limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      for (const r of body.data.results as Json[]) list.push(r.id);
      cursor = body.data.meta.nextCursor;
      if (!cursor) break;
    }
  }
  if (!ids.traders.length || !ids.assets.length) throw new Error('no traders or assets in the directory');
  writers = await findWriters(ids.traders, 50);
  progress(`${ids.traders.length} traders, ${ids.assets.length} assets for the load; ${writers.length} traders carry the new records`);

  // A since-cursor at the feed head: the current watermark (from /metrics), signed as the service
  // signs a since-poll's nextCursor for the demo key (the cursor secret is in DATA_DIR).
  const metricsText = await fetch(`${base}/metrics`).then((r) => (r.ok ? r.text() : ''));
  const wm = /^signalbase_feed_watermark (\d+)/m.exec(metricsText)?.[1];
  if (wm === undefined)
    throw new Error(`${base}/metrics gives no signalbase_feed_watermark (METRICS_PORT set? the bench reads /metrics on the API port)`);
  const feedOp = OPERATIONS.find((o) => o.versions.includes('v2') && o.path === '/feed')!;
  const { since: _s, cursor: _c, limit: _l, ...filters } = handlerQuery(feedOp, new URLSearchParams('since=0&limit=100'));
  const codec = cursorCodec(dataDir);
  // A visibility as the authenticator builds it (apps/auth/keys.ts): the key order is part of the policy print.
  const all = { mode: 'all' as const, platforms: [], traderIds: [] };
  const headCursor = (accountId: string) =>
    codec.encode(
      { k: [Number(wm)] },
      fingerprint('list_feed:since', filters),
      codec.policyPrint({ accountId, messageVisibility: all, signalVisibility: all, historyWindowDays: null } as unknown as Principal),
    );

  // One account per client and per probe, all-visibility, every scope, each with a key
  // (through the log, as \`signalbase accounts create\` and \`keys create\` do; the server projects them).
  const log = new EmbeddedLog(dataDir);
  const accounts = benchAccounts(log, 'bench-live', clients + 1 + EVENT_PROBES);
  for (const a of accounts) {
    for (let i = 0; ; i++) {
      const r = await fetch(`${base}/v2/feed?since=${encodeURIComponent(headCursor(a.id))}&limit=100`, { headers: { 'x-api-key': a.key } });
      await r.arrayBuffer();
      if (r.status === 200) break;
      if (i > 200 || (r.status !== 401 && r.status !== 403))
        throw new Error(`account ${a.id}: a since-poll at the head answered ${r.status}`);
      await sleep(100);
    }
  }
  await caughtUp();
  const states: ClientState[] = accounts.slice(0, clients).map((a) => ({ key: a.key, since: headCursor(a.id) }));
  const probeAccount = accounts[clients]!;
  const eventProbeKeys = accounts.slice(clients + 1).map((a) => a.key);
  progress(`feed head: watermark ${wm}; ${accounts.length} accounts with a key each (the clients' and the probes')`);

  // The streaming ingest, one process for the whole run (static phase included: the same processes in every phase).
  ingest = spawn(process.execPath, [cli, 'ingest', '-', '--data-dir', dataDir], {
    env: { ...process.env, LOG_LEVEL: 'silent' },
    stdio: ['pipe', 'ignore', 'pipe'],
  });
  let ingestErr = '';
  ingest.stderr!.setEncoding('utf8').on('data', (d: string) => {
    ingestErr += d;
  });
  const ingestExit = new Promise<number | null>((ok) => ingest!.once('exit', (c) => ok(c)));

  // The seed's prices end when it was made. A live server's assets are priced all along: without
  // this, each asset's first live price would be the first sample after the evaluation time of a
  // day's worth of 30D windows (its tolerance), and re-evaluate them all at once. One price of now
  // for each asset the records use, before any phase, is what a server that kept running had.
  const priced = [...new Map(writers.flatMap((w) => w.assets.map((a) => [a.id, a.price] as const)))];
  const primedAt = new Date().toISOString();
  const priming = priced.map(([assetId, price]) =>
    JSON.stringify({ topic: 'prices', value: { assetId, at: primedAt, price, version: 1 } }),
  );
  ingest.stdin!.write(`${priming.join('\n')}\n`);
  await sleep(1000);
  await caughtUp();
  progress(`${priced.length} assets of the records priced at ${primedAt} (the seed's prices end when it was made)`);

  const probes = new Probes(headCursor(probeAccount.id), probeAccount.key, eventProbeKeys);
  if (!argv['no-probes']) probes.start();
  if (warmupMs > 0) {
    progress(`warm-up: ${(warmupMs / 1000).toFixed(0)} s of load, not measured`);
    await mixedLoad(ids, states, performance.now() + warmupMs, null);
  }

  const phases: PhaseResult[] = [];
  const plan = Array.from({ length: rounds }, () => [0, ...rates]).flat();
  for (const [i, rate] of plan.entries()) {
    // A rate given twice (a longer look at one rate: --rates 20,20,20), or a later round, is a phase with figures of its own.
    const base = rate === 0 ? 'static' : `live ${rate}/s`;
    const nth = plan.slice(0, i + 1).filter((r) => r === rate).length;
    const name = nth > 1 ? `${base} (${nth})` : base;
    progress(`phase ${name}: ${(phaseMs / 1000).toFixed(0)} s`);
    const samples: Sample[] = [];
    const cpu0 = { server: cpuSecs(server?.pid), ingest: cpuSecs(ingest.pid) };
    const threads0 = threadCpu(server?.pid);
    const version0 = await dataVersion();
    const t0 = performance.now();
    const until = t0 + phaseMs;
    const written0 = probes.written.length;
    // The writer: units of 4 records on schedule (catching up after a late timer), stopping a little
    // before the load does so that the last records are measured under load too.
    const writeUntil = until - Math.min(3000, phaseMs / 4);
    const writer = (async () => {
      if (!rate) return;
      const perUnitMs = 4000 / rate;
      let units = 0;
      while (performance.now() < writeUntil) {
        const due = Math.floor((performance.now() - t0) / perUnitMs) + 1;
        while (units < due) {
          const u = unit(pick(writers));
          if (!ingest!.stdin!.write(u.text)) await new Promise((ok) => ingest!.stdin!.once('drain', ok));
          probes.wrote({ phase: name, at: performance.now(), messageId: u.messageId, eventId: u.eventId, traderId: u.traderId });
          units++;
        }
        await sleep(Math.max(1, t0 + units * perUnitMs - performance.now()));
      }
    })();
    const secs = await mixedLoad(ids, states, until, samples);
    await writer;
    const cpu = {
      server: perSec(cpu0.server, cpuSecs(server?.pid), secs),
      ingest: perSec(cpu0.ingest, cpuSecs(ingest.pid), secs),
    };
    const threads = threadsPerSec(threads0, threadCpu(server?.pid), secs);
    const version1 = await dataVersion();
    const commits = version0 === null || version1 === null ? null : (version1 - version0) / secs;
    // What was written and not seen yet: up to GRACE_MS more (no load; what is still unseen then
    // counts for this phase when a later phase sees it, or as unseen).
    for (const end = performance.now() + GRACE_MS; performance.now() < end && probes.waiting(); ) await sleep(50);
    phases.push({
      name,
      rate,
      round: Math.floor(i / (rates.length + 1)) + 1,
      secs,
      samples,
      feedMs: [],
      eventMs: [],
      feedPollMs: [],
      eventPollMs: [],
      written: (probes.written.length - written0) * 4,
      unseen: { groups: 0, events: 0 },
      cpu,
      threads,
      commits,
    });
    const f = figures(samples, secs);
    progress(`${name}: ${fmtRps(f.rps)} req/s, p50 ${fmtMs(f.p50)} ms, p99 ${fmtMs(f.p99)} ms, cache hits ${fmtPct(f.hits)}`);
  }
  await probes.stop();
  for (const p of phases) {
    p.unseen = probes.unseen(p.name);
    p.feedMs = probes.feedMs.filter((x) => x.phase === p.name).map((x) => x.ms);
    p.eventMs = probes.eventMs.filter((x) => x.phase === p.name).map((x) => x.ms);
    p.feedPollMs = probes.feedMs.filter((x) => x.phase === p.name).map((x) => x.pollMs);
    p.eventPollMs = probes.eventMs.filter((x) => x.phase === p.name).map((x) => x.pollMs);
  }
  ingest.stdin!.end();
  const ingestCode = await ingestExit;
  const ingestSummary = /appended \d+ records from standard input, refused \d+ lines?/.exec(ingestErr)?.[0] ?? 'no summary';

  // --- Output
  const staticOf = (p: PhaseResult) => phases.find((s) => s.rate === 0 && s.round === p.round)!;
  const staticFigures = (p: PhaseResult) => {
    const s = staticOf(p);
    return figures(s.samples, s.secs);
  };
  console.log(
    `Mixed load, ${clients} clients, ${(phaseMs / 1000).toFixed(0)} s per phase; live phases pipe records into one \`signalbase ingest -\``,
  );
  printTable(
    [
      'phase',
      'records/s',
      'req/s',
      'p50 ms',
      'p99 ms',
      'cache hits',
      'errors',
      'req/s vs static',
      'p99 vs static',
      'CPU server',
      'CPU ingest',
    ],
    phases.map((p) => {
      const f = figures(p.samples, p.secs);
      return [
        p.name,
        p.rate ? `${(p.written / ((phaseMs - Math.min(3000, phaseMs / 4)) / 1000)).toFixed(1)}` : '0',
        fmtRps(f.rps),
        fmtMs(f.p50),
        fmtMs(f.p99),
        fmtPct(f.hits),
        String(f.errors),
        p.rate === 0 ? '-' : fmtX(f.rps / staticFigures(p).rps),
        p.rate === 0 ? '-' : fmtX(f.p99 / staticFigures(p).p99),
        p.cpu.server === null ? '-' : p.cpu.server.toFixed(2),
        p.cpu.ingest === null ? '-' : p.cpu.ingest.toFixed(2),
      ];
    }),
  );
  const statuses = phases
    .map((p) => {
      const by = new Map<number, number>();
      for (const x of p.samples) if (x.status !== 200) by.set(x.status, (by.get(x.status) ?? 0) + 1);
      return by.size ? `${p.name}: ${[...by].map(([st, n]) => `${n} x ${st || 'no answer'}`).join(', ')}` : '';
    })
    .filter(Boolean);
  if (statuses.length) console.log(`errors (not in the latencies): ${statuses.join('; ')}`);
  for (const [st, first] of firstErrors) console.log(`  first ${st}: ${first}`);
  if (rounds > 1) {
    console.log('');
    console.log(`Each live phase against the static phase of its own round (${rounds} rounds)`);
    const median = (xs: number[]) => sortNum(xs)[Math.floor((xs.length - 1) / 2)]!;
    printTable(
      ['rate', 'req/s vs static, by round', 'median', 'p99 vs static, by round', 'median'],
      [...new Set(rates)].map((rate) => {
        const live = phases.filter((p) => p.rate === rate);
        const rps = live.map((p) => figures(p.samples, p.secs).rps / staticFigures(p).rps);
        const p99 = live.map((p) => figures(p.samples, p.secs).p99 / staticFigures(p).p99);
        return [`live ${rate}/s`, rps.map(fmtX).join(' '), fmtX(median(rps)), p99.map(fmtX).join(' '), fmtX(median(p99))];
      }),
    );
  }
  console.log('');
  console.log("Where the server's CPU went (cores: CPU seconds per second), per answer, and the projector's commits per second");
  printTable(
    ['phase', 'JS thread', 'store & other threads', 'merges', 'of all: in the kernel', 'CPU ms per answer', 'commits/s'],
    phases.map((p) => {
      const f = figures(p.samples, p.secs);
      const t = p.threads;
      return [
        p.name,
        t ? t.js.toFixed(2) : '-',
        t ? t.other.toFixed(2) : '-',
        t ? t.merges.toFixed(2) : '-',
        t ? t.kernel.toFixed(2) : '-',
        p.cpu.server === null || !f.rps ? '-' : ((p.cpu.server / f.rps) * 1000).toFixed(2),
        p.commits === null ? '-' : p.commits.toFixed(1),
      ];
    }),
  );
  console.log('');
  console.log('Per read kind: req/s  p50 ms / p99 ms  cache hits (of the answers 200; x-cache: hit)');
  printTable(
    ['read', ...phases.map((p) => p.name)],
    KINDS.map((k) => [
      k.kind,
      ...phases.map((p) => {
        const f = figures(
          p.samples.filter((s) => s.kind === k.kind),
          p.secs,
        );
        return `${fmtRps(f.rps)}  ${fmtMs(f.p50)} / ${fmtMs(f.p99)}  ${fmtPct(f.hits)}${f.errors ? ` (${f.errors} err)` : ''}`;
      }),
    ]),
  );
  console.log('');
  if (argv['no-probes']) console.log('Freshness: not measured (--no-probes)');
  else {
    console.log('Freshness: from the write to the ingest stdin until seen (p50 / p99 / max; measured of written)');
    printTable(
      ['phase', 'feed since-poll', 'its poll', 'events?traderIds=', 'its poll'],
      [
        ...phases.filter((p) => p.rate),
        // With rounds, each rate's phases together too.
        ...(rounds > 1
          ? [...new Set(rates)].map((rate) => {
              const of = phases.filter((p) => p.rate === rate);
              return {
                name: `live ${rate}/s, all rounds`,
                feedMs: of.flatMap((p) => p.feedMs),
                eventMs: of.flatMap((p) => p.eventMs),
                feedPollMs: of.flatMap((p) => p.feedPollMs),
                eventPollMs: of.flatMap((p) => p.eventPollMs),
                written: of.reduce((n, p) => n + p.written, 0),
                unseen: of.reduce((u, p) => ({ groups: u.groups + p.unseen.groups, events: u.events + p.unseen.events }), {
                  groups: 0,
                  events: 0,
                }),
              };
            })
          : []),
      ].map((p) => {
        const fm = sortNum(p.feedMs);
        const em = sortNum(p.eventMs);
        const fp = sortNum(p.feedPollMs);
        const ep = sortNum(p.eventPollMs);
        const units = p.written / 4;
        return [
          p.name,
          `${fmtS(pct(fm, 50))} / ${fmtS(pct(fm, 99))} / ${fmtS(fm.at(-1) ?? NaN)}  (${fm.length} of ${units}${p.unseen.groups ? `, ${p.unseen.groups} unseen` : ''})`,
          `${fmtS(pct(fp, 50))} / ${fmtS(pct(fp, 99))}`,
          `${fmtS(pct(em, 50))} / ${fmtS(pct(em, 99))} / ${fmtS(em.at(-1) ?? NaN)}  (${em.length} sampled of ${units}${p.unseen.events ? `, ${p.unseen.events} sampled unseen` : ''})`,
          `${fmtS(pct(ep, 50))} / ${fmtS(pct(ep, 99))}`,
        ];
      }),
    );
  }
  console.log('');
  console.log(`ingest: ${ingestSummary}; exit ${ingestCode}`);
  const load = Math.round((Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]) || 0) * 100) / 100;
  console.log(
    `machine: ${cpus().length} CPUs (${cpus()[0]?.model.trim() ?? '?'}), node ${process.version}, ${platform()} ${release()}; ` +
      `data ${dataDir}; server ${argv.server ?? 'started by the bench'}; setup ${setupSecs.toFixed(1)} s, total ${((performance.now() - tStart) / 1000).toFixed(1)} s; load average ${load}`,
  );
  if (ingestCode !== 0) process.exitCode = 1;
} catch (err) {
  console.error(`bench/live: ${(err as Error).stack ?? err}`);
  process.exitCode = 1;
} finally {
  for (const c of children()) c.kill('SIGTERM');
  await Promise.all(children().map((c) => new Promise((ok) => c.once('exit', ok))));
}
