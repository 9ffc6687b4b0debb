import { table } from '../table.ts';

export const PRICES_TABLE = table('prices');

export const PRICES_DDL = `CREATE TABLE IF NOT EXISTS ${PRICES_TABLE} (
    assetId UInt64, at DateTime64(3, 'UTC'), price Float64, version UInt64, deleted UInt8,
    INDEX at_minmax at TYPE minmax GRANULARITY 1
  ) ENGINE = ReplacingMergeTree(version) ORDER BY (assetId, at)`;
