import { AsyncLocalStorage } from 'node:async_hooks';
import { TOPIC_NAMES } from '../schemas/topics/index.ts';
import { type ChangeSet, emptyChangeSet, mergeChanges, recordChanges, recordingStore } from '../storage/changes.ts';
import { checkIdentifier, type Params, type QueryOptions, type Store, wrapStore } from '../storage/port.ts';
import { DEAD_LETTERS_DDL, DEAD_LETTERS_TABLE, READ_MODEL_VERSION_TABLE, VERSION_DDL } from '../storage/tables/log.ts';
import { PROJECTIONS, READ_MODEL_GRAPH } from './index.ts';
import type { Log, LogBatch, LogRecord, LogSubscription } from './log/port.ts';
import type { Projection, ValidRecord } from './projection.ts';
import { ProjectorSession } from './session.ts';
import { oversizeReason, validateRecord } from './validate.ts';

export async function ensureSchema(store: Store, projections: readonly Projection[] = PROJECTIONS): Promise<void> {
  await store.exec(DEAD_LETTERS_DDL);
  for (const p of projections) for (const ddl of p.ddl) await store.exec(ddl);
}

/**
 * The layout of the read models (tables and what projections write into them). Bump it with any
 * change to a table or a projection: a DATA_DIR built by another version is then rebuilt from the
 * log on start instead of being served from old tables.
 *   1: the foundation (issue 2)   2: sanitized text and URLs, canonical date-times (issue 5)
 *   3: events, positions and messages as statement tables ordered for their reads (issue 6)
 *   4: time-based performance as a read model: position_performances, price_series (issue 6)
 *   5: the trader directory as a statement table; tombstones as the is-deleted column (issue 6)
 *   6: a minmax index on prices.at (issue 6)
 *   7: position_performances in small granules for point lookups (issue 6)
 *   8: position_performances' window, direction and status as Enum8 (issue 6)
 *   9: events' by_position projection holds the sort key and _part_offset only (issue 6)
 *  10: position_performances ordered by (traderId, openAt), partitioned by month, for the analytics reads (issue 7)
 *  11: position_performances ordered by (window, assetId, traderId, openAt): one window is a third of it (issue 7)
 *  12: position_performances ordered by (window, traderId, assetId, openAt): a trader is a range of each window (issue 7)
 *  13: position_performances back to (positionId, window) for pages; position_samples, the same rows by (window, traderId, ...) for analytics (issue 7)
 *  14: position_samples partitioned by (window, month), ordered by (traderId, assetId, openAt, positionId) (issue 7)
 *  15: summaries as statement tables ordered by (windowStart, id); position_samples fed by a materialized view (issue 8)
 *  16: the partner feed: feed_groups, feed_changes, feed_watermark (issue 8)
 *  17: feed_changes stamps carry their group's row (a since-poll reads no group by id) (issue 8)
 *  18: open_positions, the positions table's statements at open keys, for first pages of open positions (issue 6)
 *  19: activity_events and activity_messages, activity rolled up by hour and day (issue 7)
 *  20: the same rolled-up rows by trader and by source (activity_events_by_trader, activity_messages_by_source) (issue 7)
 *  21: open_positions written by the projector, no longer by a materialized view (issue 6);
 *      position_samples with isReady and readyReturn worked out at insert (issue 7)
 *  22: trade_batch, open_positions by_id and position_samples by_position: a trade batch that finds
 *      the previous one unfinished reads back what these hold of its positions and repairs them (issue 6)
 *  23: activity by trader and by source in compressed blocks of at most 16 KiB (issue 7)
 *  24: position_samples.assetLow, the low 16 bits of assetId (issue 7)
 *  25: accounts.scopes, the scopes an account may hold (issue 24)
 *  26: position_samples copied by the projector with its settled work, no longer by a materialized view (issue 26)
 */
export const READ_MODEL_VERSION = 26;

/**
 * Brings the store to READ_MODEL_VERSION: read models of another version (or of none, from before
 * versions were kept) are dropped and `resetOffsets` makes the projector replay the log from the
 * start. The steps are ordered so that a crash anywhere only repeats them on the next start.
 * Returns the version it found (null: none recorded) when it rebuilt, undefined otherwise.
 */
export async function migrateReadModels(
  store: Store,
  resetOffsets: () => void | Promise<void>,
  say: (line: string) => void = () => {},
): Promise<number | null | undefined> {
  await store.exec(VERSION_DDL);
  const [found] = await store.query<{ v: number | null; n: number }>(
    `SELECT argMax(version, at) AS v, count() AS n FROM ${READ_MODEL_VERSION_TABLE}`,
  );
  const current = found && found.n > 0 ? found.v : null;
  if (current === READ_MODEL_VERSION) {
    await ensureSchema(store);
    return undefined;
  }
  const tables = (
    await store.query<{ name: string }>('SELECT name FROM system.tables WHERE database = {db:String}', { db: store.database })
  )
    .map((t) => t.name)
    .filter((t) => t !== READ_MODEL_VERSION_TABLE.name);
  if (tables.length) {
    say(
      `read models were built by read-model version ${current ?? 1}, this is version ${READ_MODEL_VERSION}: rebuilding them from the log`,
    );
    await resetOffsets();
    for (const t of tables) await store.exec(`DROP TABLE IF EXISTS $db.${checkIdentifier(t)}`);
  }
  await ensureSchema(store);
  await store.exec(`INSERT INTO ${READ_MODEL_VERSION_TABLE} VALUES ({v:UInt32}, now64(3))`, { v: READ_MODEL_VERSION });
  return tables.length ? current : undefined;
}

export interface DeadLetter {
  topic: string;
  offset: string;
  key: string;
  raw: string;
  reason: string;
}

/** A batch validated: what can be projected, and what is dead-lettered with its reason. */
export interface Validated {
  valid: ValidRecord[];
  dead: DeadLetter[];
}

function validateInto(topic: string, records: readonly LogRecord[], from: number, to: number, out: Validated): void {
  for (let i = from; i < to; i++) {
    const r = records[i]!;
    const res = r.oversize !== undefined ? { ok: false as const, reason: oversizeReason(r.oversize) } : validateRecord(topic, r.value);
    if (res.ok) out.valid.push({ topic, key: r.key || res.key, offset: r.offset, value: res.value, raw: r.value });
    else out.dead.push({ topic, offset: r.offset, key: r.key, raw: r.value, reason: res.reason });
  }
}

/**
 * Validates a batch at the edge: invalid JSON, schema violations, non-finite numbers and
 * oversized records become dead letters with a reason; `raw` is always the text as received.
 */
export function validateBatch(batch: LogBatch): Validated {
  const out: Validated = { valid: [], dead: [] };
  validateInto(batch.topic, batch.records, 0, batch.records.length, out);
  return out;
}

/** Records validated between two turns of the event loop (so that store calls in flight are answered meanwhile). */
const VALIDATE_SLICE = 2000;

/**
 * validateBatch in slices, yielding to the event loop between them: the projector validates the
 * next batch while the store writes the current one (SubscribeOptions.prepare).
 */
export async function validateBatchAsync(batch: LogBatch): Promise<Validated> {
  const out: Validated = { valid: [], dead: [] };
  const n = batch.records.length;
  for (let i = 0; i < n; i += VALIDATE_SLICE) {
    if (i) await new Promise<void>((resolve) => setImmediate(resolve));
    validateInto(batch.topic, batch.records, i, Math.min(n, i + VALIDATE_SLICE), out);
  }
  return out;
}

async function project(session: ProjectorSession, topic: string, valid: readonly ValidRecord[], version: bigint): Promise<void> {
  for (const p of session.projections) {
    if (!p.canHandle.includes(topic)) continue;
    if (p.handle && p.table) await session.store.insert(p.table.name, p.handle(valid));
    if (p.afterStore) await p.afterStore(session, valid, version);
  }
}

/**
 * Projects valid records; when the store refuses them while it still answers, the batch is
 * bisected so that only the records it refuses are dead-lettered (with the store's reason) and
 * the projector never stalls on one poisoned record. A store that does not answer is an outage:
 * the error propagates and the batch is retried from its committed offset.
 */
async function projectOrIsolate(
  session: ProjectorSession,
  topic: string,
  valid: readonly ValidRecord[],
  version: bigint,
  dead: DeadLetter[],
): Promise<number> {
  try {
    await project(session, topic, valid, version);
    return valid.length;
  } catch (err) {
    await session.store.query('SELECT 1'); // throws during an outage: retry the whole batch later
    if (valid.length === 1) {
      const r = valid[0]!;
      dead.push({ topic, offset: r.offset, key: r.key, raw: r.raw, reason: `store: ${(err as Error).message.slice(0, 500)}` });
      return 0;
    }
    const mid = valid.length >> 1;
    return (
      (await projectOrIsolate(session, topic, valid.slice(0, mid), version, dead)) +
      (await projectOrIsolate(session, topic, valid.slice(mid), version, dead))
    );
  }
}

/**
 * Applies one batch to the session's store: rows of every projection of the session that handles
 * the topic, then dead letters. `validated`: the batch already validated (validateBatch), else it
 * is validated here.
 */
export async function applyBatch(
  session: ProjectorSession,
  batch: LogBatch,
  validated?: Validated,
): Promise<{ applied: number; dead: number }> {
  const { valid, dead: refused } = validated ?? validateBatch(batch);
  const dead = [...refused];
  // Statement seqs and roll-up marks grow with it: the batch's place in the group's order.
  const version = batch.seq ?? BigInt(batch.records.at(-1)?.offset ?? '0');
  const applied = valid.length ? await projectOrIsolate(session, batch.topic, valid, version, dead) : 0;
  if (dead.length) {
    const at = new Date().toISOString();
    await session.store.insert(
      DEAD_LETTERS_TABLE.name,
      dead.map((d) => ({ ...d, at })),
    );
  }
  return { applied, dead: dead.length };
}

/** What one batch of a topic applied, and sent to the dead-letter table. */
export interface BatchOutcome {
  topic: string;
  applied: number;
  dead: number;
}

/** A commit made known: the batches it covers, whether the put-off derived work is in it, and what they all wrote. */
export interface Commit {
  batches: readonly BatchOutcome[];
  /** It holds a run of the live derived work the batches put off (ProjectorSession.settle). */
  settled: boolean;
  changes: ChangeSet;
}

/** The records a commit's batches applied and sent to the dead-letter table. */
export function counted(commit: Commit): { applied: number; dead: number } {
  let applied = 0;
  let dead = 0;
  for (const b of commit.batches) {
    applied += b.applied;
    dead += b.dead;
  }
  return { applied, dead };
}

export interface ProjectorEvents {
  /**
   * A commit: awaited before the next batch, so what it ends is gone before more data lands.
   * Without a cadence each batch is a commit; with one, a commit is what every lane wrote in a
   * round (SubscribeOptions.onRest), and the batches of a round go on without waiting for it.
   * `changes`: what the commit's writes changed, per table (storage/changes.ts).
   */
  onCommit?: (commit: Commit) => void | Promise<void>;
  onError?: (err: unknown, topic: string) => void;
  /** The live commit cadence (SubscribeOptions.cadenceMs): the embedded server groups live records into a commit per round. */
  cadenceMs?: number;
}

/**
 * The projector's commits. Without a cadence, each batch is announced as it ends. With one, the
 * batches (and the settled derived work) are gathered and announced together when every lane is
 * between rounds: each announcement ends the cached answers its changes touch, and a question
 * asked again after each of a round's three or four batches was read again after each, where one
 * read after the round gives the same answer. Live lanes begin their rounds together at most once
 * per cadence (SubscribeOptions.onRest `together`), so each such rest is announced at once; lanes
 * that run apart (a backlog in one) are announced at most once per cadence. A backlog keeps the
 * lanes busy: then what is gathered is announced once it is two cadences old, after the batch that
 * makes it so, or by a timer.
 */
class Commits {
  private pending: Commit | undefined;
  private since = 0;
  /** When the last announcement began (performance.now(): Date.now()'s whole milliseconds made a wait up to one short). */
  private announced = -Infinity;
  private timer: NodeJS.Timeout | undefined;
  private turn: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly events: ProjectorEvents) {}

  /** A batch ended (or the settled work, `batch` undefined): announced now, or gathered. */
  async add(changes: ChangeSet, batch?: BatchOutcome): Promise<void> {
    const cadence = this.events.cadenceMs;
    const commit = { batches: batch ? [batch] : [], settled: !batch, changes };
    if (!cadence) return this.announce(commit);
    // A round longer than a cadence (under load) is not cut in two: the wait is two cadences.
    this.gather(commit, 2 * cadence);
    // Settled work goes with the next round's commit (or the timer's), not in one of its own.
    if (performance.now() - this.since >= 2 * cadence) await this.flush();
  }

  /**
   * Every lane is between rounds: what was gathered is announced now when the lanes' rounds began
   * together (`together`), else now or, when the last announcement is not yet a cadence old, once
   * it is: lanes whose rounds end apart would otherwise announce a commit each, and each commit
   * ends the cached answers it touches.
   */
  rest(together = false): Promise<void> {
    const cadence = this.events.cadenceMs ?? 0;
    const wait = this.announced + cadence - performance.now();
    if (!this.pending || together || wait <= 0) return this.flush();
    clearTimeout(this.timer);
    this.arm(wait);
    return Promise.resolve();
  }

  /** Announces what was gathered, one announcement at a time; one that fails is gathered again and retried at the next. */
  flush(): Promise<void> {
    const run = this.turn.then(async () => {
      const c = this.pending;
      if (!c) return;
      this.pending = undefined;
      clearTimeout(this.timer);
      this.announced = performance.now();
      try {
        await this.announce(c);
      } catch (err) {
        const later = this.pending as Commit | undefined;
        this.pending = undefined;
        clearTimeout(this.timer);
        const ms = this.events.cadenceMs ?? 1000;
        this.gather(c, ms);
        if (later) this.gather(later, ms);
        throw err;
      }
    });
    this.turn = run.catch(() => {});
    return run;
  }

  /** Adds `c` to what is to be announced, within `ms` at the latest when it is the first. */
  private gather(c: Commit, ms: number): void {
    if (!this.pending) {
      this.pending = { batches: [], settled: false, changes: emptyChangeSet() };
      this.since = performance.now();
      this.arm(ms);
    }
    (this.pending.batches as BatchOutcome[]).push(...c.batches);
    this.pending.settled ||= c.settled;
    mergeChanges(this.pending.changes, c.changes);
  }

  /** Announces what is left; nothing is retried after. */
  async close(): Promise<void> {
    try {
      await this.flush();
    } finally {
      this.closed = true;
      clearTimeout(this.timer);
    }
  }

  /** However the lanes go, nothing gathered waits longer than `ms` to be announced. */
  private arm(ms: number): void {
    if (this.closed) return;
    this.timer = setTimeout(() => void this.flush().catch((err) => this.events.onError?.(err, 'commit')), ms);
  }

  private async announce(c: Commit): Promise<void> {
    await this.events.onCommit?.(c);
  }
}

/** The consumer group of the read-model projector. */
export const PROJECTOR_GROUP = 'projector';

/**
 * Records per batch at most. A live projector's batches are what was appended since the last
 * one; catching up (a seed, a rebuild, a backlog) takes big batches, which spread the per-batch
 * work (the read-backs of the folded projections, one insert per table, the offset commit) and
 * leave the store fewer, larger parts to merge. The log also bounds a batch by bytes.
 */
export const MAX_BATCH = 50_000;

/**
 * Topics projected concurrently with the others (SubscribeOptions.lanes). The messages projection
 * reads and writes only the messages table, and the feed projection, which reads messages for the
 * groups of trade events, takes one step at a time whichever lane calls it (projectors/feed), so
 * the messages topic needs no place in the upstream-first order, and its batches fill the
 * projector's waits on the store during the other topics' batches.
 */
export const SEPARATE_LANES: readonly (readonly string[])[] = [['messages']];

/**
 * Records in a batch at most for its reads to run on one thread each. A live batch's reads are
 * point reads of a few keys, where a second thread costs more CPU than it saves (issue 26: a read
 * by id of an absent message, 9.4 ms of CPU on two threads, 6.0 on one); catching up, a batch
 * reads tens of thousands of keys and keeps every thread.
 */
export const ONE_THREAD_BATCH = 1000;
const oneThread = new AsyncLocalStorage<boolean>();
const ONE_THREAD_SETTINGS = { max_threads: 1 } as const;

/** `store` whose reads run on one thread while a small batch (ONE_THREAD_BATCH) is applied. */
function batchSizedStore(store: Store): Store {
  return wrapStore(store, {
    query<T>(sql: string, params?: Params, opts?: QueryOptions): Promise<T[]> {
      if (!oneThread.getStore()) return store.query<T>(sql, params, opts);
      return store.query<T>(sql, params, { ...opts, settings: { ...ONE_THREAD_SETTINGS, ...opts?.settings } });
    },
  });
}

/**
 * Moves batches from the log to the store (at-least-once: offsets commit after the store write).
 * The next batch of a topic is read and validated while the store writes the current one. One
 * projector session holds what the projections keep of the store; a take-over resets it.
 */
export function runProjector(log: Log, store: Store, events: ProjectorEvents = {}, group = PROJECTOR_GROUP): LogSubscription {
  // Every write of a batch is noted in the batch's own change set (lanes run batches concurrently).
  const session = new ProjectorSession(batchSizedStore(recordingStore(store, READ_MODEL_GRAPH)), PROJECTIONS);
  const commits = new Commits(events);
  const settler = events.cadenceMs ? settleLater(session, commits, events) : undefined;
  const subscription = log.subscribe<Validated>(
    group,
    TOPIC_NAMES,
    async (batch, validated) => {
      const changes = emptyChangeSet();
      const res = await oneThread.run(batch.records.length <= ONE_THREAD_BATCH, () =>
        recordChanges(changes, () => applyBatch(session, batch, validated)),
      );
      await commits.add(changes, { topic: batch.topic, ...res });
    },
    {
      maxBatch: MAX_BATCH,
      prepare: validateBatchAsync,
      ...(events.cadenceMs
        ? { cadenceMs: events.cadenceMs, onRest: (together) => commits.rest(together).catch((err) => events.onError?.(err, 'commit')) }
        : {}),
      lanes: SEPARATE_LANES,
      onError: (err, batch) => events.onError?.(err, batch.topic),
      // Another projector process has written the store since: what the projections keep of it is read again.
      onTakeOver: () => {
        session.reset();
        if (settler) void session.resume();
      },
    },
  );
  if (!settler) return subscription;
  // Settled work a stopped projector left undone (projections' `resume`), done with the first settled work.
  void session.resume();
  return {
    lag: () => subscription.lag(),
    // Caught up once what the batches put off is done too, and announced.
    caughtUp: async () => {
      await subscription.caughtUp();
      await settler.now();
      await commits.flush();
    },
    stop: async () => {
      await subscription.stop();
      await settler.stop();
      await commits.close().catch((err) => events.onError?.(err, 'commit'));
    },
  };
}

/**
 * Live derived work put off by the projections (ProjectorSession.settle: the activity roll-ups)
 * runs SETTLE_MS after it was first put off, with every batch's since, in the next commit: a
 * trickle of live batches pays it once per SETTLE_MS instead of once per batch, and the cached
 * activity answers it ends last that long.
 */
export const SETTLE_MS = 2000;

function settleLater(
  session: ProjectorSession,
  commits: Commits,
  events: ProjectorEvents,
): { now(): Promise<void>; stop(): Promise<void> } {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  const run = (): Promise<void> => {
    clearTimeout(timer);
    timer = undefined;
    running = running.then(async () => {
      const changes = emptyChangeSet();
      try {
        if (await recordChanges(changes, () => session.settlePending())) await commits.add(changes);
      } catch (err) {
        // What was written before the failure is announced all the same; the rest is retried.
        if (changes.all || changes.tables.size) await commits.add(changes).catch(() => {});
        events.onError?.(err, 'settle');
        schedule();
      }
    });
    return running;
  };
  const schedule = () => {
    if (!stopped && !timer) timer = setTimeout(run, SETTLE_MS);
  };
  session.onPending = schedule;
  return {
    now: async () => {
      // A failed run is retried (the store is down): a caught-up waits for it.
      for (;;) {
        await run();
        if (!session.unsettled || stopped) return;
        await new Promise((resolve) => setTimeout(resolve, 1000));
      }
    },
    // What is put off is done before the projector stops (once: a failure is reported, not retried).
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      await run();
    },
  };
}
