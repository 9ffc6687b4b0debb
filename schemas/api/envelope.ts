import Type, { type TSchema } from 'typebox';
import { DateTime, Nullable } from '../topics/common.ts';

export const AppliedTimeRange = Type.Object({ startTime: Nullable(DateTime), endTime: Nullable(DateTime) });
export type AppliedTimeRange = Type.Static<typeof AppliedTimeRange>;

/** `meta` of a paginated list read; `appliedTimeRange` only on historical lists. */
export const ListMeta = (historical: boolean) =>
  Type.Object({
    hasMore: Type.Boolean(),
    nextCursor: Nullable(Type.String()),
    serverTime: DateTime,
    ...(historical ? { appliedTimeRange: AppliedTimeRange } : {}),
  });

export const SuccessEnvelope = <D extends TSchema>(data: D) =>
  Type.Object({
    success: Type.Literal(true),
    data,
    requestId: Type.String(),
  });

export const ListEnvelope = <T extends TSchema>(item: T, historical: boolean) =>
  SuccessEnvelope(Type.Object({ results: Type.Array(item), meta: ListMeta(historical) }));

/** The feed's answer: `dataComputedAt` on every page; a since-poll also lists the groups that left the feed (`removedIds`). */
export const FeedResponse = <T extends TSchema>(item: T) =>
  SuccessEnvelope(
    Type.Object({
      results: Type.Array(item),
      meta: Type.Object({
        ...ListMeta(true).properties,
        dataComputedAt: DateTime,
        removedIds: Type.Optional(Type.Array(Type.String())),
      }),
    }),
  );
