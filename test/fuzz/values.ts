import fc from 'fast-check';

/**
 * Query values derived from a property's JSON schema: valid ones and hostile ones, each with the
 * exact bytes that go on the wire, the value the server should see once decoded, and a verdict of
 * the DESIGN section 6 rules (`valid`, `invalid`, or `unknown` where the rules leave it open).
 */
export type Validity = 'valid' | 'invalid' | 'unknown';
export type S = Record<string, any>;

export interface PV {
  /** Cause label, e.g. `integer:hex`; failures are grouped by it. */
  label: string;
  /** As written in the request-target (already percent-encoded). */
  wire: string;
  /** The decoded value, or null when the wire form is not well-formed percent-encoding / UTF-8. */
  decoded: string | null;
  validity: Validity;
}

export const MAX_SAFE = Number.MAX_SAFE_INTEGER; // 2^53 - 1: ids are 1 .. 2^53-1 (DESIGN 6)

export type Kind =
  | 'integer'
  | 'number'
  | 'boolean'
  | 'enum'
  | 'datetime'
  | 'idlist'
  | 'enumlist'
  | 'strlist'
  | 'cursor'
  | 'watermark'
  | 'text';

export function enumOf(s: S | undefined): string[] | null {
  if (!s) return null;
  if (Array.isArray(s.enum)) return s.enum.map(String);
  if (s.const !== undefined) return [String(s.const)];
  const alts = s.anyOf ?? s.oneOf;
  if (Array.isArray(alts) && alts.length && alts.every((a: S) => a.const !== undefined || Array.isArray(a.enum)))
    return alts.flatMap((a: S) => enumOf(a)!);
  return null;
}

export function kindOf(name: string, s: S): Kind {
  // An export's `resume`: a token the server made, as opaque as a cursor (issue 28).
  if (name === 'cursor' || name === 'resume') return 'cursor';
  // The feed's `since`: 0 or a watermark the server signed (DESIGN 6), as opaque as a cursor.
  if (name === 'since') return 'watermark';
  const list = s['x-list'];
  if (list) {
    if (list.type === 'integer') return 'idlist';
    if (enumOf(list)) return 'enumlist';
    return 'strlist';
  }
  if (enumOf(s)) return 'enum';
  if (s.type === 'integer') return 'integer';
  if (s.type === 'number') return 'number';
  if (s.type === 'boolean') return 'boolean';
  if (s.format === 'date-time') return 'datetime';
  return 'text';
}

// ------------------------------------------------------------------------------------------------
// Wire forms

/** A value sent percent-encoded (what a well-behaved client sends). */
export const enc = (label: string, value: string): Omit<PV, 'validity'> => ({ label, wire: encodeURIComponent(value), decoded: value });

/** A value written verbatim on the wire: `+` means a space, `%XX` escapes may be broken. */
export function raw(label: string, wire: string): Omit<PV, 'validity'> {
  let decoded: string | null;
  try {
    decoded = decodeURIComponent(wire.replace(/\+/g, ' '));
  } catch {
    decoded = null;
  }
  return { label, wire, decoded };
}

/** What a lenient decoder could make of a broken escape: valid escapes as bytes, invalid UTF-8 as U+FFFD. */
function lenientDecode(wire: string): string {
  const bytes: number[] = [];
  const s = wire.replace(/\+/g, ' ');
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '%' && /^[0-9a-fA-F]{2}$/.test(s.slice(i + 1, i + 3))) {
      bytes.push(parseInt(s.slice(i + 1, i + 3), 16));
      i += 2;
    } else for (const b of Buffer.from(s[i]!, 'utf8')) bytes.push(b);
  }
  return Buffer.from(bytes).toString('utf8');
}

// ------------------------------------------------------------------------------------------------
// The oracle: DESIGN section 6 Validation row applied to a property's schema.

const daysIn = (y: number, m: number) =>
  m === 2 ? ((y % 4 === 0 && y % 100 !== 0) || y % 400 === 0 ? 29 : 28) : [4, 6, 9, 11].includes(m) ? 30 : 31;
const MIN_T = Date.UTC(1970, 0, 1);
const MAX_T = Date.UTC(2299, 11, 31, 23, 59, 59, 999);

/** RFC 3339, a real calendar date, second 00-59, within 1970-01-01 .. 2299-12-31 (DESIGN 6). */
export function judgeDateTime(v: string): Validity {
  const m = /^(\d{4})-(\d{2})-(\d{2})([Tt ])(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|([+-])(\d{2}):(\d{2}))$/.exec(v);
  if (!m) return 'invalid';
  const [y, mo, d, h, mi, s] = [1, 2, 3, 5, 6, 7].map((i) => Number(m[i]));
  if (mo! < 1 || mo! > 12 || d! < 1 || d! > daysIn(y!, mo!) || h! > 23 || mi! > 59 || s! > 59) return 'invalid';
  let off = 0;
  if (m[10]) {
    if (Number(m[11]) > 23 || Number(m[12]) > 59) return 'invalid';
    off = (m[10] === '-' ? -1 : 1) * (Number(m[11]) * 60 + Number(m[12]));
  }
  const date = new Date(Date.UTC(2000, mo! - 1, d!, h!, mi!, s!, m[8] ? Number(m[8].slice(1, 4).padEnd(3, '0')) : 0));
  date.setUTCFullYear(y!);
  const t = date.getTime() - off * 60_000;
  if (t < MIN_T || t > MAX_T) return 'invalid';
  // RFC 3339 allows these; the DESIGN does not say whether they are accepted.
  if (m[4] !== 'T' || (m[9] && m[9] === 'z') || (m[8] && m[8].length > 10)) return 'unknown';
  return 'valid';
}

const CONTROL = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069\ufffd]/;
const codePoints = (s: string) => [...s].length;

function judgeInteger(v: string, min: number | undefined, max: number | undefined): Validity {
  if (!/^[0-9]+$/.test(v)) return 'invalid';
  const n = BigInt(v);
  if (min !== undefined && n < BigInt(min)) return 'invalid';
  if (max !== undefined && n > BigInt(max)) return 'invalid';
  if (v.length > 1 && v.startsWith('0')) return 'unknown'; // "plain decimal digits": leading zeros left open
  if (max === undefined && n > BigInt(MAX_SAFE)) return 'unknown';
  return 'valid';
}

export function judge(name: string, s: S, decoded: string): Validity {
  const kind = kindOf(name, s);
  if (typeof s.minLength === 'number' && codePoints(decoded) < s.minLength) return 'invalid';
  if (typeof s.maxLength === 'number' && codePoints(decoded) > s.maxLength) return 'invalid';
  switch (kind) {
    case 'integer':
      return judgeInteger(decoded, s.minimum, s.maximum);
    case 'number': {
      if (!/^(0|[1-9][0-9]*)(\.[0-9]+)?$/.test(decoded)) return 'unknown';
      const n = Number(decoded);
      if ((s.minimum !== undefined && n < s.minimum) || (s.maximum !== undefined && n > s.maximum)) return 'invalid';
      return 'valid';
    }
    case 'boolean':
      return decoded === 'true' || decoded === 'false' ? 'valid' : ['1', '0'].includes(decoded) ? 'unknown' : 'invalid';
    case 'watermark':
      // 0, now (the head, issue 28), or a real watermark; anything else: INVALID_CURSOR (verdictExpect).
      return decoded === '0' || decoded === 'now' ? 'valid' : 'unknown';
    case 'enum':
      return enumOf(s)!.includes(decoded) ? 'valid' : 'invalid';
    case 'datetime':
      return judgeDateTime(decoded);
    case 'idlist':
    case 'enumlist':
    case 'strlist': {
      if (s.pattern && !new RegExp(s.pattern, 'u').test(decoded)) return 'invalid';
      if (decoded === '') return s.pattern ? 'valid' : 'unknown';
      const items = decoded.split(',');
      if (items.some((x) => x === '')) return 'invalid';
      const item = s['x-list'] as S;
      for (const x of items) {
        const v =
          kind === 'idlist'
            ? judgeInteger(x, Math.max(1, item.minimum ?? 1), Math.min(MAX_SAFE, item.maximum ?? MAX_SAFE))
            : kind === 'enumlist'
              ? enumOf(item)!.includes(x)
                ? 'valid'
                : 'invalid'
              : (typeof item.minLength === 'number' && codePoints(x) < item.minLength) ||
                  (typeof item.maxLength === 'number' && codePoints(x) > item.maxLength) ||
                  (item.pattern && !new RegExp(item.pattern, 'u').test(x))
                ? 'invalid'
                : 'valid';
        if (v === 'invalid') return 'invalid';
      }
      const max = s['x-list-max'];
      if (typeof max === 'number') {
        if (new Set(items).size > max) return 'invalid';
        if (items.length > max) return 'unknown'; // duplicates: whether they count is left open
      }
      if (kind === 'strlist' && CONTROL.test(decoded)) return 'unknown';
      return 'valid';
    }
    case 'cursor':
      return 'unknown';
    case 'text': {
      if (s.pattern && !new RegExp(s.pattern, 'u').test(decoded)) return 'invalid';
      // A free string without a length bound may carry meaning (e.g. a watermark): only its length is judged.
      if (s.maxLength === undefined && s.pattern === undefined) return 'unknown';
      if (CONTROL.test(decoded)) return 'unknown';
      return 'valid';
    }
  }
}

/** Verdict of a wire form: a broken escape is invalid only if every plausible reading is. */
export function judgeWire(name: string, s: S, v: Omit<PV, 'validity'>): PV {
  if (v.decoded !== null) return { ...v, validity: judge(name, s, v.decoded) };
  const readings = [v.wire.replace(/\+/g, ' '), lenientDecode(v.wire)].map((d) => judge(name, s, d));
  return { ...v, validity: readings.every((r) => r === 'invalid') ? 'invalid' : 'unknown' };
}

// ------------------------------------------------------------------------------------------------
// Valid values

export interface IdPools {
  traderIds: number[];
  assetIds: number[];
  positionIds: number[];
  messageIds: string[];
}

const DAY = 86_400_000;

function knownIds(name: string, pools: IdPools): number[] {
  const n = name.toLowerCase();
  if (n.includes('trader')) return pools.traderIds;
  if (n.includes('asset')) return pools.assetIds;
  if (n.includes('position')) return pools.positionIds;
  return [...pools.traderIds, ...pools.assetIds];
}

export function formatDateTime(t: number, style: number): string {
  const iso = new Date(t).toISOString();
  switch (style % 5) {
    case 0:
      return iso;
    case 1:
      return iso.replace(/\.\d{3}Z$/, 'Z');
    case 2: {
      // an offset other than Z
      const off = (((style >> 3) % 27) - 13) * 60 + ((style >> 2) % 2) * 30;
      const local = new Date(t + off * 60_000).toISOString().slice(0, 19);
      const a = Math.abs(off);
      return `${local}${off < 0 ? '-' : '+'}${String(Math.floor(a / 60)).padStart(2, '0')}:${String(a % 60).padStart(2, '0')}`;
    }
    case 3:
      return iso.replace(/Z$/, '123Z'); // microseconds
    default:
      return iso.replace(/\.\d{3}Z$/, '+00:00');
  }
}

export function validArb(name: string, s: S, pools: IdPools, now: number): fc.Arbitrary<PV> {
  const arb = validArbEncoded(name, s, pools, now);
  if (!s['x-list']) return arb;
  // Lists go out with encoded (%2C) or plain commas: both decode to the same value.
  return fc.tuple(arb, fc.boolean()).map(([v, plain]) => (plain ? { ...v, wire: v.wire.replace(/%2C/g, ',') } : v));
}

function validArbEncoded(name: string, s: S, pools: IdPools, now: number): fc.Arbitrary<PV> {
  const kind = kindOf(name, s);
  const wrap =
    (label: string) =>
    (v: string): PV =>
      judgeWire(name, s, enc(`${kind}:valid-${label}`, v));
  // A valid `wait` holds an empty since-poll that long: the fuzz waits 1 s at most (issue 28's tests hold polls).
  if (name === 'wait') return fc.constant('1').map(wrap('short'));
  switch (kind) {
    case 'integer':
    case 'number': {
      const min = Math.ceil(s.minimum ?? 0);
      const max = Math.floor(s.maximum ?? min + 10_000);
      return fc.oneof(
        fc.integer({ min, max }).map((n) => wrap('range')(String(n))),
        fc.constantFrom(min, max, ...(typeof s.default === 'number' ? [s.default] : [])).map((n) => wrap('bound')(String(n))),
      );
    }
    case 'boolean':
      return fc.constantFrom('true', 'false').map(wrap('bool'));
    case 'watermark':
      return fc.constantFrom('0', 'now').map(wrap('zero'));
    case 'enum':
      return fc.constantFrom(...enumOf(s)!).map(wrap('member'));
    case 'datetime':
      return fc.oneof(
        fc
          .tuple(fc.integer({ min: 0, max: 200 * 24 }), fc.nat(255))
          .map(([h, st]) => wrap('recent')(formatDateTime(now - h * 3_600_000, st))),
        fc
          .tuple(fc.integer({ min: Date.UTC(1970, 0, 1), max: Date.UTC(2299, 11, 31) }), fc.nat(255))
          .map(([t, st]) => wrap('any')(formatDateTime(t, st))),
        fc
          .constantFrom('1970-01-01T00:00:00Z', '2299-12-31T23:59:59.999Z', '2024-02-29T12:00:00Z', '2026-01-01T00:00:00-00:00')
          .map(wrap('edge')),
      );
    case 'idlist': {
      const ids = knownIds(name, pools);
      const max = Math.min(8, s['x-list-max'] ?? 8);
      return fc
        .uniqueArray(
          fc.oneof({ arbitrary: fc.constantFrom(...ids), weight: 6 }, fc.integer({ min: 1, max: 1_000_000 }), fc.constant(MAX_SAFE)),
          { minLength: 1, maxLength: max },
        )
        .map((xs) => wrap('ids')(xs.join(',')));
    }
    case 'enumlist': {
      const values = enumOf(s['x-list'])!;
      const allowEmpty = s.pattern ? new RegExp(s.pattern, 'u').test('') : false;
      return fc
        .uniqueArray(fc.constantFrom(...values), { minLength: allowEmpty ? 0 : 1, maxLength: values.length })
        .map((xs) => wrap('members')(xs.join(',')));
    }
    case 'strlist':
      return fc
        .uniqueArray(
          fc.oneof({ arbitrary: fc.constantFrom(...pools.messageIds), weight: 4 }, fc.stringMatching(/^[A-Za-z0-9_.-]{1,16}$/)),
          { minLength: 1, maxLength: 6 },
        )
        .map((xs) => wrap('items')(xs.join(',')));
    case 'cursor':
      return fc.constant(enc('cursor:none', 'x')).map((v) => ({ ...v, validity: 'unknown' as const }));
    case 'text': {
      const maxLen = Math.max(1, Math.min(s.maxLength ?? 30, 30));
      const minLen = Math.min(s.minLength ?? 1, maxLen);
      return fc
        .oneof(
          fc
            .constantFrom('BTC', 'alpha', 'Ärger', '😀', 'a', "O'Brien", 'S P X')
            .filter((x) => codePoints(x) <= maxLen && codePoints(x) >= minLen),
          fc.string({ minLength: Math.max(1, minLen), maxLength: maxLen }),
        )
        .map(wrap('text'));
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Hostile values

const SQL = [
  "' OR 1=1 --",
  '{limit:UInt32}',
  '); DROP TABLE events; --',
  "1' UNION SELECT name FROM system.tables --",
  '${db}.events',
  '{db:Identifier}',
  '\\',
  "'",
  '"',
];

function generic(): Omit<PV, 'validity'>[] {
  return [
    enc('any:empty', ''),
    enc('any:nul', '\u0000'),
    enc('any:nul-inside', '1\u00002'),
    enc('any:control', '\u0001\u0002\u001b[31m'),
    enc('any:crlf', 'a\r\nX-Injected: 1'),
    enc('any:bidi', '\u202e\u2066abc\u2069'),
    enc('any:del-c1', '\u007f\u0085\u009f'),
    ...SQL.map((x, i) => enc(`any:sql-${i}`, x)),
    raw('any:pct-bare', '%'),
    raw('any:pct-zz', '%zz'),
    raw('any:pct-trailing', 'abc%2'),
    raw('any:pct-overlong-C0AF', '%C0%AF'),
    raw('any:pct-FF', '%FF'),
    raw('any:pct-surrogate', '%ED%A0%80'),
    raw('any:pct-truncated-utf8', '%E2%82'),
    raw('any:plus', '+'),
    enc('any:100kB', 'a'.repeat(100_000)),
    enc('any:300-chars', 'x'.repeat(300)),
    enc('any:json', '{"$gt":1}'),
    enc('any:brackets', '[1,2]'),
    enc('any:proto', '__proto__'),
    enc('any:constructor', 'constructor'),
    enc('any:fullwidth', 'Ｔｅｓｔ１'),
    enc('any:emoji', '😀'),
    enc('any:space', ' '),
    enc('any:null-word', 'null'),
    enc('any:undefined-word', 'undefined'),
    enc('any:comma', ','),
    enc('any:encoded-separators', 'a&b=c'),
    enc('any:semicolon-param', '5;limit=1'),
    enc('any:hash', '5#x'),
  ];
}

function integerHostile(s: S): Omit<PV, 'validity'>[] {
  const min = s.minimum ?? 0;
  const max = s.maximum;
  return [
    enc('integer:hex', '0x10'),
    enc('integer:exponent', '1e1'),
    enc('integer:plus', '+5'),
    raw('integer:plus-raw', '+5'),
    enc('integer:lead-space', ' 5'),
    enc('integer:trail-space', '5 '),
    enc('integer:tab', '\t5'),
    enc('integer:negative', '-1'),
    enc('integer:neg-zero', '-0'),
    enc('integer:fraction', '1.5'),
    enc('integer:fraction-zero', '5.0'),
    enc('integer:Infinity', 'Infinity'),
    enc('integer:-Infinity', '-Infinity'),
    enc('integer:NaN', 'NaN'),
    enc('integer:1e309', '1e309'),
    enc('integer:400-nines', '9'.repeat(400)),
    enc('integer:2^53', '9007199254740992'),
    enc('integer:2^64', '18446744073709551616'),
    enc('integer:binary', '0b1'),
    enc('integer:octal', '0o7'),
    enc('integer:underscore', '1_0'),
    enc('integer:bigint-suffix', '5n'),
    enc('integer:arabic-digit', '٣'),
    enc('integer:fullwidth-digit', '５'),
    enc('integer:leading-zero', '007'),
    enc('integer:below-min', String(min - 1)),
    enc('integer:min', String(min)),
    ...(max !== undefined ? [enc('integer:above-max', String(max + 1)), enc('integer:max', String(max))] : []),
    enc('integer:list', '1,2'),
    enc('integer:true', 'true'),
  ];
}

const members = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i)).join(',');

function idListHostile(s: S): Omit<PV, 'validity'>[] {
  const max = s['x-list-max'] ?? 1000;
  return [
    enc('idlist:2^53', '9007199254740992'),
    enc('idlist:2^53+1', '9007199254740993'),
    enc('idlist:2^53-1', '9007199254740991'),
    enc('idlist:18-nines', '9'.repeat(18)),
    enc('idlist:2^64', '18446744073709551616'),
    enc('idlist:400-nines', '9'.repeat(400)),
    enc('idlist:zero', '0'),
    enc('idlist:negative', '-1'),
    enc('idlist:hex', '0x10'),
    enc('idlist:exponent', '1e3'),
    enc('idlist:fraction', '1.0'),
    enc('idlist:empty-member', '1,,2'),
    enc('idlist:leading-comma', ',1'),
    enc('idlist:trailing-comma', '1,'),
    enc('idlist:space', '1, 2'),
    enc('idlist:semicolon', '1;2'),
    enc('idlist:word', '1,2,abc'),
    enc('idlist:plus', '+1'),
    enc('idlist:mixed-big', '1,9007199254740993'),
    enc(
      'idlist:at-max',
      members(max, (i) => String(i + 1)),
    ),
    enc(
      'idlist:over-max',
      members(max + 1, (i) => String(i + 1)),
    ),
    enc(
      'idlist:10000-members',
      members(10_000, (i) => String(i + 1)),
    ),
    enc(
      'idlist:10000-same',
      members(10_000, () => '1'),
    ),
  ];
}

function enumListHostile(s: S): Omit<PV, 'validity'>[] {
  const values = enumOf(s['x-list'])!;
  const v = values[0]!;
  return [
    enc('enumlist:upper', v.toUpperCase() === v ? v.toLowerCase() : v.toUpperCase()),
    enc('enumlist:trailing-comma', `${v},`),
    enc('enumlist:leading-comma', `,${v}`),
    enc('enumlist:empty-member', `${v},,${v}`),
    enc('enumlist:space', `${v}, ${v}`),
    enc('enumlist:all', 'all'),
    enc('enumlist:equities', 'equities'),
    enc('enumlist:other', 'other'),
    enc('enumlist:unknown-member', `${v},bogus`),
    enc(
      'enumlist:lookalike',
      v.replace(/[a-z]/, (c) => String.fromCharCode(c.charCodeAt(0) + 0xfee0)),
    ),
    enc('enumlist:nul-suffix', `${v}\u0000`),
    enc('enumlist:all-members', values.join(',')),
    enc('enumlist:duplicates', `${v},${v}`),
    enc(
      'enumlist:10000-members',
      members(10_000, (i) => values[i % values.length]!),
    ),
  ];
}

function strListHostile(s: S): Omit<PV, 'validity'>[] {
  const max = s['x-list-max'] ?? 1000;
  return [
    enc('strlist:empty-member', 'a,,b'),
    enc('strlist:only-comma', ','),
    enc('strlist:trailing-comma', 'm-1,'),
    enc(
      'strlist:at-max',
      members(max, (i) => `m-${i + 1}`),
    ),
    enc(
      'strlist:over-max',
      members(max + 1, (i) => `m-${i + 1}`),
    ),
    enc(
      'strlist:10000-members',
      members(10_000, (i) => `m${i}`),
    ),
    enc('strlist:long-member', 'm'.repeat(5000)),
  ];
}

function enumHostile(s: S): Omit<PV, 'validity'>[] {
  const values = enumOf(s)!;
  const v = values[0]!;
  return [
    enc('enum:upper', v.toUpperCase() === v ? v.toLowerCase() : v.toUpperCase()),
    enc('enum:list', values.slice(0, 2).join(',')),
    enc('enum:space', ` ${v}`),
    enc('enum:unknown', 'bogus'),
    enc('enum:nul-suffix', `${v}\u0000`),
    enc('enum:member', v),
  ];
}

function dateTimeHostile(now: number): Omit<PV, 'validity'>[] {
  const base = new Date(now).toISOString();
  return [
    enc('datetime:feb-30', '2026-02-30T00:00:00Z'),
    enc('datetime:feb-29-non-leap', '2025-02-29T00:00:00Z'),
    enc('datetime:leap-second', '2016-12-31T23:59:60Z'),
    enc('datetime:year-0', '0000-01-01T00:00:00Z'),
    enc('datetime:year-2300', '2300-01-01T00:00:00Z'),
    enc('datetime:year-9999', '9999-12-31T23:59:59Z'),
    enc('datetime:before-1970', '1969-12-31T23:59:59Z'),
    enc('datetime:offset-before-1970', '1970-01-01T00:00:00+01:00'),
    enc('datetime:offset-after-2299', '2299-12-31T23:59:59-01:00'),
    enc('datetime:no-zone', '2026-01-01T00:00:00'),
    enc('datetime:hour-24', '2026-01-01T24:00:00Z'),
    enc('datetime:month-13', '2026-13-01T00:00:00Z'),
    enc('datetime:day-0', '2026-01-00T00:00:00Z'),
    enc('datetime:minute-60', '2026-01-01T00:60:00Z'),
    enc('datetime:offset-24', '2026-01-01T00:00:00+24:00'),
    enc('datetime:offset-no-colon', '2026-01-01T00:00:00+0100'),
    enc('datetime:date-only', '2026-01-01'),
    enc('datetime:space-separator', '2026-01-01 00:00:00Z'),
    enc('datetime:lowercase', '2026-01-01t00:00:00z'),
    enc('datetime:expanded-year', '+002026-01-01T00:00:00Z'),
    enc('datetime:negative-year', '-000001-01-01T00:00:00Z'),
    enc('datetime:10-fraction-digits', '2026-01-01T00:00:00.1234567891Z'),
    enc('datetime:epoch-number', '1700000000'),
    enc('datetime:word-now', 'now'),
    enc('datetime:js-date-string', new Date(now).toString()),
    enc('datetime:trailing-nul', `${base}\u0000`),
    enc('datetime:trailing-space', `${base} `),
    enc('datetime:single-digit', '2026-1-1T0:0:0Z'),
    enc('datetime:min', '1970-01-01T00:00:00Z'),
    enc('datetime:max', '2299-12-31T23:59:59.999Z'),
    raw('datetime:plus-offset-raw', '2026-01-01T00:00:00+01:00'),
  ];
}

function booleanHostile(): Omit<PV, 'validity'>[] {
  return [
    enc('boolean:upper', 'TRUE'),
    enc('boolean:one', '1'),
    enc('boolean:yes', 'yes'),
    enc('boolean:list', 'true,false'),
    enc('boolean:true', 'true'),
  ];
}

/** Hostile values for one property: the per-type ones and the general ones, judged by the oracle. */
export function hostileValues(name: string, s: S, now: number): PV[] {
  const kind = kindOf(name, s);
  const specific =
    kind === 'integer' || kind === 'number'
      ? integerHostile(s)
      : kind === 'idlist'
        ? idListHostile(s)
        : kind === 'enumlist'
          ? enumListHostile(s)
          : kind === 'strlist'
            ? strListHostile(s)
            : kind === 'enum'
              ? enumHostile(s)
              : kind === 'datetime'
                ? dateTimeHostile(now)
                : kind === 'boolean'
                  ? booleanHostile()
                  : kind === 'watermark'
                    ? [
                        enc('watermark:number', '12345'),
                        enc('watermark:negative', '-1'),
                        enc('watermark:forged', 'eyJrIjpbMV19.AAAAAAAAAAAAAAAAAAAAAA'),
                        enc('watermark:dots', 'a.b.c'),
                      ]
                    : [
                        enc('text:201-chars', 'a'.repeat((s.maxLength ?? 200) + 1)),
                        enc('text:max-chars', 'a'.repeat(s.maxLength ?? 200)),
                        enc('text:astral-at-max', '😀'.repeat(s.maxLength ?? 200)),
                      ];
  return [...specific, ...generic()].map((v) => judgeWire(name, s, v));
}

export const HOSTILE_NAMES: Omit<PV, 'validity'>[] = [
  enc('name:unknown', 'foo'),
  enc('name:case', 'LIMIT'),
  enc('name:brackets', 'limit[]'),
  enc('name:dotted', 'a.b'),
  enc('name:proto', '__proto__'),
  enc('name:constructor', 'constructor'),
  enc('name:toString', 'toString'),
  enc('name:space', ' '),
  enc('name:nul', '\u0000'),
  enc('name:long', 'n'.repeat(300)),
  enc('name:sql', "'; DROP TABLE x; --"),
  enc('name:trailing-space', 'limit '),
  raw('name:pct-ff', '%FF'),
  raw('name:pct-bare', '%'),
  enc('name:unicode', 'ｌimit'),
  enc('name:nul-suffix', 'limit\u0000'),
  enc('name:equals-inside', 'a=b'),
  enc('name:ampersand-inside', 'a&b'),
];

/** A real parameter name written with percent-escapes: the server must see the plain name. */
export const encodeName = (name: string): string =>
  [...name].map((ch) => `%${ch.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`).join('');

export { DAY };
