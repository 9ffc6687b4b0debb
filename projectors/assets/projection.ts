import type { AssetRecord } from '../../schemas/topics/index.ts';
import { ASSETS_DDL, ASSETS_TABLE } from '../../storage/tables/assets.ts';
import { del, type Projection } from '../projection.ts';
import { httpUrl } from '../sanitize.ts';

const KNOWN_CLASSES = new Set(['crypto', 'equities', 'commodities', 'fx', 'other']);

/** Raw class as the contract names it: unknown or missing classes read as `other`. */
export function assetClassOf(raw: string | null): string {
  const c = (raw ?? '').toLowerCase();
  return KNOWN_CLASSES.has(c) ? c : 'other';
}

/** Equities split: an Indices category resolves to `indices`, any other equity to `stocks`. */
export function resolvedAssetClassOf(raw: string | null, category: string | null): string {
  const c = assetClassOf(raw);
  if (c !== 'equities') return c;
  return (category ?? '').toLowerCase() === 'indices' ? 'indices' : 'stocks';
}

/** The preferred active market's quote symbol; else the first active market's; null when none is active. */
export function quoteSymbolOf(markets: AssetRecord['markets']): string | null {
  const active = markets.filter((m) => m.active);
  return (active.find((m) => m.preferred) ?? active[0])?.quoteSymbol ?? null;
}

export const assetsProjection: Projection = {
  name: 'assets',
  canHandle: ['assets'],
  table: ASSETS_TABLE,
  ddl: [ASSETS_DDL],
  handle: (batch) =>
    batch.map(({ value: a }: { value: AssetRecord }) => {
      const quoteSymbol = quoteSymbolOf(a.markets);
      return {
        id: a.id,
        name: a.name,
        symbol: a.symbol,
        logoUrl: httpUrl(a.logoUrl),
        assetClass: assetClassOf(a.assetClass),
        resolvedAssetClass: resolvedAssetClassOf(a.assetClass, a.category),
        category: a.category,
        quoteSymbol,
        hasActiveMarket: quoteSymbol === null ? 0 : 1,
        version: a.version,
        deleted: del(a),
      };
    }),
};
