import Type from 'typebox';
import { DateTime, Id, Nullable, StringEnum, Versioned } from './common.ts';

export const Stance = StringEnum(['bullish', 'bearish', 'mixed', 'neutral', 'unclear']);
export const Confidence = StringEnum(['low', 'medium', 'high']);
export const SummaryStatus = Type.Union([Type.Literal('safe'), Type.Literal('low_signal')]);

/** Fields every generated summary has: its Source Window (end exclusive), when it was generated, its status. */
export const SummaryHead = {
  id: Type.String({ minLength: 1 }),
  windowStart: DateTime,
  windowEnd: DateTime,
  generatedAt: DateTime,
  status: SummaryStatus,
};

export const ChannelSummaryRecord = Type.Object(
  {
    ...SummaryHead,
    traderId: Id,
    overview: Type.String(),
    keyInsights: Type.Array(Type.String(), { maxItems: 3 }),
    marketBias: Stance,
    mentionedAssets: Type.Array(
      Type.Object(
        {
          symbol: Type.String(),
          name: Nullable(Type.String()),
          stance: Stance,
          confidence: Confidence,
        },
        { additionalProperties: false },
      ),
      { maxItems: 5 },
    ),
    ...Versioned,
  },
  { additionalProperties: false },
);
export type ChannelSummaryRecord = Type.Static<typeof ChannelSummaryRecord>;
export const channelSummaries = {
  name: 'channel-summaries',
  schema: ChannelSummaryRecord,
  key: (r: ChannelSummaryRecord) => r.id,
} as const;
