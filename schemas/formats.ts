import Format from 'typebox/format';

/**
 * The one definition of a date-time we accept (DESIGN 6), on ingest and in query parameters alike:
 * RFC 3339 with a time zone, a real calendar date, hour 00-23, minute and second 00-59 (no leap
 * seconds: the store cannot represent them and would silently move them to the next minute), and
 * an instant within 1970-01-01T00:00:00Z .. 2299-12-31T23:59:59.999Z (the store's DateTime64 range
 * clamps anything outside it). Fractions beyond milliseconds are accepted and truncated: the store
 * keeps millisecond precision.
 */
export const MIN_DATE_TIME_MS = Date.UTC(1970, 0, 1);
export const MAX_DATE_TIME_MS = Date.UTC(2299, 11, 31, 23, 59, 59, 999);

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

const daysIn = (y: number, m: number): number =>
  m === 2 ? ((y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28) : [4, 6, 9, 11].includes(m) ? 30 : 31;

const digits = (s: string, from: number, n: number): number => {
  let v = 0;
  for (let i = from; i < from + n; i++) {
    const c = s.charCodeAt(i) - 48;
    if (c < 0 || c > 9) return -1;
    v = v * 10 + c;
  }
  return v;
};

/**
 * The canonical form `YYYY-MM-DDTHH:MM:SS.sssZ` (what the projector writes and most producers
 * send) without the regular expression: the same checks, digit by digit. undefined: not in that
 * form, let the general parser decide.
 */
function canonical(s: string): number | null | undefined {
  if (s[4] !== '-' || s[7] !== '-' || s[10] !== 'T' || s[13] !== ':' || s[16] !== ':' || s[19] !== '.' || s[23] !== 'Z') return undefined;
  const y = digits(s, 0, 4);
  const mo = digits(s, 5, 2);
  const d = digits(s, 8, 2);
  const h = digits(s, 11, 2);
  const mi = digits(s, 14, 2);
  const sec = digits(s, 17, 2);
  const ms = digits(s, 20, 3);
  if (y < 0 || mo < 0 || d < 0 || h < 0 || mi < 0 || sec < 0 || ms < 0) return undefined;
  if (mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || sec > 59) return null;
  if (y < 100) return undefined; // Date.UTC reads years 0-99 as 1900-1999: the general path handles them
  const t = Date.UTC(y, mo - 1, d, h, mi, sec, ms);
  return t >= MIN_DATE_TIME_MS && t <= MAX_DATE_TIME_MS ? t : null;
}

/** Milliseconds since the epoch of a valid date-time, or null when the string is not one. */
export function parseDateTime(s: string): number | null {
  if (typeof s !== 'string' || s.length > 40) return null;
  if (s.length === 24) {
    const t = canonical(s);
    if (t !== undefined) return t;
  }
  const m = RFC3339.exec(s);
  if (!m) return null;
  const [y, mo, d, h, mi, sec] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i]));
  if (mo! < 1 || mo! > 12 || d! < 1 || d! > daysIn(y!, mo!) || h! > 23 || mi! > 59 || sec! > 59) return null;
  let offsetMin = 0;
  if (m[9]) {
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return null;
    offsetMin = (m[9] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const ms = m[7] ? Number(m[7].slice(0, 3).padEnd(3, '0')) : 0;
  // Date.UTC maps years 0-99 to 1900-1999; build the date first and set the full year.
  const date = new Date(Date.UTC(2000, mo! - 1, d!, h!, mi!, sec!, ms));
  date.setUTCFullYear(y!);
  const t = date.getTime() - offsetMin * 60_000;
  return t >= MIN_DATE_TIME_MS && t <= MAX_DATE_TIME_MS ? t : null;
}

export const isDateTime = (s: string): boolean => parseDateTime(s) !== null;

// typebox validates ingest records (and anything else compiled from `schemas/`) with this format.
Format.Set('date-time', isDateTime);

/** An instant (ms since the epoch, or their decimal text as the store returns it) as the contract writes date-times. */
export const iso = (ms: number | string): string => new Date(Number(ms)).toISOString();
