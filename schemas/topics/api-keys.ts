import Type from 'typebox';
import { DateTime, StringEnum, Versioned } from './common.ts';

export const SCOPES = [
  'events.read',
  'messages.read',
  'feed.read',
  'summaries.read',
  'positions.read',
  'directory.read',
  'stats.read',
] as const;
export type Scope = (typeof SCOPES)[number];
export const Scope = StringEnum(SCOPES);

/** Only the SHA-256 of a key is ever stored; the key itself is shown once by `keys create`. */
export const ApiKeyRecord = Type.Object(
  {
    id: Type.String({ pattern: '^[a-f0-9]{16}$' }),
    keyHash: Type.String({ pattern: '^[a-f0-9]{64}$' }),
    accountId: Type.String({ minLength: 1 }),
    scopes: Type.Array(Scope),
    revoked: Type.Boolean(),
    createdAt: DateTime,
    ...Versioned,
  },
  { additionalProperties: false },
);
export type ApiKeyRecord = Type.Static<typeof ApiKeyRecord>;
export const apiKeys = { name: 'api-keys', schema: ApiKeyRecord, key: (r: ApiKeyRecord) => r.id } as const;
