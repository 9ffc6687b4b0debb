import Type from 'typebox';
import { Id, Nullable, Versioned } from './common.ts';

export const Market = Type.Object(
  {
    quoteSymbol: Type.String({ minLength: 1 }),
    active: Type.Boolean(),
    preferred: Type.Boolean(),
  },
  { additionalProperties: false },
);

/** `assetClass` is the raw upstream class; unknown values are kept and read as `other`. */
export const AssetRecord = Type.Object(
  {
    id: Id,
    name: Type.String({ minLength: 1 }),
    symbol: Type.String({ minLength: 1 }),
    logoUrl: Nullable(Type.String()),
    assetClass: Nullable(Type.String()),
    category: Nullable(Type.String()),
    markets: Type.Array(Market),
    ...Versioned,
  },
  { additionalProperties: false },
);
export type AssetRecord = Type.Static<typeof AssetRecord>;
export const assets = { name: 'assets', schema: AssetRecord, key: (r: AssetRecord) => String(r.id) } as const;
