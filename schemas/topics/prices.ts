import Type from 'typebox';
import { DateTime, Id, Versioned } from './common.ts';

/** One mark of an asset at a point in time. */
export const PriceRecord = Type.Object(
  {
    assetId: Id,
    at: DateTime,
    price: Type.Number(),
    ...Versioned,
  },
  { additionalProperties: false },
);
export type PriceRecord = Type.Static<typeof PriceRecord>;
export const prices = { name: 'prices', schema: PriceRecord, key: (r: PriceRecord) => String(r.assetId) } as const;
