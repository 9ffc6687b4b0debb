import { table } from '../table.ts';

export const POSITION_PERFORMANCES_TABLE = table('position_performances');
export const POSITION_SAMPLES_TABLE = table('position_samples');
export const POSITION_SAMPLES_FEED_TABLE = table('position_samples_feed');
export const PRICE_SERIES_TABLE = table('price_series');
