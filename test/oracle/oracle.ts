// Independent brute-force oracle for the list reads (events, positions, open positions, messages,
// traders, assets). It works on the raw topic records only, with plain loops and sorts: no SQL, and
// nothing imported from apps/ or projectors/. Its rules are the contract's (service-spec sections
// 2-4) plus DESIGN sections 5-7, restated here on purpose so that a bug in the service's SQL cannot
// leak into the expected answers. Every list function takes an optional account `policy` (message
// and signal visibility; the history window enters through `resolveWindow`), see "Account policy".
// Open positions and `/assets?traderIds=` have no time window of their own, but the account's
// history window bounds them by the positions' openAt (`historyWindow`, DESIGN 6 "History window
// scope"); only the directories (traders, assets without traderIds) are outside it.

import type { TopicName } from '../../schemas/topics/index.ts';

/** One ingest record (topic name + value), as appended to the log. Only the type is imported. */
export interface TopicRec {
  topic: TopicName;
  value: any;
}

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
export const DEFAULT_WINDOW_MS = 90 * DAY;
export const WINDOWS = ['1D', '7D', '30D'] as const;
export type WindowName = (typeof WINDOWS)[number];
export const WINDOW_MS: Record<WindowName, number> = { '1D': 24 * HOUR, '7D': 168 * HOUR, '30D': 720 * HOUR };
export const TOLERANCE_MS: Record<WindowName, number> = { '1D': HOUR, '7D': 6 * HOUR, '30D': 24 * HOUR };

const ms = (iso: string): number => Date.parse(iso);
const isoOf = (t: number): string => new Date(t).toISOString();

// ---------------------------------------------------------------------------------------------------
// Ordering helpers

// biome-ignore lint/suspicious/noControlCharactersInRegex: every ASCII character, control ones included
const ASCII = /^[\x00-\x7f]*$/;
/** ClickHouse String order: byte-wise on the UTF-8 encoding. */
export function cmpBytes(a: string, b: string): number {
  if (a === b) return 0;
  if (ASCII.test(a) && ASCII.test(b)) return a < b ? -1 : 1;
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}
const cmpNum = (a: number, b: number): number => (a < b ? -1 : a > b ? 1 : 0);

// ---------------------------------------------------------------------------------------------------
// The world: latest version of every entity, tombstones removed

export interface Price {
  at: number;
  price: number;
}
export interface Pos {
  id: number;
  traderId: number;
  assetId: number;
  direction: 'long' | 'short';
  openAt: number;
  openPrice: number | null;
  isOpen: boolean;
}

export interface World {
  traders: Map<number, any>;
  sources: Map<string, any>;
  assets: Map<number, any>;
  messages: Map<string, any>;
  events: Map<number, any>;
  /** Live price samples per asset, ascending by `at`. */
  prices: Map<number, Price[]>;
  positions: Map<number, Pos>;
  /** Entities whose latest version is a tombstone (for negative assertions). */
  deleted: { traders: Set<number>; events: Set<number>; messages: Set<string>; assets: Set<number>; positions: Set<number> };
}

export const srcKey = (platform: string, id: string): string => `${platform}\u0000${id}`;

/** Latest version per key wins; at equal versions the later record wins. */
function latest<K>(recs: readonly any[], key: (v: any) => K): Map<K, any> {
  const out = new Map<K, any>();
  for (const v of recs) {
    const k = key(v);
    const cur = out.get(k);
    if (cur === undefined || v.version >= cur.version) out.set(k, v);
  }
  return out;
}

function live<K>(m: Map<K, any>, gone?: Set<K>): Map<K, any> {
  const out = new Map<K, any>();
  for (const [k, v] of m) {
    if (v.deleted === true) gone?.add(k);
    else out.set(k, v);
  }
  return out;
}

const cache = new WeakMap<readonly TopicRec[], World>();

export function buildWorld(records: readonly TopicRec[]): World {
  const cached = cache.get(records);
  if (cached) return cached;
  const by: Record<string, any[]> = {};
  for (const r of records) (by[r.topic] ??= []).push(r.value);
  const deleted: World['deleted'] = { traders: new Set(), events: new Set(), messages: new Set(), assets: new Set(), positions: new Set() };
  const traders = live(
    latest<number>(by['traders'] ?? [], (v) => v.id),
    deleted.traders,
  );
  const sources = live(latest<string>(by['source-identities'] ?? [], (v) => srcKey(v.platform, v.sourceIdentityId)));
  const assets = live(
    latest<number>(by['assets'] ?? [], (v) => v.id),
    deleted.assets,
  );
  const messages = live(
    latest<string>(by['messages'] ?? [], (v) => v.id),
    deleted.messages,
  );
  const allEvents = latest<number>(by['trade-events'] ?? [], (v) => v.id);
  const events = live(allEvents, deleted.events);
  const priceRecs = live(latest<string>(by['prices'] ?? [], (v) => `${v.assetId}/${ms(v.at)}`));
  const prices = new Map<number, Price[]>();
  for (const p of priceRecs.values()) {
    let list = prices.get(p.assetId);
    if (!list) prices.set(p.assetId, (list = []));
    list.push({ at: ms(p.at), price: p.price });
  }
  for (const list of prices.values()) list.sort((a, b) => a.at - b.at);

  // Positions: fold of the live events per positionId.
  const byPos = new Map<number, any[]>();
  for (const e of events.values()) {
    let l = byPos.get(e.positionId);
    if (!l) byPos.set(e.positionId, (l = []));
    l.push(e);
  }
  const positions = new Map<number, Pos>();
  for (const [pid, evs] of byPos) {
    let open: any = null;
    let closed = false;
    for (const e of evs) {
      if (e.type === 'close') closed = true;
      if (e.type !== 'open') continue;
      if (open === null) {
        open = e;
        continue;
      }
      const c = cmpNum(ms(e.timeOfEvent), ms(open.timeOfEvent)) || cmpNum(e.id, open.id);
      if (c < 0) open = e;
    }
    if (open === null) continue;
    positions.set(pid, {
      id: pid,
      traderId: open.traderId,
      assetId: open.assetId,
      direction: open.direction,
      openAt: ms(open.timeOfEvent),
      openPrice: open.price,
      isOpen: !closed,
    });
  }
  // A position is gone when it had events but none of them gives a live open.
  for (const e of allEvents.values()) if (!positions.has(e.positionId)) deleted.positions.add(e.positionId);

  const w: World = { traders, sources, assets, messages, events, prices, positions, deleted };
  cache.set(records, w);
  return w;
}

const worldOf = (x: readonly TopicRec[] | World): World => (Array.isArray(x) ? buildWorld(x as TopicRec[]) : (x as World));

// ---------------------------------------------------------------------------------------------------
// Shared derivations

/** Quote symbol of the preferred active market, else of the first active market; null when none is active. */
export function quoteSymbol(asset: any): string | null {
  const active = (asset.markets as any[]).filter((m) => m.active === true);
  if (active.length === 0) return null;
  const preferred = active.find((m) => m.preferred === true);
  return (preferred ?? active[0]).quoteSymbol;
}

export function assetClass(raw: string | null): string {
  const c = (raw ?? '').toLowerCase();
  return ['crypto', 'equities', 'commodities', 'fx', 'other'].includes(c) ? c : 'other';
}

export function resolvedAssetClass(raw: string | null, category: string | null): string {
  const c = assetClass(raw);
  if (c !== 'equities') return c;
  return (category ?? '').toLowerCase() === 'indices' ? 'indices' : 'stocks';
}

export function eligibleAsset(w: World, assetId: number): any | null {
  const a = w.assets.get(assetId);
  return a && quoteSymbol(a) !== null ? a : null;
}

// ---------------------------------------------------------------------------------------------------
// Account policy (contract sections 1.5, 2 and 4; DESIGN 6 "Account history window" and DESIGN 7)

/** One visibility of an account: all, none, a set of platforms or a set of traders. */
export interface Visibility {
  mode: 'all' | 'none' | 'platforms' | 'traders';
  platforms?: string[];
  traderIds?: number[];
}
/** An account's access policy: message visibility, signal visibility and the history window. */
export interface Policy {
  messageVisibility: Visibility;
  signalVisibility: Visibility;
  historyWindowDays: number | null;
}
export const OPEN_POLICY: Policy = { messageVisibility: { mode: 'all' }, signalVisibility: { mode: 'all' }, historyWindowDays: null };

/**
 * Whether a visibility permits a (live) trader. A trader's platform is the platform of its
 * assigned source, as the trader record states it; a trader without an assigned source has no
 * platform and is permitted by a platform set never.
 */
export function permits(v: Visibility, trader: any): boolean {
  switch (v.mode) {
    case 'all':
      return true;
    case 'none':
      return false;
    case 'platforms':
      return trader.source != null && (v.platforms ?? []).includes(trader.source.platform);
    case 'traders':
      return (v.traderIds ?? []).includes(trader.id);
  }
}

/** The list reads of this oracle, and which visibility each needs at all (403 FORBIDDEN without it). */
export type ListRead = 'events' | 'positions' | 'open' | 'messages' | 'traders' | 'assets';
export const NEEDS: Record<ListRead, 'msg' | 'sig' | 'either' | null> = {
  events: 'sig',
  positions: 'sig',
  open: 'sig', // signal content
  messages: 'msg', // "Requires messages.read and message visibility"
  traders: 'either', // "Requires scope directory.read and message or signal visibility"
  assets: null, // asset discovery: no trader content
};

/** Whether the policy lets the caller use the read at all (else 403 FORBIDDEN). */
export function allowed(read: ListRead, p: Policy): boolean {
  const msg = p.messageVisibility.mode !== 'none';
  const sig = p.signalVisibility.mode !== 'none';
  switch (NEEDS[read]) {
    case 'msg':
      return msg;
    case 'sig':
      return sig;
    case 'either':
      return msg || sig;
    case null:
      return true;
  }
}

/** Time window of a historical list read. */
export interface Win {
  start: number | null;
  end: number | null;
}

/**
 * DESIGN 6: both bounds omitted -> [serverTime - 90 days, serverTime]; `unboundedDefault` (id
 * hydration) -> no window. A single given bound leaves the other side open.
 * An account history window of `historyWindowDays` then holds the start to
 * serverTime - historyWindowDays: an older explicit start is clamped forward, and an omitted one
 * (endTime only, id hydration) is set to it. The end is never altered.
 */
export function resolveWindow(
  q: { startTime?: string; endTime?: string },
  serverTime: number,
  unboundedDefault = false,
  historyWindowDays: number | null = null,
): Win {
  let start = q.startTime !== undefined ? ms(q.startTime) : null;
  let end = q.endTime !== undefined ? ms(q.endTime) : null;
  if (start === null && end === null && !unboundedDefault) {
    start = serverTime - DEFAULT_WINDOW_MS;
    end = serverTime;
  }
  if (historyWindowDays !== null) {
    const floor = historyFloor(serverTime, historyWindowDays);
    if (start === null || start < floor) start = floor;
  }
  return { start, end };
}

/** The oldest instant an account with a history window of `days` may read at `serverTime`. */
export const historyFloor = (serverTime: number, days: number): number => serverTime - days * DAY;

/**
 * The window of a read without one of its own that the history window still bounds (open
 * positions and assets by trader, by openAt): from the floor on, no end; none without a window.
 */
export const historyWindow = (serverTime: number, days: number | null): Win | undefined =>
  days === null ? undefined : { start: historyFloor(serverTime, days), end: null };

export const appliedTimeRange = (win: Win) => ({
  startTime: win.start === null ? null : isoOf(win.start),
  endTime: win.end === null ? null : isoOf(win.end),
});

const inWin = (t: number, win: Win | undefined): boolean =>
  !win || ((win.start === null || t >= win.start) && (win.end === null || t <= win.end));
const inList = <T>(v: T, list: readonly T[] | undefined): boolean => !list || list.length === 0 || list.includes(v);

// ---------------------------------------------------------------------------------------------------
// Events

export interface EventFilters {
  traderIds?: number[];
  assetIds?: number[];
  directions?: string[];
  types?: string[];
  window?: Win;
  /** The caller's policy: rows of traders its signal visibility does not permit are omitted. */
  policy?: Policy;
}

export function events(input: readonly TopicRec[] | World, f: EventFilters = {}): any[] {
  const w = worldOf(input);
  const out: { t: number; row: any }[] = [];
  for (const e of w.events.values()) {
    const trader = w.traders.get(e.traderId);
    if (!trader) continue;
    if (f.policy && !permits(f.policy.signalVisibility, trader)) continue;
    const asset = eligibleAsset(w, e.assetId);
    if (!asset) continue;
    if (!w.positions.has(e.positionId)) continue;
    if (
      !inList(e.traderId, f.traderIds) ||
      !inList(e.assetId, f.assetIds) ||
      !inList(e.direction, f.directions) ||
      !inList(e.type, f.types)
    )
      continue;
    const t = ms(e.timeOfEvent);
    if (!inWin(t, f.window)) continue;
    out.push({
      t,
      row: {
        id: e.id,
        type: e.type,
        price: e.price,
        quoteSymbol: quoteSymbol(asset),
        timeOfEvent: isoOf(t),
        assumed: e.assumed,
        retrospective: e.retrospective,
        autoGenerated: e.autoGenerated,
        positionId: e.positionId,
        traderId: e.traderId,
        assetId: e.assetId,
        messageId: e.messageId,
      },
    });
  }
  out.sort((a, b) => b.t - a.t || b.row.id - a.row.id);
  return out.map((x) => x.row);
}

// ---------------------------------------------------------------------------------------------------
// Positions and time-based performance

export function evaluate(w: World, p: Pick<Pos, 'assetId' | 'openAt' | 'openPrice' | 'direction'>, win: WindowName, serverTime: number) {
  const series = w.prices.get(p.assetId);
  if (!series || series.length === 0) return null;
  const E = p.openAt + WINDOW_MS[win];
  const res = (status: string, returnPercentage: number | null = null) => ({ window: win, status, returnPercentage });
  if (serverTime < E) return res('too_young');
  if (p.openPrice === null) return res('missing_entry_price');
  if (p.openPrice === 0) return res('zero_entry_price');
  // First sample at or after E (binary search over the ascending series).
  let lo = 0;
  let hi = series.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (series[mid]!.at < E) lo = mid + 1;
    else hi = mid;
  }
  const fwd: Price | null = series[lo] ?? null;
  if (fwd === null || fwd.at - E > TOLERANCE_MS[win]) return res('missing_forward_price');
  const ret = returnOf(p.direction, p.openPrice, fwd.price);
  if (!Number.isFinite(ret)) return res('calculation_error');
  return res('ready', ret);
}

export function returnOf(direction: string, open: number, price: number): number {
  return direction === 'long' ? (price / open - 1) * 100 : (1 - price / open) * 100;
}

export function timeBasedPerformances(
  input: readonly TopicRec[] | World,
  p: Pick<Pos, 'assetId' | 'openAt' | 'openPrice' | 'direction'>,
  serverTime: number,
) {
  const w = worldOf(input);
  return { '1D': evaluate(w, p, '1D', serverTime), '7D': evaluate(w, p, '7D', serverTime), '30D': evaluate(w, p, '30D', serverTime) };
}

export interface PositionFilters {
  traderIds?: number[];
  assetIds?: number[];
  directions?: string[];
  positionIds?: number[];
  window?: Win;
  /** The caller's policy: positions of traders its signal visibility does not permit are omitted. */
  policy?: Policy;
}

function eligiblePositions(w: World, f: PositionFilters): { p: Pos; asset: any }[] {
  const out: { p: Pos; asset: any }[] = [];
  for (const p of w.positions.values()) {
    const trader = w.traders.get(p.traderId);
    if (!trader) continue;
    if (f.policy && !permits(f.policy.signalVisibility, trader)) continue;
    const asset = eligibleAsset(w, p.assetId);
    if (!asset) continue;
    if (
      !inList(p.traderId, f.traderIds) ||
      !inList(p.assetId, f.assetIds) ||
      !inList(p.direction, f.directions) ||
      !inList(p.id, f.positionIds)
    )
      continue;
    if (!inWin(p.openAt, f.window)) continue;
    out.push({ p, asset });
  }
  out.sort((a, b) => b.p.openAt - a.p.openAt || b.p.id - a.p.id);
  return out;
}

export function positions(input: readonly TopicRec[] | World, f: PositionFilters, serverTime: number): any[] {
  const w = worldOf(input);
  return eligiblePositions(w, f).map(({ p, asset }) => ({
    id: p.id,
    direction: p.direction,
    openAt: isoOf(p.openAt),
    openPrice: p.openPrice,
    quoteSymbol: quoteSymbol(asset),
    timeBasedPerformances: timeBasedPerformances(w, p, serverTime),
    traderId: p.traderId,
    assetId: p.assetId,
  }));
}

/**
 * Open positions with a live mark. `currentPrice` and `currentReturnPercentage` are required
 * numbers in the contract, so a position that cannot be marked is left out: no price sample at or
 * before serverTime, an entry price that is null or 0, or a mark-to-market return that is not a
 * finite number (JSON has no Infinity). `window`: the account's history window (`historyWindow`), by openAt.
 */
export function openPositions(input: readonly TopicRec[] | World, f: Omit<PositionFilters, 'positionIds'>, serverTime: number): any[] {
  const w = worldOf(input);
  const out: any[] = [];
  for (const { p, asset } of eligiblePositions(w, f)) {
    if (!p.isOpen || p.openPrice === null || p.openPrice === 0) continue;
    let mark: Price | null = null;
    for (const s of w.prices.get(p.assetId) ?? [])
      if (s.at <= serverTime) mark = s;
      else break;
    if (mark === null) continue;
    const ret = returnOf(p.direction, p.openPrice, mark.price);
    if (!Number.isFinite(ret)) continue;
    out.push({
      id: p.id,
      direction: p.direction,
      openAt: isoOf(p.openAt),
      openPrice: p.openPrice,
      quoteSymbol: quoteSymbol(asset),
      currentPrice: mark.price,
      currentReturnPercentage: ret,
      traderId: p.traderId,
      assetId: p.assetId,
    });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Messages

export interface MessageFilters {
  traderIds?: number[];
  ids?: string[];
  sourcePlatforms?: string[];
  window?: Win;
  /**
   * The caller's policy: messages whose (assigned) trader its message visibility does not permit
   * are omitted. Signal visibility plays no part: `traderIds` selects by assigned source.
   */
  policy?: Policy;
}

/** Owner of a source identity: the lowest id among live traders assigned to it. */
export function owners(w: World): Map<string, number> {
  const out = new Map<string, number>();
  for (const t of w.traders.values()) {
    if (!t.source) continue;
    const k = srcKey(t.source.platform, t.source.sourceIdentityId);
    const cur = out.get(k);
    if (cur === undefined || t.id < cur) out.set(k, t.id);
  }
  return out;
}

export function identity(w: World, platform: string, sourceIdentityId: string) {
  const s = w.sources.get(srcKey(platform, sourceIdentityId));
  return {
    platform,
    sourceIdentityId,
    displayName: s?.displayName ?? null,
    handle: s?.handle ?? null,
    avatarUrl: s?.avatarUrl ?? null,
    profileUrl: s?.profileUrl ?? null,
    audienceCount: s?.audienceCount ?? null,
  };
}

export function messages(input: readonly TopicRec[] | World, f: MessageFilters = {}): any[] {
  const w = worldOf(input);
  const own = owners(w);
  const out: { t: number; row: any }[] = [];
  for (const m of w.messages.values()) {
    const traderId = own.get(srcKey(m.platform, m.sourceIdentityId));
    if (traderId === undefined) continue;
    if (f.policy && !permits(f.policy.messageVisibility, w.traders.get(traderId))) continue;
    if (!inList(traderId, f.traderIds) || !inList(m.id, f.ids) || !inList(m.platform, f.sourcePlatforms)) continue;
    const t = ms(m.writtenAt);
    if (!inWin(t, f.window)) continue;
    out.push({
      t,
      row: {
        traderId,
        id: m.id,
        source: {
          platform: m.platform,
          identity: identity(w, m.platform, m.sourceIdentityId),
          preview: {
            platform: m.platform,
            writtenAt: isoOf(t),
            url: m.url,
            text: m.text,
            attachments: (m.attachments as any[]).map((a) => ({ type: a.type, url: a.url })),
            isEdited: m.isEdited,
            isReply: m.isReply,
            isQuote: m.isQuote,
            isRepost: m.isRepost,
          },
        },
      },
    });
  }
  out.sort((a, b) => b.t - a.t || cmpBytes(b.row.id, a.row.id));
  return out.map((x) => x.row);
}

// ---------------------------------------------------------------------------------------------------
// Trader directory

export interface TraderFilters {
  search?: string;
  sourcePlatforms?: string[];
  /** The caller's policy: a trader is listed when its message visibility or its signal visibility permits it. */
  policy?: Policy;
}

const has = (hay: string | null | undefined, needle: string): boolean => hay != null && hay.toLowerCase().includes(needle);

export function traders(input: readonly TopicRec[] | World, f: TraderFilters = {}): any[] {
  const w = worldOf(input);
  const out: any[] = [];
  for (const t of w.traders.values()) {
    if (f.policy && !permits(f.policy.messageVisibility, t) && !permits(f.policy.signalVisibility, t)) continue;
    if (f.sourcePlatforms && f.sourcePlatforms.length && !(t.source && f.sourcePlatforms.includes(t.source.platform))) continue;
    const s = t.source ? w.sources.get(srcKey(t.source.platform, t.source.sourceIdentityId)) : undefined;
    if (f.search !== undefined) {
      const q = f.search.toLowerCase();
      if (!(has(t.name, q) || has(t.slug, q) || has(s?.displayName, q) || has(s?.handle, q) || has(s?.profileUrl, q))) continue;
    }
    out.push({
      id: t.id,
      name: t.name,
      slug: t.slug,
      avatarUrl: t.avatarUrl,
      source: s
        ? {
            platform: s.platform,
            sourceIdentityId: s.sourceIdentityId,
            displayName: s.displayName,
            handle: s.handle,
            avatarUrl: s.avatarUrl,
            profileUrl: s.profileUrl,
            audienceCount: s.audienceCount,
          }
        : null,
    });
  }
  out.sort((a, b) => cmpBytes(a.name, b.name) || a.id - b.id);
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Assets

export interface AssetFilters {
  search?: string;
  assetClass?: string[];
  assetIds?: number[];
  traderIds?: number[];
  /** The caller's policy: `traderIds` counts only positions of traders its signal visibility permits. */
  policy?: Policy;
  /** The account's history window (`historyWindow`): `traderIds` counts only positions opened within it. */
  window?: Win;
}

export function assets(input: readonly TopicRec[] | World, f: AssetFilters = {}): any[] {
  const w = worldOf(input);
  let held: Set<number> | null = null;
  if (f.traderIds && f.traderIds.length) {
    held = new Set();
    for (const p of w.positions.values()) {
      const trader = w.traders.get(p.traderId);
      if (!trader || !f.traderIds.includes(p.traderId)) continue;
      if (f.policy && !permits(f.policy.signalVisibility, trader)) continue;
      if (!inWin(p.openAt, f.window)) continue;
      held.add(p.assetId);
    }
  }
  const out: any[] = [];
  for (const a of w.assets.values()) {
    const qs = quoteSymbol(a);
    if (qs === null) continue;
    const row = {
      id: a.id,
      name: a.name,
      symbol: a.symbol,
      logoUrl: a.logoUrl,
      assetClass: assetClass(a.assetClass),
      resolvedAssetClass: resolvedAssetClass(a.assetClass, a.category),
      category: a.category,
      quoteSymbol: qs,
    };
    if (!inList(row.resolvedAssetClass, f.assetClass) || !inList(a.id, f.assetIds)) continue;
    if (f.search !== undefined) {
      const q = f.search.toLowerCase();
      if (!has(a.name, q) && !has(a.symbol, q)) continue;
    }
    if (held && !held.has(a.id)) continue;
    out.push(row);
  }
  out.sort((a, b) => cmpBytes(a.symbol, b.symbol) || a.id - b.id);
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Comparison: deep equality, floats with a relative tolerance

/** First difference between `actual` and `expected`, as a readable string; null when equal. */
export function diff(actual: unknown, expected: unknown, path = '$', relTol = 1e-9, absTol = 0): string | null {
  if (typeof expected === 'number' && typeof actual === 'number') {
    if (Object.is(actual, expected)) return null;
    if (Number.isFinite(expected) && Number.isFinite(actual)) {
      const scale = Math.max(Math.abs(expected), Math.abs(actual));
      const d = Math.abs(actual - expected);
      if (d <= relTol * scale || d <= absTol) return null;
    }
    return `${path}: ${actual} !== ${expected}`;
  }
  if (expected === null || typeof expected !== 'object' || actual === null || typeof actual !== 'object') {
    return Object.is(actual, expected) ? null : `${path}: ${JSON.stringify(actual)} !== ${JSON.stringify(expected)}`;
  }
  if (Array.isArray(expected) !== Array.isArray(actual)) return `${path}: array vs non-array`;
  if (Array.isArray(expected)) {
    const a = actual as unknown[];
    for (let i = 0; i < Math.min(a.length, expected.length); i++) {
      const d = diff(a[i], expected[i], `${path}[${i}]`, relTol, absTol);
      if (d) return d;
    }
    return a.length === expected.length ? null : `${path}: length ${a.length} !== ${expected.length}`;
  }
  const ek = Object.keys(expected as object).sort();
  const ak = Object.keys(actual as object).sort();
  if (ek.join() !== ak.join()) return `${path}: keys [${ak}] !== [${ek}]`;
  for (const k of ek) {
    const d = diff((actual as any)[k], (expected as any)[k], `${path}.${k}`, relTol, absTol);
    if (d) return d;
  }
  return null;
}
