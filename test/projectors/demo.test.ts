import { createHash } from 'node:crypto';
import { Compile } from 'typebox/compile';
import { beforeAll, describe, expect, it } from 'vitest';
import { type DemoRecord, estimateDemoRecords, generateDemo } from '../../projectors/demo/generate.ts';
import type {
  AssetRecord,
  MessageRecord,
  PriceRecord,
  SourceIdentityRecord,
  TradeEventRecord,
  TraderRecord,
  TraderTagsRecord,
} from '../../schemas/topics/index.ts';
import { TOPIC_NAMES, type TopicName, topicByName } from '../../schemas/topics/index.ts';

const NOW = new Date('2026-11-01T00:00:00Z');
const NOW_MS = NOW.getTime();
const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const ms = (s: string) => Date.parse(s);

function hashOf(recs: Iterable<DemoRecord>): { hash: string; count: number } {
  const h = createHash('sha256');
  let count = 0;
  for (const r of recs) {
    h.update(r.topic);
    h.update(JSON.stringify(r.value));
    h.update('\n');
    count++;
  }
  return { hash: h.digest('hex'), count };
}

let records: DemoRecord[] = [];
const by = {
  identities: [] as SourceIdentityRecord[],
  traders: [] as TraderRecord[],
  tags: [] as TraderTagsRecord[],
  assets: [] as AssetRecord[],
  prices: [] as PriceRecord[],
  messages: [] as MessageRecord[],
  events: [] as TradeEventRecord[],
};
/** Live (version 1) events grouped by position, in stream order. */
const positions = new Map<number, TradeEventRecord[]>();
const eventTombs = new Map<number, TradeEventRecord>();
const msgV1 = new Map<string, MessageRecord>();
const identityKey = (p: string, id: string) => `${p}:${id}`;
const identityOf = new Map<string, SourceIdentityRecord>();
const traderV1 = new Map<number, TraderRecord>();
const pricesByAsset = new Map<number, number[]>(); // times (ms)

beforeAll(() => {
  records = [...generateDemo({ scale: 'small', now: NOW })];
  for (const r of records) {
    const v = r.value as never;
    switch (r.topic) {
      case 'source-identities':
        by.identities.push(v);
        break;
      case 'traders':
        by.traders.push(v);
        break;
      case 'trader-tags':
        by.tags.push(v);
        break;
      case 'assets':
        by.assets.push(v);
        break;
      case 'prices':
        by.prices.push(v);
        break;
      case 'messages':
        by.messages.push(v);
        break;
      case 'trade-events':
        by.events.push(v);
        break;
      case 'channel-summaries':
      case 'aggregate-summaries':
        break; // checked on `records` below
      default:
        throw new Error(`unexpected topic ${r.topic}`);
    }
  }
  for (const s of by.identities) identityOf.set(identityKey(s.platform, s.sourceIdentityId), s);
  for (const t of by.traders) if (t.version === 1) traderV1.set(t.id, t);
  for (const m of by.messages) if (m.version === 1) msgV1.set(m.id, m);
  for (const p of by.prices) {
    let list = pricesByAsset.get(p.assetId);
    if (!list) pricesByAsset.set(p.assetId, (list = []));
    list.push(ms(p.at));
  }
  for (const e of by.events) {
    if (e.version === 1) {
      let list = positions.get(e.positionId);
      if (!list) positions.set(e.positionId, (list = []));
      list.push(e);
    } else eventTombs.set(e.id, e);
  }
}, 30_000);

/** Fails with the first offending item; much faster than an `expect` per item over 250k records. */
function assertEach<T>(items: Iterable<T>, label: string, bad: (x: T) => string | false | undefined): void {
  for (const x of items) {
    const why = bad(x);
    if (why) throw new Error(`${label}: ${why}: ${JSON.stringify(x)}`);
  }
}

const liveEvents = () => by.events.filter((e) => e.version === 1);
const openOf = (list: TradeEventRecord[]) => list[0]!;
const closeOf = (list: TradeEventRecord[]) => list.find((e) => e.type === 'close');

describe('demo generator: determinism and shape', () => {
  it('is deterministic for a seed and differs for another seed', () => {
    const again = hashOf(generateDemo({ scale: 'small', now: NOW, seed: 42 }));
    expect(again).toEqual(hashOf(records));
    // Another seed (or another now) gives other data: compare the generators in lockstep until they differ.
    for (const other of [
      { seed: 7, now: NOW },
      { seed: 42, now: new Date(NOW_MS + 1000) },
    ]) {
      const a = generateDemo({ scale: 'small', now: NOW });
      const b = generateDemo({ scale: 'small', ...other });
      let differs = false;
      for (let i = 0; i < 10_000 && !differs; i++) differs = JSON.stringify(a.next().value) !== JSON.stringify(b.next().value);
      expect(differs).toBe(true);
    }
  }, 20_000);

  it('every record validates against its topic schema', () => {
    const checkers = new Map<string, ReturnType<typeof Compile>>();
    for (const r of records) {
      const topic = topicByName.get(r.topic);
      if (!topic) throw new Error(`unknown topic ${r.topic}`);
      let c = checkers.get(r.topic);
      if (!c) checkers.set(r.topic, (c = Compile(topic!.schema)));
      if (!c.Check(r.value)) {
        throw new Error(`${r.topic} ${JSON.stringify(r.value)}: ${JSON.stringify([...c.Errors(r.value)].slice(0, 3))}`);
      }
    }
  });

  it('emits referenced entities first, in topic order, and no accounts / api-keys', () => {
    const firstSeen: TopicName[] = [];
    for (const r of records) if (!firstSeen.includes(r.topic)) firstSeen.push(r.topic);
    expect(firstSeen).toEqual([
      'source-identities',
      'traders',
      'trader-tags',
      'assets',
      'prices',
      'messages',
      'trade-events',
      'channel-summaries',
      'aggregate-summaries',
    ]);
    const order = TOPIC_NAMES.filter((t) => firstSeen.includes(t));
    expect(order).toEqual(firstSeen);
    // Only the summaries, then trader tombstones, come after the trade events.
    const lastSummary = records.findLastIndex((r) => r.topic === 'aggregate-summaries');
    for (const r of records.slice(lastSummary + 1)) {
      expect(r.topic).toBe('traders');
      expect((r.value as TraderRecord).deleted).toBe(true);
    }
  });

  it("issue 8: generates channel and aggregate summaries of both statuses, within the contract's array caps, some regenerated or withdrawn", () => {
    const channel = records.filter((r) => r.topic === 'channel-summaries').map((r) => r.value as any);
    const aggregate = records.filter((r) => r.topic === 'aggregate-summaries').map((r) => r.value as any);
    expect(channel.length).toBeGreaterThan(500);
    expect(aggregate.length).toBeGreaterThan(100);
    for (const list of [channel, aggregate]) expect(new Set(list.map((s) => s.status))).toEqual(new Set(['safe', 'low_signal']));
    expect(channel.some((s) => s.version === 2 && !s.deleted)).toBe(true);
    expect(channel.some((s) => s.deleted === true)).toBe(true);
    const traderIds = new Set(records.filter((r) => r.topic === 'traders').map((r) => (r.value as TraderRecord).id));
    for (const s of channel) {
      expect(traderIds.has(s.traderId)).toBe(true);
      expect(Date.parse(s.windowEnd)).toBeGreaterThan(Date.parse(s.windowStart));
    }
  });

  it('has the small-scale sizes, and the estimate is within 10%', () => {
    expect(traderV1.size).toBe(200);
    expect(by.assets.length).toBe(60);
    expect(by.events.length).toBeGreaterThan(40_000);
    expect(by.events.length).toBeLessThan(60_000);
    expect(msgV1.size).toBeGreaterThanOrEqual(15_000);
    expect(msgV1.size).toBeLessThanOrEqual(20_000);
    expect(Math.abs(estimateDemoRecords('small') - records.length) / records.length).toBeLessThan(0.1);
    expect(estimateDemoRecords('large')).toBeGreaterThan(3_000_000);
  });

  it('uses ISO-8601 dates with milliseconds and Z, all before now', () => {
    const isoRe = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
    const dates = [...by.prices.map((p) => p.at), ...by.messages.map((m) => m.writtenAt), ...by.events.map((e) => e.timeOfEvent)];
    assertEach(dates, 'date', (d) => (!isoRe.test(d) ? 'not ISO with ms' : ms(d) >= NOW_MS ? 'not before now' : false));
  });
});

describe('demo generator: traders, identities, tags', () => {
  it('has traders 1..N on both platforms, with and without a source', () => {
    expect([...traderV1.keys()].sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
    const platforms = new Set([...traderV1.values()].map((t) => t.source?.platform));
    expect(platforms.has('TELEGRAM')).toBe(true);
    expect(platforms.has('X')).toBe(true);
    expect([...traderV1.values()].some((t) => t.source === null)).toBe(true);
    for (const t of traderV1.values()) {
      if (t.source) expect(identityOf.has(identityKey(t.source.platform, t.source.sourceIdentityId))).toBe(true);
    }
    // Each identity is assigned to at most one trader.
    const assigned = [...traderV1.values()].filter((t) => t.source).map((t) => identityKey(t.source!.platform, t.source!.sourceIdentityId));
    expect(new Set(assigned).size).toBe(assigned.length);
  });

  it('has realistic, searchable names and some null slugs', () => {
    expect(traderV1.get(1)!.name).toBe('Alpha Whale');
    expect(traderV1.get(1)!.slug).toBe('alpha-whale');
    const slugs = [...traderV1.values()].map((t) => t.slug);
    expect(slugs.some((s) => s === null)).toBe(true);
    const nonNull = slugs.filter((s): s is string => s !== null);
    expect(new Set(nonNull).size).toBe(nonNull.length);
    for (const s of nonNull) expect(s).toMatch(/^[a-z0-9]+(-[a-z0-9]+)*$/);
    expect(new Set([...traderV1.values()].map((t) => t.name)).size).toBe(200);
  });

  it('has source identities with some null fields and some assigned to no trader', () => {
    for (const f of ['displayName', 'handle', 'avatarUrl', 'profileUrl', 'audienceCount'] as const) {
      expect(
        by.identities.some((s) => s[f] === null),
        f,
      ).toBe(true);
      expect(
        by.identities.some((s) => s[f] !== null),
        f,
      ).toBe(true);
    }
    const assigned = new Set(
      [...traderV1.values()].filter((t) => t.source).map((t) => identityKey(t.source!.platform, t.source!.sourceIdentityId)),
    );
    const unassigned = by.identities.filter((s) => !assigned.has(identityKey(s.platform, s.sourceIdentityId)));
    expect(unassigned.length).toBeGreaterThan(0);
    // ...and those have messages.
    const unassignedKeys = new Set(unassigned.map((s) => identityKey(s.platform, s.sourceIdentityId)));
    expect([...msgV1.values()].some((m) => unassignedKeys.has(identityKey(m.platform, m.sourceIdentityId)))).toBe(true);
  });

  it('has traders without messages, without positions, and deleted traders with events', () => {
    const withPositions = new Set(liveEvents().map((e) => e.traderId));
    const msgIdentities = new Set([...msgV1.values()].map((m) => identityKey(m.platform, m.sourceIdentityId)));
    const hasMessages = (t: TraderRecord) =>
      t.source !== null && msgIdentities.has(identityKey(t.source.platform, t.source.sourceIdentityId));
    const all = [...traderV1.values()];
    expect(all.some((t) => !withPositions.has(t.id) && hasMessages(t))).toBe(true);
    expect(all.some((t) => withPositions.has(t.id) && !hasMessages(t) && t.source !== null)).toBe(true);
    expect(all.some((t) => !withPositions.has(t.id) && !hasMessages(t))).toBe(true);
    expect(all.some((t) => t.source === null && withPositions.has(t.id))).toBe(true);

    const tombs = by.traders.filter((t) => t.deleted);
    expect(tombs.length).toBeGreaterThanOrEqual(2);
    for (const tomb of tombs) {
      const first = traderV1.get(tomb.id)!;
      expect(tomb.version).toBeGreaterThan(first.version);
      expect({ ...tomb, version: first.version, deleted: undefined }).toEqual({ ...first, deleted: undefined });
      expect(records.findIndex((r) => r.value === tomb)).toBeGreaterThan(records.findIndex((r) => r.value === first));
    }
    expect(tombs.some((t) => withPositions.has(t.id))).toBe(true);
  });

  it('tags most traders (first category thematic, lowercase) and leaves some untagged', () => {
    expect(by.tags.length).toBeGreaterThan(150);
    expect(by.tags.length).toBeLessThan(200);
    for (const r of by.tags) {
      expect(r.version).toBe(1);
      expect(r.tags.length).toBeGreaterThan(0);
      expect(r.tags[0]!.category).toBe('thematic');
      for (const t of r.tags) {
        expect(t.category).toBe(t.category.toLowerCase());
        expect(t.name).toBe(t.name.toLowerCase());
      }
    }
    expect(by.tags.some((r) => r.tags.some((t) => t.category === 'style'))).toBe(true);
    expect(new Set(by.tags.map((r) => r.traderId)).size).toBe(by.tags.length);
  });
});

describe('demo generator: assets and prices', () => {
  const assetById = () => new Map(by.assets.map((a) => [a.id, a]));
  const activeMarket = (a: AssetRecord) => a.markets.some((m) => m.active);

  it('has ids 1..M and every asset class, incl. indices, unknown and null classes', () => {
    expect(by.assets.map((a) => a.id)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    const classes = new Set(by.assets.map((a) => a.assetClass));
    for (const c of ['crypto', 'equities', 'commodities', 'fx', 'other', null]) expect(classes.has(c), String(c)).toBe(true);
    expect(
      by.assets.some((a) => a.assetClass !== null && !['crypto', 'equities', 'commodities', 'fx', 'other'].includes(a.assetClass)),
    ).toBe(true);
    expect(by.assets.some((a) => a.assetClass === 'equities' && a.category === 'Indices')).toBe(true);
    expect(by.assets.some((a) => a.assetClass === 'equities' && a.category === 'Technology')).toBe(true);
    expect(new Set(by.assets.map((a) => a.symbol)).size).toBe(60);
  });

  it('has markets: mostly one preferred active, some with the preferred one not first, >= 3 without an active market but with events', () => {
    const preferredActive = by.assets.filter((a) => a.markets.some((m) => m.preferred && m.active));
    expect(preferredActive.length).toBeGreaterThan(50);
    expect(by.assets.some((a) => a.markets.length > 1 && a.markets.findIndex((m) => m.preferred) > 0)).toBe(true);
    const noActive = by.assets.filter((a) => !activeMarket(a));
    expect(noActive.length).toBeGreaterThanOrEqual(3);
    expect(noActive.some((a) => a.markets.length === 0)).toBe(true);
    expect(noActive.some((a) => a.markets.length > 0)).toBe(true);
    const eventAssets = new Set(liveEvents().map((e) => e.assetId));
    for (const a of noActive) expect(eventAssets.has(a.id), a.symbol).toBe(true);
  });

  it('has hourly random-walk prices over ~130 days up to a few minutes before now, with multi-day gaps', () => {
    expect(pricesByAsset.size).toBeGreaterThan(50);
    let gapped = 0;
    for (const [, times] of pricesByAsset) {
      expect(NOW_MS - times[0]!).toBeGreaterThan(128 * DAY);
      expect(NOW_MS - times[0]!).toBeLessThan(132 * DAY);
      const last = times[times.length - 1]!;
      expect(NOW_MS - last).toBeGreaterThan(0);
      expect(NOW_MS - last).toBeLessThan(HOUR);
      let maxGap = 0;
      for (let i = 1; i < times.length; i++) {
        const d = times[i]! - times[i - 1]!;
        if (d <= 0 || d % HOUR !== 0) throw new Error(`price samples not hourly: ${d}`);
        maxGap = Math.max(maxGap, d);
      }
      if (maxGap >= 2 * DAY) gapped++;
    }
    expect(gapped).toBeGreaterThanOrEqual(5);
    assertEach(by.prices, 'price', (p) => !(Number.isFinite(p.price) && p.price > 0) && 'not finite positive');
    // A walk, not a constant.
    const btc = by.prices.filter((p) => p.assetId === 1).map((p) => p.price);
    expect(new Set(btc).size).toBeGreaterThan(btc.length / 2);
  });

  it('has assets without any price series but with positions', () => {
    const eventAssets = new Set(liveEvents().map((e) => e.assetId));
    const unpriced = by.assets.filter((a) => !pricesByAsset.has(a.id) && eventAssets.has(a.id));
    expect(unpriced.length).toBeGreaterThanOrEqual(1);
  });

  it('has an overflow asset: opens at ~1e-300, prices ~1e308, fwd/open = Infinity', () => {
    const tinyOpens = liveEvents().filter((e) => e.type === 'open' && e.price !== null && e.price > 0 && e.price < 1e-290);
    expect(tinyOpens.length).toBeGreaterThan(0);
    const assetId = tinyOpens[0]!.assetId;
    const prices = by.prices.filter((p) => p.assetId === assetId).map((p) => p.price);
    expect(prices.length).toBeGreaterThan(0);
    expect(Math.min(...prices)).toBeGreaterThan(1e307);
    expect(prices[prices.length - 1]! / tinyOpens[0]!.price!).toBe(Infinity);
    expect(assetById().get(assetId)).toBeDefined();
  });

  it('has positions whose 1D or 7D forward time falls in a price gap', () => {
    const inGap = (assetId: number, t: number) => {
      const times = pricesByAsset.get(assetId);
      if (!times) return false;
      // index of first sample >= t
      let lo = 0,
        hi = times.length;
      while (lo < hi) {
        const m = (lo + hi) >> 1;
        if (times[m]! < t) lo = m + 1;
        else hi = m;
      }
      if (lo === 0 || lo === times.length) return false;
      return times[lo]! - times[lo - 1]! >= 2 * DAY;
    };
    let hits = 0;
    for (const list of positions.values()) {
      const o = openOf(list);
      if (inGap(o.assetId, ms(o.timeOfEvent) + DAY) || inGap(o.assetId, ms(o.timeOfEvent) + 7 * DAY)) hits++;
    }
    expect(hits).toBeGreaterThan(10);
  });
});

describe('demo generator: positions and trade events', () => {
  it('has unique, increasing event ids and position ids 1..P, each position one trader/asset/direction, open first', () => {
    const live = liveEvents();
    for (let i = 1; i < live.length; i++) if (live[i]!.id <= live[i - 1]!.id) throw new Error(`event ids not increasing at ${i}`);
    const ids = [...positions.keys()].sort((a, b) => a - b);
    expect(ids[0]).toBe(1);
    expect(ids[ids.length - 1]).toBe(ids.length);
    assertEach(positions.values(), 'position', (list) => {
      if (list[0]!.type !== 'open') return 'does not start with open';
      if (list.filter((e) => e.type === 'open').length !== 1) return 'several opens';
      const closes = list.filter((e) => e.type === 'close');
      if (closes.length > 1) return 'several closes';
      if (closes.length === 1 && list[list.length - 1] !== closes[0]) return 'close is not last';
      for (const e of list) {
        if (e.traderId !== list[0]!.traderId || e.assetId !== list[0]!.assetId || e.direction !== list[0]!.direction)
          return 'mixed trader/asset/direction';
      }
      for (let i = 1; i < list.length; i++) if (ms(list[i]!.timeOfEvent) < ms(list[i - 1]!.timeOfEvent)) return 'not in time order';
      return false;
    });
    expect(live.some((e) => e.type === 'increase')).toBe(true);
    expect(live.some((e) => e.type === 'decrease')).toBe(true);
  });

  it('has mostly-long, mostly-short and mixed traders', () => {
    const stats = new Map<number, { long: number; n: number }>();
    for (const list of positions.values()) {
      const o = openOf(list);
      const s = stats.get(o.traderId) ?? { long: 0, n: 0 };
      s.n++;
      if (o.direction === 'long') s.long++;
      stats.set(o.traderId, s);
    }
    const ratios = [...stats.values()].filter((s) => s.n >= 10).map((s) => s.long / s.n);
    expect(ratios.filter((r) => r >= 0.6).length).toBeGreaterThan(10);
    expect(ratios.filter((r) => r <= 0.4).length).toBeGreaterThan(10);
    expect(ratios.filter((r) => r > 0.4 && r < 0.6).length).toBeGreaterThan(10);
  });

  it('spreads opens over ~120 days, incl. < 20h and < 6 days old; most close, some stay open', () => {
    const ages = [...positions.values()].map((l) => NOW_MS - ms(openOf(l).timeOfEvent));
    expect(Math.max(...ages)).toBeGreaterThan(110 * DAY);
    expect(Math.max(...ages)).toBeLessThan(125 * DAY);
    expect(ages.filter((a) => a < 20 * HOUR).length).toBeGreaterThan(5);
    expect(ages.filter((a) => a >= 20 * HOUR && a < 6 * DAY).length).toBeGreaterThan(5);
    const lists = [...positions.values()];
    const open = lists.filter((l) => !closeOf(l));
    expect(open.length).toBeGreaterThan(lists.length * 0.05);
    expect(open.length).toBeLessThan(lists.length * 0.3);
    expect(open.some((l) => NOW_MS - ms(openOf(l).timeOfEvent) > 60 * DAY)).toBe(true);
  });

  it('prices events near the asset price, with some null and zero entry prices', () => {
    const opens = [...positions.values()].map(openOf);
    expect(opens.filter((e) => e.price === null).length).toBeGreaterThan(20);
    expect(opens.filter((e) => e.price === 0).length).toBeGreaterThan(20);
    // BTC event prices are within 1% of the price sample nearest in time.
    const btcPrices = by.prices.filter((p) => p.assetId === 1);
    const start = ms(btcPrices[0]!.at);
    let checked = 0;
    for (const e of liveEvents()) {
      if (e.assetId !== 1 || !e.price) continue;
      const k = Math.round((ms(e.timeOfEvent) - start) / HOUR);
      const sample = btcPrices[k];
      if (!sample || Math.abs(ms(sample.at) - ms(e.timeOfEvent)) > HOUR) continue;
      if (Math.abs(e.price / sample.price - 1) >= 0.01) throw new Error(`BTC event price ${e.price} far from ${sample.price}`);
      checked++;
    }
    expect(checked).toBeGreaterThan(100);
  });

  it('has assumed, retrospective and auto-generated events', () => {
    const live = liveEvents();
    expect(live.some((e) => e.assumed && e.type === 'open')).toBe(true);
    expect(live.some((e) => e.assumed && e.type === 'increase')).toBe(true);
    expect(live.some((e) => e.retrospective)).toBe(true);
    const autoCloses = live.filter((e) => e.autoGenerated && e.type === 'close');
    expect(autoCloses.length).toBeGreaterThan(10);
    expect(autoCloses.filter((e) => e.assumed).length).toBeGreaterThan(autoCloses.length / 2);

    // Instant opens fabricated at the close.
    let instant = 0;
    for (const list of positions.values()) {
      const o = openOf(list);
      const c = closeOf(list);
      if (o.autoGenerated && c && o.timeOfEvent === c.timeOfEvent) instant++;
    }
    expect(instant).toBeGreaterThan(10);

    // Assumed opens sharing messageId and assetId with a sibling event of another position, and lone ones.
    const byMsg = new Map<string, TradeEventRecord[]>();
    for (const e of live) if (e.messageId) byMsg.set(e.messageId, [...(byMsg.get(e.messageId) ?? []), e]);
    let shared = 0;
    let lone = 0;
    for (const e of live) {
      if (!e.assumed || e.type !== 'open' || e.autoGenerated) continue;
      const sib = e.messageId ? byMsg.get(e.messageId)!.filter((s) => s !== e && s.assetId === e.assetId) : [];
      if (sib.length > 0) shared++;
      else lone++;
    }
    expect(shared).toBeGreaterThan(5);
    expect(lone).toBeGreaterThan(5);
  });

  it("links most events to a message of the trader's source identity, written a little before the event", () => {
    const live = liveEvents();
    const linked = live.filter((e) => e.messageId !== null);
    expect(linked.length / live.length).toBeGreaterThan(0.8);
    expect(live.some((e) => e.messageId === null)).toBe(true);
    let shared = 0;
    const count = new Map<string, number>();
    assertEach(linked, 'linked event', (e) => {
      const m = msgV1.get(e.messageId!);
      if (!m) return 'unknown message';
      const t = traderV1.get(e.traderId)!;
      if (!t.source) return 'trader without source';
      if (m.platform !== t.source.platform || m.sourceIdentityId !== t.source.sourceIdentityId) return 'message of another identity';
      const lead = ms(e.timeOfEvent) - ms(m.writtenAt);
      if (e.retrospective ? lead >= 0 : lead <= 0 || lead >= 2 * HOUR) return `message lead ${lead}`;
      count.set(e.messageId!, (count.get(e.messageId!) ?? 0) + 1);
      return false;
    });
    for (const n of count.values()) if (n > 1) shared++;
    expect(shared).toBeGreaterThan(1000);
    // Messages mentioning two different assets.
    const assetsPerMsg = new Map<string, Set<number>>();
    for (const e of linked) assetsPerMsg.set(e.messageId!, (assetsPerMsg.get(e.messageId!) ?? new Set()).add(e.assetId));
    expect([...assetsPerMsg.values()].some((s) => s.size >= 2)).toBe(true);
  });

  it('has deleted events and deleted positions (tombstones with a higher version, later in the stream)', () => {
    expect(eventTombs.size).toBeGreaterThan(50);
    const liveById = new Map(liveEvents().map((e) => [e.id, e]));
    for (const t of eventTombs.values()) {
      expect(t.deleted).toBe(true);
      expect(t.version).toBe(2);
      const first = liveById.get(t.id)!;
      expect({ ...t, version: 1, deleted: undefined }).toEqual({ ...first, deleted: undefined });
    }
    const index = new Map(by.events.map((e, i) => [e, i]));
    for (const t of eventTombs.values()) expect(index.get(t)!).toBeGreaterThan(index.get(liveById.get(t.id)!)!);
    let wholeDeleted = 0;
    let partlyDeleted = 0;
    for (const list of positions.values()) {
      const n = list.filter((e) => eventTombs.has(e.id)).length;
      if (n === list.length) wholeDeleted++;
      else if (n > 0) partlyDeleted++;
    }
    expect(wholeDeleted).toBeGreaterThan(20);
    expect(partlyDeleted).toBeGreaterThan(20);
  });

  it('has events of deleted traders', () => {
    const deleted = new Set(by.traders.filter((t) => t.deleted).map((t) => t.id));
    expect(liveEvents().some((e) => deleted.has(e.traderId))).toBe(true);
  });
});

describe('demo generator: messages', () => {
  it('has unique tg-/x- ids, known identities, and writtenAt spread over ~120 days', () => {
    assertEach(msgV1.values(), 'message', (m) => {
      if (!(m.platform === 'TELEGRAM' ? /^tg-\d{6,}$/ : /^x-\d{6,}$/).test(m.id)) return 'bad id';
      return !identityOf.has(identityKey(m.platform, m.sourceIdentityId)) && 'unknown identity';
    });
    const v1 = by.messages.filter((m) => m.version === 1);
    expect(new Set(v1.map((m) => m.id)).size).toBe(v1.length);
    const ages = v1.map((m) => NOW_MS - ms(m.writtenAt));
    expect(Math.max(...ages)).toBeGreaterThan(110 * DAY);
    expect(Math.max(...ages)).toBeLessThan(125 * DAY);
    expect(Math.min(...ages)).toBeLessThan(DAY);
    expect(new Set(v1.map((m) => m.platform)).size).toBe(2);
  });

  it('has attachments, null texts, replies/quotes/reposts with some nulls, messages without events', () => {
    const v1 = [...msgV1.values()];
    expect(
      v1.some(
        (m) =>
          m.attachments.length > 0 && m.attachments[0]!.type === 'image' && m.attachments[0]!.url.startsWith('https://cdn.example.com/'),
      ),
    ).toBe(true);
    expect(v1.some((m) => m.text === null)).toBe(true);
    for (const f of ['isReply', 'isQuote', 'isRepost', 'isEdited'] as const) {
      expect(
        v1.some((m) => m[f] === null),
        f,
      ).toBe(true);
      expect(
        v1.some((m) => m[f] === false),
        f,
      ).toBe(true);
    }
    for (const f of ['isReply', 'isQuote', 'isRepost'] as const)
      expect(
        v1.some((m) => m[f] === true),
        f,
      ).toBe(true);
    const linked = new Set(liveEvents().map((e) => e.messageId));
    expect(v1.filter((m) => !linked.has(m.id)).length).toBeGreaterThan(500);
  });

  it('has edited messages re-emitted as version 2 with changed text, and deleted messages', () => {
    const v2 = by.messages.filter((m) => m.version === 2);
    const edits = v2.filter((m) => !m.deleted);
    const tombs = v2.filter((m) => m.deleted);
    expect(edits.length).toBeGreaterThan(100);
    expect(tombs.length).toBeGreaterThan(5);
    for (const e of edits) {
      const first = msgV1.get(e.id)!;
      expect(e.isEdited).toBe(true);
      expect(e.text).not.toBe(first.text);
      expect(e.writtenAt).toBe(first.writtenAt);
    }
    for (const t of tombs) expect({ ...t, version: 1, deleted: undefined }).toEqual({ ...msgV1.get(t.id)!, deleted: undefined });
    const index = new Map(by.messages.map((m, i) => [m, i]));
    for (const m of v2) expect(index.get(m)!).toBeGreaterThan(index.get(msgV1.get(m.id)!)!);
  });
});

describe('demo data through the log', () => {
  it('appendDemo writes each record as the envelope line appendSync writes; appendDemoInWorker writes the same bytes', async () => {
    const { mkdtempSync, readdirSync, readFileSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { EmbeddedLog } = await import('../../projectors/log/embedded.ts');
    const { appendDemo } = await import('../../projectors/demo/append.ts');
    const { appendDemoInWorker } = await import('../../apps/seed.ts');
    const dirs = [0, 1, 2].map(() => mkdtempSync(join(tmpdir(), 'signalbase-demo-log-')));
    try {
      const n = await appendDemo(new EmbeddedLog(dirs[0]!), { scale: 'small', now: NOW });
      const seen: number[] = [];
      expect(await appendDemoInWorker(dirs[1]!, { scale: 'small', now: NOW, onProgress: (d) => seen.push(d) })).toBe(n);
      expect(seen.at(-1)).toBe(n);
      const reference = new EmbeddedLog(dirs[2]!);
      for (const r of records) reference.appendSync(r.topic, [{ key: topicByName.get(r.topic)!.key(r.value), value: r.value }]);
      const files = readdirSync(join(dirs[2]!, 'log'))
        .filter((f) => f.endsWith('.ndjson'))
        .sort();
      expect(files.length).toBe(9); // the seven topics of the trading data and the two of summaries
      for (const dir of dirs.slice(0, 2)) {
        expect(
          readdirSync(join(dir, 'log'))
            .filter((f) => f.endsWith('.ndjson'))
            .sort(),
        ).toEqual(files);
        for (const f of files)
          expect(readFileSync(join(dir, 'log', f)).equals(readFileSync(join(dirs[2]!, 'log', f))), `${dir} ${f}`).toBe(true);
      }
    } finally {
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  }, 60_000);
});
