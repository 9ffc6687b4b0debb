import { table } from '../table.ts';

export const EVENTS_TABLE = table('events');
export const POSITIONS_TABLE = table('positions');
export const OPEN_POSITIONS_TABLE = table('open_positions');
export const TRADE_BATCH_TABLE = table('trade_batch');
export const EVENTS_CURRENT_TABLE = table('events_current');
export const POSITIONS_CURRENT_TABLE = table('positions_current');
