import { splitIds, splitList } from '../../schemas/api/common-params.ts';
import type { AssetRow } from '../../schemas/api/resources.ts';
import type { VisibilityPolicy } from '../../schemas/topics/index.ts';
import { baseStore, type Store } from '../../storage/port.ts';
import type { Sql } from '../../storage/sql.ts';
import { ASSETS_TABLE } from '../../storage/tables/assets.ts';
import { type FeedMarks, feedMarks } from '../../storage/tables/feed-groups.ts';
import { SOURCE_IDENTITIES_TABLE, sourceKey, TRADERS_TABLE } from '../../storage/tables/traders.ts';
import { perDataVersion, type ReadContext } from './context.ts';
import type { Where } from './list.ts';
import type { Principal } from './principal.ts';

/**
 * The small tables every list read consults (live traders, eligible assets, source identities),
 * loaded once per data version and kept in memory: a page query then takes the eligible ids as
 * parameters and the page's rows are completed here, instead of every query building sets from
 * the traders and assets tables and joining them (DESIGN 9). The data version changes with every
 * projector commit, so these facts are never older than the version they are kept for (it is
 * read before they are loaded).
 */
export interface Facts {
  /** Live traders: id -> assigned source platform ('' when none). */
  traderPlatform: Map<number, string>;
  /** Live traders: id -> name. */
  traderName: Map<number, string>;
  /** Live traders: id -> slug and avatar URL (the feed embeds them). */
  traderLook: Map<number, { slug: string | null; avatarUrl: string | null }>;
  /** Live traders with an assigned source: id -> its `sourceKey`. */
  traderSource: Map<number, string>;
  /** Live trader ids ordered by name (UTF-8 bytes, as ClickHouse orders strings), then id. */
  tradersByName: number[];
  /** Assets that may appear anywhere (live, with an active market): id -> quote symbol. */
  assetQuote: Map<number, string | null>;
  /** Eligible assets by id. */
  assetById: Map<number, AssetRow>;
  /** Eligible asset ids, ascending (a query parameter). */
  assetIds: number[];
  /** Eligible assets as `/assets` lists them, in its order: symbol (bytes), then id. */
  assetRows: AssetRow[];
  /** A message source's trader: the lowest live trader id assigned it, by `sourceKey`. */
  sourceTrader: Map<string, number>;
  /** Live source identities by `sourceKey`. */
  identities: Map<string, Identity>;
  /** Memo of visible trader ids per signal policy. */
  visible: Map<string, number[]>;
  /** Traders and assets the tables know, deleted or not (how selective a set of them is). */
  knownTraders: number;
  knownAssets: number;
  /**
   * The feed's marks as read just before these facts: the feed's stamps up to their watermark may
   * be judged by these facts, and so may later ones while the facts mark has not moved (apps/reads/feed.ts).
   */
  feedMarks: FeedMarks;
}

export interface Identity {
  displayName: string | null;
  handle: string | null;
  avatarUrl: string | null;
  profileUrl: string | null;
  audienceCount: number | null;
}

async function load(store: Store): Promise<Facts> {
  // Read before the tables, and not as a dependency: the facts last until the tables change, not the feed.
  const marks = await feedMarks(baseStore(store));
  const [traders, assets, identities] = await Promise.all([
    store.query<{
      id: number;
      name: string;
      slug: string | null;
      avatarUrl: string | null;
      sourcePlatform: string;
      sourceIdentityId: string;
      deleted: number;
    }>(`SELECT id, name, slug, avatarUrl, sourcePlatform, sourceIdentityId, deleted FROM ${TRADERS_TABLE} FINAL ORDER BY id`),
    store.query<AssetRow & { eligible: number }>(`SELECT id, name, symbol, logoUrl, assetClass, resolvedAssetClass, category, quoteSymbol,
      deleted = 0 AND hasActiveMarket = 1 AS eligible FROM ${ASSETS_TABLE} FINAL ORDER BY symbol, id`),
    store.query<Identity & { platform: string; sourceIdentityId: string }>(
      `SELECT platform, sourceIdentityId, displayName, handle, avatarUrl, profileUrl, audienceCount FROM ${SOURCE_IDENTITIES_TABLE} FINAL WHERE deleted = 0`,
    ),
  ]);
  const facts: Facts = {
    traderPlatform: new Map(),
    traderName: new Map(),
    traderLook: new Map(),
    traderSource: new Map(),
    tradersByName: [],
    assetQuote: new Map(),
    assetById: new Map(),
    assetIds: [],
    assetRows: [],
    sourceTrader: new Map(),
    identities: new Map(),
    visible: new Map(),
    knownTraders: traders.length,
    knownAssets: assets.length,
    feedMarks: marks,
  };
  for (const t of traders) {
    if (t.deleted) continue;
    facts.traderPlatform.set(t.id, t.sourcePlatform);
    facts.traderName.set(t.id, t.name);
    facts.traderLook.set(t.id, { slug: t.slug, avatarUrl: t.avatarUrl });
    const k = sourceKey(t.sourcePlatform, t.sourceIdentityId);
    if (t.sourcePlatform !== '') facts.traderSource.set(t.id, k);
    if (t.sourcePlatform !== '' && !facts.sourceTrader.has(k)) facts.sourceTrader.set(k, t.id); // ascending ids: the lowest first
  }
  for (const { eligible, ...a } of assets) {
    if (!eligible) continue;
    facts.assetQuote.set(a.id, a.quoteSymbol);
    facts.assetById.set(a.id, a);
    facts.assetIds.push(a.id);
    facts.assetRows.push(a);
  }
  facts.assetIds.sort((a, b) => a - b);
  const nameBytes = new Map([...facts.traderName].map(([id, name]) => [id, Buffer.from(name, 'utf8')]));
  facts.tradersByName = [...facts.traderName.keys()].sort((a, b) => Buffer.compare(nameBytes.get(a)!, nameBytes.get(b)!) || a - b);
  for (const { platform, sourceIdentityId, ...identity } of identities)
    facts.identities.set(sourceKey(platform, sourceIdentityId), identity);
  return facts;
}

/** The facts of the context's data version (loaded now when the context has none to key them on). */
export const factsOf: (ctx: ReadContext) => Promise<Facts> = perDataVersion(load);

/** Whether a policy permits a trader (DESIGN 7): all, none, a set of platforms or of traders. */
export function permits(policy: VisibilityPolicy, traderId: number, platform: string): boolean {
  switch (policy.mode) {
    case 'all':
      return true;
    case 'platforms':
      return (policy.platforms ?? []).includes(platform as never);
    case 'traders':
      return (policy.traderIds ?? []).includes(traderId);
    default:
      return false;
  }
}

/** Live traders whose signals the principal may see, ascending (memoized per policy). */
export function signalTraders(facts: Facts, p: Principal): number[] {
  const k = JSON.stringify(p.signalVisibility);
  let ids = facts.visible.get(k);
  if (!ids) {
    ids = [];
    for (const [id, platform] of facts.traderPlatform) if (permits(p.signalVisibility, id, platform)) ids.push(id);
    facts.visible.set(k, ids);
  }
  return ids;
}

/**
 * A set condition on a page, placed where it costs least: a set that selects (under half of the
 * ids known) goes into the SQL, where a few ids are cheap and let the read stop early; a large
 * one (all live traders, every asset with a market) is a costly parameter for the query, and
 * excludes few rows, so it is checked on the page's resolved rows instead (statementPage reads on
 * while the page is short). Returns the row check ('always true' when the SQL applies it).
 */
export function setCondition<R>(
  where: Where,
  sql: string | Sql,
  name: string,
  ids: readonly (number | string)[],
  known: number,
  has: (r: R) => boolean,
): { keep: (r: R) => boolean; share: number } {
  if (ids.length * 2 < known) {
    where.add(sql, { [name]: ids });
    return { keep: () => true, share: 1 };
  }
  return { keep: has, share: known ? ids.length / known : 1 };
}

/**
 * The filters of a signal read (events, positions) on a statement table aliased `s`: the trader
 * is live and signal-visible, the asset live with an active market, then the caller's
 * traderIds, assetIds and directions. Returns the check of resolved rows (see setCondition).
 */
export function addSignalFilters(
  where: Where,
  facts: Facts,
  p: Principal,
  q: { traderIds?: string; assetIds?: string; directions?: string },
  /** Every condition in the SQL, however large its set (an export: one statement, no resolved rows to check). */
  allInSql = false,
): {
  keep: (r: { traderId: number; assetId: number }) => boolean;
  share: number;
} {
  const visible = signalTraders(facts, p);
  const traderOk = setCondition(
    where,
    's.traderId IN {visibleTraders:Array(UInt64)}',
    'visibleTraders',
    visible,
    allInSql ? Infinity : facts.knownTraders,
    (r: { traderId: number }) =>
      facts.traderPlatform.has(r.traderId) && permits(p.signalVisibility, r.traderId, facts.traderPlatform.get(r.traderId)!),
  );
  const assetOk = setCondition(
    where,
    's.assetId IN {eligibleAssets:Array(UInt64)}',
    'eligibleAssets',
    facts.assetIds,
    allInSql ? Infinity : facts.knownAssets,
    (r: { assetId: number }) => facts.assetQuote.has(r.assetId),
  );
  where
    .when(splitIds(q.traderIds), 's.traderId IN {traderIds:Array(UInt64)}', 'traderIds')
    .when(splitIds(q.assetIds), 's.assetId IN {assetIds:Array(UInt64)}', 'assetIds')
    .when(splitList(q.directions), 's.direction IN {directions:Array(String)}', 'directions');
  // An explicit traderIds or assetIds list decides which rows are read; the shares only size a read in table order.
  const selective = q.traderIds !== undefined || q.assetIds !== undefined;
  return { keep: (r) => traderOk.keep(r) && assetOk.keep(r), share: selective ? 1 : traderOk.share * assetOk.share };
}
