import Type from 'typebox';
import { Scope } from './api-keys.ts';
import { Count, Id, Nullable, Platform, Versioned } from './common.ts';

/** all | none | only these platforms | only these traders. */
export const VisibilityPolicy = Type.Object(
  {
    mode: Type.Union([Type.Literal('all'), Type.Literal('none'), Type.Literal('platforms'), Type.Literal('traders')]),
    platforms: Type.Optional(Type.Array(Platform)),
    traderIds: Type.Optional(Type.Array(Id)),
  },
  { additionalProperties: false },
);
export type VisibilityPolicy = Type.Static<typeof VisibilityPolicy>;

export const AccountRecord = Type.Object(
  {
    id: Type.String({ minLength: 1, pattern: '^[A-Za-z0-9_.@-]+$' }),
    status: Type.Union([Type.Literal('active'), Type.Literal('blocked')]),
    emailVerified: Type.Boolean(),
    messageVisibility: VisibilityPolicy,
    signalVisibility: VisibilityPolicy,
    historyWindowDays: Nullable(Count({ minimum: 1, description: 'null: unlimited history' })),
    /** The scopes the account may hold (DESIGN 6 "Account scopes"): its keys and OAuth grants are limited to them. Omitted: all seven. */
    scopes: Type.Optional(Type.Array(Scope, { uniqueItems: true })),
    ...Versioned,
  },
  { additionalProperties: false },
);
export type AccountRecord = Type.Static<typeof AccountRecord>;
export const accounts = { name: 'accounts', schema: AccountRecord, key: (r: AccountRecord) => r.id } as const;
