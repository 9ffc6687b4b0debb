import { table } from '../table.ts';

export const PRICES_TABLE = table('prices');
