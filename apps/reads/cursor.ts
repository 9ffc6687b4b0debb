import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ApiError } from '../../schemas/api/errors.ts';
import { MAX_DATE_TIME_MS, MIN_DATE_TIME_MS } from '../../schemas/formats.ts';
import type { Principal } from './principal.ts';

/**
 * Keyset cursors (DESIGN 6): `base64url(JSON payload) "." base64url(HMAC-SHA256)`, signed with a
 * server key. The payload carries the last sort key, the time window the first page resolved, a
 * fingerprint of the filters and one of the caller's account policy. The signature makes edits
 * evident; the fingerprints bind a cursor to its filters and to its account; every decoded field
 * is still type- and range-checked, and the window is clamped to the account's history window
 * again on every page (window.ts), so a cursor can never widen what its caller may read.
 */
export type Key = (string | number)[];
export type WindowBounds = [number | null, number | null];
export interface CursorState {
  k: Key;
  w?: WindowBounds;
}

/** What each position of a read's sort key holds: a time (ms), an id, a string, or a sequence number (0 or more). */
export type KeyPart = 'time' | 'id' | 'string' | 'seq';

const MAC_BYTES = 16;
const RESUME_MAC_BYTES = 12;
/** A key made of a trader name or symbol plus an id stays far below this; anything longer is not ours. */
const MAX_CURSOR_LENGTH = 4096;
const MAX_KEY_STRING = 2048;
const MALFORMED = () => new ApiError('INVALID_CURSOR', 'Malformed cursor');

export class CursorCodec {
  /** Policy prints by principal: an authenticated principal is reused while its key's answer is (apps/auth/keys.ts). */
  private readonly prints = new WeakMap<Principal, string>();

  constructor(private readonly secret: Buffer) {
    if (secret.length < 32) throw new Error('the cursor secret must be at least 32 bytes');
  }

  static random(): CursorCodec {
    return new CursorCodec(randomBytes(32));
  }

  private mac(data: string): Buffer {
    return createHmac('sha256', this.secret).update(data).digest().subarray(0, MAC_BYTES);
  }

  /** Fingerprint of the account and its policy: a cursor of another account, or of a changed policy, does not fit. */
  policyPrint(p: Principal): string {
    let print = this.prints.get(p);
    if (print === undefined) {
      const policy = [p.accountId, p.messageVisibility, p.signalVisibility, p.historyWindowDays];
      print = this.mac(`policy:${JSON.stringify(policy)}`).toString('base64url');
      this.prints.set(p, print);
    }
    return print;
  }

  encode(state: CursorState, filters: string, policy: string): string {
    const body = Buffer.from(JSON.stringify({ k: state.k, ...(state.w ? { w: state.w } : {}), f: filters, p: policy })).toString(
      'base64url',
    );
    return `${body}.${this.mac(body).toString('base64url')}`;
  }

  decode(raw: string, parts: readonly KeyPart[], filters: string, policy: string, historical: boolean): CursorState {
    if (raw.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(raw)) throw MALFORMED();
    const [body, sig] = raw.split('.') as [string, string];
    const given = Buffer.from(sig, 'base64url');
    if (given.length !== MAC_BYTES || !timingSafeEqual(given, this.mac(body))) throw MALFORMED();
    let parsed: any;
    try {
      parsed = JSON.parse(Buffer.from(body, 'base64url').toString('utf8'));
    } catch {
      throw MALFORMED();
    }
    // Signed by us, yet checked as if it were not: a leaked key or a bug must not turn into a 500.
    if (!isKey(parsed?.k, parts) || typeof parsed.f !== 'string' || typeof parsed.p !== 'string') throw MALFORMED();
    if (historical ? !isWindowBounds(parsed.w) : parsed.w !== undefined) throw MALFORMED();
    if (parsed.f !== filters) {
      throw new ApiError('INVALID_CURSOR', 'Cursor does not match the filters of this request; keep the filters unchanged between pages');
    }
    if (parsed.p !== policy) {
      throw new ApiError(
        'INVALID_CURSOR',
        'Cursor was issued to another account or under another access policy; start again from the first page',
      );
    }
    return { k: parsed.k, ...(historical ? { w: parsed.w } : {}) };
  }

  /**
   * Exports (issue 28): every exported row carries a resume token, `seal "." key`. The seal (the
   * window the export resolved, signed with the filters' and the account's fingerprints) is made
   * once per export; the key is the row's sort key in the clear, as base64url JSON (written by the
   * store: apps/reads/exports.ts resumeTokenSql), so a token costs no signature per row. A caller who edits a key only moves where its own filtered, policy-bound result
   * resumes; the list read checks the key and clamps the window as it does a cursor's.
   */
  resumeSeal(w: WindowBounds | undefined, filters: string, policy: string): string {
    // Short, as every row carries it: the bounds in base 36 (`_`: no window), a 96-bit signature.
    const body = w ? w.map((x) => (x === null ? '' : x.toString(36))).join('~') : '_';
    return `${body}.${this.resumeMac(body, filters, policy).toString('base64url')}`;
  }

  private resumeMac(body: string, filters: string, policy: string): Buffer {
    return this.mac(`resume:${body}:${filters}:${policy}`).subarray(0, RESUME_MAC_BYTES);
  }

  /** A resume token of this export's filters and account, as the state of a cursor (its key and window are checked where it is decoded). */
  resumed(token: string, filters: string, policy: string): CursorState {
    const malformed = () => new ApiError('INVALID_CURSOR', 'Malformed resume token');
    if (token.length > MAX_CURSOR_LENGTH || !/^(_|[0-9a-z]*~[0-9a-z]*)\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/.test(token)) throw malformed();
    const [body, sig, key] = token.split('.') as [string, string, string];
    const given = Buffer.from(sig, 'base64url');
    if (given.length !== RESUME_MAC_BYTES) throw malformed();
    if (!timingSafeEqual(given, this.resumeMac(body, filters, policy)))
      throw new ApiError(
        'INVALID_CURSOR',
        'Resume token does not fit this export: it was issued for other filters, another account or another access policy, or it was altered',
      );
    try {
      const k = JSON.parse(Buffer.from(key, 'base64url').toString('utf8'));
      if (body === '_') return { k };
      const w = body.split('~').map((x) => (x === '' ? null : Number.parseInt(x, 36))) as WindowBounds;
      return { k, w };
    } catch {
      throw malformed();
    }
  }
}

const isTime = (x: unknown): x is number =>
  Number.isSafeInteger(x) && (x as number) >= MIN_DATE_TIME_MS && (x as number) <= MAX_DATE_TIME_MS;

function isKey(k: unknown, parts: readonly KeyPart[]): k is Key {
  return (
    Array.isArray(k) &&
    k.length === parts.length &&
    parts.every((part, i) => {
      const x = k[i];
      if (part === 'time') return isTime(x);
      if (part === 'id') return Number.isSafeInteger(x) && (x as number) >= 1;
      if (part === 'seq') return Number.isSafeInteger(x) && (x as number) >= 0;
      return typeof x === 'string' && x.length <= MAX_KEY_STRING;
    })
  );
}

/**
 * Two bounds, each a time or null. A start after the end is an empty window the server itself
 * applies when an account's history window begins after an explicit endTime (a read whose rows
 * are not all in time, such as trader activity, still pages through it); it widens nothing.
 */
function isWindowBounds(w: unknown): w is WindowBounds {
  return Array.isArray(w) && w.length === 2 && w.every((x) => x === null || isTime(x));
}

/** Fingerprint of a read's filters: every parameter but the cursor and the page size. */
export function fingerprint(op: string, filters: Record<string, unknown>): string {
  const norm = Object.keys(filters)
    .filter((k) => k !== 'cursor' && k !== 'limit' && filters[k] !== undefined)
    .sort()
    .map((k) => [k, filters[k]]);
  const text = JSON.stringify([op, norm]);
  let print = prints.get(text);
  if (print === undefined) {
    // A commit wakes a thousand held polls of a few filters at once: each hashes them once.
    if (prints.size >= MAX_PRINTS) prints.clear();
    print = createHash('sha256').update(text).digest('base64url').slice(0, 16);
    prints.set(text, print);
  }
  return print;
}
const prints = new Map<string, string>();
const MAX_PRINTS = 1_000;
