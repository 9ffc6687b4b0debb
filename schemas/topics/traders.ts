import Type from 'typebox';
import { Id, Nullable, Platform, Versioned } from './common.ts';

/** A trader; `source` names the assigned source identity (platform-scoped), or null. */
export const TraderRecord = Type.Object(
  {
    id: Id,
    name: Type.String({ minLength: 1 }),
    slug: Nullable(Type.String()),
    avatarUrl: Nullable(Type.String()),
    source: Nullable(Type.Object({ platform: Platform, sourceIdentityId: Type.String({ minLength: 1 }) }, { additionalProperties: false })),
    ...Versioned,
  },
  { additionalProperties: false },
);
export type TraderRecord = Type.Static<typeof TraderRecord>;
export const traders = { name: 'traders', schema: TraderRecord, key: (r: TraderRecord) => String(r.id) } as const;
