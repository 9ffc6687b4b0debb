import Type from 'typebox';
import { Attachment, DateTime, Nullable, Platform, Versioned } from './common.ts';

/** A source message; its trader is whoever is assigned the source identity at read time. */
export const MessageRecord = Type.Object(
  {
    id: Type.String({ minLength: 1 }),
    platform: Platform,
    sourceIdentityId: Type.String({ minLength: 1 }),
    writtenAt: DateTime,
    url: Nullable(Type.String()),
    text: Nullable(Type.String()),
    attachments: Type.Array(Attachment),
    isEdited: Nullable(Type.Boolean()),
    isReply: Nullable(Type.Boolean()),
    isQuote: Nullable(Type.Boolean()),
    isRepost: Nullable(Type.Boolean()),
    ...Versioned,
  },
  { additionalProperties: false },
);
export type MessageRecord = Type.Static<typeof MessageRecord>;
export const messages = { name: 'messages', schema: MessageRecord, key: (r: MessageRecord) => r.id } as const;
