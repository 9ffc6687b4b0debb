// Deterministic demo-data generator for the ingest topics (DESIGN section 4).
//
// Same seed + same `now` => the same record sequence, byte for byte. Every entity draws from its own
// PRNG sub-stream (seed, stream, id), so traders can be regenerated one at a time: messages are emitted
// in a first pass over the traders and trade events in a second pass that rebuilds the same per-trader
// plan. Only small per-trader state, the trader profiles and the hourly price walks are held in memory.
//
// Emission order (referenced entities first):
//   source-identities -> traders -> trader-tags -> assets -> prices -> messages -> trade-events
//   -> channel-summaries -> aggregate-summaries
//   -> traders (tombstones of the deleted traders, version 2, at the very end).
// Within messages: trader by trader (id order), each trader's messages by writtenAt, then that trader's
// edits (version 2) and tombstones; then the messages of unassigned source identities.
// Within trade-events: trader by trader, position by position (by open time), each position's events in
// time order, then that position's tombstones (version 2, full record with deleted: true).
//
// Special ids (every scale):
//   traders: 1 "Alpha Whale" (TELEGRAM, mostly long), 2 (X, mostly short), 3 source null (has positions,
//     all messageIds null), 4 no positions (has messages), 5 no messages (has positions), 6 no messages
//     and no positions, 7 deleted (tombstone at the end; has positions + messages), 8 untagged,
//     9 slug null. Others get these properties at random too.
//   assets: 18 HYPE and 60 MYST have no price series (but positions); 19 LUNC has markets [];
//     20 FTT and 21 SRM have only inactive markets; 22 OVFL is the overflow case (opens ~1e-300,
//     prices ~1.2e308); 1 BTC, 2 ETH, 28 AAPL have several markets with the preferred one not first;
//     23..27 are equities with category 'Indices'; 58 US10Y has assetClass 'bonds', 59 GLD 'etf',
//     60 MYST null. Large scale adds synthetic assets 61..300.

import type {
  AggregateSummaryRecord,
  AssetRecord,
  ChannelSummaryRecord,
  MessageRecord,
  Platform,
  PriceRecord,
  SourceIdentityRecord,
  TopicName,
  TradeEventRecord,
  TraderRecord,
  TraderTagsRecord,
} from '../../schemas/topics/index.ts';
import { Prng } from './prng.ts';

export type Scale = 'small' | 'large';
export interface DemoRecord {
  topic: TopicName;
  value: unknown;
}
export interface DemoOptions {
  scale: Scale;
  seed?: number;
  now: Date;
}

const SEC = 1000;
const MIN = 60 * SEC;
const HOUR = 60 * MIN;
const DAY = 24 * HOUR;

/** Price samples: hourly, the last one PRICE_END_LAG before now, PRICE_STEPS + 1 samples. */
const PRICE_DAYS = 130;
const PRICE_STEPS = PRICE_DAYS * 24;
const PRICE_END_LAG = 5 * MIN;
/** Trading sessions (message + events) fall in [now - SESSION_DAYS, now - SESSION_END_LAG]. */
const SESSION_DAYS = 120;
const SESSION_END_LAG = 30 * MIN;
const EVENT_MAX_OFFSET = 20 * MIN;

interface ScaleParams {
  traders: number;
  assets: number;
  /** Mean positions per trader that has positions. */
  meanPositions: number;
  /** Mean events per trading session (one message per session). */
  eventsPerSession: number;
  orphanIdentities: number;
}

const SCALES: Record<Scale, ScaleParams> = {
  small: { traders: 200, assets: 60, meanPositions: 97, eventsPerSession: 2.9, orphanIdentities: 10 },
  large: { traders: 5000, assets: 300, meanPositions: 170, eventsPerSession: 1.8, orphanIdentities: 150 },
};

/** Measured record totals for seed 42 (they vary by well under 1% with the seed). */
const ESTIMATES: Record<Scale, number> = { small: 238_000, large: 4_200_000 };

export function estimateDemoRecords(scale: Scale): number {
  return ESTIMATES[scale];
}

// ---------------------------------------------------------------------------------------------------
// PRNG streams

const S_NAMES = 1;
const S_PROFILE = 2;
const S_ASSETS = 3;
const S_PRICES = 4;
const S_PLAN = 5;
const S_TEXT = 6;
const S_ORPHAN = 7;
const S_SUMMARY = 8;

// ---------------------------------------------------------------------------------------------------
// Helpers

/** `new Date(ms).toISOString()` for ms >= 0 (years up to 9999), from cached day texts and digit tables (~8x faster). */
const isoDays = new Map<number, string>();
const DIGITS2 = Array.from({ length: 60 }, (_, i) => String(i).padStart(2, '0'));
const DIGITS3 = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));
export function fastIso(ms: number): string {
  if (!(ms >= 0 && ms < 253402300800000)) return new Date(ms).toISOString();
  const day = Math.floor(ms / DAY);
  let dayText = isoDays.get(day);
  if (dayText === undefined) {
    if (isoDays.size > 10_000) isoDays.clear();
    isoDays.set(day, (dayText = new Date(day * DAY).toISOString().slice(0, 11)));
  }
  let r = ms - day * DAY;
  const h = Math.floor(r / HOUR);
  r -= h * HOUR;
  const m = Math.floor(r / MIN);
  r -= m * MIN;
  const sec = Math.floor(r / SEC);
  return dayText + DIGITS2[h] + ':' + DIGITS2[m] + ':' + DIGITS2[sec] + '.' + DIGITS3[r - sec * SEC] + 'Z';
}

function roundPrice(p: number): number {
  if (p >= 1000) return Math.round(p * 100) / 100;
  if (p >= 1) return Math.round(p * 10000) / 10000;
  return Number(p.toPrecision(6));
}

function lowerBound(arr: Float64Array, x: number): number {
  let lo = 0;
  let hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (arr[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const pad6 = (n: number): string => String(n).padStart(6, '0');

// ---------------------------------------------------------------------------------------------------
// Assets

type AssetFlag = 'noPrices' | 'emptyMarkets' | 'inactiveMarkets' | 'multi' | 'overflow' | 'gaps' | 'noLogo';

interface AssetSpec {
  symbol: string;
  name: string;
  assetClass: string | null;
  category: string | null;
  price: number;
  flags?: AssetFlag[];
}

const CATALOG: AssetSpec[] = [
  // crypto 1..22
  { symbol: 'BTC', name: 'Bitcoin', assetClass: 'crypto', category: 'Layer 1', price: 64000, flags: ['multi'] },
  { symbol: 'ETH', name: 'Ethereum', assetClass: 'crypto', category: 'Layer 1', price: 3100, flags: ['multi', 'gaps'] },
  { symbol: 'SOL', name: 'Solana', assetClass: 'crypto', category: 'Layer 1', price: 145, flags: ['gaps'] },
  { symbol: 'BNB', name: 'BNB', assetClass: 'crypto', category: 'Exchange', price: 580 },
  { symbol: 'XRP', name: 'XRP', assetClass: 'crypto', category: 'Payments', price: 0.52 },
  { symbol: 'DOGE', name: 'Dogecoin', assetClass: 'crypto', category: 'Meme', price: 0.12 },
  { symbol: 'ADA', name: 'Cardano', assetClass: 'crypto', category: 'Layer 1', price: 0.45 },
  { symbol: 'AVAX', name: 'Avalanche', assetClass: 'crypto', category: 'Layer 1', price: 28 },
  { symbol: 'LINK', name: 'Chainlink', assetClass: 'crypto', category: 'Oracle', price: 14 },
  { symbol: 'ARB', name: 'Arbitrum', assetClass: 'crypto', category: 'Layer 2', price: 0.75 },
  { symbol: 'OP', name: 'Optimism', assetClass: 'crypto', category: 'Layer 2', price: 1.6 },
  { symbol: 'PEPE', name: 'Pepe', assetClass: 'crypto', category: 'Meme', price: 0.0000085 },
  { symbol: 'TON', name: 'Toncoin', assetClass: 'crypto', category: 'Layer 1', price: 5.5 },
  { symbol: 'SUI', name: 'Sui', assetClass: 'crypto', category: 'Layer 1', price: 1.1 },
  { symbol: 'TAO', name: 'Bittensor', assetClass: 'crypto', category: 'AI', price: 320 },
  { symbol: 'FET', name: 'Fetch.ai', assetClass: 'crypto', category: 'AI', price: 1.3 },
  { symbol: 'WIF', name: 'dogwifhat', assetClass: 'crypto', category: 'Meme', price: 2.1 },
  { symbol: 'HYPE', name: 'Hyperliquid', assetClass: 'crypto', category: 'DeFi', price: 24, flags: ['noPrices'] },
  { symbol: 'LUNC', name: 'Terra Classic', assetClass: 'crypto', category: 'Layer 1', price: 0.00009, flags: ['emptyMarkets', 'noLogo'] },
  { symbol: 'FTT', name: 'FTX Token', assetClass: 'crypto', category: 'Exchange', price: 1.4, flags: ['inactiveMarkets'] },
  { symbol: 'SRM', name: 'Serum', assetClass: 'crypto', category: 'DeFi', price: 0.03, flags: ['inactiveMarkets', 'gaps'] },
  { symbol: 'OVFL', name: 'Overflow Coin', assetClass: 'crypto', category: 'Test', price: 1.2e308, flags: ['overflow', 'noLogo'] },
  // equities 23..42 (23..27 indices)
  { symbol: 'SPX', name: 'S&P 500', assetClass: 'equities', category: 'Indices', price: 5400 },
  { symbol: 'NDX', name: 'Nasdaq 100', assetClass: 'equities', category: 'Indices', price: 19000 },
  { symbol: 'DJI', name: 'Dow Jones Industrial Average', assetClass: 'equities', category: 'Indices', price: 39000 },
  { symbol: 'DAX', name: 'DAX 40', assetClass: 'equities', category: 'Indices', price: 18300, flags: ['gaps'] },
  { symbol: 'NI225', name: 'Nikkei 225', assetClass: 'equities', category: 'Indices', price: 38500 },
  { symbol: 'AAPL', name: 'Apple', assetClass: 'equities', category: 'Technology', price: 215, flags: ['multi', 'gaps'] },
  { symbol: 'MSFT', name: 'Microsoft', assetClass: 'equities', category: 'Technology', price: 430 },
  { symbol: 'NVDA', name: 'NVIDIA', assetClass: 'equities', category: 'Technology', price: 120 },
  { symbol: 'AMD', name: 'Advanced Micro Devices', assetClass: 'equities', category: 'Technology', price: 155 },
  { symbol: 'GOOGL', name: 'Alphabet', assetClass: 'equities', category: 'Communication Services', price: 175 },
  { symbol: 'META', name: 'Meta Platforms', assetClass: 'equities', category: 'Communication Services', price: 500 },
  { symbol: 'AMZN', name: 'Amazon', assetClass: 'equities', category: 'Consumer Cyclical', price: 185 },
  { symbol: 'TSLA', name: 'Tesla', assetClass: 'equities', category: 'Consumer Cyclical', price: 230 },
  { symbol: 'JPM', name: 'JPMorgan Chase', assetClass: 'equities', category: 'Financials', price: 205 },
  { symbol: 'COIN', name: 'Coinbase', assetClass: 'equities', category: 'Financials', price: 220 },
  { symbol: 'MSTR', name: 'MicroStrategy', assetClass: 'equities', category: 'Technology', price: 1500 },
  { symbol: 'XOM', name: 'Exxon Mobil', assetClass: 'equities', category: 'Energy', price: 115 },
  { symbol: 'LLY', name: 'Eli Lilly', assetClass: 'equities', category: 'Healthcare', price: 900 },
  { symbol: 'PLTR', name: 'Palantir', assetClass: 'equities', category: 'Technology', price: 28 },
  { symbol: 'BRK.B', name: 'Berkshire Hathaway', assetClass: 'equities', category: 'Financials', price: 440, flags: ['noLogo'] },
  // commodities 43..48
  { symbol: 'XAU', name: 'Gold', assetClass: 'commodities', category: 'Metals', price: 2400 },
  { symbol: 'XAG', name: 'Silver', assetClass: 'commodities', category: 'Metals', price: 29 },
  { symbol: 'WTI', name: 'Crude Oil WTI', assetClass: 'commodities', category: 'Energy', price: 78, flags: ['gaps'] },
  { symbol: 'BRENT', name: 'Brent Crude Oil', assetClass: 'commodities', category: 'Energy', price: 82 },
  { symbol: 'NG', name: 'Natural Gas', assetClass: 'commodities', category: 'Energy', price: 2.4 },
  { symbol: 'HG', name: 'Copper', assetClass: 'commodities', category: 'Metals', price: 4.4 },
  // fx 49..54
  { symbol: 'EURUSD', name: 'Euro / US Dollar', assetClass: 'fx', category: 'Majors', price: 1.085 },
  { symbol: 'GBPUSD', name: 'British Pound / US Dollar', assetClass: 'fx', category: 'Majors', price: 1.27 },
  { symbol: 'USDJPY', name: 'US Dollar / Japanese Yen', assetClass: 'fx', category: 'Majors', price: 157 },
  { symbol: 'AUDUSD', name: 'Australian Dollar / US Dollar', assetClass: 'fx', category: 'Majors', price: 0.66 },
  { symbol: 'USDCHF', name: 'US Dollar / Swiss Franc', assetClass: 'fx', category: 'Majors', price: 0.9 },
  { symbol: 'USDCAD', name: 'US Dollar / Canadian Dollar', assetClass: 'fx', category: 'Majors', price: 1.36 },
  // other 55..57
  { symbol: 'VIX', name: 'CBOE Volatility Index', assetClass: 'other', category: 'Volatility', price: 14 },
  { symbol: 'BTC.D', name: 'Bitcoin Dominance', assetClass: 'other', category: null, price: 54 },
  { symbol: 'DXY', name: 'US Dollar Index', assetClass: 'other', category: 'Indices', price: 104 },
  // unknown classes 58..59, null class 60
  { symbol: 'US10Y', name: 'US 10Y Treasury Yield', assetClass: 'bonds', category: 'Rates', price: 4.3 },
  { symbol: 'GLD', name: 'SPDR Gold Trust', assetClass: 'etf', category: 'Commodities', price: 220 },
  { symbol: 'MYST', name: 'Mystery Asset', assetClass: null, category: null, price: 3.3, flags: ['noPrices', 'noLogo'] },
];

interface Asset {
  id: number;
  spec: AssetSpec;
  record: AssetRecord;
  priced: boolean;
  overflow: boolean;
  /** Hidden hourly walk (also for unpriced assets: event prices come from it). */
  walk: Float64Array;
  /** 1 where the emitted series has a hole. */
  gap: Uint8Array | null;
}

const HOURLY_SIGMA: Record<string, number> = {
  crypto: 0.006,
  equities: 0.0022,
  commodities: 0.0025,
  fx: 0.0006,
  other: 0.004,
  bonds: 0.002,
  etf: 0.0015,
};

const SYLLABLES = ['ka', 'zo', 'ri', 'ne', 'lu', 'ta', 'vo', 'mi', 'sa', 'qu', 'xe', 'do', 'pe', 'ra', 'ni', 'to', 'ly', 'on', 'ex', 'ar'];
const CRYPTO_SUFFIX = ['Protocol', 'Network', 'Finance', 'Chain', 'AI', 'Token', 'Swap', 'Labs', 'DAO', 'Coin'];
const CRYPTO_CATS = ['DeFi', 'Layer 1', 'Layer 2', 'AI', 'Gaming', 'Meme', 'RWA', 'Infrastructure'];
const EQUITY_SUFFIX = ['Inc.', 'Corp.', 'Holdings', 'Group', 'Systems', 'Therapeutics', 'Industries', 'Technologies'];
const EQUITY_CATS = ['Technology', 'Healthcare', 'Financials', 'Energy', 'Industrials', 'Consumer Cyclical', 'Utilities'];
const MAGNITUDES = [0.0001, 0.001, 0.01, 0.1, 1, 10, 100, 1000];

function syntheticSpecs(rng: Prng, count: number, used: Set<string>): AssetSpec[] {
  const out: AssetSpec[] = [];
  const cap = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);
  for (let i = 0; i < count; i++) {
    let symbol = '';
    do {
      const len = rng.intIn(3, 5);
      symbol = '';
      for (let k = 0; k < len; k++) symbol += String.fromCharCode(65 + rng.int(26));
    } while (used.has(symbol));
    used.add(symbol);
    const stem = cap(rng.pick(SYLLABLES) + rng.pick(SYLLABLES) + (rng.chance(0.5) ? rng.pick(SYLLABLES) : ''));
    const r = rng.next();
    const flags: AssetFlag[] = [];
    if (rng.chance(0.08)) flags.push('multi');
    if (rng.chance(0.08)) flags.push('noLogo');
    if (r < 0.55) {
      out.push({
        symbol,
        name: `${stem} ${rng.pick(CRYPTO_SUFFIX)}`,
        assetClass: 'crypto',
        category: rng.pick(CRYPTO_CATS),
        price: rng.pick(MAGNITUDES) * rng.range(1, 10),
        flags,
      });
    } else if (r < 0.88) {
      const index = rng.chance(0.05);
      out.push({
        symbol,
        name: index ? `${stem} ${rng.intIn(20, 500)} Index` : `${stem} ${rng.pick(EQUITY_SUFFIX)}`,
        assetClass: 'equities',
        category: index ? 'Indices' : rng.pick(EQUITY_CATS),
        price: index ? rng.range(1000, 30000) : rng.range(5, 800),
        flags,
      });
    } else if (r < 0.93) {
      out.push({
        symbol,
        name: `${stem} Futures`,
        assetClass: 'commodities',
        category: rng.pick(['Metals', 'Energy', 'Agriculture']),
        price: rng.range(2, 3000),
        flags,
      });
    } else if (r < 0.97) {
      out.push({ symbol, name: `${stem} Cross`, assetClass: 'fx', category: 'Minors', price: rng.range(0.5, 150), flags });
    } else {
      out.push({ symbol, name: `${stem} Basket`, assetClass: 'other', category: null, price: rng.range(10, 200), flags });
    }
  }
  return out;
}

function buildAssets(seed: number, count: number): Asset[] {
  const rng = new Prng(seed, S_ASSETS, 0);
  const specs = CATALOG.slice(0, Math.min(count, CATALOG.length));
  if (count > CATALOG.length) {
    specs.push(...syntheticSpecs(rng, count - CATALOG.length, new Set(CATALOG.map((s) => s.symbol))));
  }
  return specs.map((spec, i) => {
    const id = i + 1;
    const flags = spec.flags ?? [];
    const quote = spec.assetClass === 'crypto' ? 'USDT' : spec.assetClass === 'fx' ? spec.symbol.slice(3) || 'USD' : 'USD';
    let markets: AssetRecord['markets'];
    if (flags.includes('emptyMarkets')) markets = [];
    else if (flags.includes('inactiveMarkets'))
      markets = [
        { quoteSymbol: quote, active: false, preferred: true },
        { quoteSymbol: 'USD', active: false, preferred: false },
      ];
    else if (flags.includes('multi'))
      markets =
        spec.assetClass === 'crypto'
          ? [
              { quoteSymbol: 'EUR', active: true, preferred: false },
              { quoteSymbol: 'USDT', active: true, preferred: true },
              { quoteSymbol: 'USDC', active: false, preferred: false },
            ]
          : [
              { quoteSymbol: 'EUR', active: true, preferred: false },
              { quoteSymbol: quote, active: true, preferred: true },
            ];
    else if (spec.assetClass === 'crypto' && rng.chance(0.3))
      markets = [
        { quoteSymbol: 'USDT', active: true, preferred: true },
        { quoteSymbol: 'USD', active: true, preferred: false },
      ];
    else markets = [{ quoteSymbol: quote, active: true, preferred: true }];
    const record: AssetRecord = {
      id,
      name: spec.name,
      symbol: spec.symbol,
      logoUrl: flags.includes('noLogo') ? null : `https://cdn.example.com/logos/${spec.symbol.toLowerCase()}.png`,
      assetClass: spec.assetClass,
      category: spec.category,
      markets,
      version: 1,
    };

    // Hidden hourly walk + gaps of the emitted series.
    const prng = new Prng(seed, S_PRICES, id);
    const walk = new Float64Array(PRICE_STEPS + 1);
    const overflow = flags.includes('overflow');
    if (overflow) {
      for (let k = 0; k <= PRICE_STEPS; k++) walk[k] = 1.2e308 * (1 + 0.1 * (2 * prng.next() - 1));
    } else {
      const sigma =
        (HOURLY_SIGMA[spec.assetClass ?? 'other'] ?? 0.003) * (spec.category === 'Meme' ? 1.6 : spec.category === 'Indices' ? 0.6 : 1);
      const step = sigma * 1.7320508075688772;
      let p = spec.price;
      for (let k = 0; k <= PRICE_STEPS; k++) {
        walk[k] = p;
        p *= 1 + step * (2 * prng.next() - 1);
      }
    }
    const priced = !flags.includes('noPrices');
    let gap: Uint8Array | null = null;
    const gapCount = flags.includes('gaps') ? prng.intIn(2, 3) : !overflow && prng.chance(0.45) ? prng.intIn(1, 3) : 0;
    if (priced && gapCount > 0) {
      gap = new Uint8Array(PRICE_STEPS + 1);
      for (let g = 0; g < gapCount; g++) {
        const len = prng.intIn(48, 192);
        const start = prng.intIn(24, PRICE_STEPS - len - 24);
        gap.fill(1, start, start + len);
      }
    }
    return { id, spec, record, priced, overflow, walk, gap };
  });
}

// ---------------------------------------------------------------------------------------------------
// Traders

const ADJECTIVES = [
  'Alpha',
  'Crypto',
  'Macro',
  'Degen',
  'Quiet',
  'Golden',
  'Iron',
  'Lunar',
  'Solar',
  'Delta',
  'Gamma',
  'Sigma',
  'Swift',
  'Silent',
  'Atlas',
  'Apex',
  'Blue',
  'Red',
  'Green',
  'Night',
  'Early',
  'Smart',
  'Wise',
  'Rapid',
  'Steady',
  'Bold',
  'Lucky',
  'Stealth',
  'Cosmic',
  'Arctic',
  'Phantom',
  'Royal',
  'Urban',
  'Zen',
  'Turbo',
  'Prime',
  'Nova',
  'Echo',
  'Titan',
  'Velvet',
  'Hidden',
  'Patient',
  'Chart',
  'Pivot',
  'Trend',
  'Value',
  'Momentum',
  'Contrarian',
  'Bullish',
  'Bearish',
];
const NOUNS = [
  'Whale',
  'Trader',
  'Falcon',
  'Wolf',
  'Monk',
  'Fox',
  'Owl',
  'Shark',
  'Bull',
  'Bear',
  'Hawk',
  'Tiger',
  'Lion',
  'Raven',
  'Phoenix',
  'Samurai',
  'Ninja',
  'Sniper',
  'Captain',
  'Oracle',
  'Hunter',
  'Alchemist',
  'Pilot',
  'Ranger',
  'Scout',
  'Sage',
  'Capital',
  'Signals',
  'Charts',
  'Labs',
  'Desk',
  'Research',
  'Insights',
  'Markets',
  'Ventures',
  'Dragon',
  'Panda',
  'Bison',
  'Viper',
  'Cobra',
  'Lynx',
  'Otter',
  'Badger',
  'Mustang',
  'Stallion',
  'Eagle',
  'Heron',
  'Orca',
  'Dolphin',
  'Kraken',
];
const TG_HANDLE_SUFFIX = ['', '_signals', '_calls', '_trading', '_vip', '_official'];
const X_HANDLE_SUFFIX = ['', '_fx', 'trades', '_eth', 'capital', '_'];

type Focus = 'crypto' | 'equities' | 'macro' | 'mixed';
const THEMATIC: Record<Focus, string[]> = {
  crypto: ['ai', 'defi', 'memecoins', 'l2', 'bitcoin', 'altcoins', 'rwa', 'gaming'],
  equities: ['ai', 'semis', 'big tech', 'earnings', 'biotech', 'energy'],
  macro: ['macro', 'rates', 'forex', 'commodities', 'energy', 'gold'],
  mixed: ['ai', 'macro', 'bitcoin', 'defi', 'big tech', 'commodities', 'forex'],
};
const STYLES = ['swing', 'scalping', 'day trading', 'position', 'breakout', 'momentum', 'mean reversion', 'options'];

interface Profile {
  id: number;
  platform: Platform;
  /** Assigned source identity id, or null (trader.source = null). */
  sourceIdentityId: string | null;
  name: string;
  slug: string | null;
  avatarUrl: string | null;
  identity: SourceIdentityRecord | null;
  tags: TraderTagsRecord['tags'] | null;
  longBias: number;
  focus: Focus;
  positions: number;
  hasMessages: boolean;
  /** Message sessions for traders with messages but no positions. */
  fillerSessions: number;
  deleted: boolean;
}

function sourceIdFor(platform: Platform, n: number): string {
  return platform === 'TELEGRAM' ? `-100${1500000000 + n * 7919}` : String(1200000000 + n * 104729);
}

function makeIdentity(
  rng: Prng,
  platform: Platform,
  sourceIdentityId: string,
  displayName: string,
  handleBase: string,
  n: number,
): SourceIdentityRecord {
  const handle = rng.chance(0.06) ? null : `${handleBase}${rng.pick(platform === 'TELEGRAM' ? TG_HANDLE_SUFFIX : X_HANDLE_SUFFIX)}`;
  const u = rng.next();
  return {
    platform,
    sourceIdentityId,
    displayName: rng.chance(0.05) ? null : platform === 'TELEGRAM' && rng.chance(0.4) ? `${displayName} Signals` : displayName,
    handle,
    avatarUrl: rng.chance(0.15) ? null : `https://cdn.example.com/avatars/${platform === 'TELEGRAM' ? 'tg' : 'x'}/${n}.jpg`,
    profileUrl: handle === null || rng.chance(0.05) ? null : platform === 'TELEGRAM' ? `https://t.me/${handle}` : `https://x.com/${handle}`,
    audienceCount: rng.chance(0.1) ? null : Math.floor(100 + u * u * u * 480000),
    version: 1,
  };
}

function buildProfiles(seed: number, p: ScaleParams): Profile[] {
  const combos: string[] = [];
  for (const a of ADJECTIVES) for (const n of NOUNS) if (!a.startsWith(n) && !n.startsWith(a)) combos.push(`${a} ${n}`);
  new Prng(seed, S_NAMES, 0).shuffle(combos);
  const first = combos.indexOf('Alpha Whale');
  combos.splice(first, 1);
  combos.unshift('Alpha Whale');

  const profiles: Profile[] = [];
  for (let id = 1; id <= p.traders; id++) {
    const rng = new Prng(seed, S_PROFILE, id);
    const round = Math.floor((id - 1) / combos.length);
    const name = combos[(id - 1) % combos.length]! + (round > 0 ? ` ${round + 1}` : '');
    const slugText = name.toLowerCase().replace(/[^a-z0-9]+/g, '-');
    let platform: Platform = rng.chance(0.6) ? 'TELEGRAM' : 'X';
    if (id === 1) platform = 'TELEGRAM';
    if (id === 2) platform = 'X';
    const sourceNull = id === 3 || (id > 9 && rng.chance(0.03));
    const noPositions = id === 4 || id === 6 || (id > 9 && rng.chance(0.02));
    const noMessages = id === 5 || id === 6 || (id > 9 && rng.chance(0.02));
    const deleted = id === 7 || (id > 9 && rng.chance(0.01));
    const untagged = id === 8 || (id > 9 && rng.chance(0.08));
    const slugNull = id === 9 || (id > 9 && rng.chance(0.05));
    const b = rng.next();
    let longBias = b < 0.45 ? rng.range(0.72, 0.92) : b < 0.65 ? rng.range(0.08, 0.3) : rng.range(0.42, 0.58);
    if (id === 1) longBias = 0.85;
    if (id === 2) longBias = 0.15;
    const f = rng.next();
    const focus: Focus = id === 1 ? 'crypto' : f < 0.5 ? 'crypto' : f < 0.7 ? 'equities' : f < 0.82 ? 'macro' : 'mixed';
    const w = rng.next();
    const positions = noPositions ? 0 : Math.max(1, Math.round(p.meanPositions * (0.15 + 2.55 * w * w)));
    const sourceIdentityId = sourceNull ? null : sourceIdFor(platform, id);
    const identity = sourceIdentityId === null ? null : makeIdentity(rng, platform, sourceIdentityId, name, slugText.replace(/-/g, ''), id);
    let tags: Profile['tags'] = null;
    if (!untagged) {
      tags = [{ category: 'thematic', name: rng.pick(THEMATIC[focus]) }];
      if (rng.chance(0.35)) {
        const second = rng.pick(THEMATIC[focus]);
        if (second !== tags[0]!.name) tags.push({ category: 'thematic', name: second });
      }
      if (rng.chance(0.85)) tags.push({ category: 'style', name: rng.pick(STYLES) });
      if (rng.chance(0.3)) tags.push({ category: 'risk', name: rng.pick(['low', 'medium', 'high']) });
    }
    profiles.push({
      id,
      platform,
      sourceIdentityId,
      name,
      slug: slugNull ? null : slugText,
      avatarUrl: rng.chance(0.2) ? null : `https://cdn.example.com/traders/${id}.png`,
      identity,
      tags,
      longBias,
      focus,
      positions,
      hasMessages: sourceIdentityId !== null && !noMessages,
      fillerSessions: rng.intIn(15, 90),
      deleted,
    });
  }
  return profiles;
}

function traderRecord(t: Profile, version: number, deleted: boolean): TraderRecord {
  const r: TraderRecord = {
    id: t.id,
    name: t.name,
    slug: t.slug,
    avatarUrl: t.avatarUrl,
    source: t.sourceIdentityId === null ? null : { platform: t.platform, sourceIdentityId: t.sourceIdentityId },
    version,
  };
  if (deleted) r.deleted = true;
  return r;
}

// ---------------------------------------------------------------------------------------------------
// Per-trader plan (rebuilt identically in the message pass and in the event pass)

type EvType = TradeEventRecord['type'];
type Dir = TradeEventRecord['direction'];

interface PEvent {
  type: EvType;
  t: number;
  price: number | null;
  assumed: boolean;
  retro: boolean;
  auto: boolean;
  /** Session (= message) index, or -1 for messageId null. */
  sess: number;
  deleted: boolean;
  pos: PPos;
}

interface PPos {
  seq: number;
  t0: number;
  asset: Asset;
  dir: Dir;
  deleted: boolean;
  events: PEvent[];
}

interface Plan {
  sessions: Float64Array;
  positions: PPos[];
}

interface Ctx {
  seed: number;
  nowMs: number;
  params: ScaleParams;
  assets: Asset[];
  byFocus: Record<Focus, Asset[]>;
  priceT0: number;
  profiles: Profile[];
}

const EVENTS_PER_POSITION = 2.4;

function eventPrice(ctx: Ctx, rng: Prng, asset: Asset, t: number, type: EvType): number {
  let k = Math.round((t - ctx.priceT0) / HOUR);
  if (k < 0) k = 0;
  else if (k > PRICE_STEPS) k = PRICE_STEPS;
  const u = rng.next();
  if (asset.overflow) {
    if (type === 'open' || type === 'increase') return Number((1e-300 * (1 + u)).toPrecision(4));
    return asset.walk[k]!;
  }
  return roundPrice(asset.walk[k]! * (1 + 0.003 * (u - 0.5)));
}

function pickAsset(ctx: Ctx, rng: Prng, focus: Focus): Asset {
  const list = rng.chance(0.7) ? ctx.byFocus[focus] : ctx.assets;
  const u = rng.next();
  return list[Math.floor(list.length * u * u)]!;
}

function buildPlan(ctx: Ctx, t: Profile): Plan {
  const rng = new Prng(ctx.seed, S_PLAN, t.id);
  const nowMs = ctx.nowMs;
  const P = t.positions;
  const nS =
    P > 0 ? Math.max(2, Math.round((P * EVENTS_PER_POSITION) / ctx.params.eventsPerSession)) : t.hasMessages ? t.fillerSessions : 0;
  const sessions = new Float64Array(nS);
  const sStart = nowMs - SESSION_DAYS * DAY;
  const sSpan = SESSION_DAYS * DAY - SESSION_END_LAG;
  for (let i = 0; i < nS; i++) sessions[i] = Math.floor((sStart + rng.next() * sSpan) / SEC) * SEC;
  sessions.sort();
  const positions: PPos[] = [];
  if (P === 0) return { sessions, positions };
  const linkMessages = t.hasMessages;
  const offset = () => SEC * rng.intIn(10, EVENT_MAX_OFFSET / SEC);
  /** Message session of an event at time `at` in session `sess`. */
  const sessFor = (sess: number, at: number, retro: boolean): number => {
    if (!linkMessages) return -1;
    if (retro) {
      const later = lowerBound(sessions, at + HOUR);
      return later < nS ? later : -1;
    }
    return rng.chance(0.05) ? -1 : sess;
  };
  const mkEvent = (pos: PPos, type: EvType, sess: number, at: number): PEvent => {
    const retro = rng.chance(0.02);
    return {
      type,
      t: at,
      price: eventPrice(ctx, rng, pos.asset, at, type),
      assumed: false,
      retro,
      auto: false,
      sess: sessFor(sess, at, retro),
      deleted: false,
      pos,
    };
  };

  let seq = 0;
  const makePosition = (openSess: number, flipFrom: PEvent | null): void => {
    const asset = flipFrom ? flipFrom.pos.asset : pickAsset(ctx, rng, t.focus);
    const dir: Dir = flipFrom ? (flipFrom.pos.dir === 'long' ? 'short' : 'long') : rng.chance(t.longBias) ? 'long' : 'short';
    const t0 = flipFrom ? flipFrom.t : sessions[openSess]! + offset();
    const pos: PPos = { seq: seq++, t0, asset, dir, deleted: rng.chance(0.006), events: [] };
    positions.push(pos);

    // An open fabricated at the close: the message only reported the close.
    if (!flipFrom && rng.chance(0.02)) {
      const close = mkEvent(pos, 'close', openSess, t0);
      close.retro = false;
      close.sess = linkMessages ? openSess : -1;
      const open: PEvent = { ...close, type: 'open', assumed: true, auto: true, price: close.price };
      pos.events.push(open, close);
      return;
    }

    const open = mkEvent(pos, 'open', openSess, t0);
    if (flipFrom) {
      open.assumed = true;
      open.retro = flipFrom.retro;
      open.sess = flipFrom.sess;
      open.price = flipFrom.price;
    } else {
      if (rng.chance(0.03)) open.assumed = true;
      const r = rng.next();
      if (r < 0.015) open.price = null;
      else if (r < 0.025) open.price = 0;
    }
    pos.events.push(open);

    const d = rng.next();
    const duration = d < 0.3 ? rng.range(HOUR, 12 * HOUR) : d < 0.7 ? rng.range(12 * HOUR, 7 * DAY) : rng.range(7 * DAY, 45 * DAY);
    const closeSess = lowerBound(sessions, t0 + duration);
    const hasClose = closeSess < nS && !rng.chance(0.07);
    const endSess = hasClose ? closeSess : nS;
    const spanEnd = hasClose ? t0 + duration : Math.min(t0 + duration, nowMs);
    const m = rng.next();
    const nMid = m < 0.45 ? 0 : m < 0.75 ? 1 : m < 0.9 ? 2 : 3;
    const mids: PEvent[] = [];
    for (let i = 0; i < nMid; i++) {
      const s = lowerBound(sessions, t0 + (spanEnd - t0) * rng.next());
      const type: EvType = rng.chance(0.55) ? 'increase' : 'decrease';
      if (s >= endSess) continue;
      const ev = mkEvent(pos, type, s, sessions[s]! + offset());
      if (type === 'increase' && rng.chance(0.04)) ev.assumed = true;
      if (rng.chance(0.012)) ev.deleted = true;
      mids.push(ev);
    }
    mids.sort((a, b) => a.t - b.t);
    let last = open.t;
    for (const ev of mids) {
      if (ev.t <= last) ev.t = last + SEC;
      last = ev.t;
      pos.events.push(ev);
    }
    if (!hasClose) return;
    const close = mkEvent(pos, 'close', closeSess, Math.max(sessions[closeSess]! + offset(), last + SEC));
    if (rng.chance(0.04)) {
      close.auto = true;
      close.assumed = rng.chance(0.8);
      close.retro = false;
      close.sess = -1;
    }
    if (rng.chance(0.012)) close.deleted = true;
    pos.events.push(close);
    // Flip: the same message closes this position and opens the opposite one (assumed open).
    if (!flipFrom && !close.auto && rng.chance(0.03)) makePosition(closeSess, close);
  };

  for (let i = 0; i < P; i++) makePosition(rng.int(nS), null);
  return { sessions, positions };
}

// ---------------------------------------------------------------------------------------------------
// Generated summaries

const STANCES = ['bullish', 'bearish', 'mixed', 'neutral', 'unclear'] as const;
const LEVELS = ['low', 'medium', 'high'] as const;
const NARRATIVES = [
  'ETF flows',
  'rate cuts',
  'AI trade',
  'memecoin rotation',
  'earnings season',
  'dollar strength',
  'risk-off',
  'L2 season',
];
const SUMMARY_WEEKS = 8;
const AGGREGATE_DAYS = 120;

/**
 * Channel summaries (one per week of the last SUMMARY_WEEKS, per trader with messages) and
 * aggregate summaries (one per day of the last AGGREGATE_DAYS), about a fifth of them low_signal;
 * a few regenerated (version 2) or withdrawn (tombstone). Array sizes stay within the contract's caps.
 */
function* emitSummaries(ctx: Ctx): Generator<DemoRecord> {
  const dayStart = Math.floor(ctx.nowMs / DAY) * DAY;
  const weekStart = dayStart - ((new Date(dayStart).getUTCDay() + 6) % 7) * DAY; // this week's Monday
  const later: DemoRecord[] = [];
  for (const t of ctx.profiles) {
    if (!t.hasMessages) continue;
    const rng = new Prng(ctx.seed, S_SUMMARY, t.id);
    const pool = ctx.byFocus[t.focus];
    for (let w = SUMMARY_WEEKS; w >= 1; w--) {
      if (rng.chance(0.15)) continue; // a quiet week: no summary
      const start = weekStart - w * 7 * DAY;
      const assets = Array.from({ length: rng.intIn(0, 5) }, () => rng.pick(pool).spec);
      const rec: ChannelSummaryRecord = {
        id: `cs-${t.id}-${fastIso(start).slice(0, 10)}`,
        traderId: t.id,
        windowStart: fastIso(start),
        windowEnd: fastIso(start + 7 * DAY),
        generatedAt: fastIso(start + 7 * DAY + rng.intIn(10, 300) * MIN),
        status: rng.chance(0.2) ? 'low_signal' : 'safe',
        overview: `${t.name} spent the week on ${assets.map((a) => a.symbol).join(', ') || 'the macro picture'}; ${rng.pick(NARRATIVES)} dominated the channel.`,
        keyInsights: Array.from({ length: rng.intIn(0, 3) }, () => `Watching ${rng.pick(NARRATIVES)}.`),
        marketBias: rng.pick(STANCES),
        mentionedAssets: assets.map((a) => ({
          symbol: a.symbol,
          name: rng.chance(0.9) ? a.name : null,
          stance: rng.pick(STANCES),
          confidence: rng.pick(LEVELS),
        })),
        version: 1,
      };
      yield { topic: 'channel-summaries', value: rec };
      if (rng.chance(0.05))
        later.push({
          topic: 'channel-summaries',
          value: { ...rec, version: 2, overview: `${rec.overview} (regenerated)`, status: 'safe' },
        });
      else if (rng.chance(0.01)) later.push({ topic: 'channel-summaries', value: { ...rec, version: 2, deleted: true } });
    }
  }
  yield* later;
  later.length = 0;
  const rng = new Prng(ctx.seed, S_SUMMARY, 0);
  for (let d = AGGREGATE_DAYS; d >= 1; d--) {
    const start = dayStart - d * DAY;
    const sentiment = Array.from({ length: rng.intIn(1, 8) }, (_, i) => {
      const a = rng.pick(ctx.assets).spec;
      return {
        symbol: a.symbol,
        name: a.name,
        discussionRank: i + 1,
        sentiment: rng.pick(STANCES),
        intensity: rng.pick(LEVELS),
        thesis: `${a.symbol}: ${rng.pick(NARRATIVES)}.`,
        drivers: [rng.pick(NARRATIVES)],
        contrarianAngle: rng.chance(0.3) ? `Fade the ${a.symbol} move.` : null,
        confidence: rng.pick(LEVELS),
      };
    });
    const active = rng.intIn(50, 400);
    const rec: AggregateSummaryRecord = {
      id: `as-${fastIso(start).slice(0, 10)}`,
      windowStart: fastIso(start),
      windowEnd: fastIso(start + DAY),
      generatedAt: fastIso(start + DAY + rng.intIn(5, 60) * MIN),
      status: rng.chance(0.15) ? 'low_signal' : 'safe',
      headline: `Channels on ${rng.pick(NARRATIVES)}`,
      overview: `The day's talk turned on ${sentiment
        .map((x) => x.symbol)
        .slice(0, 3)
        .join(', ')}.`,
      dominantNarratives: Array.from({ length: rng.intIn(1, 5) }, () => rng.pick(NARRATIVES)),
      contrarianTheses: Array.from({ length: rng.intIn(0, 5) }, () => `Against ${rng.pick(NARRATIVES)}.`),
      marketDrivers: Array.from({ length: rng.intIn(1, 8) }, () => rng.pick(NARRATIVES)),
      assetSentiment: sentiment,
      risks: Array.from({ length: rng.intIn(0, 5) }, () => `${rng.pick(NARRATIVES)} reversal`),
      coverage: {
        eligibleSourceCount: active + rng.intIn(0, 300),
        activeSourceCount: active,
        messageCount: active * rng.intIn(3, 20),
        attachmentCount: rng.intIn(0, 200),
      },
      version: 1,
    };
    yield { topic: 'aggregate-summaries', value: rec };
    // Regenerated with the other status now and then: the version the reads serve moves.
    if (rng.chance(0.08))
      later.push({ topic: 'aggregate-summaries', value: { ...rec, version: 2, status: rec.status === 'safe' ? 'low_signal' : 'safe' } });
  }
  yield* later.filter((x) => x.topic === 'aggregate-summaries');
}

// ---------------------------------------------------------------------------------------------------
// Message text

const FILLER = [
  'GM everyone. Quiet session so far, waiting for the US open.',
  'Watching {S} closely here, key level at {P}.',
  '{S} breaking out of the range. Not in yet.',
  'Weekly recap coming tonight. Thanks for the support!',
  'Reminder: always use a stop loss. Risk management > everything.',
  'Funding is getting hot, be careful with leverage.',
  'Macro calendar this week: CPI on Wednesday, FOMC minutes Thursday.',
  '{S} looks heavy on the daily. Patience.',
  'New subscribers: welcome! Pinned message has the rules.',
  'Chart of the day: {S}.',
  'Volatility is back. Sizing down a bit.',
  'No trades today, market is chopping.',
];
const TAILS = ['', '', '', ' NFA.', ' Tight stop.', ' Target is the range high.', ' DYOR.', ' Small size.', ' 🚀', ' Let it ride.'];

function fmtPrice(p: number | null): string {
  return p === null || p === 0 ? '' : ` @ ${p}`;
}

function eventLine(e: PEvent, rng: Prng): string {
  const sym = e.pos.asset.spec.symbol;
  const dir = e.pos.dir;
  switch (e.type) {
    case 'open':
      return rng.chance(0.5)
        ? `${dir === 'long' ? 'Long' : 'Short'} ${sym}${fmtPrice(e.price)}`
        : `Opening a ${dir} on ${sym}${fmtPrice(e.price)}`;
    case 'increase':
      return rng.chance(0.5) ? `Adding to my ${sym} ${dir}${fmtPrice(e.price)}` : `Scaling into ${sym} ${dir}`;
    case 'decrease':
      return rng.chance(0.5) ? `Taking partial profits on ${sym}${fmtPrice(e.price)}` : `Trimming the ${sym} ${dir}`;
    case 'close':
      return rng.chance(0.5) ? `Closed ${sym} ${dir}${fmtPrice(e.price)}` : `Out of ${sym}${fmtPrice(e.price)}`;
  }
}

interface MsgCounters {
  tg: number;
  x: number;
}

interface MsgSource {
  platform: Platform;
  sourceIdentityId: string;
  handle: string | null;
  n: number;
}

/** Message records of one source identity (v1 in time order, then edits and tombstones). */
function* emitMessages(
  ctx: Ctx,
  src: MsgSource,
  sessions: Float64Array,
  lines: (i: number) => string[] | null,
  rng: Prng,
  counters: MsgCounters,
): Generator<DemoRecord> {
  const later: MessageRecord[] = [];
  const isTg = src.platform === 'TELEGRAM';
  const nowMs = ctx.nowMs;
  const assets = ctx.assets;
  for (let i = 0; i < sessions.length; i++) {
    const num = isTg ? ++counters.tg : ++counters.x;
    const id = `${isTg ? 'tg' : 'x'}-${pad6(num)}`;
    const writtenAt = Math.min(sessions[i]! - SEC * rng.intIn(30, 900), nowMs - MIN);
    const ls = lines(i);
    let text: string | null;
    if (ls && ls.length > 0) {
      text = (ls.length > 4 ? [...ls.slice(0, 4), `+${ls.length - 4} more`] : ls).join('\n') + rng.pick(TAILS);
    } else {
      const a = assets[Math.floor(assets.length * rng.next() * rng.next())]!;
      text = rng
        .pick(FILLER)
        .replace('{S}', a.spec.symbol)
        .replace('{P}', String(roundPrice(a.overflow ? 1 : a.walk[PRICE_STEPS]!)));
    }
    const attachments: MessageRecord['attachments'] = [];
    if (rng.chance(0.12)) {
      const nAtt = rng.chance(0.8) ? 1 : 2;
      for (let k = 1; k <= nAtt; k++)
        attachments.push({ type: 'image', url: `https://cdn.example.com/a/${isTg ? 't' : 'x'}${num}-${k}.png` });
      if (rng.chance(0.25)) text = null;
    }
    const flagsNull = rng.chance(0.04);
    const edited = rng.chance(0.03);
    const deleted = !edited && rng.chance(0.004);
    const rec: MessageRecord = {
      id,
      platform: src.platform,
      sourceIdentityId: src.sourceIdentityId,
      writtenAt: fastIso(writtenAt),
      url:
        src.handle === null
          ? null
          : isTg
            ? `https://t.me/${src.handle}/${i + 1}`
            : `https://x.com/${src.handle}/status/18${pad6(src.n)}${String(num).padStart(11, '0')}`,
      text,
      attachments,
      isEdited: flagsNull ? null : false,
      isReply: flagsNull ? null : rng.chance(0.1),
      isQuote: flagsNull || isTg ? null : rng.chance(0.06),
      isRepost: flagsNull ? null : rng.chance(isTg ? 0.03 : 0.05),
      version: 1,
    };
    yield { topic: 'messages', value: rec };
    if (edited)
      later.push({ ...rec, text: `${rec.text ?? ''}${rec.text ? '\n' : ''}Edit: updated the target.`, isEdited: true, version: 2 });
    if (deleted) later.push({ ...rec, version: 2, deleted: true });
  }
  for (const rec of later) yield { topic: 'messages', value: rec };
}

// ---------------------------------------------------------------------------------------------------
// The generator

export function* generateDemo(opts: DemoOptions): Generator<DemoRecord> {
  const seed = opts.seed ?? 42;
  const nowMs = opts.now.getTime();
  if (!Number.isFinite(nowMs)) throw new Error('generateDemo: invalid now');
  const params = SCALES[opts.scale];
  if (!params) throw new Error(`generateDemo: unknown scale ${String(opts.scale)}`);

  const assets = buildAssets(seed, params.assets);
  const byFocus: Record<Focus, Asset[]> = {
    crypto: assets.filter((a) => a.spec.assetClass === 'crypto'),
    equities: assets.filter((a) => a.spec.assetClass === 'equities'),
    macro: assets.filter((a) => (a.spec.assetClass !== 'crypto' && a.spec.assetClass !== 'equities') || a.spec.category === 'Indices'),
    mixed: assets,
  };
  const profiles = buildProfiles(seed, params);
  const priceT0 = nowMs - PRICE_END_LAG - PRICE_STEPS * HOUR;
  const ctx: Ctx = { seed, nowMs, params, assets, byFocus, priceT0, profiles };

  // Unassigned source identities (messages, no trader).
  const orphans: { identity: SourceIdentityRecord; sessions: number }[] = [];
  for (let i = 1; i <= params.orphanIdentities; i++) {
    const rng = new Prng(seed, S_ORPHAN, i);
    const platform: Platform = i % 2 === 1 ? 'TELEGRAM' : 'X';
    const name = `${rng.pick(ADJECTIVES)} ${rng.pick(['Calls', 'Alerts', 'Club', 'Room', 'Pumps', 'News'])} ${i}`;
    const identity = makeIdentity(
      rng,
      platform,
      sourceIdFor(platform, 100000 + i),
      name,
      name.toLowerCase().replace(/[^a-z0-9]+/g, ''),
      100000 + i,
    );
    orphans.push({ identity, sessions: rng.intIn(20, 100) });
  }

  // 1. source identities
  for (const t of profiles) if (t.identity) yield { topic: 'source-identities', value: t.identity };
  for (const o of orphans) yield { topic: 'source-identities', value: o.identity };
  // 2. traders
  for (const t of profiles) yield { topic: 'traders', value: traderRecord(t, 1, false) };
  // 3. trader tags
  for (const t of profiles) {
    if (t.tags) yield { topic: 'trader-tags', value: { traderId: t.id, tags: t.tags, version: 1 } satisfies TraderTagsRecord };
  }
  // 4. assets
  for (const a of assets) yield { topic: 'assets', value: a.record };
  // 5. prices
  for (const a of assets) {
    if (!a.priced) continue;
    for (let k = 0; k <= PRICE_STEPS; k++) {
      if (a.gap && a.gap[k]) continue;
      const v = a.walk[k]!;
      const rec: PriceRecord = { assetId: a.id, at: fastIso(priceT0 + k * HOUR), price: a.overflow ? v : roundPrice(v), version: 1 };
      yield { topic: 'prices', value: rec };
    }
  }
  // 6. messages (pass 1 over the traders)
  const mc: MsgCounters = { tg: 0, x: 0 };
  for (const t of profiles) {
    if (!t.hasMessages) continue;
    const plan = buildPlan(ctx, t);
    const nS = plan.sessions.length;
    const trng = new Prng(seed, S_TEXT, t.id);
    // Events by session (linked list) for the message text.
    const head = new Int32Array(nS).fill(-1);
    const flat: PEvent[] = [];
    const next: number[] = [];
    for (const pos of plan.positions) {
      for (const e of pos.events) {
        if (e.sess < 0) continue;
        next.push(head[e.sess]!);
        head[e.sess] = flat.length;
        flat.push(e);
      }
    }
    const lines = (i: number): string[] | null => {
      let j = head[i]!;
      if (j < 0) return null;
      const out: string[] = [];
      for (; j >= 0; j = next[j]!) out.push(eventLine(flat[j]!, trng));
      return out.reverse();
    };
    yield* emitMessages(
      ctx,
      { platform: t.platform, sourceIdentityId: t.sourceIdentityId!, handle: t.identity!.handle, n: t.id },
      plan.sessions,
      lines,
      trng,
      mc,
    );
  }
  for (let i = 0; i < orphans.length; i++) {
    const o = orphans[i]!;
    const rng = new Prng(seed, S_ORPHAN, 1_000_000 + i);
    const sessions = new Float64Array(o.sessions);
    for (let k = 0; k < sessions.length; k++)
      sessions[k] = Math.floor((nowMs - SESSION_DAYS * DAY + rng.next() * (SESSION_DAYS * DAY - SESSION_END_LAG)) / SEC) * SEC;
    sessions.sort();
    yield* emitMessages(
      ctx,
      { platform: o.identity.platform, sourceIdentityId: o.identity.sourceIdentityId, handle: o.identity.handle, n: 100000 + i },
      sessions,
      () => null,
      rng,
      mc,
    );
  }

  // 7. trade events (pass 2: the same plans, in the same order, so message ids line up)
  const mc2: MsgCounters = { tg: 0, x: 0 };
  let posId = 0;
  let evId = 0;
  for (const t of profiles) {
    if (t.positions === 0) {
      if (t.hasMessages) {
        if (t.platform === 'TELEGRAM') mc2.tg += t.fillerSessions;
        else mc2.x += t.fillerSessions;
      }
      continue;
    }
    const plan = buildPlan(ctx, t);
    const isTg = t.platform === 'TELEGRAM';
    const base = isTg ? mc2.tg : mc2.x;
    if (t.hasMessages) {
      if (isTg) mc2.tg += plan.sessions.length;
      else mc2.x += plan.sessions.length;
    }
    const prefix = isTg ? 'tg-' : 'x-';
    plan.positions.sort((a, b) => a.t0 - b.t0 || a.seq - b.seq);
    for (const pos of plan.positions) {
      const positionId = ++posId;
      let tomb: TradeEventRecord[] | null = null;
      for (const e of pos.events) {
        const rec: TradeEventRecord = {
          id: ++evId,
          type: e.type,
          direction: pos.dir,
          price: e.price,
          timeOfEvent: fastIso(e.t),
          assumed: e.assumed,
          retrospective: e.retro,
          autoGenerated: e.auto,
          positionId,
          traderId: t.id,
          assetId: pos.asset.id,
          messageId: e.sess >= 0 ? prefix + pad6(base + e.sess + 1) : null,
          version: 1,
        };
        yield { topic: 'trade-events', value: rec };
        if (pos.deleted || e.deleted) (tomb ??= []).push(rec);
      }
      if (tomb) for (const rec of tomb) yield { topic: 'trade-events', value: { ...rec, version: 2, deleted: true } };
    }
  }

  // 8. generated summaries: weekly per trader with messages, daily across all channels
  yield* emitSummaries(ctx);

  // 9. tombstones of the deleted traders
  for (const t of profiles) if (t.deleted) yield { topic: 'traders', value: traderRecord(t, 2, true) };
}
