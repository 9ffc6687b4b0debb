import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LogBatch } from '../../projectors/log/port.ts';
import { applyBatch, ensureSchema } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import { ChdbStore } from '../../storage/chdb.ts';
import type { TopicRecord } from './harness.ts';

/**
 * Projection specs in the given/when/then style: `given(records)` is applied as log batches
 * (grouped by topic, in order), and then applied a second time, as at-least-once delivery may do;
 * `then` checks the read after both passes, so every spec also proves idempotency.
 */
export function projectionSpec(session: ProjectorSession) {
  let offset = 0;
  // A replay delivers the same log positions again, so offsets are assigned once per `given`.
  const toBatches = (records: readonly (TopicRecord | { topic: string; raw: string })[]): LogBatch[] =>
    records.map((r) => ({
      topic: r.topic,
      partition: 0,
      records: [{ key: '', value: 'raw' in r ? r.raw : JSON.stringify(r.value), offset: String(++offset) }],
    }));
  const apply = async (batches: readonly LogBatch[]) => {
    for (const b of batches) await applyBatch(session, b);
  };
  return {
    given: (records: readonly (TopicRecord | { topic: string; raw: string })[]) => ({
      when: <T>(read: () => Promise<T>) => ({
        // biome-ignore lint/suspicious/noThenProperty: the spec reads given(...).when(...).then(rows), as Emmett's do; it is awaited by no one
        then: async (expected: T | ((actual: T) => void)) => {
          const batches = toBatches(records);
          await apply(batches);
          const first = await read();
          await apply(batches); // replay: the same records delivered again
          const second = await read();
          const { expect } = await import('vitest');
          expect(second).toEqual(first);
          if (typeof expected === 'function') (expected as (a: T) => void)(second);
          else expect(second).toEqual(expected);
        },
      }),
    }),
  };
}

/**
 * A fresh chdb store of its own (directory and database `name`, per process) with every read model's schema, and the
 * projector session that applies batches to it; `close` drops it.
 */
export async function openSchemaStore(name: string): Promise<{ store: ChdbStore; session: ProjectorSession; close(): Promise<void> }> {
  const dir = join(tmpdir(), `signalbase-${name}-${process.pid}`);
  const store = await new ChdbStore(dir, `${name}_${process.pid}`).init();
  await store.drop();
  await store.init();
  await ensureSchema(store);
  return {
    store,
    session: new ProjectorSession(store),
    close: async () => {
      await store.drop();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
