// The record set of test/projectors/crash.test.ts (issue 6): a slice of the small demo data plus
// seeded changes of every kind, placed after the version they change, either right after it (one
// batch for most batch sizes) or anywhere later.
import { generateDemo } from '../../projectors/demo/generate.ts';
import type { TopicName } from '../../schemas/topics/index.ts';
import type { Rng } from '../helpers/prng.ts';
import type * as O from '../oracle/oracle.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;
const iso = (t: number) => new Date(t).toISOString();

/** Traders whose events and messages are kept (3: no source; 4: no positions; 7: deleted at the end of the demo data). */
export const TRADERS = [1, 2, 3, 4, 7, 8, 9, 11, 12, 13, 15];
/** Ids of positions created by moving events to a new position. */
export const NEW_POSITIONS_FROM = 9_000_000;

type Kind = string;
interface Placed {
  topic: TopicName;
  value: any;
  pos: number;
  n: number;
}

/**
 * Builds the record set: the demo slice, then seeded changes placed after the version they change,
 * either right after it (same batch, most batch sizes) or anywhere later. `kinds` counts what was
 * done, for the test that checks the data exercises every path.
 */
export function buildRecords(now: number, r: Rng) {
  const gen = [...generateDemo({ scale: 'small', now: new Date(now) })] as { topic: TopicName; value: any }[];
  const selected = new Set(TRADERS);
  const srcKey = (platform: string, id: string) => `${platform}/${id}`;
  const traderSources = new Map<string, number>();
  for (const { topic, value } of gen)
    if (topic === 'traders' && value.source) traderSources.set(srcKey(value.source.platform, value.source.sourceIdentityId), value.id);
  const orphanSources = gen
    .filter((x) => x.topic === 'source-identities' && !traderSources.has(srcKey(x.value.platform, x.value.sourceIdentityId)))
    .slice(0, 2)
    .map((x) => x.value);
  const keptSources = new Set([...traderSources].filter(([, id]) => selected.has(id)).map(([k]) => k));
  for (const s of orphanSources) keptSources.add(srcKey(s.platform, s.sourceIdentityId));
  const lastPrice = new Map<number, number>();
  for (const { topic, value } of gen)
    if (topic === 'prices') lastPrice.set(value.assetId, Math.max(lastPrice.get(value.assetId) ?? 0, Date.parse(value.at)));

  const base = gen.filter(({ topic, value }) => {
    switch (topic) {
      case 'prices':
        return (lastPrice.get(value.assetId)! - Date.parse(value.at)) % (5 * DAY) === 0; // a sample every 5 days, ending at the latest
      case 'messages':
        return keptSources.has(srcKey(value.platform, value.sourceIdentityId));
      case 'trade-events':
        return selected.has(value.traderId);
      default:
        return true;
    }
  });

  // Placement: per topic, base record i sits at position i; a change sits after the version it changes.
  const placed: Placed[] = [];
  const size = new Map<TopicName, number>();
  let n = 0;
  for (const { topic, value } of base) {
    const i = size.get(topic) ?? 0;
    size.set(topic, i + 1);
    placed.push({ topic, value, pos: i, n: n++ });
  }
  const idOf = (topic: TopicName, v: any) => (topic === 'messages' ? `m:${v.id}` : topic === 'traders' ? `t:${v.id}` : `e:${v.id}`);
  const latest = new Map<string, Placed>(); // highest version so far
  const lastPos = new Map<string, number>(); // position of the entity's last placed record
  const maxVersion = new Map<string, number>();
  for (const p of placed) {
    if (p.topic !== 'trade-events' && p.topic !== 'messages' && p.topic !== 'traders') continue;
    const k = idOf(p.topic, p.value);
    if (p.value.version >= (maxVersion.get(k) ?? 0)) {
      latest.set(k, p);
      maxVersion.set(k, p.value.version);
    }
    lastPos.set(k, Math.max(lastPos.get(k) ?? -1, p.pos));
  }
  const later = (topic: TopicName, pos: number, adjacent = r.chance(0.45)) =>
    adjacent ? pos + 0.01 + r.next() * 2.5 : pos + r.next() * (size.get(topic)! + 1 - pos);
  const place = (topic: TopicName, value: any, pos: number): Placed => {
    const p = { topic, value, pos, n: n++ };
    placed.push(p);
    return p;
  };
  const kinds: Record<Kind, number> = {};
  const count = (k: Kind) => {
    kinds[k] = (kinds[k] ?? 0) + 1;
  };

  /** A new version of an entity, from its highest version so far with `change` applied, placed after its last record. */
  function revise(
    topic: TopicName,
    id: number | string,
    kind: Kind,
    change: (v: any) => void,
    opts: { bump?: number; adjacent?: boolean } = {},
  ): Placed {
    const k = idOf(topic, { id });
    const cur = latest.get(k)!;
    const v = structuredClone(cur.value);
    change(v);
    v.version = maxVersion.get(k)! + (opts.bump ?? 1);
    const p = place(topic, v, later(topic, lastPos.get(k)!, opts.adjacent));
    if (v.version > maxVersion.get(k)!) {
      latest.set(k, p);
      maxVersion.set(k, v.version);
    }
    lastPos.set(k, Math.max(lastPos.get(k)!, p.pos));
    count(kind);
    return p;
  }

  // --- trade events ----------------------------------------------------------------------------------
  const cur = (id: number) => latest.get(`e:${id}`)!.value;
  const eventIds = () => [...latest.keys()].filter((k) => k.startsWith('e:')).map((k) => Number(k.slice(2)));
  const baseEvents = placed.filter((p) => p.topic === 'trade-events').map((p) => p.value);
  const positionIds = [...new Set(baseEvents.map((e) => e.positionId))];
  const eventTimes = baseEvents.map((e) => e.timeOfEvent);
  const minT = Math.min(...eventTimes.map(Date.parse));
  const maxT = now - HOUR;
  const clampT = (t: number) => Math.min(maxT, Math.max(minT, t));
  const TYPES = ['open', 'increase', 'decrease', 'close'];
  const live = (e: any) => !e.deleted;
  const pickEvent = (where: (e: any) => boolean = () => true) => {
    const ids = eventIds().filter((id) => where(cur(id)));
    return ids.length ? r.pick(ids) : r.pick(eventIds());
  };
  /** Re-appends, after `pos`, an exact copy of the latest version of another event of `positionId` (a replay that touches that position again). */
  const touch = (positionId: number, pos: number) => {
    const other = eventIds().find((id) => cur(id).positionId === positionId);
    if (other !== undefined) {
      place('trade-events', structuredClone(cur(other)), pos + 0.5 + r.next() * 40);
      count('touch-old-position');
    }
  };
  let newPosition = NEW_POSITIONS_FROM;
  const eventChanges: Record<string, (v: any) => void> = {
    time: (v) => {
      v.timeOfEvent = iso(clampT(Date.parse(v.timeOfEvent) + r.pick([1, -1]) * r.pick([1, 1000, 7 * MIN, 5 * HOUR, 3 * DAY])));
    },
    'time-tie': (v) => {
      v.timeOfEvent = r.pick(eventTimes);
    }, // onto another event's time: keyset ties
    trader: (v) => {
      v.traderId = r.pick(TRADERS.filter((t) => t !== v.traderId));
    },
    asset: (v) => {
      v.assetId = r.pick([...Array.from({ length: 60 }, (_, i) => i + 1).filter((a) => a !== v.assetId), 20, 22]);
    },
    type: (v) => {
      v.type = r.pick(TYPES.filter((t) => t !== v.type));
    },
    direction: (v) => {
      v.direction = v.direction === 'long' ? 'short' : 'long';
    },
    price: (v) => {
      v.price = v.price === null ? 42.5 : r.chance(0.2) ? null : Number.isFinite(v.price * 1.07) ? v.price * 1.07 : v.price / 2;
    },
    'move-same-key': (v) => {
      v.positionId = r.pick(positionIds.filter((p) => p !== v.positionId));
    },
    'move-and-time': (v) => {
      v.positionId = r.pick(positionIds.filter((p) => p !== v.positionId));
      eventChanges.time!(v);
    },
    'move-new-position': (v) => {
      v.positionId = ++newPosition;
    },
    delete: (v) => {
      v.deleted = true;
    },
  };
  const changeEvent = (id: number, kind: string, opts: { bump?: number; adjacent?: boolean } = {}) => {
    const from = cur(id).positionId;
    const p = revise('trade-events', id, `event:${kind}`, eventChanges[kind]!, opts);
    if (kind.startsWith('move')) touch(from, p.pos);
    return p;
  };

  for (let i = 0; i < 24; i++) changeEvent(pickEvent(live), r.chance(0.35) ? 'time-tie' : 'time');
  for (let i = 0; i < 14; i++) changeEvent(pickEvent(live), 'trader');
  for (let i = 0; i < 14; i++) changeEvent(pickEvent(live), 'asset');
  for (let i = 0; i < 18; i++) changeEvent(pickEvent(live), 'type');
  for (let i = 0; i < 8; i++) changeEvent(pickEvent(live), 'direction');
  for (let i = 0; i < 10; i++) changeEvent(pickEvent(live), 'price');
  for (let i = 0; i < 14; i++) changeEvent(pickEvent(live), 'move-same-key');
  for (let i = 0; i < 8; i++) changeEvent(pickEvent(live), 'move-and-time');
  for (let i = 0; i < 8; i++) {
    // An open moves to a new position; half the time its position's close follows it (in the same batch or later).
    const id = pickEvent((e) => live(e) && e.type === 'open');
    const from = cur(id).positionId;
    changeEvent(id, 'move-new-position');
    const close = eventIds().find((c) => cur(c).positionId === from && cur(c).type === 'close' && live(cur(c)));
    if (close !== undefined && r.chance(0.5))
      revise('trade-events', close, 'event:close-follows-open', (v) => {
        v.positionId = newPosition;
      });
  }
  // Opens deleted: the position dies; half of them are re-created later (the position comes back).
  for (let i = 0; i < 16; i++) {
    const id = pickEvent((e) => live(e) && e.type === 'open');
    changeEvent(id, 'delete');
    if (i % 2 === 0)
      revise('trade-events', id, 'event:open-recreated', (v) => {
        v.deleted = false;
        if (r.chance(0.5)) v.price = v.price === null ? 7 : v.price + 1;
      });
  }
  // Closes deleted (the position reopens), a third re-created.
  for (let i = 0; i < 12; i++) {
    const id = pickEvent((e) => live(e) && e.type === 'close');
    changeEvent(id, 'delete');
    if (i % 3 === 0)
      revise('trade-events', id, 'event:close-recreated', (v) => {
        v.deleted = false;
      });
  }
  for (let i = 0; i < 10; i++)
    changeEvent(
      pickEvent((e) => live(e) && (e.type === 'increase' || e.type === 'decrease')),
      'delete',
    );
  // Chains: 3 to 4 versions of one event back to back (one batch for most batch sizes).
  const chainKinds = ['time', 'trader', 'asset', 'type', 'direction', 'price', 'move-same-key', 'move-and-time', 'delete'];
  for (let i = 0; i < 14; i++) {
    const id = pickEvent(live);
    const len = r.int(3, 4);
    for (let j = 0; j < len; j++) {
      const kind = j === len - 1 && cur(id).deleted ? 'time' : r.pick(chainKinds);
      if (cur(id).deleted && kind !== 'delete')
        revise(
          'trade-events',
          id,
          'event:recreated-in-chain',
          (v) => {
            v.deleted = false;
          },
          { adjacent: true },
        );
      else changeEvent(id, kind, { adjacent: true });
    }
    count('event:chain');
  }
  // Out of order: version v+2 first, then a different v+1 later (it must lose).
  for (let i = 0; i < 12; i++) {
    const id = pickEvent(live);
    const newer = changeEvent(id, r.pick(['time', 'move-same-key', 'type', 'trader', 'delete']), { bump: 2 });
    const older = structuredClone(newer.value);
    eventChanges[r.pick(['time', 'asset', 'direction', 'price'])]!(older);
    older.deleted = undefined;
    delete older.deleted;
    older.version = newer.value.version - 1;
    place('trade-events', older, newer.pos + 0.01 + r.next() * (r.chance(0.5) ? 2 : 60));
    count('event:out-of-order');
  }

  // --- messages --------------------------------------------------------------------------------------
  const msg = (id: string) => latest.get(`m:${id}`)!.value;
  const messageIds = () => [...latest.keys()].filter((k) => k.startsWith('m:')).map((k) => k.slice(2));
  const pickMessage = (where: (m: any) => boolean = (m) => !m.deleted) => r.pick(messageIds().filter((id) => where(msg(id))));
  const sources = [...keptSources].map((k) => {
    const [platform, sourceIdentityId] = k.split('/') as [string, string];
    return { platform, sourceIdentityId };
  });
  let edits = 0;
  const messageChanges: Record<string, (v: any) => void> = {
    edit: (v) => {
      v.text = `${v.text ?? ''} (edit ${++edits})`;
      v.isEdited = true;
    },
    'edit-and-time': (v) => {
      messageChanges.edit!(v);
      v.writtenAt = iso(Math.min(maxT, Date.parse(v.writtenAt) + r.pick([-1, 1]) * r.pick([1, 1000, 9 * MIN, 2 * DAY])));
    },
    'move-source': (v) => {
      const s = r.pick(sources);
      v.platform = s.platform;
      v.sourceIdentityId = s.sourceIdentityId;
    },
    delete: (v) => {
      v.deleted = true;
    },
  };
  const changeMessage = (id: string, kind: string, opts: { bump?: number; adjacent?: boolean } = {}) =>
    revise('messages', id, `message:${kind}`, messageChanges[kind]!, opts);
  for (let i = 0; i < 25; i++) changeMessage(pickMessage(), 'edit');
  for (let i = 0; i < 25; i++) changeMessage(pickMessage(), 'edit-and-time');
  for (let i = 0; i < 8; i++) changeMessage(pickMessage(), 'move-source');
  for (let i = 0; i < 20; i++) {
    const id = pickMessage();
    changeMessage(id, 'delete');
    if (i % 3 === 0)
      revise('messages', id, 'message:recreated', (v) => {
        v.deleted = false;
        v.text = `${v.text ?? ''} (restored)`;
      });
  }
  for (let i = 0; i < 8; i++) {
    const id = pickMessage();
    for (const kind of ['edit-and-time', 'edit', r.pick(['edit-and-time', 'move-source', 'delete'])])
      changeMessage(id, kind, { adjacent: true });
    count('message:chain');
  }
  for (let i = 0; i < 8; i++) {
    const newer = changeMessage(pickMessage(), r.pick(['edit-and-time', 'delete']), { bump: 2 });
    const older = structuredClone(newer.value);
    delete older.deleted;
    messageChanges['edit-and-time']!(older);
    older.version = newer.value.version - 1;
    place('messages', older, newer.pos + 0.01 + r.next() * (r.chance(0.5) ? 2 : 40));
    count('message:out-of-order');
  }

  // --- traders: two deleted (one of them re-created later) ---------------------------------------------
  const [gone, back] = r.subset(
    TRADERS.filter((t) => t !== 7 && t !== 3),
    2,
    2,
  ) as [number, number];
  revise('traders', gone, 'trader:deleted', (v) => {
    v.deleted = true;
  });
  revise('traders', back, 'trader:deleted', (v) => {
    v.deleted = true;
  });
  revise('traders', back, 'trader:recreated', (v) => {
    v.deleted = false;
    v.name = `${v.name} Again`;
  });

  // --- exact duplicates (replays): single records anywhere after the original, and one replayed block --
  const changeable = placed.filter((p) => p.topic === 'trade-events' || p.topic === 'messages' || p.topic === 'traders');
  for (let i = 0; i < 90; i++) {
    const p = r.pick(changeable);
    place(p.topic, structuredClone(p.value), later(p.topic, p.pos));
    count(`duplicate:${p.topic}`);
  }
  for (const topic of ['trade-events', 'messages'] as const) {
    const list = placed.filter((p) => p.topic === topic).sort((a, b) => a.pos - b.pos || a.n - b.n);
    const start = r.int(0, list.length - 60);
    const at = list.at(-1)!.pos;
    for (const p of list.slice(start, start + 50)) place(topic, structuredClone(p.value), at + 1 + p.pos / 1e6);
    count(`replayed-block:${topic}`);
  }

  placed.sort((a, b) => (a.topic < b.topic ? -1 : a.topic > b.topic ? 1 : a.pos - b.pos || a.n - b.n));
  // As the log holds them (JSON): what the projector reads is exactly what the oracle gets.
  const records: O.TopicRec[] = placed.map((p) => ({ topic: p.topic, value: JSON.parse(JSON.stringify(p.value)) }));
  return { records, kinds, gone, back };
}
