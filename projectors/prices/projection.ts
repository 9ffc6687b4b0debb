import type { PriceRecord } from '../../schemas/topics/index.ts';
import { PRICES_DDL, PRICES_TABLE } from '../../storage/tables/prices.ts';
import { canonicalDateTime, del, type Projection } from '../projection.ts';

export const pricesProjection: Projection = {
  name: 'prices',
  canHandle: ['prices'],
  table: PRICES_TABLE,
  // Ordered by (assetId, at): forward-price look-ups and latest marks are range reads. The minmax
  // index on `at` lets "the first sample after now, any asset" (the read cache's expiry of open
  // positions) skip every part of the past.
  ddl: [PRICES_DDL],
  handle: (batch) =>
    batch.map(({ value: p }: { value: PriceRecord }) => ({
      assetId: p.assetId,
      at: canonicalDateTime(p.at),
      price: p.price,
      version: p.version,
      deleted: del(p),
    })),
};
