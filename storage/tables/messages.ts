import { table } from '../table.ts';

export const MESSAGES_TABLE = table('messages');
export const MESSAGES_CURRENT_TABLE = table('messages_current');
