/**
 * The Log port: an append-only, keyed record log read by consumer groups with committed
 * offsets and at-least-once delivery. Records of one key stay in order (one partition per key),
 * which is what a Kafka consumer group gives; the embedded adapter has one partition per topic.
 */
export interface AppendRecord { key: string; value: unknown }

export interface LogRecord {
  key: string;
  /** Raw JSON text as appended: the projector validates it, so a bad record can be dead-lettered. */
  value: string;
  offset: string;
}

export interface LogBatch {
  topic: string;
  partition: number;
  records: LogRecord[];
}

export interface SubscribeOptions {
  /** Called after each committed batch (progress, cache invalidation). */
  onCommit?: (batch: LogBatch) => void;
  /** Called when a handler throws; the batch is retried after a pause (it is not committed). */
  onError?: (err: unknown, batch: LogBatch) => void;
  /** Max records per batch. */
  maxBatch?: number;
}

export interface LogSubscription {
  /** Resolves once everything appended before this call has been handled and committed. */
  caughtUp(): Promise<void>;
  stop(): Promise<void>;
}

export interface Log {
  append(topic: string, records: readonly AppendRecord[]): Promise<void>;
  subscribe(group: string, topics: readonly string[], handle: (batch: LogBatch) => Promise<void>, opts?: SubscribeOptions): LogSubscription;
  close(): Promise<void>;
}
