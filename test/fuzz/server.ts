import type { Scope } from '../../schemas/topics/index.ts';
import { build, createHarness, type Harness, type TopicRecord } from '../helpers/harness.ts';
import { prng } from '../helpers/prng.ts';

/**
 * The server under fuzz: a harness listening on a real socket, seeded with a small data set that
 * spreads rows over 160 days (so the 7- and 30-day history windows and the 90-day default window
 * all cut through it), and one key per account. The accounts have pairwise different policies,
 * so a cursor of one is never valid for another.
 */
export type AccountName = 'full' | 'restricted' | 'windowed' | 'narrow';

export interface AccountSpec {
  name: AccountName;
  scopes: readonly Scope[] | null; // null: every scope
  messageVisibility: { mode: 'all' | 'none' | 'platforms' | 'traders'; platforms?: ('TELEGRAM' | 'X')[]; traderIds?: number[] };
  signalVisibility: { mode: 'all' | 'none' | 'platforms' | 'traders'; platforms?: ('TELEGRAM' | 'X')[]; traderIds?: number[] };
  historyWindowDays: number | null;
}

export const ACCOUNTS: readonly AccountSpec[] = [
  { name: 'full', scopes: null, messageVisibility: { mode: 'all' }, signalVisibility: { mode: 'all' }, historyWindowDays: null },
  {
    name: 'restricted',
    scopes: null,
    messageVisibility: { mode: 'platforms', platforms: ['TELEGRAM'] },
    signalVisibility: { mode: 'traders', traderIds: [1, 2, 3, 4] },
    historyWindowDays: 30,
  },
  { name: 'windowed', scopes: null, messageVisibility: { mode: 'all' }, signalVisibility: { mode: 'all' }, historyWindowDays: 7 },
  {
    name: 'narrow',
    scopes: ['events.read'],
    messageVisibility: { mode: 'none' },
    signalVisibility: { mode: 'platforms', platforms: ['X'] },
    historyWindowDays: null,
  },
];

export interface FuzzServer {
  harness: Harness;
  port: number;
  keys: Record<AccountName, string>;
  /** Ids the data set holds (valid-value generators draw from them). */
  traderIds: number[];
  assetIds: number[];
  positionIds: number[];
  messageIds: string[];
  close(): Promise<void>;
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

export function seedRecords(now: number): {
  records: TopicRecord[];
  traderIds: number[];
  assetIds: number[];
  positionIds: number[];
  messageIds: string[];
} {
  const r = prng(8_675_309);
  const iso = (t: number) => new Date(t).toISOString();
  const records: TopicRecord[] = [];
  const traderIds = [1, 2, 3, 4, 5, 6, 7, 8];
  const platformOf = (id: number) => (id % 3 === 0 ? 'X' : 'TELEGRAM');
  for (const id of traderIds) {
    if (id !== 8) records.push(build.source(`s${id}`, { platform: platformOf(id), profileUrl: `https://example.com/s${id}` }));
    records.push(
      build.trader(id, {
        name: ['Alpha', 'beta', 'Ärger', '😀 Smile', "O'Brien", 'Zed', 'alpha', 'NoSource'][id - 1],
        source: id === 8 ? null : { platform: platformOf(id), sourceIdentityId: `s${id}` },
      }),
    );
  }
  records.push(build.source('orphan', { platform: 'X' }));
  const assetIds = [1, 2, 3, 4, 5, 6];
  const classes = ['crypto', 'equities', 'commodities', 'fx', 'other', 'crypto'];
  for (const id of assetIds) {
    records.push(
      build.asset(id, {
        assetClass: classes[id - 1],
        category: id === 2 ? 'Indices' : null,
        symbol: ['BTC', 'SPX', 'GLD', 'EUR', 'ZZZ', 'OLD'][id - 1],
        markets:
          id === 6 ? [{ quoteSymbol: 'USD', active: false, preferred: true }] : [{ quoteSymbol: 'USD', active: true, preferred: true }],
      }),
    );
    if (id <= 5) for (let t = now - 160 * DAY; t < now - HOUR; t += DAY) records.push(build.price(id, iso(t), 50 + r.int(0, 100)));
  }
  const messageIds: string[] = [];
  for (let i = 1; i <= 160; i++) {
    const owner = r.int(1, 8);
    const sid = owner === 8 ? 'orphan' : `s${owner}`;
    const id = `m-${i}`;
    messageIds.push(id);
    records.push(
      build.message(id, sid, iso(now - r.int(1, 160 * 24) * HOUR), {
        platform: owner === 8 ? 'X' : platformOf(owner),
        text: r.pick(['BTC long here', 'closing SPX', 'gold 🚀', 'EUR/USD short', 'nothing today']),
        attachments: i % 7 === 0 ? [{ type: 'image', url: `https://cdn.example.com/${i}.png` }] : [],
      }),
    );
  }
  const positionIds: number[] = [];
  let eventId = 1;
  for (let pid = 1; pid <= 180; pid++) {
    positionIds.push(pid);
    const traderId = r.pick(traderIds);
    const assetId = r.pick(assetIds);
    const direction = r.next() < 0.6 ? 'long' : 'short';
    const openAt = now - r.int(2, 160 * 24) * HOUR;
    const common = { positionId: pid, traderId, assetId, direction };
    records.push(
      build.event(eventId++, {
        ...common,
        type: 'open',
        price: 100,
        timeOfEvent: iso(openAt),
        messageId: r.next() < 0.3 ? r.pick(messageIds) : null,
      }),
    );
    if (r.next() < 0.3)
      records.push(
        build.event(eventId++, { ...common, type: r.pick(['increase', 'decrease']), price: 101, timeOfEvent: iso(openAt + HOUR / 2) }),
      );
    if (r.next() < 0.5) records.push(build.event(eventId++, { ...common, type: 'close', price: 102, timeOfEvent: iso(openAt + HOUR) }));
  }
  return { records, traderIds, assetIds, positionIds, messageIds };
}

export async function startFuzzServer(): Promise<FuzzServer> {
  const harness = await createHarness();
  try {
    const seed = seedRecords(Math.floor(Date.now() / 1000) * 1000);
    await harness.given(seed.records);
    const keys = {} as Record<AccountName, string>;
    for (const a of ACCOUNTS) {
      keys[a.name] = await harness.key({
        ...(a.scopes ? { scopes: a.scopes } : {}),
        account: {
          id: `fuzz-${a.name}`,
          messageVisibility: a.messageVisibility,
          signalVisibility: a.signalVisibility,
          historyWindowDays: a.historyWindowDays,
        },
      });
    }
    await harness.app.listen({ port: 0, host: '127.0.0.1' });
    const addr = harness.app.server.address();
    const port = typeof addr === 'object' && addr ? addr.port : 0;
    return { harness, port, keys, ...seed, close: () => harness.close() };
  } catch (e) {
    await harness.close().catch(() => undefined);
    throw e;
  }
}
