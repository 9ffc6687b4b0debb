import { table } from '../table.ts';

export const DEAD_LETTERS_TABLE = table('dead_letters');
export const READ_MODEL_VERSION_TABLE = table('read_model_version');

export const DEAD_LETTERS_DDL = `CREATE TABLE IF NOT EXISTS ${DEAD_LETTERS_TABLE} (
  topic LowCardinality(String), offset String, key String, raw String, reason String, at DateTime64(3, 'UTC')
) ENGINE = ReplacingMergeTree ORDER BY (topic, offset)`;

export const VERSION_DDL = `CREATE TABLE IF NOT EXISTS ${READ_MODEL_VERSION_TABLE} (
  version UInt32, at DateTime64(3, 'UTC')
) ENGINE = MergeTree ORDER BY at`;
