import { appendFileSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { EmbeddedLog } from '../../projectors/log/embedded.ts';
import { type LogBatch, type LogSubscription, MAX_RECORD_BYTES, OVERSIZE_PREFIX_BYTES } from '../../projectors/log/port.ts';
import { ensureSchema, runProjector } from '../../projectors/runner.ts';
import { ChdbStore } from '../../storage/chdb.ts';
import { event, eventText, message } from './records.ts';

/**
 * The embedded log at the ingest edge (issue 5): appends keep the bytes given, a torn line never
 * glues onto the next record, no record (however large) stalls its topic, and lag is counted.
 * Each test gets its own log directory and its own chdb database.
 */
const chdbDir = join(tmpdir(), `signalbase-test-${process.pid}`);
const cleanup: (() => Promise<void> | void)[] = [];
let dbs = 0;

afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});
afterAll(() => rmSync(chdbDir, { recursive: true, force: true }));

function newLog(): EmbeddedLog {
  const dir = mkdtempSync(join(tmpdir(), 'signalbase-log-test-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return new EmbeddedLog(dir, 20);
}

async function projected(log: EmbeddedLog): Promise<{ store: ChdbStore; sub: LogSubscription }> {
  const store = await new ChdbStore(chdbDir, `log_${process.pid}_${++dbs}`).init();
  await ensureSchema(store);
  const sub = runProjector(log, store);
  cleanup.push(async () => {
    await sub.stop();
    await store.drop();
    await store.close();
  });
  return { store, sub };
}

/** caughtUp() within a time limit: a stalled topic fails the test instead of hanging it. */
const caughtUp = (sub: LogSubscription, ms = 30_000) =>
  Promise.race([
    sub.caughtUp(),
    new Promise((_, reject) => setTimeout(() => reject(new Error(`caughtUp() did not resolve within ${ms} ms`)), ms)),
  ]);

const deadLetters = (store: ChdbStore) =>
  store.query<{ topic: string; key: string; raw: string; reason: string }>(
    'SELECT topic, key, raw, reason FROM $db.dead_letters FINAL ORDER BY topic, toUInt64(offset)',
  );
const eventIds = async (store: ChdbStore) =>
  (await store.query<{ id: number }>('SELECT id FROM $db.events_current ORDER BY id')).map((r) => r.id);

describe('appending', () => {
  it('issue 5: a raw record is written verbatim as {"k":<key>,"v":<raw>} on a line of its own', () => {
    const log = newLog();
    const raw = '{ "id" : 7,  "price":1.50 }';
    log.appendSync('trade-events', [
      { key: '7', raw },
      { key: 'k"8', value: { a: 1 } },
    ]);
    expect(readFileSync(log.topicFile('trade-events'), 'utf8')).toBe(`{"k":"7","v":${raw}}\n{"k":"k\\"8","v":{"a":1}}\n`);
    expect(() => log.appendSync('trade-events', [{ key: '9', raw: '{\n}' }])).toThrow(/one line/);
  });

  it('issue 5: an append after a torn last line starts on a fresh line', () => {
    const log = newLog();
    const file = log.topicFile('trade-events');
    appendFileSync(file, '{"k":"8","v":{"id":8,"posi');
    log.appendSync('trade-events', [{ key: '9', raw: eventText(9) }]);
    expect(readFileSync(file, 'utf8')).toBe(`{"k":"8","v":{"id":8,"posi\n{"k":"9","v":${eventText(9)}}\n`);
  });
});

describe('reading', () => {
  it('gives each record its key, its value text and the byte offset after its line, whatever the characters', () => {
    const log = newLog();
    const values = [{ t: 'plain' }, { t: 'café 🚀 \u2028 ok' }, { t: 'end' }];
    log.appendSync('messages', [
      { key: 'k1', value: values[0] },
      { key: 'k"2\\é', value: values[1] },
      { key: 'ключ', value: values[2] },
    ]);
    appendFileSync(log.topicFile('messages'), ' \t\r\n\n{"k":"x","v":1}\r\n{"v":2}\n');
    const file = readFileSync(log.topicFile('messages'));
    const ends: number[] = [];
    for (let i = file.indexOf(10); i !== -1; i = file.indexOf(10, i + 1)) ends.push(i + 1);
    const { records, next, lines } = log.read('messages', 0, 100);
    expect(lines).toBe(7);
    expect(next).toBe(file.length);
    expect(records).toEqual([
      { key: 'k1', value: JSON.stringify(values[0]), offset: String(ends[0]) },
      { key: 'k"2\\é', value: JSON.stringify(values[1]), offset: String(ends[1]) },
      { key: 'ключ', value: JSON.stringify(values[2]), offset: String(ends[2]) },
      // not envelopes as appended: the line as a whole, to be dead-lettered
      { key: '', value: '{"k":"x","v":1}\r', offset: String(ends[5]) },
      { key: '', value: '{"v":2}', offset: String(ends[6]) },
    ]);
    // From the middle, at most `max` lines (blank ones count).
    const part = log.read('messages', ends[1]!, 3);
    expect(part.records.map((r) => r.key)).toEqual(['ключ']);
    expect(part).toMatchObject({ next: ends[4], lines: 3 });
  });

  it('hands the handler what prepare made of each batch, reading and preparing the next one meanwhile; a failed batch is read and prepared again', async () => {
    const log = newLog();
    log.appendSync(
      'trade-events',
      Array.from({ length: 10 }, (_, i) => ({ key: String(i), raw: eventText(i + 1) })),
    );
    const prepared: string[] = [];
    const handled: string[] = [];
    let fail = true;
    const sub = log.subscribe<string>(
      'prepare-test',
      ['trade-events'],
      async (b, p) => {
        handled.push(`${b.records[0]!.key}:${p}`);
        await new Promise((r) => setTimeout(r, 20));
        if (b.records[0]!.key === '4' && fail) {
          fail = false;
          throw new Error('store down');
        }
      },
      {
        maxBatch: 2,
        prepare: async (b) => {
          const id = b.records.map((r) => r.key).join('+');
          prepared.push(id);
          return id;
        },
        onError: () => {},
      },
    );
    cleanup.push(() => sub.stop());
    await caughtUp(sub);
    expect(handled).toEqual(['0:0+1', '2:2+3', '4:4+5', '4:4+5', '6:6+7', '8:8+9']);
    // Each batch prepared once ahead of its turn, the failed one (and the one read ahead of it) again.
    expect(prepared.filter((p) => p === '4+5')).toHaveLength(2);
    expect(prepared.filter((p) => p === '0+1' || p === '2+3' || p === '8+9')).toEqual(['0+1', '2+3', '8+9']);
    expect(await sub.lag()).toBe(0);
  });
});

describe('lanes', () => {
  it('a topic in a lane of its own is handled while another lane waits on its batch; each commits its own offsets', async () => {
    const log = newLog();
    log.appendSync(
      'trade-events',
      Array.from({ length: 4 }, (_, i) => ({ key: String(i), raw: eventText(i + 1) })),
    );
    log.appendSync(
      'messages',
      Array.from({ length: 6 }, (_, i) => ({ key: `m${i}`, value: message(`m${i}`).value })),
    );
    let open!: () => void;
    const gate = new Promise<void>((r) => {
      open = r;
    });
    const handled: string[] = [];
    const sub = log.subscribe(
      'lanes-test',
      ['trade-events', 'messages'],
      async (b) => {
        handled.push(`${b.topic} ${b.records.map((r) => r.key).join(',')}`);
        if (b.topic === 'trade-events') await gate;
      },
      { maxBatch: 2, lanes: [['messages']] },
    );
    cleanup.push(async () => {
      open();
      await sub.stop();
    });
    for (let i = 0; i < 200 && handled.filter((h) => h.startsWith('messages')).length < 3; i++) await new Promise((r) => setTimeout(r, 10));
    expect(handled.filter((h) => h.startsWith('messages'))).toEqual(['messages m0,m1', 'messages m2,m3', 'messages m4,m5']);
    expect(handled.filter((h) => h.startsWith('trade-events'))).toEqual(['trade-events 0,1']); // still waiting on it
    expect(log.readOffsets('lanes-test')).toEqual({ messages: log.end('messages') });
    expect(await sub.lag()).toBe(4);
    open();
    await caughtUp(sub);
    expect(handled.filter((h) => h.startsWith('trade-events'))).toEqual(['trade-events 0,1', 'trade-events 2,3']);
    expect(log.readOffsets('lanes-test')).toEqual({ messages: log.end('messages'), 'trade-events': log.end('trade-events') });
    expect(await sub.lag()).toBe(0);
  });
});

describe('projecting what the log holds', () => {
  it('issue 5: a torn last line followed by an append gives one dead letter for the fragment and projects the appended record', async () => {
    const log = newLog();
    const fragment = `{"k":"8","v":${eventText(8).slice(0, 40)}`;
    log.appendSync('trade-events', [{ key: '7', raw: eventText(7) }]);
    appendFileSync(log.topicFile('trade-events'), fragment); // a crash mid-append
    log.appendSync('trade-events', [{ key: '9', raw: eventText(9) }]);
    const { store, sub } = await projected(log);
    await caughtUp(sub);
    expect(await eventIds(store)).toEqual([7, 9]);
    const dead = await deadLetters(store);
    expect(dead).toEqual([{ topic: 'trade-events', key: '', raw: fragment, reason: expect.stringMatching(/^invalid JSON/) }]);
  });

  it('issue 5: caughtUp() does not wait for a torn tail; sealTornTails() makes it a dead letter of its own', async () => {
    const log = newLog();
    const fragment = '{"k":"8","v":{"id":8';
    log.appendSync('trade-events', [{ key: '7', raw: eventText(7) }]);
    appendFileSync(log.topicFile('trade-events'), fragment);
    const { store, sub } = await projected(log);
    await caughtUp(sub);
    expect(await eventIds(store)).toEqual([7]);
    expect(await sub.lag()).toBe(0);
    expect(await deadLetters(store)).toEqual([]);

    expect(log.sealTornTails()).toEqual(['trade-events']);
    expect(log.sealTornTails()).toEqual([]);
    await caughtUp(sub);
    expect((await deadLetters(store)).map((d) => [d.raw, d.reason.slice(0, 12)])).toEqual([[fragment, 'invalid JSON']]);
  });

  it('issue 5: blank lines are consumed without a dead letter, also when nothing else follows', async () => {
    const log = newLog();
    appendFileSync(log.topicFile('trade-events'), '\n  \n');
    const { store, sub } = await projected(log);
    await caughtUp(sub);
    log.appendSync('trade-events', [{ key: '7', raw: eventText(7) }]);
    appendFileSync(log.topicFile('trade-events'), '\r\n\n');
    await caughtUp(sub);
    expect(await eventIds(store)).toEqual([7]);
    expect(await deadLetters(store)).toEqual([]);
    expect(await sub.lag()).toBe(0);
  });

  it('issue 5: dead_letters.raw holds the bytes appended (an id 9007199254740993 is not rewritten to ...992)', async () => {
    const log = newLog();
    const raws = [
      eventText(1, { id: '9007199254740993' }),
      eventText(2, { price: '1e400' }),
      eventText(3, { timeOfEvent: '"2016-12-31T23:59:60Z"' }),
      ' { "id" : 4 } ',
    ];
    log.appendSync(
      'trade-events',
      raws.map((raw, i) => ({ key: String(i), raw })),
    );
    const { store, sub } = await projected(log);
    await caughtUp(sub);
    const dead = await deadLetters(store);
    expect(dead.map((d) => d.raw)).toEqual(raws);
    expect(dead.map((d) => d.reason)).toEqual([
      expect.stringMatching(/^schema: \/id /),
      expect.stringMatching(/^non-finite number at \/price/),
      expect.stringMatching(/^schema: \/timeOfEvent /),
      expect.stringMatching(/^schema: /),
    ]);
    expect(await eventIds(store)).toEqual([]);
  });

  it('issue 5: a 17 MiB record is dead-lettered with its size; the records after it are projected and caughtUp() resolves', async () => {
    const log = newLog();
    const big = message('m-big', { text: 'x'.repeat(17 << 20) }).value;
    const bigText = JSON.stringify(big);
    log.appendSync('messages', [
      { key: 'm-before', value: message('m-before').value },
      { key: 'm-big', value: big },
      { key: 'm-after', value: message('m-after').value },
    ]);
    log.appendSync('trade-events', [{ key: '5', value: event(5).value }]);
    const { store, sub } = await projected(log);
    await caughtUp(sub, 60_000);
    const ids = await store.query<{ id: string }>('SELECT id FROM $db.messages_current ORDER BY id');
    expect(ids.map((r) => r.id)).toEqual(['m-after', 'm-before']);
    expect(await eventIds(store)).toEqual([5]);
    const dead = await deadLetters(store);
    expect(dead).toHaveLength(1);
    expect(dead[0]!.key).toBe('m-big');
    expect(dead[0]!.reason).toBe(
      `record too large: ${Buffer.byteLength(bigText)} bytes, over the maximum record size of ${MAX_RECORD_BYTES} bytes; raw keeps only its first ${OVERSIZE_PREFIX_BYTES} bytes`,
    );
    expect(dead[0]!.raw).toBe(bigText.slice(0, OVERSIZE_PREFIX_BYTES));
    expect(await sub.lag()).toBe(0);
  }, 90_000);

  it('issue 5: a record of ~15 MiB (longer than one read chunk, within the maximum) is projected', async () => {
    const log = newLog();
    const text = 'y'.repeat(15 << 20);
    log.appendSync('messages', [
      { key: 'm-15', value: message('m-15', { text }).value },
      { key: 'm-next', value: message('m-next').value },
    ]);
    const { store, sub } = await projected(log);
    await caughtUp(sub, 60_000);
    expect(await store.query('SELECT id, length(text) AS n FROM $db.messages_current ORDER BY id')).toEqual([
      { id: 'm-15', n: text.length },
      { id: 'm-next', n: 'message m-next'.length },
    ]);
    expect(await deadLetters(store)).toEqual([]);
  }, 90_000);
});

describe('lag', () => {
  /** A subscription whose handler waits for `release()`: what it holds is read but not committed. */
  function gated(log: EmbeddedLog) {
    let open!: () => void;
    let gate = new Promise<void>((r) => {
      open = r;
    });
    const handled: LogBatch[] = [];
    const sub = log.subscribe(
      'lag-test',
      ['trade-events', 'prices'],
      async (b) => {
        handled.push(b);
        await gate;
      },
      { maxBatch: 2 },
    );
    cleanup.push(async () => {
      open();
      await sub.stop();
    });
    return {
      sub,
      handled,
      release() {
        open();
        gate = new Promise<void>((r) => {
          open = r;
        });
      },
      releaseAll() {
        open();
        gate = Promise.resolve();
      },
    };
  }
  const append = (log: EmbeddedLog, topic: string, n: number, from = 0) =>
    log.appendSync(
      topic,
      Array.from({ length: n }, (_, i) => ({ key: String(from + i), raw: eventText(from + i + 1) })),
    );
  const until = async (cond: () => boolean) => {
    for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  };

  it('issue 5: counts the records not yet committed by the group, counts new appends, and drops to 0', async () => {
    const log = newLog();
    append(log, 'trade-events', 5);
    append(log, 'prices', 2);
    const g = gated(log);
    await until(() => g.handled.length === 1);
    expect(await g.sub.lag()).toBe(7); // the batch being handled is not projected yet
    g.release();
    await until(() => g.handled.length === 2);
    expect(await g.sub.lag()).toBe(5);
    append(log, 'trade-events', 3, 5);
    appendFileSync(log.topicFile('prices'), '{"k":"torn"'); // not a record (yet): not counted
    expect(await g.sub.lag()).toBe(8);
    g.releaseAll();
    await caughtUp(g.sub);
    expect(await g.sub.lag()).toBe(0);
  });

  it('issue 5: is incremental: a call reads only what was appended since the previous one', async () => {
    const log = newLog();
    append(log, 'trade-events', 4);
    const g = gated(log);
    await until(() => g.handled.length === 1);
    const count = vi.spyOn(log, 'countLines');
    expect(await g.sub.lag()).toBe(4);
    const scanned = () => count.mock.calls.reduce((n, [, from, to]) => n + (to - from), 0);
    const first = scanned();
    expect(first).toBe(log.end('trade-events'));
    expect(await g.sub.lag()).toBe(4);
    expect(scanned()).toBe(first); // nothing appended: nothing read
    const before = log.end('trade-events');
    append(log, 'trade-events', 1, 4);
    expect(await g.sub.lag()).toBe(5);
    expect(scanned() - first).toBe(log.end('trade-events') - before);
    g.releaseAll();
    await caughtUp(g.sub);
    expect(await g.sub.lag()).toBe(0);
  });
});
