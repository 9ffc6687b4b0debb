import { table } from '../table.ts';

export const ASSETS_TABLE = table('assets');
