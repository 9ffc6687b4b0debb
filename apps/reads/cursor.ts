import { createHash } from 'node:crypto';
import { ApiError } from '../../schemas/api/errors.ts';

/**
 * Keyset cursors (DESIGN 6): opaque base64url JSON carrying the last sort key, the time window
 * the first page resolved (so later pages keep it) and a fingerprint of the filters.
 */
export interface CursorState { k: (string | number)[]; w?: [number | null, number | null] }

export function fingerprint(op: string, filters: Record<string, unknown>): string {
  const norm = Object.keys(filters).filter((k) => k !== 'cursor' && k !== 'limit' && filters[k] !== undefined).sort()
    .map((k) => [k, filters[k]]);
  return createHash('sha256').update(JSON.stringify([op, norm])).digest('base64url').slice(0, 12);
}

export function encodeCursor(state: CursorState, fp: string): string {
  return Buffer.from(JSON.stringify({ ...state, f: fp })).toString('base64url');
}

export function decodeCursor(raw: string, fp: string): CursorState {
  let parsed: any;
  try {
    if (!/^[A-Za-z0-9_-]+$/.test(raw)) throw new Error('charset');
    parsed = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    throw new ApiError('INVALID_CURSOR', 'Malformed cursor');
  }
  const okKey = Array.isArray(parsed?.k) && parsed.k.every((x: unknown) => typeof x === 'string' || (typeof x === 'number' && Number.isFinite(x)));
  const okWin = parsed?.w === undefined || (Array.isArray(parsed.w) && parsed.w.length === 2 && parsed.w.every((x: unknown) => x === null || Number.isFinite(x)));
  if (!okKey || !okWin || typeof parsed.f !== 'string') throw new ApiError('INVALID_CURSOR', 'Malformed cursor');
  if (parsed.f !== fp) throw new ApiError('INVALID_CURSOR', 'Cursor does not match the filters of this request; keep the filters unchanged between pages');
  return { k: parsed.k, w: parsed.w };
}
