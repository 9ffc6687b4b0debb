/**
 * The Log port: an append-only, keyed record log read by consumer groups with committed
 * offsets and at-least-once delivery. Records of one key stay in order (one partition per key),
 * which is what a Kafka consumer group gives; the embedded adapter has one partition per topic.
 */

/**
 * Maximum record size: the UTF-8 bytes of a record's value JSON (16 MiB). Any record up to it is
 * delivered and projected; a larger one is delivered as an `oversize` record and dead-lettered,
 * so that no record can stall its topic.
 */
export const MAX_RECORD_BYTES = 16 * 1024 * 1024;
/** Maximum size of a record key's JSON text. Keys derive from ids; this bounds a log line. */
export const MAX_KEY_BYTES = 64 * 1024;
/** How much of an oversized record's value is kept (for its dead letter). */
export const OVERSIZE_PREFIX_BYTES = 64 * 1024;

/**
 * A record to append: a value to serialise, or `raw` JSON text appended verbatim (the CLI
 * appends exactly the bytes it validated). `raw` must be one line.
 */
export type AppendRecord = { key: string; value: unknown } | { key: string; raw: string };

export interface LogRecord {
  key: string;
  /** Raw JSON text as appended: the projector validates it, so a bad record can be dead-lettered. */
  value: string;
  offset: string;
  /**
   * Set when the record is larger than MAX_RECORD_BYTES: its size in bytes. `value` then holds
   * only its first OVERSIZE_PREFIX_BYTES bytes (the record is never loaded whole).
   */
  oversize?: number;
}

export interface LogBatch {
  topic: string;
  partition: number;
  records: LogRecord[];
  /**
   * The batch's place in the order its group applies batches, where offsets do not give one: on
   * Kafka, offsets count per partition, so each batch is given a number above every batch's before
   * it (BatchSequencer). Absent on the embedded log (one partition per topic), where the offset of
   * the batch's last record is that place.
   */
  seq?: bigint;
}

/**
 * In process: the clock in microseconds, or one above the last number when the clock has not moved
 * on (or went back). A restarted process starts above what it gave before as long as the clock
 * does not go back by more than the time since its last batch.
 */
export class ClockSequencer {
  private last = 0n;
  constructor(private readonly clock: () => number = Date.now) {}
  async next(): Promise<bigint> {
    const now = BigInt(Math.floor(this.clock())) * 1000n;
    this.last = now > this.last ? now : this.last + 1n;
    return this.last;
  }
}

export interface SubscribeOptions<P = unknown> {
  /** Called after each committed batch (progress, cache invalidation). */
  onCommit?: (batch: LogBatch) => void;
  /** Called when a handler throws; the batch is retried after a pause (it is not committed). */
  onError?: (err: unknown, batch: LogBatch) => void;
  /** Max records per batch. */
  maxBatch?: number;
  /**
   * Work on a batch that needs nothing but the batch (validation): the subscription reads a
   * topic's next batch and starts preparing it while the current one is handled, and gives the
   * result to `handle`. A rejection counts as the handler's. Nothing is committed by preparing.
   */
  prepare?: (batch: LogBatch) => Promise<P>;
  /**
   * Topics handled concurrently with the others: each lane is a loop of its own over its topics
   * (in `topics` order, upstream first, one batch at a time); the topics in no lane share one
   * more. For topics whose handling neither reads nor writes anything another topic's does.
   */
  lanes?: readonly (readonly string[])[];
  /**
   * Called before a batch when another member of the group has applied batches since this
   * member's last one (Kafka, several members): what the handler keeps in process of the store
   * must be read again.
   */
  onTakeOver?: () => void | Promise<void>;
  /**
   * Live commit cadence (ms; 0, the default: none): while batches take all there is (records
   * arriving, no backlog), a round of the topics (upstream first) starts at most this often, and
   * what arrives meanwhile is taken together: fewer commits, each ending fewer cached answers, and
   * the per-batch work spread over more records. A backlog is read without pause.
   */
  cadenceMs?: number;
  /**
   * With a cadence: called, and awaited, each time a lane ends a round while no other lane is in
   * one (every batch handled so far has been handled), before `caughtUp` callers are told. The
   * handler may put off what each batch would announce (the projector's commits, which end cached
   * answers) to it: one announcement per round of every lane instead of one per batch.
   * `together`: the lanes are live and begin their rounds together, at most once per cadence, so
   * this rest ends a round of every lane (a backlog in any lane: they run apart).
   */
  onRest?: (together: boolean) => Promise<void>;
}

export interface LogSubscription {
  /** Resolves once every complete record appended before this call has been handled and committed. */
  caughtUp(): Promise<void>;
  /** Records on the log not yet handled and committed by this group (counted incrementally). */
  lag(): Promise<number>;
  stop(): Promise<void>;
}

export interface Log {
  append(topic: string, records: readonly AppendRecord[]): Promise<void>;
  /** `prepared`: what `opts.prepare` made of the batch (undefined without one). */
  subscribe<P = unknown>(
    group: string,
    topics: readonly string[],
    handle: (batch: LogBatch, prepared?: P) => Promise<void>,
    opts?: SubscribeOptions<P>,
  ): LogSubscription;
  close(): Promise<void>;
}
