import { type AccountRecord, type ApiKeyRecord, SCOPES } from '../../schemas/topics/index.ts';
import { ACCOUNTS_DDL, ACCOUNTS_TABLE, API_KEYS_DDL, API_KEYS_TABLE } from '../../storage/tables/access.ts';
import { canonicalDateTime, del, type Projection } from '../projection.ts';

export const accountsProjection: Projection = {
  name: 'accounts',
  canHandle: ['accounts'],
  table: ACCOUNTS_TABLE,
  ddl: [ACCOUNTS_DDL],
  handle: (batch) =>
    batch.map(({ value: a }: { value: AccountRecord }) => ({
      id: a.id,
      status: a.status,
      emailVerified: a.emailVerified ? 1 : 0,
      msgMode: a.messageVisibility.mode,
      msgPlatforms: a.messageVisibility.platforms ?? [],
      msgTraderIds: a.messageVisibility.traderIds ?? [],
      sigMode: a.signalVisibility.mode,
      sigPlatforms: a.signalVisibility.platforms ?? [],
      sigTraderIds: a.signalVisibility.traderIds ?? [],
      // A record without scopes (from before accounts had them) holds all seven.
      historyWindowDays: a.historyWindowDays,
      scopes: a.scopes ?? [...SCOPES],
      version: a.version,
      deleted: del(a),
    })),
};

export const apiKeysProjection: Projection = {
  name: 'api-keys',
  canHandle: ['api-keys'],
  table: API_KEYS_TABLE,
  ddl: [API_KEYS_DDL],
  handle: (batch) =>
    batch.map(({ value: k }: { value: ApiKeyRecord }) => ({
      id: k.id,
      keyHash: k.keyHash,
      accountId: k.accountId,
      scopes: k.scopes,
      revoked: k.revoked ? 1 : 0,
      createdAt: canonicalDateTime(k.createdAt),
      version: k.version,
      deleted: del(k),
    })),
};
