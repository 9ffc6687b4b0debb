import fc from 'fast-check';
import Type from 'typebox';
import { Compile } from 'typebox/compile';
import { OPERATIONS, type Operation, type Version } from '../../apps/registry.ts';
import { EXPORT_CONTENT_TYPES } from '../../schemas/api/exports.ts';
import { type RawRequest, type RawResponse, rawRequest } from './client.ts';
import { ACCOUNTS, type AccountName, type AccountSpec, type FuzzServer, startFuzzServer } from './server.ts';
import { DAY, enc, encodeName, enumOf, HOSTILE_NAMES, hostileValues, type IdPools, kindOf, type PV, type S, validArb } from './values.ts';

/**
 * The schema-driven fuzz suite (DESIGN section 8). Every (version, operation) route of the
 * registry is fuzzed: valid values come from each query property's schema, hostile ones per type
 * and in general (values.ts), cursors from the server itself. Properties checked on every answer
 * are listed in PROPERTIES. Used by `fuzz.test.ts` (fixed seed, bounded) and `run.ts` (long runs).
 */

export const PROPERTIES = {
  answered: 'the server answers with a parseable HTTP response',
  'no-5xx': 'status < 500',
  envelope: 'body is the success envelope (2xx) or the error envelope (4xx) with requestId = x-request-id',
  'response-schema': "every 200 body validates against the operation's response schema",
  'invalid-param': 'exactly one invalid query parameter: 400 VALIDATION_ERROR with a details entry naming it',
  'invalid-cursor': 'a malformed, tampered or foreign cursor: 400 INVALID_CURSOR',
  'expected-status': 'status (and code / Allow header) the DESIGN prescribes: 401, 403, 404, 405, 414, 400 for bad encoding',
  'valid-accepted': 'a request whose parameters are all valid is not refused with 400',
  'history-window': 'no row of a history-windowed account is older than serverTime - window',
} as const;
export type Property = keyof typeof PROPERTIES;

/**
 * URL length above which a 414 URI_TOO_LONG is required; up to SAFE_URL the normal rules apply, in
 * between either answer is accepted. DESIGN 6 gives no number: valid queries reach ~17 kB (1,000 ids
 * of 16 digits), so a limit must sit above that; 32 KiB is the server's stated limit.
 */
export const LONG_URL = 32 * 1024;
export const SAFE_URL = 8 * 1024;
export const METHODS = ['POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'] as const;

// ------------------------------------------------------------------------------------------------
// Routes from the registry

export interface QParam {
  name: string;
  nameWire: string;
  value: PV | null;
}

export interface Route {
  key: string;
  version: Version;
  op: Operation;
  target: string;
  props: Record<string, S>;
  names: string[];
  required: Set<string>;
  historical: boolean;
  /** Paths to date-time fields of a result row (for the history-window property). */
  datePaths: string[][];
  check: (body: unknown) => boolean;
  errors: (body: unknown) => string;
  /** Filter sets used to obtain real cursors (index 0: only the required parameters). */
  filterSets: QParam[][];
  /** An export (issue 28): a 200 is a stream of rows in the asked format, not an envelope; `check` judges one NDJSON row. */
  stream?: boolean;
}

function datePathsOf(s: S | undefined, prefix: string[] = [], depth = 0): string[][] {
  if (!s || depth > 4) return [];
  if (s.type === 'string' && s.format === 'date-time') return [prefix];
  const alts = s.anyOf ?? s.oneOf;
  if (Array.isArray(alts)) return alts.flatMap((a: S) => datePathsOf(a, prefix, depth + 1));
  if (s.type === 'object' && s.properties)
    return Object.entries(s.properties as Record<string, S>).flatMap(([k, v]) => datePathsOf(v, [...prefix, k], depth + 1));
  return [];
}

const param = (name: string, value: PV | null): QParam => ({ name, nameWire: encodeURIComponent(name), value });

/**
 * A valid value of a parameter. `unlikeDefault`: not the schema's default (a filter set that only
 * spells out a default is the same filters, so a cursor must carry over to it).
 */
function benignValue(name: string, s: S, pools: IdPools, now: number, unlikeDefault = false): PV | null {
  // A long-poll's `wait` holds a since-poll (issue 28): no filter of its own (without since, a 400).
  if (name === 'wait') return null;
  const kind = kindOf(name, s);
  const v = (x: string): PV => ({ ...enc(`${kind}:benign`, x), validity: 'valid' });
  switch (kind) {
    case 'enumlist':
      return v(enumOf(s['x-list'])![0]!);
    case 'enum':
      return v(enumOf(s)!.find((x) => !unlikeDefault || x !== s.default)!);
    case 'idlist': {
      const n = name.toLowerCase();
      const ids = n.includes('trader')
        ? pools.traderIds
        : n.includes('asset')
          ? pools.assetIds
          : n.includes('position')
            ? pools.positionIds
            : pools.traderIds;
      return v(ids.slice(0, Math.min(ids.length, s['x-list-max'] ?? 200)).join(','));
    }
    case 'strlist':
      return v(pools.messageIds.slice(0, Math.min(pools.messageIds.length, s['x-list-max'] ?? 200)).join(','));
    case 'datetime':
      return v(new Date(name.toLowerCase().includes('end') ? now - DAY : now - 100 * DAY).toISOString());
    case 'boolean':
      return v('true');
    case 'integer':
    case 'number': {
      const x = typeof s.default === 'number' ? s.default : (s.minimum ?? 0);
      return v(String(unlikeDefault && x === s.default ? x + 1 : x));
    }
    case 'text':
      return s.maxLength !== undefined ? v('a') : null;
    case 'cursor':
      return null;
    case 'watermark':
      return null; // a since-poll answers with a watermark, not a page cursor
  }
}

/** A route's check of a body against a compiled schema, and the first three errors when it fails. */
function checks(v: { Check(b: unknown): boolean; Errors(b: unknown): unknown }): Pick<Route, 'check' | 'errors'> {
  return {
    check: (b) => v.Check(b),
    errors: (b) =>
      [...(v.Errors(b) as Iterable<{ instancePath: string; message: string }>)]
        .slice(0, 3)
        .map((e) => `${e.instancePath || '/'} ${e.message}`)
        .join('; '),
  };
}

export function routesOf(pools: IdPools, now: number, operations: readonly Operation[] = OPERATIONS): Route[] {
  const routes: Route[] = [];
  for (const op of operations) {
    const props = ((op.query as S).properties ?? {}) as Record<string, S>;
    const required = new Set<string>(((op.query as S).required ?? []) as string[]);
    const names = Object.keys(props);
    const resp = op.response as S;
    const meta = resp.properties?.data?.properties?.meta;
    const item = resp.properties?.data?.properties?.results?.items;
    const validator = Compile(op.response);
    const base = [...required].map((n) => param(n, benignValue(n, props[n]!, pools, now))).filter((p) => p.value);
    const filterSets: QParam[][] = [base];
    // One filter set per kind of parameter (list of ids, list of members, date-time, ...), at most 4 in all.
    const kinds = new Set<string>();
    for (const n of names) {
      if (filterSets.length >= 5) break;
      const kind = kindOf(n, props[n]!);
      if (n === 'limit' || kind === 'cursor' || required.has(n) || kinds.has(kind)) continue;
      const value = benignValue(n, props[n]!, pools, now, true);
      if (value) {
        kinds.add(kind);
        filterSets.push([...base, param(n, value)]);
      }
    }
    if (op.export) {
      const ex = op.export;
      const exProps = ((ex.query as S).properties ?? {}) as Record<string, S>;
      const row = Compile(Type.Object({ ...(ex.item as S).properties, resumeToken: Type.String({ minLength: 1 }) }));
      routes.push({
        key: `v2${ex.path}`,
        version: 'v2',
        op,
        target: `/v2${ex.path}`,
        props: exProps,
        names: Object.keys(exProps),
        required: new Set<string>(((ex.query as S).required ?? []) as string[]),
        historical: false,
        datePaths: [],
        ...checks(row),
        filterSets: [base],
        stream: true,
      });
    }
    for (const version of op.versions) {
      routes.push({
        key: `${version}${op.path}`,
        version,
        op,
        target: `/${version}${op.path}`,
        props,
        names,
        required,
        historical: meta?.properties?.appliedTimeRange !== undefined,
        datePaths: datePathsOf(item),
        ...checks(validator),
        filterSets,
      });
    }
  }
  return routes;
}

// ------------------------------------------------------------------------------------------------
// Cases

export type CallerName = AccountName | 'none' | 'bad-key';

export type Expect =
  | { kind: 'any' }
  | { kind: 'accepted' }
  | { kind: 'invalid-param'; param: string }
  | { kind: 'invalid-cursor'; orValidation?: boolean }
  | { kind: 'status'; status: number[]; code?: string; allowGet?: boolean };

export interface FuzzCase {
  label: string;
  /** What else the case is about when its label names the dominant cause (e.g. the value that made a URL too long). */
  detail?: string;
  method: string;
  target: string;
  caller: CallerName;
  headers?: Record<string, string>;
  body?: string;
  route?: Route;
  expect: Expect;
}

export function queryString(params: readonly QParam[]): string {
  if (!params.length) return '';
  return `?${params.map((p) => (p.value === null ? p.nameWire : `${p.nameWire}=${p.value.wire}`)).join('&')}`;
}

const accountSpec = (name: CallerName): AccountSpec | undefined => ACCOUNTS.find((a) => a.name === name);

/** Whether an account may call a route at all (scope and visibility, DESIGN 7): otherwise 403 comes first. */
export function authorized(route: Route, caller: CallerName): boolean {
  const a = accountSpec(caller);
  if (!a) return false;
  if (a.scopes && !a.scopes.includes(route.op.scope)) return false;
  const none = (v: AccountSpec['messageVisibility']) => v.mode === 'none';
  const vis = route.op.visibility;
  if (vis === 'msg' && none(a.messageVisibility)) return false;
  if (vis === 'sig' && none(a.signalVisibility)) return false;
  if (vis === 'either' && none(a.messageVisibility) && none(a.signalVisibility)) return false;
  return true;
}

/**
 * The final expectation of a case: a too-long URL is 414 whatever else is wrong; a caller without a
 * valid key gets 401 and one without the scope or visibility 403, before any parameter is looked at.
 */
export function finalize(c: Omit<FuzzCase, 'expect'>, inner: Expect, params: readonly QParam[] = []): FuzzCase {
  const len = c.target.length;
  if (len > LONG_URL)
    return { ...c, label: 'url:over-32KiB', detail: c.label, expect: { kind: 'status', status: [414], code: 'URI_TOO_LONG' } };
  if (len > SAFE_URL) return { ...c, expect: { kind: 'any' } };
  if (!c.route || c.method !== 'GET') return { ...c, expect: inner };
  const wellEncoded =
    params.every((p) => p.value === null || p.value.decoded !== null) &&
    params.every((p) => {
      try {
        decodeURIComponent(p.nameWire);
        return true;
      } catch {
        return false;
      }
    });
  if (c.caller === 'none' || c.caller === 'bad-key') {
    return { ...c, expect: wellEncoded ? { kind: 'status', status: [401], code: 'UNAUTHORIZED' } : { kind: 'status', status: [400, 401] } };
  }
  if (!authorized(c.route, c.caller)) {
    return { ...c, expect: wellEncoded ? { kind: 'status', status: [403], code: 'FORBIDDEN' } : { kind: 'status', status: [400, 403] } };
  }
  // The feed's cursor and since are mutually exclusive (contract 4): a 400, whichever of them is checked first.
  if (params.some((p) => p.name === 'since' && p.value !== null) && params.some((p) => p.name === 'cursor'))
    return { ...c, expect: { kind: 'status', status: [400] } };
  // `wait` holds a since-poll (issue 28): without one, a 400.
  if (params.some((p) => p.name === 'wait') && !params.some((p) => p.name === 'since' && p.value !== null))
    return { ...c, expect: { kind: 'status', status: [400] } };
  return { ...c, expect: inner };
}

export interface CursorEntry {
  route: Route;
  caller: AccountName;
  filterIdx: number;
  page: number;
  cursor: string;
}

export interface FuzzContext {
  server: FuzzServer;
  routes: Route[];
  pool: CursorEntry[];
  now: number;
}

const callerArb: fc.Arbitrary<CallerName> = fc.oneof(
  { arbitrary: fc.constant<CallerName>('full'), weight: 8 },
  { arbitrary: fc.constant<CallerName>('restricted'), weight: 4 },
  { arbitrary: fc.constant<CallerName>('windowed'), weight: 4 },
  { arbitrary: fc.constant<CallerName>('narrow'), weight: 1 },
  { arbitrary: fc.constant<CallerName>('none'), weight: 1 },
  { arbitrary: fc.constant<CallerName>('bad-key'), weight: 1 },
);
/** Callers that reach parameter validation on most routes. */
const authorizedCallerArb: fc.Arbitrary<CallerName> = fc.oneof(
  { arbitrary: fc.constant<CallerName>('full'), weight: 2 },
  { arbitrary: fc.constant<CallerName>('restricted'), weight: 1 },
  { arbitrary: fc.constant<CallerName>('windowed'), weight: 1 },
);

/** Keeps startTime <= endTime among valid bounds, so that a combination of valid values stays valid. */
function orderWindow(params: QParam[]): QParam[] {
  const s = params.find((p) => p.name === 'startTime');
  const e = params.find((p) => p.name === 'endTime');
  if (s?.value?.decoded && e?.value?.decoded && Date.parse(s.value.decoded) > Date.parse(e.value.decoded)) {
    return params.map((p) => (p === s ? { ...s, value: e.value } : p === e ? { ...e, value: s.value } : p));
  }
  return params;
}

function baseArb(ctx: FuzzContext, route: Route): fc.Arbitrary<QParam[]> {
  // Cursors and resume tokens come from the server (cursor cases), never from the generator.
  const names = route.names.filter((n) => n !== 'cursor' && n !== 'resume');
  if (!names.length) return fc.constant([]);
  const pools = ctx.server;
  return fc
    .tuple(
      ...names.map((n) => {
        const v = validArb(n, route.props[n]!, pools, ctx.now);
        return route.required.has(n) ? v : fc.oneof({ arbitrary: fc.constant(null), weight: 7 }, { arbitrary: v, weight: 3 });
      }),
    )
    .map((vals) => orderWindow(vals.flatMap((v, i) => (v ? [param(names[i]!, v)] : []))));
}

const isBound = (n: string) => n === 'startTime' || n === 'endTime';

/** Drops endTime when both bounds are readable and reversed (a combination of valid values must stay valid). */
function fixWindow(params: QParam[]): QParam[] {
  const s = params.find((p) => p.name === 'startTime');
  const e = params.find((p) => p.name === 'endTime');
  if (!s?.value?.decoded || !e?.value?.decoded || s.value.validity === 'invalid' || e.value.validity === 'invalid') return params;
  const a = Date.parse(s.value.decoded);
  const b = Date.parse(e.value.decoded);
  return Number.isFinite(a) && Number.isFinite(b) && a > b ? params.filter((p) => p !== e) : params;
}

function withParam(params: QParam[], p: QParam): QParam[] {
  const out = [...params.filter((x) => x.name !== p.name), p];
  if (p.value === null && isBound(p.name)) return out.filter((x) => x === p || !isBound(x.name));
  return fixWindow(out);
}

function make(route: Route, caller: CallerName, label: string, params: QParam[], inner: Expect): FuzzCase {
  return finalize({ label, method: 'GET', target: route.target + queryString(params), caller, route }, inner, params);
}

const hostileMemo = new WeakMap<Route, Map<string, PV[]>>();
function hostileOf(ctx: FuzzContext, route: Route, name: string): PV[] {
  let m = hostileMemo.get(route);
  if (!m) hostileMemo.set(route, (m = new Map()));
  let v = m.get(name);
  if (!v) m.set(name, (v = hostileValues(name, route.props[name]!, ctx.now)));
  return v;
}

/** Request ids a client may send: the server keeps a safe one and replaces the others, and always echoes it. */
const REQUEST_IDS = ['abc-123', 'a'.repeat(129), 'a b', '<script>', '../../etc', 'id\u00e9', '', '"quoted"', 'x'.repeat(5000), 'a,b'];

/** All parameters valid (sometimes with a client-chosen x-request-id). */
function validCase(ctx: FuzzContext, route: Route): fc.Arbitrary<FuzzCase> {
  return fc.tuple(baseArb(ctx, route), callerArb, fc.option(fc.constantFrom(...REQUEST_IDS), { freq: 4 })).map(([params, caller, rid]) => {
    const c = make(route, caller, rid === null ? 'valid' : 'valid+x-request-id', params, { kind: 'accepted' });
    return rid === null ? c : { ...c, headers: { 'x-request-id': rid } };
  });
}

/** Valid parameters and one hostile value: its verdict decides the expectation. */
function hostileCase(ctx: FuzzContext, route: Route): fc.Arbitrary<FuzzCase> {
  const names = route.names.filter((n) => n !== 'cursor');
  if (!names.length) return validCase(ctx, route);
  const perName = new Map(names.map((n) => [n, hostileOf(ctx, route, n)]));
  return fc
    .tuple(
      baseArb(ctx, route),
      fc.constantFrom(...names).chain((n) => fc.tuple(fc.constant(n), fc.constantFrom(...perName.get(n)!))),
      fc.oneof({ arbitrary: authorizedCallerArb, weight: 9 }, { arbitrary: callerArb, weight: 1 }),
    )
    .map(([base, [name, value], caller]) => {
      return make(route, caller, value.label, withParam(base, param(name, value)), verdictExpect(value, name));
    });
}

/** Parameter names and shapes: unknown, repeated, empty, without `=`. */
interface Shape {
  label: string;
  params: (base: QParam[]) => QParam[];
  tail?: string;
  expect: Expect;
}

function verdictExpect(v: PV | undefined, name: string): Expect {
  // A `since` that is neither 0 nor a watermark the server signed for these filters and this caller.
  if ((name === 'since' || name === 'resume') && v?.validity === 'unknown' && v.decoded !== null)
    return { kind: 'invalid-cursor', orValidation: true };
  return v?.validity === 'invalid'
    ? { kind: 'invalid-param', param: name }
    : v?.validity === 'valid'
      ? { kind: 'accepted' }
      : { kind: 'any' };
}

function shapeCase(ctx: FuzzContext, route: Route): fc.Arbitrary<FuzzCase> {
  const names = route.names.filter((n) => n !== 'cursor');
  const one: PV = { ...enc('v', '1'), validity: 'valid' };
  const variants: fc.Arbitrary<Shape>[] = [
    fc
      .constantFrom(...HOSTILE_NAMES)
      .filter((n) => n.decoded === null || !route.names.includes(n.decoded))
      .map(
        (n): Shape => ({
          label: n.label,
          params: (b) => [...b, { name: n.decoded ?? n.wire, nameWire: n.wire, value: one }],
          expect: n.decoded === null ? { kind: 'status', status: [400] } : { kind: 'invalid-param', param: n.decoded },
        }),
      ),
    // The parameter's name is the empty string: the details name it as such.
    fc
      .constantFrom('=1', '=', '&&=', '&=x', '=1&=2')
      .map((tail): Shape => ({ label: `name:empty(${tail})`, params: (b) => b, tail, expect: { kind: 'invalid-param', param: '' } })),
  ];
  if (names.length) {
    variants.push(
      fc
        .constantFrom(...names)
        .chain((n) =>
          fc.tuple(fc.constant(n), validArb(n, route.props[n]!, ctx.server, ctx.now), validArb(n, route.props[n]!, ctx.server, ctx.now)),
        )
        .map(
          ([n, a, b]): Shape => ({
            label: 'name:repeated',
            params: (base) => [...base.filter((p) => p.name !== n && !(isBound(n) && isBound(p.name))), param(n, a), param(n, b)],
            expect: { kind: 'invalid-param', param: n },
          }),
        ),
    );
    variants.push(
      fc
        .constantFrom(...names)
        .chain((n) => fc.tuple(fc.constant(n), validArb(n, route.props[n]!, ctx.server, ctx.now)))
        .map(
          ([n, v]): Shape => ({
            label: 'name:percent-encoded',
            params: (base) => withParam(base, { name: n, nameWire: encodeName(n), value: v }),
            expect: verdictExpect(v, n),
          }),
        ),
    );
    variants.push(
      fc.constantFrom(...names).map(
        (n): Shape => ({
          label: 'name:no-equals',
          params: (base) => withParam(base, param(n, null)),
          expect: verdictExpect(
            hostileOf(ctx, route, n).find((x) => x.label === 'any:empty'),
            n,
          ),
        }),
      ),
    );
  }
  return fc.tuple(baseArb(ctx, route), fc.oneof(...variants), authorizedCallerArb).map(([base, shape, caller]) => {
    const params = shape.params(base);
    let target = route.target + queryString(params);
    if (shape.tail !== undefined) target += (params.length ? '&' : '?') + shape.tail;
    return finalize({ label: shape.label, method: 'GET', target, caller, route }, shape.expect, params);
  });
}

/** Several hostile values at once: at least one of them invalid means a 400. */
function multiCase(ctx: FuzzContext, route: Route): fc.Arbitrary<FuzzCase> {
  const names = route.names.filter((n) => n !== 'cursor');
  if (names.length < 2) return hostileCase(ctx, route);
  const all = names.flatMap((n) => hostileOf(ctx, route, n).map((v) => param(n, v)));
  return fc
    .tuple(
      baseArb(ctx, route),
      fc.uniqueArray(fc.constantFrom(...all), { minLength: 2, maxLength: 4, selector: (p) => p.name }),
      authorizedCallerArb,
    )
    .map(([base, hs, caller]) => {
      let params = base;
      for (const h of hs) params = withParam(params, h);
      const anyInvalid = hs.some((h) => h.value?.validity === 'invalid');
      const allValid = params.every((p) => p.value?.validity === 'valid');
      const label = `multi:${hs
        .map((h) => h.value!.label.split(':')[0])
        .sort()
        .join('+')}`;
      return make(
        route,
        caller,
        label,
        params,
        anyInvalid ? { kind: 'status', status: [400] } : allValid ? { kind: 'accepted' } : { kind: 'any' },
      );
    });
}

// Cursors ---------------------------------------------------------------------------------------

const members = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i)).join(',');
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
const b64 = (s: string) => Buffer.from(s).toString('base64url');

const SYNTHETIC_CURSORS: [string, string][] = [
  ['cursor:json-k-zzz', b64('{"k":[1,"zzz"]}')],
  ['cursor:json-k-empty', b64('{"k":[]}')],
  ['cursor:json-k-2^64', b64('{"k":[18446744073709551616,1],"f":"x"}')],
  ['cursor:json-k-negative-fraction', b64('{"k":[-1.5,"a"],"w":[null,null]}')],
  ['cursor:json-k-1e309', b64('{"k":[1e309,1]}')],
  ['cursor:json-w-nan', b64('{"k":[1,1],"w":["NaN",0]}')],
  ['cursor:json-w-wide', b64('{"k":[9999999999999,1],"w":[0,99999999999999]}')],
  ['cursor:json-null', b64('null')],
  ['cursor:json-array', b64('[]')],
  ['cursor:json-string', b64('"x"')],
  ['cursor:json-empty-object', b64('{}')],
  ['cursor:json-proto', b64('{"__proto__":{"k":[1]},"k":[1]}')],
  ['cursor:json-deep', b64(`${'['.repeat(5000)}${']'.repeat(5000)}`)],
  ['cursor:malformed-chars', '!!!'],
  ['cursor:malformed-dollar', 'abc$'],
  ['cursor:malformed-padding', '===='],
  ['cursor:malformed-one-char', 'a'],
  ['cursor:malformed-std-alphabet', Buffer.from('{"k":[1,"\u00ff\u00fe"]}', 'latin1').toString('base64')],
  ['cursor:malformed-nuls', 'AAAA'],
  ['cursor:malformed-dot', '.'],
  ['cursor:malformed-dots', 'a.b.c'],
];

/** Edits of the JSON inside a real cursor (whatever segment of it decodes to a JSON object). */
function editedCursors(cursor: string): [string, string][] {
  const out: [string, string][] = [];
  const segs = cursor.split('.');
  segs.forEach((seg, i) => {
    let obj: any;
    try {
      obj = JSON.parse(Buffer.from(seg, 'base64url').toString('utf8'));
    } catch {
      return;
    }
    if (!obj || typeof obj !== 'object' || Array.isArray(obj)) return;
    const edits: [string, (o: any) => void][] = [
      [
        'k-zzz',
        (o) => {
          o.k = [1, 'zzz'];
        },
      ],
      [
        'k-empty',
        (o) => {
          o.k = [];
        },
      ],
      [
        'k-2^64',
        (o) => {
          o.k = [2 ** 64, 1];
        },
      ],
      [
        'k-negative',
        (o) => {
          o.k = Array.isArray(o.k) ? o.k.map((x: unknown) => (typeof x === 'number' ? -1.5 : x)) : [-1.5];
        },
      ],
      [
        'k-older',
        (o) => {
          o.k = Array.isArray(o.k) ? o.k.map((x: unknown) => (typeof x === 'number' ? x - 1 : x)) : [1];
        },
      ],
      [
        'w-wide',
        (o) => {
          o.w = [0, Date.now()];
        },
      ],
      [
        'w-null',
        (o) => {
          o.w = [null, null];
        },
      ],
      [
        'w-reversed',
        (o) => {
          o.w = [Date.now(), 0];
        },
      ],
      [
        'drop-all-but-k',
        (o) => {
          for (const key of Object.keys(o)) if (key !== 'k') delete o[key];
        },
      ],
      [
        'extra-field',
        (o) => {
          o.zz = 1;
        },
      ],
      [
        'fingerprint',
        (o) => {
          for (const key of Object.keys(o)) if (typeof o[key] === 'string') o[key] = `${o[key]}x`;
        },
      ],
    ];
    for (const [name, edit] of edits) {
      const copy = JSON.parse(JSON.stringify(obj));
      edit(copy);
      if (JSON.stringify(copy) === JSON.stringify(obj)) continue;
      const next = [...segs];
      next[i] = b64(JSON.stringify(copy));
      out.push([`cursor:edited-${name}`, next.join('.')]);
    }
  });
  return out;
}

function flip(cursor: string, at: number, by: number): string {
  if (cursor.length < 2) return `${cursor}A`;
  const i = at % (cursor.length - 1); // never the last character: its low bits may be padding
  const c = cursor[i]!;
  const idx = B64.indexOf(c);
  const next = idx < 0 ? 'A' : B64[(idx + 1 + (by % 63)) % 64]!;
  return cursor.slice(0, i) + next + cursor.slice(i + 1);
}

function cursorCase(ctx: FuzzContext, route: Route): fc.Arbitrary<FuzzCase> {
  if (!route.names.includes('cursor')) return shapeCase(ctx, route);
  const mine = ctx.pool.filter((e) => e.route === route);
  const others = ctx.pool.filter((e) => e.route.op.tool !== route.op.tool);
  const siblings = ctx.pool.filter((e) => e.route.op.tool === route.op.tool && e.route !== route);
  const limitArb = route.names.includes('limit')
    ? fc.option(
        validArb('limit', route.props.limit!, ctx.server, ctx.now).map((v) => param('limit', v)),
        { nil: undefined },
      )
    : fc.constant(undefined);
  const cur = (c: string, label: string): QParam =>
    param('cursor', { label, wire: encodeURIComponent(c), decoded: c, validity: 'unknown' });
  const build = (caller: CallerName, filters: QParam[], limit: QParam | undefined, c: QParam, inner: Expect) =>
    make(route, caller, c.value!.label, [...filters, ...(limit ? [limit] : []), c], inner);
  const invalid: Expect = { kind: 'invalid-cursor' };
  const variants: fc.Arbitrary<FuzzCase>[] = [
    fc
      .tuple(fc.constantFrom(...SYNTHETIC_CURSORS), authorizedCallerArb, limitArb)
      .map(([[label, c], caller, limit]) => build(caller, route.filterSets[0]!, limit, cur(c, label), invalid)),
    fc
      .tuple(
        authorizedCallerArb,
        fc.constantFrom<[string, string]>(
          ['cursor:empty', ''],
          ['cursor:100kB', 'A'.repeat(100_000)],
          ['cursor:40kB-json', b64(`{"k":[1,"${'z'.repeat(30_000)}"]}`)],
        ),
      )
      .map(([caller, [label, c]]) =>
        build(caller, route.filterSets[0]!, undefined, cur(c, label), { kind: 'invalid-cursor', orValidation: true }),
      ),
  ];
  if (mine.length) {
    const entry = fc.constantFrom(...mine);
    variants.push(
      fc
        .tuple(entry, limitArb)
        .map(([e, limit]) => build(e.caller, route.filterSets[e.filterIdx]!, limit, cur(e.cursor, 'cursor:real'), { kind: 'accepted' })),
      fc
        .tuple(entry, fc.nat(), fc.nat())
        .map(([e, at, by]) =>
          build(e.caller, route.filterSets[e.filterIdx]!, undefined, cur(flip(e.cursor, at, by), 'cursor:flipped-char'), invalid),
        ),
      entry.chain((e) => {
        const edits = editedCursors(e.cursor);
        return edits.length
          ? fc
              .constantFrom(...edits)
              .map(([label, c]) => build(e.caller, route.filterSets[e.filterIdx]!, undefined, cur(c, label), invalid))
          : fc.constant(build(e.caller, route.filterSets[e.filterIdx]!, undefined, cur(`${e.cursor}x`, 'cursor:appended-char'), invalid));
      }),
      fc
        .tuple(entry, fc.constantFrom(...ACCOUNTS.map((a) => a.name)))
        .filter(([e, b]) => b !== e.caller && authorized(route, b))
        .map(([e, b]) =>
          build(b, route.filterSets[e.filterIdx]!, undefined, cur(e.cursor, `cursor:other-account(${e.caller}->${b})`), invalid),
        ),
    );
    if (route.filterSets.length > 1) {
      variants.push(
        fc.tuple(entry, fc.nat()).map(([e, j]) => {
          const k = (e.filterIdx + 1 + (j % (route.filterSets.length - 1))) % route.filterSets.length;
          return build(e.caller, route.filterSets[k]!, undefined, cur(e.cursor, 'cursor:other-filters'), invalid);
        }),
      );
    }
  }
  if (others.length) {
    variants.push(
      fc.constantFrom(...others).map((e) => {
        const caller = authorized(route, e.caller) ? e.caller : 'full';
        return build(caller, route.filterSets[0]!, undefined, cur(e.cursor, 'cursor:other-operation'), invalid);
      }),
    );
  }
  if (siblings.length) {
    // Same operation, other version: the DESIGN leaves open whether it is accepted.
    variants.push(
      fc
        .constantFrom(...siblings)
        .filter((e) => e.filterIdx < route.filterSets.length)
        .map((e) => build(e.caller, route.filterSets[e.filterIdx]!, undefined, cur(e.cursor, 'cursor:other-version'), { kind: 'any' })),
    );
  }
  return fc.oneof(...variants);
}

// HTTP-level -------------------------------------------------------------------------------------

function httpCase(ctx: FuzzContext, route: Route): fc.Arbitrary<FuzzCase> {
  return fc.oneof(
    fc.tuple(fc.constantFrom(...METHODS), baseArb(ctx, route)).map(([m, params]) => methodCase(route, m, queryString(params))),
    fc.tuple(fc.nat(), fc.constantFrom('%', '%zz', '%FF', '%C0%AF', '%E2%82', '%ED%A0%80')).map(([at, bad]) => {
      const pos = 1 + (at % (route.target.length - 1));
      const target = route.target.slice(0, pos) + bad + route.target.slice(pos);
      return {
        label: `path:bad-percent(${bad})`,
        method: 'GET',
        target,
        caller: 'full' as const,
        expect: { kind: 'status', status: [400] } as Expect,
      };
    }),
    fc.constantFrom('/', '/x', '//', '/extra').map((suffix) => ({
      label: 'path:unknown',
      method: 'GET',
      target: route.target + suffix,
      caller: 'full' as const,
      expect: { kind: 'status', status: [404], code: 'NOT_FOUND' } as Expect,
    })),
  );
}

function methodCase(route: Route, m: string, query = ''): FuzzCase {
  const withBody = m === 'POST' || m === 'PUT' || m === 'PATCH';
  return {
    label: `method:${m}`,
    method: m,
    target: route.target + query,
    caller: 'full',
    route,
    ...(withBody ? { headers: { 'Content-Type': 'application/json' }, body: '{"limit":1}' } : {}),
    expect: { kind: 'status', status: [405], code: m === 'HEAD' ? undefined : 'METHOD_NOT_ALLOWED', allowGet: true },
  };
}

/** The generated cases: fast-check arbitraries over every route of the registry. */
export function caseArbitrary(ctx: FuzzContext): fc.Arbitrary<FuzzCase> {
  // Built once per route (the hostile value tables are large), then picked per case.
  const perRoute = ctx.routes.map((route) =>
    fc.oneof(
      { arbitrary: validCase(ctx, route), weight: 3 },
      { arbitrary: hostileCase(ctx, route), weight: 12 },
      { arbitrary: shapeCase(ctx, route), weight: 3 },
      { arbitrary: multiCase(ctx, route), weight: 2 },
      { arbitrary: cursorCase(ctx, route), weight: 5 },
      { arbitrary: httpCase(ctx, route), weight: 1 },
    ),
  );
  return fc.oneof(...perRoute);
}

/** Fixed HTTP-level cases, run once per run. */
export function fixedCases(ctx: FuzzContext): FuzzCase[] {
  const out: FuzzCase[] = [];
  for (const route of ctx.routes) for (const m of METHODS) out.push(methodCase(route, m));
  const any = ctx.routes[0]!;
  const s = (label: string, target: string, status: number[], extra: Partial<FuzzCase> = {}, code?: string): FuzzCase => ({
    label,
    method: 'GET',
    target,
    caller: 'full',
    expect: { kind: 'status', status, ...(code ? { code } : {}) },
    ...extra,
  });
  const known = new Set(ctx.routes.map((r) => r.target));
  for (const t of [
    '/v2/%ff',
    '/v2/events%',
    '/v2/%zz',
    '/v2/%',
    '/%',
    '/v1/events%2',
    '/v2/%C0%AF',
    '/v2/events/%E2%82',
    `${any.target}%FF`,
  ])
    out.push(s('path:bad-percent', t, [400]));
  out.push(s('path:pct-nul', '/v2/ev%00ents', [400, 404]));
  for (const t of [
    '/v2/nope',
    '/v3/events',
    '/v2/events/1',
    '/v2/EVENTS',
    '/',
    '/v2',
    '/v2/',
    '/v2/events/',
    '//v2/events',
    '/v0/assets',
    '/v2/healthz/x',
  ]) {
    if (!known.has(t)) out.push(s('path:unknown', t, [404], {}, 'NOT_FOUND'));
  }
  out.push({ ...s('path:unknown-post', '/v2/nope', [404, 405]), method: 'POST', body: '{}' });
  out.push(s('path:dot-segments', '/v2/events/../assets', [200, 400, 404]));
  out.push(s('path:matrix', `${any.target};x=1`, [200, 400, 404]));
  // URL length
  // Between SAFE_URL and LONG_URL: a 414 or the answer the request would get anyway.
  out.push(s('url:17kB-query', `/v2/assets?search=${'a'.repeat(17_000)}`, [400, 414]));
  out.push(s('url:20kB-path', `/v2/${'a'.repeat(20_000)}`, [404, 414]));
  out.push(s('url:24kB-many-params', `${any.target}?${'limit=1&'.repeat(3000)}`, [400, 414]));
  out.push(s('url:40kB-query', `/v2/assets?search=${'a'.repeat(40_000)}`, [414], {}, 'URI_TOO_LONG'));
  out.push(s('url:101kB-query', `/v2/assets?search=${'a'.repeat(101_000)}`, [414], {}, 'URI_TOO_LONG'));
  out.push(s('url:40kB-path', `/v2/${'a'.repeat(40_000)}`, [414], {}, 'URI_TOO_LONG'));
  out.push(s('url:70kB-many-params', `${any.target}?${'limit=1&'.repeat(9000)}`, [414], {}, 'URI_TOO_LONG'));
  out.push(
    s(
      'url:70kB-id-list',
      `/v2/events?traderIds=${members(10_000, (i) => String(i + 1))}&assetIds=${members(4000, (i) => String(i + 1))}`,
      [414],
      {},
      'URI_TOO_LONG',
    ),
  );
  out.push(s('url:101kB-no-key', `${any.target}?x=${'a'.repeat(101_000)}`, [414], { caller: 'none' }, 'URI_TOO_LONG'));
  out.push(s('url:300kB-query', `/v2/assets?search=${'a'.repeat(300_000)}`, [414], {}, 'URI_TOO_LONG'));
  out.push(s('url:1MB-path', `/v2/${'a'.repeat(1_000_000)}`, [414], {}, 'URI_TOO_LONG'));
  out.push(s('header:20kB-key', any.target, [401, 431], { caller: 'none', headers: { 'x-api-key': 'k'.repeat(20_000) } }));
  // DESIGN names no status for oversized headers; the answer must still be an envelope.
  out.push(s('header:300kB-key', any.target, [401, 414, 431], { caller: 'none', headers: { 'x-api-key': 'k'.repeat(300_000) } }));
  out.push(
    s('header:300kB-many', any.target, [401, 414, 431], {
      caller: 'none',
      headers: Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`x-h${i}`, 'v'.repeat(100)])),
    }),
  );
  // Authentication
  for (const route of ctx.routes) {
    out.push({ ...s('auth:no-key', route.target, [401], { caller: 'none', route }, 'UNAUTHORIZED') });
    out.push({ ...s('auth:bad-key', route.target, [401], { caller: 'bad-key', route }, 'UNAUTHORIZED') });
  }
  out.push(s('auth:empty-key', any.target, [401], { caller: 'none', headers: { 'x-api-key': '' } }, 'UNAUTHORIZED'));
  out.push(s('auth:sql-key', any.target, [401], { caller: 'none', headers: { 'x-api-key': "' OR 1=1 --" } }, 'UNAUTHORIZED'));
  out.push(s('auth:long-key', any.target, [401], { caller: 'none', headers: { 'x-api-key': 'k'.repeat(8000) } }, 'UNAUTHORIZED'));
  out.push(
    s(
      'auth:utf8-key',
      any.target,
      [401],
      { caller: 'none', headers: { 'x-api-key': Buffer.from('clé', 'utf8').toString('latin1') } },
      'UNAUTHORIZED',
    ),
  );
  out.push(s('auth:bearer-only', any.target, [401], { caller: 'none', headers: { Authorization: 'Bearer nope' } }, 'UNAUTHORIZED'));
  out.push(s('auth:control-char-key', any.target, [400, 401], { caller: 'none', headers: { 'x-api-key': 'abc\u0001def' } }));
  // Raw bytes the HTTP parser refuses or passes through
  out.push(s('raw:space-in-target', `${any.target}?x=a b`, [400]));
  out.push(s('raw:nul-in-target', `${any.target}?x=\u0000`, [400]));
  out.push(s('raw:del-in-target', `${any.target}?x=\u007f`, [400, 401]));
  out.push(s('raw:utf8-bytes-in-target', `/v2/assets?search=${Buffer.from('é', 'utf8').toString('latin1')}`, [200, 400]));
  out.push(s('raw:fragment', `${any.target}?limit=1#frag`, [200, 400]));
  out.push(s('raw:absolute-form', `http://127.0.0.1${any.target}`, [200, 400, 404]));
  out.push({ ...s('raw:options-asterisk', '*', [400, 404, 405]), method: 'OPTIONS' });
  // Query shapes on a route
  for (const [label, q, status] of [
    ['query:empty', '?', [200]],
    ['query:double-question', '??', [400]],
    ['query:lone-ampersands', '?&&', [200, 400]],
    ['query:empty-name', '?=1', [400]],
    ['query:empty-name-value', '?=', [400]],
    ['query:ampersands-empty-name', '?&&=', [400]],
    ['query:bad-pct-name', '?%=1', [400]],
    ['query:bad-pct-name-ff', '?%FF=1', [400]],
  ] as [string, string, number[]][])
    out.push(s(label, `${any.target}${q}`, status));
  // Health: no key needed, success envelope
  for (const t of ['/healthz', '/v1/healthz', '/v2/healthz']) out.push(s('health', t, [200], { caller: 'none' }));
  return out;
}

// ------------------------------------------------------------------------------------------------
// Running and checking

export interface Outcome {
  c: FuzzCase;
  res: RawResponse | null;
  error?: string;
  ms: number;
}
export interface Failure {
  property: Property;
  label: string;
  message: string;
  outcome: Outcome;
}

function headersFor(ctx: FuzzContext, c: FuzzCase): Record<string, string> {
  const h: Record<string, string> = {};
  const key = c.caller === 'bad-key' ? 'sk_not_a_key_0000000000000000' : c.caller === 'none' ? undefined : ctx.server.keys[c.caller];
  if (key) h['x-api-key'] = key;
  return { ...h, ...c.headers };
}

export async function execute(ctx: FuzzContext, c: FuzzCase): Promise<Outcome> {
  const t0 = performance.now();
  const req: RawRequest = {
    method: c.method,
    target: c.target,
    headers: headersFor(ctx, c),
    ...(c.body !== undefined ? { body: c.body } : {}),
  };
  const r = await rawRequest(ctx.server.port, req);
  const ms = performance.now() - t0;
  return r.ok ? { c, res: r.res, ms } : { c, res: null, error: r.error, ms };
}

const isObj = (x: unknown): x is Record<string, any> => typeof x === 'object' && x !== null && !Array.isArray(x);

function valueAt(row: any, path: string[]): unknown {
  let v = row;
  for (const k of path) v = isObj(v) ? v[k] : undefined;
  return v;
}

export function evaluate(o: Outcome): Failure[] {
  const { c, res } = o;
  const fails: Failure[] = [];
  const fail = (property: Property, message: string) => fails.push({ property, label: c.label, message, outcome: o });
  if (!res) {
    fail('answered', o.error ?? 'no answer');
    return fails;
  }
  if (res.status >= 500) fail('no-5xx', `status ${res.status}`);

  let body: any;
  if (c.route?.stream && res.status === 200 && c.method === 'GET') {
    // An export: rows in the format asked for; NDJSON rows are checked one by one.
    const type = String(res.headers['content-type'] ?? '');
    if (!Object.values(EXPORT_CONTENT_TYPES).includes(type)) fail('envelope', `export with content-type ${JSON.stringify(type)}`);
    if (type.startsWith('application/x-ndjson'))
      for (const line of res.body.split('\n').filter(Boolean)) {
        let row: unknown;
        try {
          row = JSON.parse(line);
        } catch {
          fail('response-schema', `export line is not JSON: ${JSON.stringify(line.slice(0, 120))}`);
          break;
        }
        if (!c.route.check(row)) {
          fail('response-schema', c.route.errors(row));
          break;
        }
      }
  } else if (c.method !== 'HEAD') {
    try {
      body = JSON.parse(res.body);
    } catch {
      body = undefined;
    }
    const rid = body?.requestId;
    if (body === undefined) fail('envelope', `body is not JSON: ${JSON.stringify(res.body.slice(0, 120))}`);
    else if (!isObj(body)) fail('envelope', 'body is not an object');
    else if (typeof rid !== 'string' || rid === '') fail('envelope', 'requestId missing or empty');
    else if (res.headers['x-request-id'] !== rid)
      fail('envelope', `x-request-id header ${JSON.stringify(res.headers['x-request-id'])} != requestId ${JSON.stringify(rid)}`);
    else if (body.success === true) {
      if (!isObj(body.data) || !Array.isArray(body.data.results)) fail('envelope', 'success envelope without data.results[]');
      else if (c.route && !isObj(body.data.meta)) fail('envelope', 'success envelope without data.meta');
      else if (res.status < 200 || res.status > 299) fail('envelope', `success envelope with status ${res.status}`);
    } else if (body.success === false) {
      const e = body.error;
      if (!isObj(e) || typeof e.code !== 'string' || !e.code || typeof e.message !== 'string')
        fail('envelope', 'error envelope without error.code / error.message');
      else if (res.status < 400) fail('envelope', `error envelope with status ${res.status}`);
    } else fail('envelope', 'no boolean `success`');
  }
  const code: string | undefined = body?.error?.code;

  if (c.route && !c.route.stream && res.status === 200 && c.method === 'GET' && body !== undefined) {
    if (!c.route.check(body)) fail('response-schema', c.route.errors(body));
    const acct = ACCOUNTS.find((a) => a.name === c.caller);
    if (acct?.historyWindowDays != null && c.route.historical && isObj(body?.data?.meta) && Array.isArray(body.data.results)) {
      const floor = Date.parse(body.data.meta.serverTime) - acct.historyWindowDays * DAY;
      for (const row of body.data.results) {
        const times = c.route.datePaths
          .map((p) => valueAt(row, p))
          .filter((v): v is string => typeof v === 'string')
          .map((v) => Date.parse(v));
        const latest = Math.max(...times);
        if (times.length && latest < floor) {
          fail(
            'history-window',
            `row ${JSON.stringify(row).slice(0, 120)} at ${new Date(latest).toISOString()} < floor ${new Date(floor).toISOString()}`,
          );
          break;
        }
      }
    }
  }

  const e = c.expect;
  const got = `${res.status} ${code ?? ''}`.trim();
  switch (e.kind) {
    case 'any':
      break;
    case 'accepted':
      if (res.status === 400) fail('valid-accepted', `refused: ${got} ${JSON.stringify(body?.error?.message ?? '')}`);
      break;
    case 'invalid-param': {
      const details = Array.isArray(body?.error?.details) ? body.error.details : [];
      if (res.status !== 400 || code !== 'VALIDATION_ERROR')
        fail('invalid-param', `expected 400 VALIDATION_ERROR naming ${JSON.stringify(e.param)}, got ${got}`);
      else if (!details.some((d: any) => isObj(d) && d.param === e.param))
        fail('invalid-param', `details do not name ${JSON.stringify(e.param)}: ${JSON.stringify(details).slice(0, 160)}`);
      break;
    }
    case 'invalid-cursor': {
      const ok =
        res.status === 400 &&
        (code === 'INVALID_CURSOR' ||
          (e.orValidation &&
            code === 'VALIDATION_ERROR' &&
            Array.isArray(body?.error?.details) &&
            body.error.details.some((d: any) => d?.param === 'cursor')));
      if (!ok) fail('invalid-cursor', `expected 400 INVALID_CURSOR, got ${got}`);
      break;
    }
    case 'status': {
      if (!e.status.includes(res.status))
        fail('expected-status', `expected ${e.status.join('/')}${e.code ? ` ${e.code}` : ''}, got ${got}`);
      else if (e.code && code !== undefined && code !== e.code) fail('expected-status', `expected code ${e.code}, got ${got}`);
      else if (e.code && code === undefined && isObj(body) && res.status >= 400)
        fail('expected-status', `expected code ${e.code}, got no error code`);
      if (e.allowGet && res.status === 405 && (res.headers['allow'] ?? '').replace(/\s/g, '') !== 'GET')
        fail('expected-status', `405 with Allow ${JSON.stringify(res.headers['allow'] ?? null)}, expected "GET"`);
      break;
    }
  }
  return fails;
}

async function runAll(ctx: FuzzContext, cases: readonly FuzzCase[], concurrency: number, onDone?: (n: number) => void): Promise<Outcome[]> {
  const out: Outcome[] = new Array(cases.length);
  let next = 0;
  let done = 0;
  await Promise.all(
    Array.from({ length: Math.max(1, concurrency) }, async () => {
      while (next < cases.length) {
        const i = next++;
        out[i] = await execute(ctx, cases[i]!);
        onDone?.(++done);
      }
    }),
  );
  return out;
}

/** Real cursors: first (and second) pages with limit 2 under every filter set, for every account. */
export async function collectCursors(server: FuzzServer, routes: Route[]): Promise<CursorEntry[]> {
  const pool: CursorEntry[] = [];
  const jobs: (() => Promise<void>)[] = [];
  for (const route of routes) {
    if (!route.names.includes('cursor')) continue;
    for (const a of ACCOUNTS) {
      if (!authorized(route, a.name)) continue;
      // biome-ignore lint/suspicious/useIterableCallbackReturn: the count push returns is not used
      route.filterSets.forEach((filters, filterIdx) =>
        jobs.push(async () => {
          const base = [...filters, ...(route.names.includes('limit') ? [param('limit', { ...enc('x', '2'), validity: 'valid' })] : [])];
          let cursor: string | null = null;
          for (let page = 0; page < 2; page++) {
            const params = cursor ? [...base, param('cursor', { ...enc('x', cursor), validity: 'unknown' })] : base;
            const r = await rawRequest(server.port, {
              method: 'GET',
              target: route.target + queryString(params),
              headers: { 'x-api-key': server.keys[a.name] },
            });
            if (!r.ok || r.res.status !== 200) break;
            let body: any;
            try {
              body = JSON.parse(r.res.body);
            } catch {
              break;
            }
            cursor = typeof body?.data?.meta?.nextCursor === 'string' ? body.data.meta.nextCursor : null;
            if (!cursor) break;
            pool.push({ route, caller: a.name, filterIdx, page, cursor });
          }
        }),
      );
    }
  }
  let i = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (i < jobs.length) await jobs[i++]!();
    }),
  );
  pool.sort(
    (x, y) => x.route.key.localeCompare(y.route.key) || x.caller.localeCompare(y.caller) || x.filterIdx - y.filterIdx || x.page - y.page,
  );
  return pool;
}

export interface FuzzOptions {
  runs: number;
  seed: number;
  concurrency?: number;
  progress?: (done: number, total: number) => void;
}

export interface Summary {
  seed: number;
  runs: number;
  cases: number;
  ms: number;
  routes: string[];
  cursors: number;
  statuses: Record<string, number>;
  expectations: Record<string, number>;
  failures: Failure[];
  failedCases: number;
}

export async function setupContext(): Promise<FuzzContext> {
  const server = await startFuzzServer();
  const now = Date.now();
  const routes = routesOf(server, now);
  const pool = await collectCursors(server, routes);
  return { server, routes, pool, now };
}

export function generateCases(ctx: FuzzContext, runs: number, seed: number): FuzzCase[] {
  return fc.sample(caseArbitrary(ctx), { numRuns: runs, seed });
}

export async function runFuzz(ctx: FuzzContext, opts: FuzzOptions): Promise<Summary> {
  const t0 = performance.now();
  const cases = [...generateCases(ctx, opts.runs, opts.seed), ...fixedCases(ctx)];
  const outcomes = await runAll(ctx, cases, opts.concurrency ?? 4, opts.progress && ((n) => opts.progress!(n, cases.length)));
  const failures = outcomes.flatMap(evaluate);
  const statuses: Record<string, number> = {};
  const expectations: Record<string, number> = {};
  for (const o of outcomes) {
    const k = o.res ? String(o.res.status) : 'none';
    statuses[k] = (statuses[k] ?? 0) + 1;
    expectations[o.c.expect.kind] = (expectations[o.c.expect.kind] ?? 0) + 1;
  }
  return {
    seed: opts.seed,
    runs: opts.runs,
    cases: cases.length,
    ms: performance.now() - t0,
    routes: ctx.routes.map((r) => r.key),
    cursors: ctx.pool.length,
    statuses,
    expectations,
    failures,
    failedCases: new Set(failures.map((f) => f.outcome)).size,
  };
}

const clip = (s: string, n: number) => (s.length > n ? `${s.slice(0, n)}… (${s.length} chars)` : s);
const printable = (s: string) => s.replace(/[\u0000-\u001f\u007f-\u009f]/g, (ch) => `\\x${ch.charCodeAt(0).toString(16).padStart(2, '0')}`);

/** Failures grouped by (property, cause label); each group shows its shortest example. */
export function groups(
  failures: readonly Failure[],
): { property: Property; label: string; count: number; routes: Set<string>; example: Failure }[] {
  const m = new Map<string, { property: Property; label: string; count: number; routes: Set<string>; example: Failure }>();
  for (const f of failures) {
    const label = f.label;
    const key = `${f.property}\u0000${label}`;
    const g = m.get(key) ?? { property: f.property, label, count: 0, routes: new Set<string>(), example: f };
    g.count++;
    g.routes.add(f.outcome.c.route?.key ?? f.outcome.c.target.split('?')[0]!);
    if (f.outcome.c.target.length < g.example.outcome.c.target.length) g.example = f;
    m.set(key, g);
  }
  return [...m.values()].sort((a, b) => a.property.localeCompare(b.property) || b.count - a.count);
}

export function formatSummary(s: Summary, maxGroups = 200): string {
  const lines: string[] = [];
  lines.push(
    `fuzz: ${s.cases} cases (${s.runs} generated + ${s.cases - s.runs} fixed) over ${s.routes.length} routes, ${s.cursors} real cursors, in ${(s.ms / 1000).toFixed(1)} s; seed ${s.seed}`,
  );
  lines.push(
    `statuses: ${Object.entries(s.statuses)
      .sort()
      .map(([k, v]) => `${k}×${v}`)
      .join(' ')}`,
  );
  lines.push(
    `expectations: ${Object.entries(s.expectations)
      .sort()
      .map(([k, v]) => `${k}×${v}`)
      .join(' ')}`,
  );
  if (!s.failures.length) {
    lines.push('no failures');
    return lines.join('\n');
  }
  const byProp: Record<string, number> = {};
  for (const f of s.failures) byProp[f.property] = (byProp[f.property] ?? 0) + 1;
  lines.push(`FAILED: ${s.failures.length} property failures in ${s.failedCases} cases`);
  for (const [p, n] of Object.entries(byProp).sort((a, b) => b[1] - a[1])) lines.push(`  ${p}: ${n}  (${PROPERTIES[p as Property]})`);
  lines.push('groups (property · cause · count · routes) with their shortest example:');
  const gs = groups(s.failures);
  for (const g of gs.slice(0, maxGroups)) {
    const o = g.example.outcome;
    lines.push(
      `- [${g.property}] ${g.label} ×${g.count} on ${[...g.routes]
        .slice(0, 4)
        .map((r) => clip(printable(r), 40))
        .join(', ')}${g.routes.size > 4 ? ` +${g.routes.size - 4}` : ''}`,
    );
    lines.push(`    ${o.c.method} ${clip(printable(o.c.target), 200)}  (caller ${o.c.caller}${o.c.detail ? `; ${o.c.detail}` : ''})`);
    lines.push(`    -> ${o.res ? `${o.res.status} ${clip(printable(o.res.body), 300)}` : o.error}`);
    lines.push(`    ${g.example.message}`);
  }
  if (gs.length > maxGroups) lines.push(`… ${gs.length - maxGroups} more groups`);
  lines.push(`reproduce: npm run fuzz -- --runs ${s.runs} --seed ${s.seed}`);
  return lines.join('\n');
}
