import Type, { type TSchema } from 'typebox';
import '../formats.ts'; // registers the strict `date-time` format before any schema is compiled

/** A count or version: JSON.parse rounds integers above 2^53-1, so larger ones are refused, not altered. */
export const Count = (opts: { minimum?: number; description?: string } = {}) =>
  Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, ...opts });

// Every ingest record carries a monotonic per-entity `version` (later wins) and may be a tombstone.
export const Versioned = {
  version: Count({ description: 'monotonic per entity; the highest version wins' }),
  deleted: Type.Optional(Type.Boolean({ description: 'tombstone: the entity is gone' })),
};

export const Platform = Type.Union([Type.Literal('TELEGRAM'), Type.Literal('X')]);
export type Platform = Type.Static<typeof Platform>;
export const PLATFORMS = ['TELEGRAM', 'X'] as const;

export const Direction = Type.Union([Type.Literal('long'), Type.Literal('short')]);
/** Direction's values, in its order. */
export const DIRECTIONS = ['long', 'short'] as const;
export const EventType = Type.Union([Type.Literal('open'), Type.Literal('close'), Type.Literal('increase'), Type.Literal('decrease')]);
export const EVENT_TYPES = ['open', 'close', 'increase', 'decrease'] as const;

/** RFC 3339 with a real calendar date, no leap second, 1970..2299 (`schemas/formats.ts`). */
export const DateTime = Type.String({ format: 'date-time' });
// Ids stay within JSON's exact integers: a larger one would be silently wrapped by UInt64 columns.
export const Id = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER });
export const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);

export const Attachment = Type.Object(
  { type: Type.String({ minLength: 1 }), url: Type.String({ format: 'uri' }) },
  { additionalProperties: false },
);

/** A string enum with a precise static type (`{ type: 'string', enum: [...] }`). */
export const StringEnum = <const V extends readonly string[]>(values: V, opts: Record<string, unknown> = {}) =>
  Type.Unsafe<V[number]>({ type: 'string', enum: [...values], ...opts });
