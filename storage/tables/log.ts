import { table } from '../table.ts';

export const DEAD_LETTERS_TABLE = table('dead_letters');
export const READ_MODEL_VERSION_TABLE = table('read_model_version');
