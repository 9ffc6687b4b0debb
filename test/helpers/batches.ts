import type { Principal } from '../../apps/reads/principal.ts';
import { SCOPES } from '../../schemas/topics/index.ts';
import type { TopicRecord } from './harness.ts';

/** A batch of records at the given log positions, as the log delivers it (a replay delivers the same positions again). */
export const batchOf = (records: readonly TopicRecord[], firstOffset: number) => ({
  topic: records[0]!.topic,
  partition: 0,
  records: records.map((r, i) => ({ key: '', value: JSON.stringify(r.value), offset: String(firstOffset + i) })),
});

/** A caller with every scope, every visibility and no history window. */
export const OPEN_PRINCIPAL: Principal = {
  accountId: 'a',
  keyId: 'k',
  scopes: new Set(SCOPES),
  messageVisibility: { mode: 'all' },
  signalVisibility: { mode: 'all' },
  historyWindowDays: null,
};
