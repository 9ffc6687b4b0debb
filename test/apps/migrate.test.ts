// Issue 6 item 4 (upgrades): a DATA_DIR whose read models were built by an earlier version is
// rebuilt from the log on start, never served from its old tables.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbedded, storePath } from '../../apps/embedded.ts';
import { EmbeddedLog } from '../../projectors/log/embedded.ts';
import { ensureSchema, PROJECTOR_GROUP, READ_MODEL_VERSION } from '../../projectors/runner.ts';
import { openChdbStore } from '../../storage/chdb.ts';
import { build } from '../helpers/harness.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'signalbase-migrate-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const cfg = { port: 0, host: '127.0.0.1', dataDir, logLevel: 'silent' };
const TOPICS = ['source-identities', 'traders', 'messages'] as const;

async function start(lines: string[]) {
  const emb = await startEmbedded(cfg, { seed: false, say: (l) => lines.push(l) });
  await emb.firstCatchUp;
  const rows = await emb.store.query<{ id: string; text: string }>('SELECT id, text FROM $db.messages_current ORDER BY id');
  const [v] = await emb.store.query<{ v: number }>('SELECT argMax(version, at) AS v FROM $db.read_model_version');
  await emb.close();
  return { rows, version: v!.v };
}

describe('upgrades: read models of an earlier version are rebuilt from the log on start', () => {
  it('an earlier DATA_DIR (no version, old unsanitized rows, log fully committed) is rebuilt; a restart does not rebuild again', async () => {
    const log = new EmbeddedLog(dataDir);
    const recs = [
      build.source('src-1'),
      build.trader(1),
      build.message('m1', 'src-1', '2026-01-01T00:00:00Z', { text: '<b>bold</b> move' }),
    ];
    for (const r of recs) log.appendSync(r.topic, [{ key: '', value: r.value }]);
    // What the earlier version left: its tables with the row as it stored it, and the log committed.
    const old = await openChdbStore(storePath(dataDir));
    await ensureSchema(old);
    await old.exec(`INSERT INTO $db.messages (id, platform, sourceIdentityId, writtenAt, text, attachmentTypes, attachmentUrls, version, deleted)
      VALUES ('m1', 'TELEGRAM', 'src-1', '2026-01-01 00:00:00', '<b>bold</b> move', [], [], 1, 0)`);
    await old.close();
    log.writeOffsets(PROJECTOR_GROUP, Object.fromEntries(TOPICS.map((t) => [t, statSync(log.topicFile(t)).size])));

    const lines: string[] = [];
    const first = await start(lines);
    expect(lines.some((l) => /rebuilding them from the log/.test(l))).toBe(true);
    expect(first).toEqual({ rows: [{ id: 'm1', text: 'bold move' }], version: READ_MODEL_VERSION });

    const again: string[] = [];
    expect(await start(again)).toEqual(first);
    expect(again.some((l) => /rebuilding/.test(l))).toBe(false);
  });
});
