import { table } from '../table.ts';

/** A sample's asset is part of its key: a change of prices names the assets it touched. */
export const PRICES_TABLE = table('prices', { changes: { asset: 'assetId', time: 'at' } });

export const PRICES_DDL = `CREATE TABLE IF NOT EXISTS ${PRICES_TABLE} (
    assetId UInt64, at DateTime64(3, 'UTC'), price Float64, version UInt64, deleted UInt8,
    INDEX at_minmax at TYPE minmax GRANULARITY 1
  ) ENGINE = ReplacingMergeTree(version) ORDER BY (assetId, at)`;
