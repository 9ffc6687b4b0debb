import Type from 'typebox';
import { Id, Versioned } from './common.ts';

/** The whole tag set of one trader (replaces the previous set). Categories are an open set. */
export const TraderTagsRecord = Type.Object(
  {
    traderId: Id,
    tags: Type.Array(
      Type.Object(
        {
          category: Type.String({ pattern: '^[a-z0-9_ -]+$' }),
          name: Type.String({ pattern: '^[^A-Z]+$' }),
        },
        { additionalProperties: false },
      ),
    ),
    ...Versioned,
  },
  { additionalProperties: false },
);
export type TraderTagsRecord = Type.Static<typeof TraderTagsRecord>;
export const traderTags = { name: 'trader-tags', schema: TraderTagsRecord, key: (r: TraderTagsRecord) => String(r.traderId) } as const;
