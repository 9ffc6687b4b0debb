// The time-based performance read model (issue 6, item 2): after every batch, in whatever order
// positions and price samples arrive (samples re-versioned, deleted, an asset's first sample, the
// deletion of its last one, positions moved in time or to another asset, deleted and revived),
// every position's windows as a read shows them equal the oracle's brute-force evaluation over
// the records so far, at several clocks; each batch is delivered twice (at-least-once). The table
// read whole with FINAL (as the analytics reads aggregate it, issue 7) holds one live row per live
// position and window, at the position's current trader and openAt: a position moved to another
// trader or time leaves nothing counted behind.

import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { timeBasedPerformances } from '../../apps/reads/performance.ts';
import { applyBatch, ensureSchema } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import { ChdbStore } from '../../storage/chdb.ts';
import { build, type TopicRecord } from '../helpers/harness.ts';
import { prng } from '../helpers/prng.ts';
import * as O from '../oracle/oracle.ts';

const dir = join(tmpdir(), `signalbase-perf-${process.pid}`);
const stores: ChdbStore[] = [];
/** A store of its own per case: the projector's per-store state (seq counter, price series) starts empty with it. */
async function freshStore(name: string) {
  const store = await new ChdbStore(dir, `${name}_${process.pid}`).init();
  await store.drop();
  await store.init();
  await ensureSchema(store);
  stores.push(store);
  return store;
}
afterAll(async () => {
  for (const s of stores) {
    await s.drop();
    await s.close();
  }
  rmSync(dir, { recursive: true, force: true });
});

const HOUR = 3_600_000;
const T0 = Date.parse('2026-03-01T00:00:00.000Z');
const iso = (t: number) => new Date(t).toISOString();

/** A random history: positions on 4 assets (asset 4 never priced until late), hourly-ish samples with gaps, then edits. */
function history(seed: number): TopicRecord[] {
  const r = prng(seed);
  const out: TopicRecord[] = [];
  const versions = new Map<string, number>();
  const next = (k: string) => {
    const v = (versions.get(k) ?? 0) + 1;
    versions.set(k, v);
    return v;
  };
  const positions: { id: number; open: number; assetId: number }[] = [];
  for (let id = 1; id <= 40; id++) {
    const open = T0 + r.int(0, 40 * 24) * HOUR + r.int(0, 59) * 60_000;
    const assetId = r.int(1, 4);
    const price = r.chance(0.1) ? null : r.chance(0.1) ? 0 : r.int(50, 150);
    positions.push({ id, open, assetId });
    out.push(
      build.event(id * 10, {
        positionId: id,
        assetId,
        price,
        timeOfEvent: iso(open),
        direction: r.pick(['long', 'short']),
        version: next(`e${id * 10}`),
      }),
    );
    if (r.chance(0.4))
      out.push(
        build.event(id * 10 + 1, {
          positionId: id,
          assetId,
          type: 'close',
          price: 99,
          timeOfEvent: iso(open + 5 * HOUR),
          version: next(`e${id * 10 + 1}`),
        }),
      );
  }
  const samples: TopicRecord[] = [];
  for (let a = 1; a <= 3; a++) {
    for (let t = T0; t < T0 + 80 * 24 * HOUR; t += r.int(1, 30) * 20 * 60_000) {
      if (r.chance(0.05)) t += 30 * HOUR; // a gap wider than every tolerance
      samples.push(build.price(a, iso(t), r.chance(0.02) ? 1e308 : r.int(40, 200), { version: next(`p${a}/${t}`) }));
    }
  }
  // A forward price so large that the return overflows (calculation_error), for two positions.
  for (const p of positions.filter((x) => x.assetId !== 4).slice(0, 2))
    samples.push(build.price(p.assetId, iso(p.open + 24 * HOUR + 60_000), 1.7e308, { version: 9 }));
  // Interleave samples and events in random chunks.
  const merged: TopicRecord[] = [];
  let i = 0;
  let j = 0;
  while (i < out.length || j < samples.length) {
    const takeEvents = j >= samples.length || (i < out.length && r.chance(0.3));
    const n = r.int(1, 60);
    if (takeEvents) merged.push(...out.slice(i, (i += Math.min(n, 8))));
    else merged.push(...samples.slice(j, (j += n)));
  }
  // Edits: samples re-versioned and deleted, asset 4 gets one sample and loses it again, positions moved and deleted.
  for (let k = 0; k < 60; k++) {
    const s = r.pick(samples).value as { assetId: number; at: string; price: number };
    merged.push(
      build.price(s.assetId, s.at, r.int(40, 200), { version: next(`p${s.assetId}/${Date.parse(s.at)}`), deleted: r.chance(0.5) }),
    );
  }
  const p4 = positions.find((p) => p.assetId === 4);
  const first4 = iso((p4?.open ?? T0) + 24 * HOUR + 10 * 60_000);
  merged.push(build.price(4, first4, 123, { version: next('p4') }));
  for (let k = 0; k < 12; k++) {
    const p = r.pick(positions);
    const v = next(`e${p.id * 10}`);
    const kind = r.pick(['time', 'asset', 'price', 'delete', 'revive', 'direction', 'trader']);
    const over: Record<string, unknown> = { positionId: p.id, assetId: p.assetId, timeOfEvent: iso(p.open), price: 100, version: v };
    if (kind === 'time') over.timeOfEvent = iso((p.open = p.open + r.int(-48, 48) * HOUR));
    if (kind === 'asset') over.assetId = p.assetId = r.int(1, 4);
    if (kind === 'price') over.price = r.pick([null, 0, 80, 130]);
    if (kind === 'delete') over.deleted = true;
    if (kind === 'direction') over.direction = 'short';
    if (kind === 'trader') over.traderId = r.int(2, 4);
    merged.push(build.event(p.id * 10, over));
  }
  merged.push(build.price(4, first4, 123, { version: next('p4'), deleted: true }));
  merged.push(build.price(4, iso(T0 + 70 * 24 * HOUR), 1, { version: 1 }));
  return merged;
}

/** Consecutive records of one topic form a batch, as the log delivers them. */
function batches(records: readonly TopicRecord[], r: ReturnType<typeof prng>) {
  const out: { topic: string; records: TopicRecord[] }[] = [];
  for (const rec of records) {
    const last = out.at(-1);
    if (last && last.topic === rec.topic && last.records.length < r.int(1, 40)) last.records.push(rec);
    else out.push({ topic: rec.topic, records: [rec] });
  }
  return out;
}

describe('time-based performance read model', () => {
  const statuses = new Set<string>();
  for (const seed of [1, 2, 3]) {
    it(`equals the oracle after every batch, at every clock, replays included (seed ${seed})`, async () => {
      const store = await freshStore(`perf${seed}`);
      const session = new ProjectorSession(store);
      const r = prng(seed * 7919);
      const records = history(seed);
      let offset = 0;
      const seen: TopicRecord[] = [];
      let checked = 0;
      for (const b of batches(records, r)) {
        const batch = {
          topic: b.topic,
          partition: 0,
          records: b.records.map((x) => ({ key: '', value: JSON.stringify(x.value), offset: String(++offset) })),
        };
        await applyBatch(session, batch);
        if (r.chance(0.5)) await applyBatch(session, batch); // delivered again
        seen.push(...b.records);
        if (!r.chance(0.25) && seen.length < records.length) continue;
        const w = O.buildWorld([...seen]); // a new array: the oracle caches worlds by array
        const ps = [...w.positions.values()];
        const sample = await store.query<{
          positionId: number;
          window: string;
          traderId: number;
          openAt: number;
          assetId: number;
          direction: string;
        }>(`
          SELECT positionId, window, traderId, openAt, assetId, direction FROM $db.position_samples FINAL WHERE live = 1
          ORDER BY positionId, window SETTINGS do_not_merge_across_partitions_select_final = 1`);
        expect(
          sample.map((x) => ({
            ...x,
            positionId: Number(x.positionId),
            traderId: Number(x.traderId),
            openAt: Number(x.openAt),
            assetId: Number(x.assetId),
          })),
          `live evaluation rows after ${seen.length} records`,
        ).toEqual(
          ps
            .sort((a, b) => a.id - b.id)
            .flatMap((p) =>
              O.WINDOWS.map((win) => ({
                positionId: p.id,
                window: win,
                traderId: p.traderId,
                openAt: p.openAt,
                assetId: p.assetId,
                direction: p.direction,
              })),
            ),
        );
        for (const now of [T0 + 10 * 24 * HOUR, T0 + 45 * 24 * HOUR, T0 + 400 * 24 * HOUR]) {
          const got = await timeBasedPerformances(
            store,
            ps.map((p) => ({ id: p.id, openAt: p.openAt })),
            now,
          );
          for (const p of ps) {
            const want = O.timeBasedPerformances(w, p, now);
            expect(got.get(p.id), `position ${p.id} at ${iso(now)} after ${seen.length} records`).toEqual(want);
            for (const v of Object.values(want))
              if (v) statuses.add(v.status);
              else statuses.add('null');
            checked++;
          }
        }
      }
      expect(checked).toBeGreaterThan(200);
    }, 120_000);
  }
  it('the histories reach every status the contract lists, and null windows', () => {
    expect([...statuses].sort()).toEqual([
      'calculation_error',
      'missing_entry_price',
      'missing_forward_price',
      'null',
      'ready',
      'too_young',
      'zero_entry_price',
    ]);
  });
});
