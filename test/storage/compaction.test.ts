// Tombstones are bounded (issue 6, item 1): the statement tables hold a tombstone at every sorting
// key an entity left (a closed position, an edited event time, a moved message, a renamed trader); compaction drops
// them once nothing is left for them to cancel, and no read changes, before or after a replay.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compactStatements, MERGED_TABLES, STATEMENT_TABLES } from '../../storage/compaction.ts';
import { createHarness, type Harness } from '../helpers/harness.ts';
import { prng } from '../helpers/prng.ts';
import { buildRecords } from '../projectors/crash-records.ts';

const NOW = Date.parse('2026-06-01T00:00:00.000Z');
const ALL_TIME = '2000-01-01T00:00:00.000Z';
let h: Harness;
let key: string;
let records: ReturnType<typeof buildRecords>['records'];
beforeAll(async () => {
  h = await createHarness({ clock: () => NOW });
  records = buildRecords(NOW, prng(42)).records;
  // In small parts, so that entities change between batches (one batch would state only final states).
  // Two traders renamed last (the directory is ordered by name: a rename moves the trader's key).
  const traders = records.filter((r) => r.topic === 'traders' && !r.value.deleted).slice(0, 2);
  records = [
    ...records,
    ...traders.map((r) => ({ topic: r.topic, value: { ...r.value, name: `Renamed ${r.value.id}`, version: r.value.version + 100 } })),
  ];

  for (let i = 0; i < records.length; i += 100) await h.given(records.slice(i, i + 100));
  // Two messages of live feed groups moved in time: their groups move key (the feed is ordered by writtenAt).
  const grouped = new Set(
    (await h.store.query<{ id: string }>('SELECT id FROM $db.feed_groups WHERE live = 1 AND tomb = 0')).map((r) => r.id),
  );
  const latest = new Map<string, any>();
  for (const r of records)
    if (r.topic === 'messages' && grouped.has(r.value.id) && !(latest.get(r.value.id)?.version > r.value.version))
      latest.set(r.value.id, r.value);
  const moved = [...latest.values()]
    .filter((m) => !m.deleted)
    .slice(0, 2)
    .map((m) => ({
      topic: 'messages' as const,
      value: { ...m, writtenAt: new Date(Date.parse(m.writtenAt) - 3_600_000).toISOString(), version: m.version + 100 },
    }));
  records = [...records, ...moved];
  await h.given(moved);
  key = await h.key();
}, 120_000);
afterAll(async () => {
  await h?.close();
});

/** Every row of every list read, walked page by page (`limit` varies so that no answer comes from the read cache). */
async function everything(limit: number) {
  const out: Record<string, unknown[]> = {};
  for (const path of [
    `/v2/events?startTime=${ALL_TIME}`,
    `/v2/positions?startTime=${ALL_TIME}`,
    '/v2/positions/open?',
    `/v2/messages?startTime=${ALL_TIME}`,
    '/v2/traders?',
  ]) {
    const rows: unknown[] = [];
    let cursor: string | null = null;
    do {
      const res = await h.get(`${path}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`, key);
      expect(res.status).toBe(200);
      rows.push(...res.body.data.results);
      cursor = res.body.data.meta.nextCursor;
    } while (cursor);
    out[path] = rows;
  }
  return out;
}

const counts = async () =>
  Object.fromEntries(
    await Promise.all(
      STATEMENT_TABLES.map(async (t) => {
        const [c] = await h.store.query<{ rows: number; tombs: number; ids: number }>(
          `SELECT count() AS rows, countIf(tomb = 1) AS tombs, uniqExact(id) AS ids FROM ${t}`,
        );
        return [t.name, { rows: Number(c!.rows), tombs: Number(c!.tombs), ids: Number(c!.ids) }];
      }),
    ),
  );

describe('compaction of statement tables', () => {
  it('leaves tables under the policy alone', async () => {
    const res = await compactStatements(h.store, { maxTombShare: 1, minTombs: 0, maxLooseShare: 1, finalPartitionsWhole: false });
    expect(res.every((r) => !r.compacted)).toBe(true);
  });

  it('drops every tombstone and changes no read, also after the whole log is delivered again', async () => {
    const before = await everything(200);
    expect(before[`/v2/positions?startTime=${ALL_TIME}`]!.length).toBeGreaterThan(50);
    const had = await counts();
    // The records close positions and move events and messages: each table has tombstones to drop.
    for (const t of STATEMENT_TABLES.map((x) => x.name)) expect(had[t]!.tombs, `${t}: ${JSON.stringify(had)}`).toBeGreaterThan(0);
    const res = await compactStatements(
      h.store,
      { maxTombShare: 0, minTombs: 0, maxLooseShare: 1, finalPartitionsWhole: false },
      STATEMENT_TABLES,
    );
    expect(res.map((r) => r.compacted)).toEqual(STATEMENT_TABLES.map(() => true));
    const after = await counts();
    for (const t of STATEMENT_TABLES.map((x) => x.name)) {
      expect(after[t]!.tombs, t).toBe(0);
      expect(after[t]!.rows, t).toBe(after[t]!.ids); // one row per entity: nothing left to resolve
    }
    expect(await everything(199)).toEqual(before);
    await h.given(records); // at-least-once: the log delivered again from the start
    expect(await everything(198)).toEqual(before);
  }, 180_000);

  it('merges a table left in many parts into one per partition, and changes no read', async () => {
    const before = await everything(197);
    await h.given(records.slice(-300)); // re-delivered: new parts, the same answers
    // The most parts of one partition (position_samples is partitioned by month).
    const parts = async (t: string) =>
      Number(
        (
          await h.store.query<{ n: number }>(
            `SELECT max(n) AS n FROM (SELECT partition, count() AS n FROM system.parts
       WHERE database = {db:String} AND table = {t:String} AND active GROUP BY partition)`,
            { db: h.store.database, t },
          )
        )[0]!.n,
      );
    const tables = [...STATEMENT_TABLES, ...MERGED_TABLES].map((t) => t.name);
    const many = (await Promise.all(tables.map(async (t) => [t, await parts(t)] as const))).filter(([, n]) => n > 1);
    expect(many.length).toBeGreaterThan(0);
    // Tombstones beyond reach: only the parts decide.
    const res = await compactStatements(h.store, { maxTombShare: 1, minTombs: Infinity, maxLooseShare: 0, finalPartitionsWhole: false });
    for (const [t] of many) {
      expect(res.find((r) => r.table === t)?.compacted, t).toBe(true);
      expect(await parts(t), t).toBe(1);
    }
    expect(await everything(196)).toEqual(before);
  }, 180_000);

  it('merges each partition of a table read with FINAL that is in more than one part, however few rows lie outside its largest', async () => {
    // A few trade events edited (a new version, another price): their positions re-evaluated, in small fresh parts.
    const edited = records
      .filter((r) => r.topic === 'trade-events' && !r.value.deleted)
      .slice(-3)
      .map((r) => ({ topic: r.topic, value: { ...r.value, price: Number(r.value.price ?? 1) + 1, version: r.value.version + 1000 } }));
    await h.given(edited);
    const split = async (t: string) =>
      await h.store.query<{ partition: string; n: number; total: number; largest: number }>(
        `SELECT partition, count() AS n, sum(p.rows) AS total, max(p.rows) AS largest FROM system.parts AS p
       WHERE database = {db:String} AND table = {t:String} AND active GROUP BY partition HAVING n > 1`,
        { db: h.store.database, t },
      );
    const before = await split('position_samples');
    expect(before.length).toBeGreaterThan(0);
    // Under the default policy's share: only the parts per partition decide.
    const total = Number((await h.store.query<{ n: number }>('SELECT count() AS n FROM $db.position_samples'))[0]!.n);
    expect(before.reduce((s, r) => s + Number(r.total) - Number(r.largest), 0)).toBeLessThan(0.1 * total);
    const res = await compactStatements(h.store);
    expect(res.find((r) => r.table === 'position_samples')?.compacted).toBe(true);
    expect(await split('position_samples')).toEqual([]);
  }, 120_000);
});
