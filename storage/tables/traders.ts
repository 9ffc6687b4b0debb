import { table } from '../table.ts';

export const TRADERS_TABLE = table('traders');
export const SOURCE_IDENTITIES_TABLE = table('source_identities');
export const TRADER_TAGS_TABLE = table('trader_tags');
export const TRADER_DIRECTORY_TABLE = table('trader_directory');
