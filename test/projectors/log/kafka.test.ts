// Issue 10, item 1 (producer side): KafkaAppender against a real Kafka-protocol peer, librdkafka's
// mock cluster (test/helpers/kafka-mock.ts). What a user of `signalbase ingest --to kafka` needs:
// every record acknowledged is on the log, each key's records in the order appended, also while
// partition leaders move mid-send (the kafkajs 2.2.4 defect of ../shared/TESTING.md drops a
// partition's messages and still resolves). Read back with a plain kafkajs consumer.
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KafkaAppender } from '../../../projectors/log/kafka.ts';
import { type KafkaMock, kafkaMock } from '../../helpers/kafka-mock.ts';

const PARTITIONS = 6;
let mock: KafkaMock | { skip: string };
beforeAll(async () => {
  mock = await kafkaMock(3, { steady: PARTITIONS, large: PARTITIONS, moving: PARTITIONS, naive: PARTITIONS });
}, 30_000);
afterAll(async () => {
  if ('stop' in mock) await mock.stop();
});

/** Every message of `topic` from the beginning, as `key:seq` values, once `expected` are there (or the deadline passes). */
async function readAll(brokers: string[], topic: string, expected: number): Promise<{ key: string; value: string }[]> {
  const kafka = new Kafka({ clientId: 'reader', brokers, logLevel: logLevel.NOTHING });
  const consumer = kafka.consumer({ groupId: `reader-${topic}-${Date.now()}`, sessionTimeout: 6000, heartbeatInterval: 500 });
  const out: { key: string; value: string }[] = [];
  await consumer.connect();
  await consumer.subscribe({ topic, fromBeginning: true });
  const done = new Promise<void>((resolve) => {
    const deadline = setTimeout(resolve, 30_000);
    void consumer.run({
      eachBatch: async ({ batch }) => {
        for (const m of batch.messages) out.push({ key: m.key!.toString(), value: m.value!.toString() });
        if (out.length >= expected) {
          clearTimeout(deadline);
          setTimeout(resolve, 500);
        } // and a little longer: duplicates after the count
      },
    });
  });
  await done;
  await consumer.disconnect();
  return out;
}

/** Records `k<i>` keyed by 50 keys, each value the key and its sequence number. */
const records = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ key: `k${i % 50}`, value: { key: `k${i % 50}`, seq: Math.floor(i / 50) } }));

/** What the read-back holds against what was appended: lost, duplicated, and keys read out of order. */
function audit(appended: ReturnType<typeof records>, read: { key: string; value: string }[]) {
  const seen = new Map<string, number>();
  const lastSeq = new Map<string, number>();
  let outOfOrder = 0;
  for (const m of read) {
    const v = JSON.parse(m.value) as { key: string; seq: number };
    expect(v.key).toBe(m.key);
    seen.set(m.value, (seen.get(m.value) ?? 0) + 1);
    // A resend repeats a run of a key's records: a sequence number may come again, never one skipped ahead and then an older new one.
    const last = lastSeq.get(v.key) ?? -1;
    if (v.seq > last + 1 && !seen.has(JSON.stringify({ key: v.key, seq: last + 1 }))) outOfOrder++;
    lastSeq.set(v.key, Math.max(last, v.seq));
  }
  const lost = appended.filter((r) => !seen.has(JSON.stringify(r.value))).length;
  const duplicated = [...seen.values()].reduce((s, n) => s + n - 1, 0);
  return { lost, duplicated, outOfOrder };
}

describe('KafkaAppender on a Kafka-protocol peer', () => {
  it('puts every acknowledged record on the log, each key in order', async (ctx) => {
    if ('skip' in mock) return ctx.skip(mock.skip);
    const appender = new KafkaAppender({ brokers: mock.brokers });
    const all = records(3000);
    for (let i = 0; i < all.length; i += 500) await appender.append('steady', all.slice(i, i + 500));
    await appender.close();
    const read = await readAll(mock.brokers, 'steady', all.length);
    expect(audit(all, read)).toEqual({ lost: 0, duplicated: 0, outOfOrder: 0 });
  }, 120_000);

  it('one append of 24,000 records (4,000 per partition, more than one send carries): each key in order, nothing lost or doubled', async (ctx) => {
    if ('skip' in mock) return ctx.skip(mock.skip);
    const appender = new KafkaAppender({ brokers: mock.brokers });
    const all = records(24_000);
    await appender.append('large', all);
    await appender.close();
    const read = await readAll(mock.brokers, 'large', all.length);
    expect(audit(all, read)).toEqual({ lost: 0, duplicated: 0, outOfOrder: 0 });
  }, 120_000);

  it('loses nothing while partition leaders move during sends (regression: the kafkajs 2.2.4 leader-move defect)', async (ctx) => {
    if ('skip' in mock) return ctx.skip(mock.skip);
    const m = mock;
    const all = records(15_000);
    let moves = 0;
    let moving = true;
    const mover = (async () => {
      for (let i = 0; moving; i++) {
        await m.command(`leader moving ${i % PARTITIONS} ${1 + ((i * 7) % 3)}`);
        moves++;
        await new Promise((r) => setTimeout(r, 3));
      }
    })();
    const appender = new KafkaAppender({ brokers: m.brokers });
    for (let i = 0; i < all.length; i += 200) await appender.append('moving', all.slice(i, i + 200));
    moving = false;
    await mover;
    await appender.close();
    const read = await readAll(m.brokers, 'moving', all.length);
    const figures = audit(all, read);
    console.log(
      `leader-move fault test: ${all.length} records appended, ${moves} leader moves, ${appender.totals.resent} partition sends repeated, ` +
        `${figures.lost} lost, ${figures.duplicated} duplicated, ${figures.outOfOrder} keys out of order`,
    );
    expect(moves).toBeGreaterThan(30);
    expect(figures.lost).toBe(0);
    expect(figures.outOfOrder).toBe(0);
  }, 180_000);
});
