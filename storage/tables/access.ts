import { table } from '../table.ts';

export const ACCOUNTS_TABLE = table('accounts');
export const API_KEYS_TABLE = table('api_keys');
/** What credentials' answers (API keys, token owners) are read from: a commit that writes neither leaves them. */
export const ACCESS_TABLES = [ACCOUNTS_TABLE, API_KEYS_TABLE] as const;

export const ACCOUNTS_DDL = `CREATE TABLE IF NOT EXISTS ${ACCOUNTS_TABLE} (
    id String, status LowCardinality(String), emailVerified UInt8,
    msgMode LowCardinality(String), msgPlatforms Array(String), msgTraderIds Array(UInt64),
    sigMode LowCardinality(String), sigPlatforms Array(String), sigTraderIds Array(UInt64),
    historyWindowDays Nullable(UInt32), scopes Array(LowCardinality(String)), version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY id`;

export const API_KEYS_DDL = `CREATE TABLE IF NOT EXISTS ${API_KEYS_TABLE} (
    id String, keyHash String, accountId String, scopes Array(String), revoked UInt8,
    createdAt DateTime64(3, 'UTC'), version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY id`;
