// Issue 6: the read-model layout (statement tables, storage/statements.ts) must stay idempotent
// under replay and lose and duplicate nothing when the projector is killed at any point.
//
// A seeded record set (test/projectors/crash-records.ts: a slice of the small demo data plus every
// kind of change: new versions of events moving them in time, to other traders, assets, types,
// directions and positions, deleted and re-created opens and closes, edited, moved, deleted and
// re-created messages, deleted and re-created traders, versions arriving out of order, exact
// duplicates and replayed blocks) is written to an embedded log in three parts. The projector runs
// in a child process (test/helpers/crash-child.ts: chdb holds one data directory per process) that
// is SIGKILLed again and again, with seeded batch sizes: by the test after a seeded delay (landing
// anywhere, inside chdb inserts too) or right after its start, or by itself at a chosen point
// (between the two inserts of a trade-events batch, between an insert and its offset commit, right
// after a commit, as a batch starts). Each restart continues from the committed offsets; a last run
// catches up. Then this process opens the same chdb path and walks every list read page by page
// with several filters, comparing each walk with the brute-force oracle (test/oracle/oracle.ts; the
// analytics reads with test/oracle/analytics.ts), with
// a control database projected in one uninterrupted run, and, after resetting the projector's
// offsets to 0 and projecting the whole log again, with itself. Two last cases state, on batches of
// a few records, the two ways the walks were first seen to go wrong.
//
// CRASH_SEED=<n> runs another seed (records, kill points, batch sizes; printed with every line of
// the run log); CRASH_KEEP=1 keeps the data directory for inspection.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ALL, createKey, putAccount } from '../../apps/admin.ts';
import { buildApi } from '../../apps/api/server.ts';
import { ApiKeyAuthenticator } from '../../apps/auth/keys.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { EmbeddedLog } from '../../projectors/log/embedded.ts';
import { applyBatch, migrateReadModels, PROJECTOR_GROUP } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import { SCOPES, TOPIC_NAMES, type TopicName, topicByName } from '../../schemas/topics/index.ts';
import { type ChdbStore, openChdbStore } from '../../storage/chdb.ts';
import { REPO_ROOT } from '../helpers/cli.ts';
import type { Harness } from '../helpers/harness.ts';
import { prng } from '../helpers/prng.ts';
import * as A from '../oracle/analytics.ts';
import * as F from '../oracle/feed.ts';
import { type Ep, expectedFor as expectedList, PATH } from '../oracle/lists.ts';
import * as O from '../oracle/oracle.ts';
import { expectSameList, type Params, walk } from '../oracle/walk.ts';
import { buildRecords, NEW_POSITIONS_FROM, TRADERS } from './crash-records.ts';

const SEED = Number(process.env.CRASH_SEED ?? 60_906);
const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const ALL_TIME = '2000-01-01T00:00:00.000Z';
const iso = (t: number) => new Date(t).toISOString();
const CHILD = 'test/helpers/crash-child.ts';

/** Runs SIGKILLed before they caught up, before the final run (the data is topped up with replayed blocks if need be). */
const KILL_RUNS = 28;
const BATCH_SIZES = [7, 16, 16, 40, 40, 100, 300];
/**
 * Self-kill points (crash-child.ts) of the phases every run must have seen: between a trade batch's
 * inserts, after its events before their roll-up, after a roll-up, before a batch's first write,
 * after a messages insert before its roll-up.
 */
const REQUIRED_POINTS = ['write-1-trade-events', 'events', 'activity_rollup', 'start-trade-events', 'write-1-messages', 'start-messages'];
/** CRASH_KEEP=1 keeps the data directory (log, offsets, chdb with the databases signalbase and control) for inspection. */
const KEEP = process.env.CRASH_KEEP === '1';

// ---------------------------------------------------------------------------------------------------
// The projector child

type Phase =
  | 'start-up'
  | 'between batches'
  | 'in a batch before its first write'
  | 'between the inserts of a trade-events batch'
  | 'after the events insert, before the activity roll-up'
  | 'after the messages insert, before the activity roll-up'
  | 'in the activity roll-up'
  | 'after the activity roll-up, before the commit'
  | 'after another insert, before the commit';

interface Run {
  n: number;
  maxBatch: number;
  mode: string;
  toReadyMs: number | null;
  ms: number;
  signal: NodeJS.Signals | null;
  code: number | null;
  caughtUp: boolean;
  phase: Phase;
  topic: string | null;
  lines: number;
}

/** Where a child died, from the last lines it printed. */
function phaseOf(lines: string[]): { phase: Phase; topic: string | null } {
  const steps = lines.filter((l) => /^(b|w|c) /.test(l));
  const b = steps.findLastIndex((l) => l.startsWith('b '));
  const topic = b === -1 ? null : steps[b]!.split(' ')[1]!;
  const last = steps.at(-1);
  if (!last) return { phase: 'start-up', topic };
  if (last.startsWith('c ')) return { phase: 'between batches', topic };
  const writes = steps.length - 1 - b;
  if (writes === 0) return { phase: 'in a batch before its first write', topic };
  // A trade-events batch marks itself in trade_batch, writes performance rows (when a position
  // changed what it is evaluated on), positions, open_positions, the feed, events, then marks itself
  // done; a trade-events or messages batch then rolls its activity up (hours, days, then the mark
  // in activity_rollup).
  if (last.startsWith('w activity_rollup ')) return { phase: 'after the activity roll-up, before the commit', topic };
  if (last.startsWith('w activity_')) return { phase: 'in the activity roll-up', topic };
  const eventsWritten = steps.slice(b + 1).some((l) => l.startsWith('w events '));
  if (topic === 'trade-events')
    return {
      phase: eventsWritten ? 'after the events insert, before the activity roll-up' : 'between the inserts of a trade-events batch',
      topic,
    };
  if (topic === 'messages') return { phase: 'after the messages insert, before the activity roll-up', topic };
  return { phase: 'after another insert, before the commit', topic };
}

interface Kill {
  afterProjectingMs?: number;
  afterGoMs?: number;
  at?: string;
}

/**
 * A projector child that has loaded its modules (the slow part of a start: about 2 s) and waits for
 * its go line before it opens the store: the next run's child warms up while the current one runs.
 */
class Child {
  private readonly child: ChildProcess;
  private out = '';
  private err = '';
  private readonly loaded: Promise<void>;
  private readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private onOut: (() => void) | undefined;

  constructor(dataDir: string, chdb: string) {
    this.child = spawn(process.execPath, ['--import', 'tsx', CHILD, '--data-dir', dataDir, '--chdb', chdb, '--wait'], {
      cwd: REPO_ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stdout!.setEncoding('utf8').on('data', (d: string) => {
      this.out += d;
      this.onOut?.();
    });
    this.child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      this.err += d;
    });
    this.closed = new Promise((resolve) => this.child.on('close', (code, signal) => resolve({ code, signal })));
    this.loaded = new Promise((resolve, reject) => {
      const check = () => {
        if (this.out.startsWith('loaded\n')) resolve();
      };
      this.onOut = check;
      this.closed.then(({ code, signal }) => reject(new Error(`crash child exited before loading (${code ?? signal}): ${this.err}`)));
    });
    this.loaded.catch(() => {}); // awaited (and reported) by run(); a dismissed child needs no handler
  }

  private kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }

  /**
   * Runs it once: `kill.afterGoMs` / `kill.afterProjectingMs` SIGKILL it that long after its go
   * line / after it subscribed; `kill.at` makes it SIGKILL itself (crash-child.ts --kill-at); no
   * kill: it runs until it has caught up.
   */
  async run(n: number, maxBatch: number, kill: Kill = {}): Promise<Run & { stdout: string; stderr: string }> {
    await this.loaded;
    const timers: NodeJS.Timeout[] = [];
    const go = Date.now();
    let ready: number | null = null;
    let armed = false;
    this.onOut = () => {
      if (ready === null && /^ready$/m.test(this.out)) ready = Date.now();
      if (!armed && kill.afterProjectingMs !== undefined && /^projecting$/m.test(this.out)) {
        armed = true;
        timers.push(setTimeout(() => this.kill(), kill.afterProjectingMs));
      }
    };
    this.child.stdin!.write(`go ${maxBatch} ${kill.at ?? '-'}\n`);
    if (kill.afterGoMs !== undefined) timers.push(setTimeout(() => this.kill(), kill.afterGoMs));
    timers.push(setTimeout(() => this.kill(), 60_000)); // a hung child fails its run instead of the whole file
    const { code, signal } = await this.closed;
    for (const t of timers) clearTimeout(t);
    const lines = this.out.split('\n').filter(Boolean);
    const mode = kill.at
      ? `self-kill at ${kill.at}`
      : kill.afterGoMs !== undefined
        ? `SIGKILL ${kill.afterGoMs} ms after start`
        : kill.afterProjectingMs !== undefined
          ? `SIGKILL ${kill.afterProjectingMs} ms into projecting`
          : 'to the end';
    return {
      n,
      maxBatch,
      mode,
      toReadyMs: ready === null ? null : ready - go,
      ms: Date.now() - go,
      code,
      signal,
      caughtUp: lines.includes('caught-up'),
      ...phaseOf(lines),
      lines: lines.length,
      stdout: this.out,
      stderr: this.err,
    };
  }

  /** A child that was never told to go: it exits without touching anything. */
  async dismiss(): Promise<void> {
    this.child.stdin!.end();
    await this.closed;
  }
}

// ---------------------------------------------------------------------------------------------------
// Reads

interface Query {
  ep: Ep;
  params: Params;
  limit: number;
}
const expectedFor = (w: O.World, { ep, params }: Query, serverTime: number): any[] => expectedList(ep, w, params, serverTime);

const label = (q: Query) =>
  `${PATH[q.ep]}?${new URLSearchParams(Object.entries(q.params).map(([k, v]) => [k, String(v)])).toString()} limit ${q.limit}`;

/** A fastify app on a store, with a fixed clock: every walk of every store sees the same serverTime. */
let apiVersions = 0;
async function apiOn(store: ChdbStore, serverTime: number): Promise<{ app: FastifyInstance; h: Harness }> {
  const version = ++apiVersions; // a data version of its own: what reads keep per version (apps/reads/facts.ts) starts afresh
  const app = buildApi({
    store,
    auth: new ApiKeyAuthenticator(store, new MemoryCache()),
    dataVersion: () => version,
    clock: () => serverTime,
  });
  await app.ready();
  const h = {
    async get(url: string, key?: string) {
      const res = await app.inject({ method: 'GET', url, headers: key ? { 'x-api-key': key } : {} });
      return { status: res.statusCode, body: res.json(), headers: res.headers };
    },
  } as unknown as Harness;
  return { app, h };
}

// ---------------------------------------------------------------------------------------------------

const t0 = Date.now();
const NOW = Math.floor(t0 / 1000) * 1000;
/** The apps' clock: events and messages end 30 minutes before NOW, price samples 5 minutes before. */
const SERVER_TIME = NOW;
/** The crash account's policy, for the analytics oracle: every visibility, no history window. */
const A_ALL = O.OPEN_POLICY;
let dataDir: string;
let chdbPath: string;
let records: O.TopicRec[];
let w: O.World;
let kinds: Record<string, number>;
let deletedTrader: number;
let recreatedTrader: number;
let key: string;
let store: ChdbStore;
let control: ChdbStore;
const apps: FastifyInstance[] = [];
const runs: Run[] = [];
let queries: Query[];
/** Walk rows per query label, after the kills. */
const afterKills = new Map<string, any[]>();

/** Every walk of `queries` on one store, each compared with the oracle; returns the rows per query. */
/**
 * Every walk of `queries` on one store, each compared with the oracle. Returns the rows per query
 * and one message per walk that failed (all walks run, so that a failure shows every read it hits).
 */
async function walkAll(h: Harness, what: string): Promise<{ rows: Map<string, any[]>; errors: string[] }> {
  const rows = new Map<string, any[]>();
  const errors: string[] = [];
  for (const q of queries) {
    try {
      const wk = await walk(h, key, PATH[q.ep], q.params, q.limit);
      rows.set(label(q), wk.rows);
      expect(Date.parse(wk.first.serverTime)).toBe(SERVER_TIME);
      expectSameList(`${what}: ${label(q)}`, wk.rows, expectedFor(w, q, SERVER_TIME));
    } catch (err) {
      errors.push((err as Error).message);
    }
  }
  return { rows, errors };
}

/** Walks of two states that differ: one line per query (missing, extra, or the first differing row). */
function differences(a: Map<string, any[]>, b: Map<string, any[]>, what: string): string[] {
  const out: string[] = [];
  for (const [k, rows] of a) {
    const other = b.get(k);
    if (!other) continue; // that walk failed outright: reported with the oracle comparison
    const d = O.diff(rows, other);
    if (d) {
      const ids = new Set(other.map((x) => x.id));
      const mine = new Set(rows.map((x) => x.id));
      out.push(
        `${what}: ${k}: ${d}; only here ${JSON.stringify(
          rows
            .filter((x) => !ids.has(x.id))
            .map((x) => x.id)
            .slice(0, 10),
        )}, only there ${JSON.stringify(
          other
            .filter((x) => !mine.has(x.id))
            .map((x) => x.id)
            .slice(0, 10),
        )}`,
      );
    }
  }
  return out;
}

function say(line: string): void {
  process.stdout.write(`[crash seed ${SEED}] ${line}\n`);
}

beforeAll(async () => {
  const r = prng(SEED);
  dataDir = mkdtempSync(join(tmpdir(), 'signalbase-crash-'));
  chdbPath = join(dataDir, 'chdb');
  const built = buildRecords(NOW, r);
  records = built.records;
  kinds = built.kinds;
  deletedTrader = built.gone;
  recreatedTrader = built.back;
  w = O.buildWorld(records);

  // The log: an account and a key first, then the records in three parts (appended between runs).
  const log = new EmbeddedLog(dataDir, 20);
  putAccount(log, {
    id: 'crash',
    status: 'active',
    emailVerified: true,
    messageVisibility: ALL,
    signalVisibility: ALL,
    historyWindowDays: null,
  });
  key = createKey(log, 'crash', SCOPES).key;
  const byTopic = new Map<TopicName, O.TopicRec[]>();
  for (const rec of records) (byTopic.get(rec.topic) ?? byTopic.set(rec.topic, []).get(rec.topic)!).push(rec);
  const parts: [TopicName, { key: string; value: unknown }[]][][] = [[], [], []];
  for (const [topic, recs] of byTopic) {
    const cut1 = Math.floor(recs.length * 0.55);
    const cut2 = Math.floor(recs.length * 0.85);
    const keyed = recs.map((x) => ({ key: topicByName.get(topic)!.key(x.value), value: x.value }));
    parts[0]!.push([topic, keyed.slice(0, cut1)]);
    parts[1]!.push([topic, keyed.slice(cut1, cut2)]);
    parts[2]!.push([topic, keyed.slice(cut2)]);
  }
  const appendPart = (i: number) => {
    for (const [topic, recs] of parts[i]!) log.appendSync(topic, recs);
  };
  const appendAt = [0, 9, 16];
  let appended = 0;
  say(
    `${records.length} records (${Object.entries(kinds)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')})`,
  );

  // Kill runs. Self-kills aim at a point the current topic can reach, preferring one not hit yet.
  const offsets = () => log.readOffsets(PROJECTOR_GROUP);
  const currentTopic = () => TOPIC_NAMES.find((t) => (offsets()[t] ?? 0) < log.completeEnd(t)) ?? null;
  const hit = new Set<string>();
  // The next run's child warms up (loads its modules) while the current one runs; it is told to go
  // only once the current one is gone. (One spare: on a small machine two starve the running one.)
  let spare = new Child(dataDir, chdbPath);
  const start = async (n: number, maxBatch: number, kill?: Kill) => {
    const child = spare;
    spare = new Child(dataDir, chdbPath);
    return child.run(n, maxBatch, kill);
  };
  /**
   * A replay: a contiguous block of trade events and of messages appended again, exactly as they
   * are on the log (what a producer retrying after a timeout does). Used when the projector has
   * consumed everything before the kill runs are done; the oracle gets the same records.
   */
  const replayBlock = () => {
    for (const [topic, n] of [
      ['trade-events', 300],
      ['messages', 100],
    ] as const) {
      const recs = byTopic.get(topic)!;
      const from = r.int(0, recs.length - n);
      const block = recs.slice(from, from + n).map((x) => structuredClone(x));
      log.appendSync(
        topic,
        block.map((x) => ({ key: topicByName.get(topic)!.key(x.value), value: x.value })),
      );
      records = [...records, ...block]; // a new array: the oracle caches its world per array
      kinds[`replayed-block:${topic}`] = (kinds[`replayed-block:${topic}`] ?? 0) + 1;
    }
  };
  /**
   * A block of trade events stated again with their newest version + 1 and nothing else changed:
   * the projector writes their events again (an exact replay writes nothing), so the trade-events
   * kill points stay reachable once the parts are consumed; the oracle's world is the same.
   */
  const restateBlock = () => {
    const newest = new Map<number, O.TopicRec>();
    for (const x of records)
      if (x.topic === 'trade-events' && (newest.get(x.value.id)?.value.version ?? -1) <= x.value.version) newest.set(x.value.id, x);
    const events = [...newest.values()];
    const from = r.int(0, Math.max(0, events.length - 100));
    const block = events
      .slice(from, from + 100)
      .map((x) => ({ topic: x.topic, value: { ...structuredClone(x.value), version: x.value.version + 1 } }));
    log.appendSync(
      'trade-events',
      block.map((x) => ({ key: topicByName.get('trade-events')!.key(x.value), value: x.value })),
    );
    records = [...records, ...block];
    kinds['restated-block:trade-events'] = (kinds['restated-block:trade-events'] ?? 0) + 1;
  };
  const missingRequired = () => REQUIRED_POINTS.filter((p) => !hit.has(p));
  let kills = 0;
  try {
    // Until the kill runs are done and every required point was reached (a required point of
    // trade events may still be missing once they are all projected: restated blocks bring it back).
    for (let i = 0; (kills < KILL_RUNS || missingRequired().length) && i < 3 * KILL_RUNS; i++) {
      // The next part of the log is appended once the projector has caught up, or when its turn
      // comes; with every part consumed, a replayed block gives the remaining kill runs work.
      if (currentTopic() === null || (appended < appendAt.length && appendAt[appended]! <= i)) {
        if (appended < appendAt.length) appendPart(appended++);
        else if (missingRequired().some((p) => p.includes('trade-events') || p === 'events')) restateBlock();
        else replayBlock();
      }
      // Runs that start in the small topics before messages and trade events take big batches and go on quickly.
      const topic = currentTopic();
      const hot = topic === 'messages' || topic === 'trade-events';
      const maxBatch = hot ? r.pick(BATCH_SIZES) : 300;
      const points =
        topic === 'trade-events'
          ? ['write-1-trade-events', 'write-2-trade-events', 'events', 'activity_rollup', 'start-trade-events', 'write', 'commit']
          : topic === 'messages'
            ? ['write-1-messages', 'activity_rollup', 'start-messages', 'write', 'commit']
            : ['write', 'commit'];
      const fresh = points.filter((p) => !hit.has(p));
      let kill: Kill;
      if (i === 1 || i === 9)
        kill = { afterGoMs: r.int(0, 400) }; // during start-up (chdb open, migration) or just after
      else if (!hot && !hit.has('write-1-messages'))
        kill = { at: 'write-1-messages:1' }; // as soon as it gets there
      else if (!hot && !hit.has('start-messages')) kill = { at: 'start-messages:1' };
      else if (!hot) kill = r.chance(0.5) ? { afterProjectingMs: r.int(20, 200) } : { at: `${r.pick(points)}:${r.int(2, 12)}` };
      // The points whose phases the test below requires, each once as soon as its topic runs; then kills at random.
      else if (fresh.some((p) => REQUIRED_POINTS.includes(p))) kill = { at: `${fresh.find((p) => REQUIRED_POINTS.includes(p))}:1` };
      else if (i % 2 === 0)
        kill = { afterProjectingMs: r.int(3, 250) }; // anywhere: in a query, an insert, the commit
      else {
        const point = fresh.length ? r.pick(fresh) : r.pick(points);
        kill = { at: `${point}:${r.int(1, point === 'write' || point === 'commit' ? 6 : 3)}` };
      }
      const run = await start(i, maxBatch, kill);
      runs.push(run);
      const self = /^self-kill ([\w-]+):/m.exec(run.stdout);
      if (self) hit.add(self[1]!);
      if (run.signal !== 'SIGKILL' && !run.caughtUp)
        throw new Error(`kill run ${i} ended with ${run.code ?? run.signal}\n${run.stdout.slice(-3000)}\n${run.stderr}`);
      if (run.signal === 'SIGKILL' && !run.caughtUp) kills++;
    }
    while (appended < appendAt.length) appendPart(appended++);
    const last = await start(runs.length, r.pick(BATCH_SIZES));
    runs.push(last);
    if (!last.caughtUp || last.code !== 0)
      throw new Error(`the final run did not catch up (${last.code ?? last.signal})\n${last.stdout.slice(-3000)}\n${last.stderr}`);
  } finally {
    await spare.dismiss();
  }
  for (const run of runs)
    say(
      `run ${run.n}: ${run.ms} ms (ready after ${run.toReadyMs}), batch ${run.maxBatch}, ${run.mode}: ${run.signal ?? `exit ${run.code}`}, ${run.caughtUp ? 'caught up' : `${run.phase}${run.topic ? ` (${run.topic})` : ''}`}`,
    );
  say(`kill runs took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
  w = O.buildWorld(records);

  // The children are gone: this process opens the chdb path (the only one it ever opens). The
  // control database gets the same log projected by one uninterrupted run (its own consumer group).
  store = await openChdbStore(chdbPath);
  control = await openChdbStore(chdbPath, 'control');
  await migrateReadModels(control, () => log.writeOffsets('control', {}));
  const controlSession = new ProjectorSession(control);
  const sub = log.subscribe('control', TOPIC_NAMES, async (b) => {
    await applyBatch(controlSession, b);
  });
  await sub.caughtUp();
  await sub.stop();

  const touchedPositions = [
    ...new Set(records.filter((x) => x.topic === 'trade-events' && x.value.version > 1).map((x) => x.value.positionId)),
  ].slice(0, 200); // the most positionIds a request takes
  const touchedMessages = [...new Set(records.filter((x) => x.topic === 'messages' && x.value.version > 1).map((x) => x.value.id))].slice(
    0,
    400,
  );
  queries = [
    { ep: 'events', params: {}, limit: 61 },
    { ep: 'events', params: { startTime: ALL_TIME }, limit: 200 },
    { ep: 'events', params: { startTime: ALL_TIME, traderIds: '3,7,9,11,13', types: 'open,close' }, limit: 23 },
    { ep: 'events', params: { startTime: ALL_TIME, assetIds: '1,2,3,20,22,28,40', directions: 'short' }, limit: 17 },
    { ep: 'events', params: { startTime: iso(NOW - 40 * DAY), endTime: iso(NOW - 10 * DAY), types: 'increase,decrease,close' }, limit: 29 },
    { ep: 'positions', params: { startTime: ALL_TIME }, limit: 200 },
    { ep: 'positions', params: { startTime: ALL_TIME, traderIds: '2,3,8,12', directions: 'long' }, limit: 19 },
    { ep: 'positions', params: { positionIds: touchedPositions.join(',') }, limit: 13 },
    { ep: 'open', params: {}, limit: 41 },
    { ep: 'open', params: { traderIds: '2,3,9,13' }, limit: 7 },
    { ep: 'messages', params: {}, limit: 53 },
    { ep: 'messages', params: { startTime: ALL_TIME }, limit: 200 },
    { ep: 'messages', params: { startTime: ALL_TIME, traderIds: '1,2,4,9,12', sourcePlatforms: 'TELEGRAM' }, limit: 19 },
    { ep: 'messages', params: { ids: touchedMessages.join(',') }, limit: 11 },
    { ep: 'traders', params: {}, limit: 37 },
    { ep: 'traders', params: { sourcePlatforms: 'X', search: 'a' }, limit: 11 },
    { ep: 'assets', params: {}, limit: 13 },
    { ep: 'assets', params: { traderIds: TRADERS.join(',') }, limit: 7 },
  ];
}, 240_000);

afterAll(async () => {
  for (const app of apps) await app.close();
  await store?.close();
  await control?.close();
  if (dataDir && !KEEP) rmSync(dataDir, { recursive: true, force: true });
  if (KEEP) say(`kept ${dataDir}`);
  say(`total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});

describe('issue 6: killed anywhere, the projector loses and duplicates nothing', () => {
  it('the records exercise every path: moved, re-typed, deleted and re-created events, edits, out-of-order versions, duplicates', () => {
    for (const k of [
      'event:time',
      'event:time-tie',
      'event:trader',
      'event:asset',
      'event:type',
      'event:direction',
      'event:price',
      'event:move-same-key',
      'event:move-and-time',
      'event:move-new-position',
      'event:delete',
      'event:open-recreated',
      'event:close-recreated',
      'event:chain',
      'event:out-of-order',
      'touch-old-position',
      'message:edit',
      'message:edit-and-time',
      'message:move-source',
      'message:delete',
      'message:recreated',
      'message:chain',
      'message:out-of-order',
      'trader:deleted',
      'trader:recreated',
      'duplicate:trade-events',
      'duplicate:messages',
      'replayed-block:trade-events',
      'replayed-block:messages',
    ]) {
      expect(kinds[k] ?? 0, k).toBeGreaterThan(0);
    }
    // What the oracle makes of them: positions that died, revived ones, new ones, deleted and re-created traders.
    expect(w.deleted.positions.size).toBeGreaterThan(5);
    expect([...w.positions.keys()].some((id) => id > NEW_POSITIONS_FROM)).toBe(true);
    expect(w.deleted.traders.has(deletedTrader)).toBe(true);
    expect(w.traders.has(recreatedTrader)).toBe(true);
    expect(w.deleted.events.size).toBeGreaterThan(20);
    expect(w.deleted.messages.size).toBeGreaterThan(5);
    const evs = records.filter((x) => x.topic === 'trade-events');
    const seen = new Set<string>();
    expect(
      evs.filter((x) => {
        const k = JSON.stringify(x.value);
        return seen.has(k) || (seen.add(k), false);
      }).length,
    ).toBeGreaterThan(30);
  });

  it('the projector was killed many times, at every kind of point, and continued each time from its committed offsets', () => {
    const killed = runs.filter((x) => x.signal === 'SIGKILL');
    expect(killed.length).toBeGreaterThanOrEqual(15);
    const phases = new Set(killed.map((x) => x.phase));
    for (const p of [
      'between the inserts of a trade-events batch',
      'after the messages insert, before the activity roll-up',
      'in a batch before its first write',
    ] as Phase[]) {
      expect(phases.has(p), `no kill landed ${p}`).toBe(true);
    }
    // After a trade batch's events are written: before its roll-up, in it, or after it (which of them
    // a run reaches depends on timing; test/projectors/activity-rollup.test.ts stops a batch right
    // before its roll-up every time).
    const afterEvents: Phase[] = [
      'after the events insert, before the activity roll-up',
      'in the activity roll-up',
      'after the activity roll-up, before the commit',
    ];
    expect(
      killed.some((x) => x.topic === 'trade-events' && afterEvents.includes(x.phase)),
      'no kill landed after the events insert of a trade-events batch',
    ).toBe(true);
    for (const topic of ['trade-events', 'messages']) {
      expect(
        killed.some((x) => x.topic === topic && x.phase === 'in a batch before its first write'),
        `no kill landed in a ${topic} batch before its first write`,
      ).toBe(true);
    }
    expect(killed.filter((x) => x.mode.includes('ms into projecting')).length, 'kills at random moments').toBeGreaterThanOrEqual(4);
  });

  it('after the kills, every walk of every list read equals the oracle exactly', async () => {
    const { app, h } = await apiOn(store, SERVER_TIME);
    apps.push(app);
    const { rows, errors } = await walkAll(h, 'after the kills');
    for (const [k, v] of rows) afterKills.set(k, v);
    expect(errors.join('\n\n')).toBe('');
    // The walks are not trivially empty.
    expect(afterKills.get(label(queries[1]!))!.length).toBeGreaterThan(1000);
    expect(afterKills.get(label(queries[5]!))!.length).toBeGreaterThan(200);
  }, 60_000);

  it('after the kills, the analytics reads (issue 7) equal the analytics oracle', async () => {
    const { app, h } = await apiOn(store, SERVER_TIME);
    apps.push(app);
    const assets = [...new Set(records.filter((x) => x.topic === 'assets').map((x) => x.value.id as number))].slice(0, 200).join(',');
    const everything = { startTime: ALL_TIME, endTime: iso(SERVER_TIME) };
    const cases: [string, A.Query, (q: A.Query) => A.Answer][] = [
      ['/v2/traders/stats', { traderIds: TRADERS.join(',') }, (q) => A.traderStats(records, q, A_ALL, SERVER_TIME)],
      ['/v2/assets/stats', { assetIds: assets }, (q) => A.assetStats(records, q, A_ALL, SERVER_TIME)],
      ...['event_count', 'position_count', 'win_rate', 'avg_return', 'median_return', 'sharpe_ratio'].map(
        (metric) =>
          [
            '/v2/traders/rankings',
            { metric, minPositions: 0, limit: 50, timeBasedPerformanceWindow: '1D', ...everything },
            (q: A.Query) => A.rankings(records, q, A_ALL, SERVER_TIME),
          ] as [string, A.Query, (q: A.Query) => A.Answer],
      ),
      [
        '/v2/activity-summaries',
        { groupBy: 'trader', interval: 'week', limit: 50, startTime: iso(SERVER_TIME - 160 * DAY) },
        (q) => A.activitySummaries(records, q, A_ALL, SERVER_TIME),
      ],
      [
        '/v2/activity-summaries',
        { groupBy: 'none', interval: 'day', startTime: iso(SERVER_TIME - 150 * DAY) },
        (q) => A.activitySummaries(records, q, A_ALL, SERVER_TIME),
      ],
      ['/v2/traders/activity', { minPositionCount: 0, limit: 200 }, (q) => A.traderActivity(records, q, A_ALL, SERVER_TIME)],
    ];
    const problems: string[] = [];
    for (const [path, q, oracle] of cases) {
      const url = `${path}?${new URLSearchParams(Object.entries(q).map(([k, v]) => [k, String(v)])).toString()}`;
      const res = await h.get(url, key);
      const want = oracle(q);
      expect(want.status, url).toBe(200);
      if (res.status !== 200) {
        problems.push(`${url}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
        continue;
      }
      const exp = (want as { data: any }).data;
      // Trader activity: the oracle answers the whole list, here on one page (limit 200).
      const d =
        path === '/v2/traders/activity'
          ? A.diff([res.body.data.results, res.body.data.meta.hasMore], [exp.results, false])
          : A.diff(res.body.data, exp);
      if (d) problems.push(`${url}: ${d}`);
    }
    expect(problems.join('\n')).toBe('');
  }, 60_000);

  it('after the kills, the feed (issue 8) equals the feed oracle, and a since-poll from 0 holds exactly the same groups', async () => {
    const { app, h } = await apiOn(store, SERVER_TIME);
    apps.push(app);
    const pages: any[] = [];
    let cursor = '';
    for (let i = 0; i < 10_000; i++) {
      const res = await h.get(`/v2/feed?limit=100&startTime=${ALL_TIME}${cursor}`, key);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      pages.push(...res.body.data.results);
      if (!res.body.data.meta.hasMore) break;
      cursor = `&cursor=${res.body.data.meta.nextCursor}`;
    }
    const want = F.feed(records);
    expect(want.length).toBeGreaterThan(100);
    expect(pages).toEqual(want);
    const held = new Map<string, any>();
    let since = '0';
    for (let i = 0; i < 10_000; i++) {
      const res = await h.get(`/v2/feed?since=${since}&limit=100`, key);
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      for (const g of res.body.data.results) held.set(g.id, g);
      for (const id of res.body.data.meta.removedIds) held.delete(id);
      since = res.body.data.meta.nextCursor;
      if (!res.body.data.meta.hasMore) break;
    }
    expect([...held.values()].sort((a, b) => (a.id < b.id ? -1 : 1))).toEqual([...want].sort((a, b) => (a.id < b.id ? -1 : 1)));
  }, 60_000);

  it('the control (the same log projected in one uninterrupted run) gives the same walks and the same current statements', async () => {
    const { app, h } = await apiOn(control, SERVER_TIME);
    apps.push(app);
    const { rows, errors } = await walkAll(h, 'control');
    const problems = [...errors, ...differences(afterKills, rows, 'after the kills vs the control')];
    // Beyond the reads: the current statement of every live row is the same in both databases.
    for (const [table, cols] of [
      ['events_current', 'id, positionId, traderId, assetId, type, direction, price, timeOfEvent, version, deleted'],
      ['positions_current', 'id, traderId, assetId, direction, openAt, openPrice, isOpen, closedAt, deleted'],
      ['messages_current', 'id, platform, sourceIdentityId, writtenAt, text, version, deleted'],
    ] as const) {
      const sql = `SELECT ${cols} FROM $db.${table} WHERE live = 1 ORDER BY id`;
      const [a, b] = await Promise.all([store.query<{ id: unknown }>(sql), control.query<{ id: unknown }>(sql)]);
      const d = O.diff(a, b);
      if (d) {
        const ak = new Set(a.map((x) => JSON.stringify(x)));
        const bk = new Set(b.map((x) => JSON.stringify(x)));
        problems.push(
          `${table} (live rows), after the kills vs the control: ${d}; only after the kills: ${a
            .filter((x) => !bk.has(JSON.stringify(x)))
            .slice(0, 5)
            .map((x) => JSON.stringify(x))
            .join(' ')}` +
            `; only in the control: ${b
              .filter((x) => !ak.has(JSON.stringify(x)))
              .slice(0, 5)
              .map((x) => JSON.stringify(x))
              .join(' ')}`,
        );
      }
    }
    expect(problems.join('\n\n')).toBe('');
  }, 60_000);

  it('projected again from offset 0 into the same store (replay), every walk is unchanged', async () => {
    const log = new EmbeddedLog(dataDir, 20);
    log.writeOffsets(PROJECTOR_GROUP, {});
    const session = new ProjectorSession(store);
    const sub = log.subscribe(
      PROJECTOR_GROUP,
      TOPIC_NAMES,
      async (b) => {
        await applyBatch(session, b);
      },
      { maxBatch: 57 },
    );
    await sub.caughtUp();
    await sub.stop();
    const { app, h } = await apiOn(store, SERVER_TIME);
    apps.push(app);
    const { rows, errors } = await walkAll(h, 'after the replay');
    expect([...errors, ...differences(rows, afterKills, 'after the replay vs after the kills')].join('\n\n')).toBe('');
  }, 60_000);

  // The smallest forms of what the walks above caught (see the report in the commit message), on
  // batches applied in this process to databases of their own.
  let offset = 0;
  const batch = (...values: any[]) => ({
    topic: 'trade-events',
    partition: 0,
    records: values.map((v) => ({ key: String(v.positionId), value: JSON.stringify(v), offset: String((offset += 1000)) })),
  });
  const ev = (id: number, positionId: number, type: string, t: string, over: Record<string, unknown> = {}) => ({
    id,
    type,
    direction: 'long',
    price: 100,
    timeOfEvent: t,
    assumed: false,
    retrospective: false,
    autoGenerated: false,
    positionId,
    traderId: 1,
    assetId: 1,
    messageId: null,
    version: 1,
    ...over,
  });
  const live = async (db: ChdbStore) => ({
    positions: await db.query<{ id: number; isOpen: number }>('SELECT id, isOpen FROM $db.positions_current WHERE live = 1 ORDER BY id'),
    events: await db.query<{ id: number; positionId: number }>('SELECT id, positionId FROM $db.events_current WHERE live = 1 ORDER BY id'),
  });
  const oracleLive = (values: any[]) => {
    const ow = O.buildWorld(values.map((value) => ({ topic: 'trade-events', value })));
    return {
      positions: [...ow.positions.values()].map((p) => ({ id: p.id, isOpen: p.isOpen ? 1 : 0 })).sort((a, b) => a.id - b.id),
      events: [...ow.events.values()]
        .filter((e) => ow.positions.has(e.positionId))
        .map((e) => ({ id: e.id, positionId: e.positionId }))
        .sort((a, b) => a.id - b.id),
    };
  };

  it('killed between the two inserts of a batch that moves an event, the replay still folds the position it left', async () => {
    // Batch 1: position 50 with an open and an increase. Batch 2 moves the open to position 60 and
    // the process dies after the first of the batch's two inserts (events and positions, in
    // whichever order the projector writes them). The restarted projector replays batch 2: position
    // 50 (no open left) must die, and its increase with it.
    const db = await openChdbStore(chdbPath, 'killed_move');
    await migrateReadModels(db, () => {});
    const session = new ProjectorSession(db);
    const open = ev(501, 50, 'open', '2026-02-01T00:00:00.000Z');
    const increase = ev(502, 50, 'increase', '2026-02-02T00:00:00.000Z');
    const moved = { ...open, positionId: 60, version: 2 };
    await applyBatch(session, batch(open, increase));
    // Batch 2, dying between its two inserts: a store on which the second insert never returns.
    const b2 = batch(moved);
    let firstWritten!: () => void;
    const wrote = new Promise<void>((resolve) => {
      firstWritten = resolve;
    });
    let inserts = 0;
    const dying = {
      database: db.database,
      query: db.query.bind(db),
      exec: db.exec.bind(db),
      insert: db.insert.bind(db),
      close: async () => {},
      async insertCompact(table: string, columns: readonly string[], rows: readonly unknown[][]) {
        if (++inserts === 2) {
          firstWritten();
          return new Promise<void>(() => {});
        } // never: the process is gone
        return db.insertCompact(table, columns, rows);
      },
    };
    void applyBatch(new ProjectorSession(dying), b2);
    await wrote;
    await applyBatch(session, b2); // the restarted projector replays batch 2 from its committed offset
    const got = await live(db);
    await db.drop();
    await db.close();
    expect(oracleLive([open, increase, moved])).toEqual({ positions: [{ id: 60, isOpen: 1 }], events: [{ id: 501, positionId: 60 }] });
    expect(got).toEqual({ positions: [{ id: 60, isOpen: 1 }], events: [{ id: 501, positionId: 60 }] });
  });

  it('an event that moves to another position keeping its sorting key leaves its old position for good, also before merges run', async () => {
    // Batch 1 writes two positions, batch 2 moves the close of position 10 to position 20 and the
    // open of position 30 to position 40 (same time, trader, asset, direction and type: each
    // statement is rewritten at the same sorting key, with no tombstone), batch 3 touches positions
    // 10 and 30 again (replayed records). Until a merge collapses that sorting key, the superseded
    // statement (old positionId) is still in the table.
    const db = await openChdbStore(chdbPath, 'moved');
    await migrateReadModels(db, () => {});
    await db.exec('SYSTEM STOP MERGES $db.events'); // a merge that comes late (or never before the next batch)
    const session = new ProjectorSession(db);
    const open10 = ev(101, 10, 'open', '2026-01-01T00:00:00.000Z');
    const close10 = ev(102, 10, 'close', '2026-01-02T00:00:00.000Z');
    const open30 = ev(301, 30, 'open', '2026-01-03T00:00:00.000Z');
    const close30 = ev(302, 30, 'close', '2026-01-04T00:00:00.000Z');
    const moves = [
      { ...close10, positionId: 20, version: 2 },
      { ...open30, positionId: 40, version: 2 },
    ];
    await applyBatch(session, batch(open10, close10, open30, close30));
    await applyBatch(session, batch(...moves));
    await applyBatch(session, batch(open10, close30));
    const got = await live(db);
    await db.drop();
    await db.close();
    // Position 10 open (its close moved away), 40 open (the open of 30 moved there), 20 and 30 gone.
    expect(oracleLive([open10, close10, open30, close30, ...moves, open10, close30])).toEqual({
      positions: [
        { id: 10, isOpen: 1 },
        { id: 40, isOpen: 1 },
      ],
      events: [
        { id: 101, positionId: 10 },
        { id: 301, positionId: 40 },
      ],
    });
    expect(got).toEqual({
      positions: [
        { id: 10, isOpen: 1 },
        { id: 40, isOpen: 1 },
      ],
      events: [
        { id: 101, positionId: 10 },
        { id: 301, positionId: 40 },
      ],
    });
  });
});
