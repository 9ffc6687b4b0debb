import { table } from '../table.ts';

export const CHANNEL_SUMMARIES_TABLE = table('channel_summaries');
export const AGGREGATE_SUMMARIES_TABLE = table('aggregate_summaries');
export const CHANNEL_SUMMARIES_CURRENT_TABLE = table('channel_summaries_current');
export const AGGREGATE_SUMMARIES_CURRENT_TABLE = table('aggregate_summaries_current');
