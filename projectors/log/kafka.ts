import { Kafka, logLevel, Partitioners, type Admin, type Message, type PartitionMetadata, type Producer } from 'kafkajs';
import type { AppendRecord } from './port.ts';

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
}

export interface AppendReport {
  /** Partitions sent again because a send's answer lacked them or failed them. */
  resent: number;
}

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
  }

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
  async append(topic: string, records: readonly AppendRecord[]): Promise<AppendReport> {
    if (!records.length) return { resent: 0 };
    await this.connect();
    const partitionMetadata = await this.partitionsOf(topic);
    const byPartition = new Map<number, Message[]>();
    for (const r of records) {
      const message: Message = { key: r.key, value: 'raw' in r ? r.raw : JSON.stringify(r.value) };
      message.partition = this.partitioner({ topic, partitionMetadata, message });
      (byPartition.get(message.partition) ?? byPartition.set(message.partition, []).get(message.partition)!).push(message);
    }
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
      if (attempt >= this.maxAttempts) throw new Error(`kafka: ${topic} partitions ${[...missing.keys()].join(', ')} not acknowledged after ${attempt} sends`);
      resent += missing.size;
      pending = missing;
      await this.partitionsOf(topic, true); // leaders moved: fresh metadata before the resend
    }
    this.totals.resent += resent;
    return { resent };
  }

  async close(): Promise<void> {
    if (!this.connected) return;
    await this.connected.catch(() => {});
    await Promise.all([this.producer.disconnect(), this.admin.disconnect()]);
  }
}
