import { table } from '../table.ts';

export const ACCOUNTS_TABLE = table('accounts');
export const API_KEYS_TABLE = table('api_keys');
