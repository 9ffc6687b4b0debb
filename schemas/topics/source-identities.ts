import Type from 'typebox';
import { Count, Nullable, Platform, Versioned } from './common.ts';

export const SourceIdentityRecord = Type.Object(
  {
    platform: Platform,
    sourceIdentityId: Type.String({ minLength: 1 }),
    displayName: Nullable(Type.String()),
    handle: Nullable(Type.String()),
    avatarUrl: Nullable(Type.String()),
    profileUrl: Nullable(Type.String()),
    audienceCount: Nullable(Count()),
    ...Versioned,
  },
  { additionalProperties: false },
);
export type SourceIdentityRecord = Type.Static<typeof SourceIdentityRecord>;
export const sourceIdentities = {
  name: 'source-identities',
  schema: SourceIdentityRecord,
  key: (r: SourceIdentityRecord) => `${r.platform}:${r.sourceIdentityId}`,
} as const;
