import Type from 'typebox';
import { Confidence, Stance, SummaryHead } from './channel-summaries.ts';
import { Count, Nullable, Versioned } from './common.ts';

export const AggregateSummaryRecord = Type.Object(
  {
    ...SummaryHead,
    headline: Type.String(),
    overview: Type.String(),
    dominantNarratives: Type.Array(Type.String(), { maxItems: 5 }),
    contrarianTheses: Type.Array(Type.String(), { maxItems: 5 }),
    marketDrivers: Type.Array(Type.String(), { maxItems: 8 }),
    assetSentiment: Type.Array(
      Type.Object(
        {
          symbol: Type.String(),
          name: Nullable(Type.String()),
          discussionRank: Count({ minimum: 1 }),
          sentiment: Stance,
          intensity: Confidence,
          thesis: Type.String(),
          drivers: Type.Array(Type.String()),
          contrarianAngle: Nullable(Type.String()),
          confidence: Confidence,
        },
        { additionalProperties: false },
      ),
      { maxItems: 8 },
    ),
    risks: Type.Array(Type.String(), { maxItems: 5 }),
    coverage: Type.Object(
      {
        eligibleSourceCount: Count(),
        activeSourceCount: Count(),
        messageCount: Count(),
        attachmentCount: Count(),
      },
      { additionalProperties: false },
    ),
    ...Versioned,
  },
  { additionalProperties: false },
);
export type AggregateSummaryRecord = Type.Static<typeof AggregateSummaryRecord>;
export const aggregateSummaries = {
  name: 'aggregate-summaries',
  schema: AggregateSummaryRecord,
  key: (r: AggregateSummaryRecord) => r.id,
} as const;
