import { type AccountRecord, type ApiKeyRecord, SCOPES } from '../../schemas/topics/index.ts';
import { ACCOUNTS_TABLE, API_KEYS_TABLE } from '../../storage/tables/access.ts';
import { canonicalDateTime, del, type Projection } from '../projection.ts';

export const accountsProjection: Projection = {
  name: 'accounts',
  canHandle: ['accounts'],
  table: ACCOUNTS_TABLE,
  ddl: [
    `CREATE TABLE IF NOT EXISTS ${ACCOUNTS_TABLE} (
    id String, status LowCardinality(String), emailVerified UInt8,
    msgMode LowCardinality(String), msgPlatforms Array(String), msgTraderIds Array(UInt64),
    sigMode LowCardinality(String), sigPlatforms Array(String), sigTraderIds Array(UInt64),
    historyWindowDays Nullable(UInt32), scopes Array(LowCardinality(String)), version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY id`,
  ],
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
  ddl: [
    `CREATE TABLE IF NOT EXISTS ${API_KEYS_TABLE} (
    id String, keyHash String, accountId String, scopes Array(String), revoked UInt8,
    createdAt DateTime64(3, 'UTC'), version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY id`,
  ],
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
