import type { LogBatch } from '../../projectors/log/port.ts';
import { applyBatch } from '../../projectors/runner.ts';
import type { Store } from '../../projectors/store/port.ts';
import type { TopicRecord } from './harness.ts';

/**
 * Projection specs in the given/when/then style: `given(records)` is applied as log batches
 * (grouped by topic, in order), and then applied a second time, as at-least-once delivery may do;
 * `then` checks the read after both passes, so every spec also proves idempotency.
 */
export function projectionSpec(store: Store) {
  let offset = 0;
  // A replay delivers the same log positions again, so offsets are assigned once per `given`.
  const toBatches = (records: readonly (TopicRecord | { topic: string; raw: string })[]): LogBatch[] => records.map((r) => ({
    topic: r.topic, partition: 0, records: [{ key: '', value: 'raw' in r ? r.raw : JSON.stringify(r.value), offset: String(++offset) }],
  }));
  const apply = async (batches: readonly LogBatch[]) => { for (const b of batches) await applyBatch(store, b); };
  return {
    given: (records: readonly (TopicRecord | { topic: string; raw: string })[]) => ({
      when: <T>(read: () => Promise<T>) => ({
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
