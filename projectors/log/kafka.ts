import {
  type Admin,
  type Consumer,
  type EachBatchPayload,
  Kafka,
  type KafkaMessage,
  logLevel,
  type Message,
  Partitioners,
  type PartitionMetadata,
  type Producer,
} from 'kafkajs';
import { type ApplyGate, LocalGate } from './gate.ts';
import {
  type AppendRecord,
  type Log,
  type LogBatch,
  type LogRecord,
  type LogSubscription,
  MAX_RECORD_BYTES,
  OVERSIZE_PREFIX_BYTES,
  type SubscribeOptions,
} from './port.ts';

/**
 * The producer side of the Log port on Kafka (kafkajs): appends keyed records, each key's records
 * to one partition in order (kafkajs's default partitioner, Java-compatible), acknowledged by all
 * in-sync replicas.
 *
 * Guard against the kafkajs 2.2.4 defect in ../shared/TESTING.md: when a partition's leader moves
 * during one send() to a broker that already answered for that send, that partition's messages are
 * dropped and send() still resolves. Every record is therefore given its partition here, and a
 * send whose answer lacks a partition it wrote (or reports an error for it) is sent again for that
 * partition, in order, until every partition is acknowledged: nothing acknowledged is ever lost.
 * A resend may write records twice; the projectors are idempotent (at-least-once delivery).
 * Topic creation is a deploy step (`signalbase topics create`), not this class's.
 */
export interface KafkaAppenderOptions {
  brokers: string[];
  clientId?: string;
  /** Sends of one partition's records before giving up (each after the metadata is refreshed). */
  maxAttempts?: number;
  /** Prepended to every topic name on the cluster (KAFKA_TOPIC_PREFIX): deployments sharing a cluster. */
  topicPrefix?: string;
}

export interface AppendReport {
  /** Partitions sent again because a send's answer lacked them or failed them. */
  resent: number;
}

/**
 * Records of one partition per send at most: kafkajs 2.2.4 groups a send's records by partition
 * copying the partition's array once per record (its groupMessagesPerPartition), which grows with
 * the square of the records; sends of this size keep it negligible. Each partition's slices are
 * sent in order, one send at a time.
 */
const SEND_PER_PARTITION = 2000;

export class KafkaAppender {
  private readonly kafka: Kafka;
  private readonly producer: Producer;
  private readonly admin: Admin;
  private readonly partitioner = Partitioners.DefaultPartitioner();
  private readonly partitions = new Map<string, PartitionMetadata[]>();
  private readonly maxAttempts: number;
  private connected: Promise<void> | undefined;
  /** Totals since the appender started (the fault tests report them). */
  readonly totals: AppendReport = { resent: 0 };

  constructor(opts: KafkaAppenderOptions) {
    this.kafka = new Kafka({ clientId: opts.clientId ?? 'signalbase', brokers: opts.brokers, logLevel: logLevel.NOTHING });
    // Not idempotent: kafkajs's idempotent producer needs the controller (InitProducerId), which
    // deployments may put anywhere; ordering per partition comes from one send in flight per call.
    this.producer = this.kafka.producer({ maxInFlightRequests: 1, allowAutoTopicCreation: false });
    this.admin = this.kafka.admin();
    this.maxAttempts = opts.maxAttempts ?? 20;
    this.prefix = opts.topicPrefix ?? '';
  }
  private readonly prefix: string;

  private connect(): Promise<void> {
    this.connected ??= Promise.all([this.producer.connect(), this.admin.connect()]).then(() => {});
    return this.connected;
  }

  private async partitionsOf(topic: string, refresh = false) {
    let p = this.partitions.get(topic);
    if (!p || refresh) {
      const meta = await this.admin.fetchTopicMetadata({ topics: [topic] });
      p = meta.topics[0]!.partitions;
      this.partitions.set(topic, p);
    }
    return p;
  }

  /** Appends the records; resolves once every one of them is acknowledged. */
  async append(logTopic: string, records: readonly AppendRecord[]): Promise<AppendReport> {
    if (!records.length) return { resent: 0 };
    const topic = this.prefix + logTopic;
    await this.connect();
    const partitionMetadata = await this.partitionsOf(topic);
    const byPartition = new Map<number, Message[]>();
    for (const r of records) {
      const message: Message = { key: r.key, value: 'raw' in r ? r.raw : JSON.stringify(r.value) };
      message.partition = this.partitioner({ topic, partitionMetadata, message });
      (byPartition.get(message.partition) ?? byPartition.set(message.partition, []).get(message.partition)!).push(message);
    }
    let resent = 0;
    for (let from = 0; ; from += SEND_PER_PARTITION) {
      const slice = new Map<number, Message[]>();
      for (const [p, messages] of byPartition) if (messages.length > from) slice.set(p, messages.slice(from, from + SEND_PER_PARTITION));
      if (!slice.size) break;
      resent += await this.sendAll(topic, slice);
    }
    this.totals.resent += resent;
    return { resent };
  }

  /** Sends the records of each partition until every partition is acknowledged; returns the partitions sent again. */
  private async sendAll(topic: string, byPartition: Map<number, Message[]>): Promise<number> {
    let pending = byPartition;
    let resent = 0;
    for (let attempt = 1; pending.size; attempt++) {
      let acked = new Set<number>();
      try {
        const answer = await this.producer.send({ topic, acks: -1, messages: [...pending.values()].flat() });
        acked = new Set(answer.filter((m) => m.topicName === topic && m.errorCode === 0).map((m) => m.partition));
      } catch (err) {
        if (attempt >= this.maxAttempts) throw err;
      }
      const missing = new Map([...pending].filter(([p]) => !acked.has(p)));
      if (!missing.size) break;
      if (attempt >= this.maxAttempts)
        throw new Error(`kafka: ${topic} partitions ${[...missing.keys()].join(', ')} not acknowledged after ${attempt} sends`);
      resent += missing.size;
      pending = missing;
      await this.partitionsOf(topic, true); // leaders moved: fresh metadata before the resend
    }
    return resent;
  }

  async close(): Promise<void> {
    if (!this.connected) return;
    await this.connected.catch(() => {});
    await Promise.all([this.producer.disconnect(), this.admin.disconnect()]);
  }
}

export interface KafkaLogOptions extends KafkaAppenderOptions {
  /** Consumer session timeout (ms): a member silent this long leaves the group. */
  sessionTimeout?: number;
  heartbeatInterval?: number;
  /**
   * How long a fetch waits for records on the broker (kafkajs's default 5000 ms). A Kafka broker
   * answers as soon as records come; librdkafka's mock cluster waits it out, so tests shorten it.
   */
  maxWaitMs?: number;
  /** Pause after a failed batch before it is tried again (ms). */
  retryDelayMs?: number;
  /** Where the group's members take turns to apply batches, each under a number (default: this process alone, LocalGate). */
  gate?: (group: string) => ApplyGate;
  /**
   * Told where the group stands on partitions, for a lag figure other processes can read: a
   * batch's partition just before its commit (as it will be after it), and every partition
   * whenever `lag` is read. Best effort: its failures are ignored.
   */
  onPositions?: (positions: PartitionPosition[]) => Promise<void>;
}

/** A consumer group's committed offset on a partition (0 when nothing is committed) and the partition's end. */
export interface PartitionPosition {
  topic: string;
  partition: number;
  committed: bigint;
  end: bigint;
}

/**
 * The Log port on Kafka (DESIGN 2): `append` through KafkaAppender, `subscribe` as a kafkajs
 * consumer group per projector (the group id is the subscription's group). At-least-once into an
 * idempotent sink: a batch's offsets are committed only after `handle` resolved (its rows are in
 * the store), and never for a partition this member no longer owns (`isStale` after a rebalance:
 * its new owner handles the batch again, which changes nothing). A failed batch is retried from
 * the same records after a pause, heartbeats going on meanwhile, so one bad moment never skips
 * anything. A member killed anywhere leaves its uncommitted batches to be delivered again.
 * Batches are handled one at a time per member, in the order of each partition; the members of a
 * group share the partitions.
 */
export class KafkaLog implements Log {
  private readonly kafka: Kafka;
  private readonly appender: KafkaAppender;
  private readonly subscriptions = new Set<KafkaSubscription>();

  constructor(private readonly opts: KafkaLogOptions) {
    this.kafka = new Kafka({ clientId: opts.clientId ?? 'signalbase', brokers: opts.brokers, logLevel: logLevel.NOTHING });
    this.appender = new KafkaAppender(opts);
  }

  async append(topic: string, records: readonly AppendRecord[]): Promise<void> {
    await this.appender.append(topic, records);
  }

  subscribe<P = unknown>(
    group: string,
    topics: readonly string[],
    handle: (batch: LogBatch, prepared?: P) => Promise<void>,
    opts: SubscribeOptions<P> = {},
  ): LogSubscription {
    const sub = new KafkaSubscription(
      this.kafka,
      group,
      topics,
      handle as (b: LogBatch, p?: unknown) => Promise<void>,
      opts as SubscribeOptions<unknown>,
      this.opts,
    );
    this.subscriptions.add(sub);
    const stop = sub.stop.bind(sub);
    sub.stop = async () => {
      this.subscriptions.delete(sub);
      await stop();
    };
    return sub;
  }

  async close(): Promise<void> {
    for (const s of [...this.subscriptions]) await s.stop();
    await this.appender.close();
  }
}

/** A Kafka message as the Log port's record: the value's text (or, past MAX_RECORD_BYTES, its first bytes and its size). */
function toRecord(m: KafkaMessage): LogRecord {
  const value = m.value ?? Buffer.alloc(0);
  const key = m.key?.toString('utf8') ?? '';
  if (value.length > MAX_RECORD_BYTES)
    return { key, value: value.subarray(0, OVERSIZE_PREFIX_BYTES).toString('utf8'), offset: m.offset, oversize: value.length };
  return { key, value: value.toString('utf8'), offset: m.offset };
}

class KafkaSubscription implements LogSubscription {
  private consumer!: Consumer;
  private readonly admin: Admin;
  private readonly started: Promise<void>;
  private stopping = false;
  private readonly gate: ApplyGate;
  /** KafkaLogOptions.topicPrefix: batches name the log's topic, the cluster's topics carry the prefix. */
  private readonly prefix: string;
  /** Consumers started so far: a consumer that crashed for good is replaced by a new one. */
  restarts = 0;

  constructor(
    private readonly kafka: Kafka,
    private readonly group: string,
    private readonly topics: readonly string[],
    private readonly handle: (batch: LogBatch, prepared?: unknown) => Promise<void>,
    private readonly opts: SubscribeOptions<unknown>,
    private readonly cfg: KafkaLogOptions,
  ) {
    this.admin = kafka.admin();
    this.prefix = cfg.topicPrefix ?? '';
    this.gate = cfg.gate?.(group) ?? new LocalGate();
    this.started = this.admin.connect().then(() => this.startConsumer());
    this.started.catch((err) => this.opts.onError?.(err, { topic: '', partition: -1, records: [] }));
  }

  private async startConsumer(): Promise<void> {
    const consumer = this.kafka.consumer({
      groupId: this.group,
      sessionTimeout: this.cfg.sessionTimeout ?? 30_000,
      heartbeatInterval: this.cfg.heartbeatInterval ?? 3000,
      allowAutoTopicCreation: false,
      maxWaitTimeInMs: this.cfg.maxWaitMs ?? 5000,
      retry: { retries: Number.MAX_SAFE_INTEGER, maxRetryTime: 5000 },
    });
    this.consumer = consumer;
    // kafkajs restarts a consumer after a retriable crash; after any other (a broker away longer
    // than its retries, say) it stays down: a new consumer takes over, from the commits.
    consumer.on(consumer.events.CRASH, ({ payload }) => {
      this.opts.onError?.(payload.error, { topic: '', partition: -1, records: [] });
      if (payload.restart || this.stopping) return;
      this.restarts++;
      setTimeout(() => {
        if (this.stopping || this.consumer !== consumer) return;
        consumer
          .disconnect()
          .catch(() => {})
          .then(() => this.startConsumer())
          .catch((err) => this.opts.onError?.(err, { topic: '', partition: -1, records: [] }));
      }, 1000);
    });
    await consumer.connect();
    await consumer.subscribe({ topics: this.topics.map((t) => this.prefix + t), fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 1,
      eachBatch: (payload) => this.eachBatch(payload),
    });
  }

  private async eachBatch({ batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    const max = this.opts.maxBatch ?? 10_000;
    const live = () => isRunning() && !isStale() && !this.stopping;
    for (let i = 0; i < batch.messages.length; i += max) {
      if (!live()) return;
      const records = batch.messages.slice(i, i + max).map(toRecord);
      const logBatch: LogBatch = { topic: batch.topic.slice(this.prefix.length), partition: batch.partition, records };
      const prepared = this.opts.prepare ? await this.opts.prepare(logBatch).catch(() => undefined) : undefined;
      for (;;) {
        try {
          // A turn (and a number) for each attempt: an attempt after a failure comes after whatever the failed one wrote.
          await this.gate.run(async ({ seq, otherWrote }) => {
            logBatch.seq = seq;
            if (otherWrote) await this.opts.onTakeOver?.();
            await this.handle(logBatch, prepared);
          });
          break;
        } catch (err) {
          this.opts.onError?.(err, logBatch);
          // The same records again after a pause; heartbeats keep the partition meanwhile.
          for (let waited = 0; waited < (this.cfg.retryDelayMs ?? 1000); waited += 250) {
            await new Promise((r) => setTimeout(r, 250));
            if (!live()) return;
            await heartbeat().catch(() => {});
          }
        }
      }
      // Revoked while handling: the partition's new owner handles the batch again (the sink is idempotent).
      if (!live()) return;
      const last = records.at(-1)!.offset;
      await this.cfg
        .onPositions?.([{ topic: batch.topic, partition: batch.partition, committed: BigInt(last) + 1n, end: BigInt(batch.highWatermark) }])
        .catch(() => {});
      try {
        await this.consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() }]);
      } catch (err) {
        // A rebalance under way (the commit would be for an old generation): delivered again to whoever owns the partition next.
        this.opts.onError?.(err, logBatch);
        return;
      }
      resolveOffset(last);
      this.opts.onCommit?.(logBatch);
      await heartbeat().catch(() => {});
    }
  }

  /**
   * Committed offset and end of every partition of the topics (an unknown committed offset is -1:
   * nothing committed). kafkajs's admin answers only for the partitions in its metadata of the
   * moment, so a topic can come back with none, or not at all: such an answer is no answer (it
   * throws), else `caughtUp` would have nothing to wait for.
   */
  private async positions(): Promise<{ topic: string; partition: number; committed: bigint; end: bigint }[]> {
    await this.started;
    const out: { topic: string; partition: number; committed: bigint; end: bigint }[] = [];
    const topics = this.topics.map((t) => this.prefix + t);
    const committed = await this.admin.fetchOffsets({ groupId: this.group, topics });
    const ends = await Promise.all(
      committed.map(async (t) => new Map((await this.admin.fetchTopicOffsets(t.topic)).map((p) => [p.partition, BigInt(p.high)]))),
    );
    for (const topic of topics)
      if (!committed.some((t) => t.topic === topic && t.partitions.length > 0)) throw new Error(`no partitions of ${topic} in the answer`);
    committed.forEach((t, i) => {
      for (const p of t.partitions) {
        const end = ends[i]!.get(p.partition);
        if (end === undefined) throw new Error(`no end offset of ${t.topic}/${p.partition} in the answer`);
        out.push({ topic: t.topic, partition: p.partition, committed: BigInt(p.offset), end });
      }
    });
    return out;
  }

  /** Records on the log this group has not committed yet, over every partition of its topics. */
  async lag(): Promise<number> {
    let positions: Awaited<ReturnType<typeof this.positions>>;
    // A broker away for a moment: the last figure known (the next scrape asks again).
    try {
      positions = await this.positions();
    } catch (err) {
      if (this.lastLag === undefined) throw err;
      return this.lastLag;
    }
    const known = positions.map((p) => ({ ...p, committed: p.committed < 0n ? 0n : p.committed }));
    await this.cfg.onPositions?.(known).catch(() => {});
    let n = 0n;
    for (const p of known) n += p.end > p.committed ? p.end - p.committed : 0n;
    return (this.lastLag = Number(n));
  }
  private lastLag: number | undefined;

  /** Resolves once the group (any member) has committed every record that was on the log when called. */
  async caughtUp(): Promise<void> {
    let target: Map<string, bigint> | undefined;
    // Asked again soon at first (a live projector is usually there already), then every 100 ms.
    for (let pause = 10; ; pause = Math.min(100, pause * 2)) {
      if (this.stopping) return;
      try {
        // Brokers that do not answer for a moment (moved leaders, a stopped broker) are asked again.
        const pos = await this.positions();
        target ??= new Map(pos.map((p) => [`${p.topic}/${p.partition}`, p.end]));
        if (pos.every((p) => (p.committed < 0n ? 0n : p.committed) >= (target!.get(`${p.topic}/${p.partition}`) ?? 0n))) return;
      } catch {
        /* asked again below */
      }
      await new Promise((r) => setTimeout(r, pause));
    }
  }

  async stop(): Promise<void> {
    this.stopping = true;
    await this.started.catch(() => {});
    await this.consumer.disconnect().catch(() => {});
    await this.admin.disconnect().catch(() => {});
  }
}
