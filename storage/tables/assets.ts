import { table } from '../table.ts';

export const ASSETS_TABLE = table('assets');

export const ASSETS_DDL = `CREATE TABLE IF NOT EXISTS ${ASSETS_TABLE} (
    id UInt64, name String, symbol String, logoUrl Nullable(String),
    assetClass LowCardinality(String), resolvedAssetClass LowCardinality(String), category Nullable(String),
    quoteSymbol Nullable(String), hasActiveMarket UInt8, version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY id`;
