// Issue 26: the feed projection keeps the row and stamp of the groups it read or wrote last, so a
// live message and then its event cost one look-up of the group instead of three. What it keeps
// is only this session's: a group that an earlier projector wrote is read from the store. Here a
// restarted projector (a new session) changes a group that the first one stamped, and a
// since-poll from the start must list the group once (contract 4: a group appears at its latest
// change), with its edited message and both events.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CursorCodec } from '../../apps/reads/cursor.ts';
import { OPERATIONS } from '../../apps/registry.ts';
import { applyBatch } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import { batchOf, OPEN_PRINCIPAL } from '../helpers/batches.ts';
import { build, type TopicRecord } from '../helpers/harness.ts';
import { openSchemaStore } from '../helpers/spec.ts';

let db: Awaited<ReturnType<typeof openSchemaStore>>;
beforeAll(async () => {
  db = await openSchemaStore('feedmemo');
});
afterAll(() => db?.close());

const FEED = OPERATIONS.find((o) => o.tool === 'list_feed' && o.versions.includes('v2'))!;
const NOW = new Date(Date.UTC(2026, 0, 2));
const AT = '2026-01-01T10:00:00.000Z';

let offset = 0;
/** Applies each record as a batch of its own, in order, with `session`. */
async function given(session: ProjectorSession, records: readonly TopicRecord[]): Promise<void> {
  for (const r of records) await applyBatch(session, batchOf([r], ++offset));
}

async function sinceStart(): Promise<any[]> {
  const page = (await FEED.handler(
    { store: db.store, principal: OPEN_PRINCIPAL, now: NOW, cursors: CursorCodec.random() },
    { since: '0', limit: 100 },
  )) as { results: any[] };
  return page.results;
}

describe('a group stamped by one projector and changed by the next (a restart)', () => {
  it('appears once in a since-poll from the start, with its current message and events', async () => {
    await given(db.session, [
      build.trader(1),
      build.asset(1),
      build.message('m1', 'src-1', AT, { text: 'first' }),
      build.event(10, { messageId: 'm1', timeOfEvent: AT }),
    ]);
    expect((await sinceStart()).map((g) => g.id ?? g.messageId)).toHaveLength(1);

    // A new session knows nothing of m1's group: an edit and a new event of it.
    const restarted = new ProjectorSession(db.store);
    await given(restarted, [
      build.message('m1', 'src-1', AT, { text: 'edited', isEdited: true, version: 2 }),
      build.event(11, { messageId: 'm1', positionId: 11, timeOfEvent: '2026-01-01T10:05:00.000Z' }),
    ]);
    const groups = await sinceStart();
    expect(groups).toHaveLength(1);
    expect(JSON.stringify(groups[0])).toContain('edited');
    expect(JSON.stringify(groups[0])).not.toContain('"first"');
    const eventIds = (groups[0].events ?? groups[0].tradeEvents ?? []).map((e: { id: number }) => e.id).sort();
    expect(eventIds).toEqual([10, 11]);
  }, 60_000);
});
