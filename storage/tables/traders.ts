import { identifier, type Sql, sql } from '../sql.ts';
import { STATEMENT_COLUMNS_DDL, statementEngine } from '../statements.ts';
import { table } from '../table.ts';

export const TRADERS_TABLE = table('traders');
export const SOURCE_IDENTITIES_TABLE = table('source_identities');
export const TRADER_TAGS_TABLE = table('trader_tags');
export const TRADER_DIRECTORY_TABLE = table('trader_directory');

/**
 * The trader directory as a statement table (storage/statements.ts) ordered for its read,
 * (name, id) ascending, with the source platform (a visibility filter) in the key and the
 * assigned source identity denormalized. Restated when a trader changes and when the identity
 * assigned to it does; both come from the traders and source_identities tables, which the batch
 * has already been stored in, so a replay restates the same rows.
 */
export const TRADER_DIRECTORY_DDL = `CREATE TABLE IF NOT EXISTS ${TRADER_DIRECTORY_TABLE} (
    id UInt64, name String, slug Nullable(String), avatarUrl Nullable(String), sourcePlatform LowCardinality(String),
    sourceIdentityId String, hasSource UInt8, displayName Nullable(String), handle Nullable(String), sAvatarUrl Nullable(String),
    profileUrl Nullable(String), audienceCount Nullable(UInt64), deleted UInt8, ${STATEMENT_COLUMNS_DDL}
  ) ${statementEngine('name, id, sourcePlatform')}`;

export const TRADERS_DDL = `CREATE TABLE IF NOT EXISTS ${TRADERS_TABLE} (
    id UInt64, name String, slug Nullable(String), avatarUrl Nullable(String),
    sourcePlatform LowCardinality(String), sourceIdentityId String, version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY id`;

export const SOURCE_IDENTITIES_DDL = `CREATE TABLE IF NOT EXISTS ${SOURCE_IDENTITIES_TABLE} (
    platform LowCardinality(String), sourceIdentityId String, displayName Nullable(String), handle Nullable(String),
    avatarUrl Nullable(String), profileUrl Nullable(String), audienceCount Nullable(UInt64), version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY (platform, sourceIdentityId)`;

export const TRADER_TAGS_DDL = `CREATE TABLE IF NOT EXISTS ${TRADER_TAGS_TABLE} (
    traderId UInt64, categories Array(String), names Array(String), version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY traderId`;

/**
 * A source identity's key, `platform:sourceIdentityId`: how the reads and projections name a
 * source (facts, message and feed filters, activity counts). A platform name has no colon, so the
 * first colon splits a key. `sourceKeySql` is the same key in SQL.
 */
export const sourceKey = (platform: string, sourceIdentityId: string): string => `${platform}:${sourceIdentityId}`;

/** A key's platform and source identity id. */
export function parseSourceKey(key: string): { platform: string; sourceIdentityId: string } {
  const colon = key.indexOf(':');
  return { platform: key.slice(0, colon), sourceIdentityId: key.slice(colon + 1) };
}

/**
 * The source key of a row in SQL, from its `platform` and `sourceIdentityId` columns (source
 * identities, messages, feed groups and the activity of messages), of `alias` when given.
 */
export function sourceKeySql(alias?: string): Sql {
  const column = (name: string) => identifier(alias ? `${alias}.${name}` : name);
  return sql`concat(${column('platform')}, ':', ${column('sourceIdentityId')})`;
}

/** The source key of a trader (the traders table's `sourcePlatform` and `sourceIdentityId`) in SQL. */
export const TRADER_SOURCE_KEY_SQL: Sql = sql`concat(sourcePlatform, ':', sourceIdentityId)`;
