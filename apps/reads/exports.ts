import { ApiError } from '../../schemas/api/errors.ts';
import { RESUME_COLUMN } from '../../schemas/api/exports.ts';
import type { Params } from '../../storage/port.ts';
import type { Table } from '../../storage/table.ts';
import { sourceKeySql } from '../../storage/tables/traders.ts';
import type { ReadContext } from './context.ts';
import type { CursorState, KeyPart } from './cursor.ts';
import { fingerprint } from './cursor.ts';
import type { Facts, Identity } from './facts.ts';
import { type Window, windowAt, windowRule } from './window.ts';

/** What the list read says of a cursor, said of the resume token it came from. */
function asResumeError(err: unknown): unknown {
  return err instanceof ApiError && err.code === 'INVALID_CURSOR' ? new ApiError('INVALID_CURSOR', 'Malformed resume token') : err;
}

/**
 * An export as one statement of the store (issue 28): the list read's rows, resolved, filtered and
 * shaped by the store, written in its own output formats (JSONEachRow, CSV) as they stream.
 * `columns` are the statement's, in order: the export's columns (apps/api/export-formats.ts
 * columnsOf the item), the resume token last. Its first `rows` rows are the export.
 */
export interface NativeExport {
  sql: string;
  params: Params;
  columns: readonly string[];
  /** Settings the statement needs, whatever it is wrapped in (the Parquet columns' select). */
  settings?: Readonly<Record<string, string | number>>;
}

/** Builds a family's native export: its filters (`query`), from after a resume token's row, at most `rows` rows. */
export type NativeExportOf = (
  ctx: ReadContext,
  query: Record<string, unknown>,
  resume: string | undefined,
  rows: number,
  format: 'ndjson' | 'csv',
) => Promise<NativeExport>;

/** A named tuple type's fields (a nested object: a tuple of its own), as ClickHouse writes it: an object in JSON, its fields as columns in CSV. */
export interface TupleShape {
  [field: string]: string | TupleShape;
}

export function tupleType(shape: TupleShape): string {
  return `Tuple(${Object.entries(shape)
    .map(([name, t]) => `\`${name}\` ${typeof t === 'string' ? t : tupleType(t)}`)
    .join(', ')})`;
}

/** The dotted names of a shape's leaves, as the export's CSV columns name them. */
export function leafNames(shape: TupleShape, prefix: string): string[] {
  return Object.entries(shape).flatMap(([name, t]) => (typeof t === 'string' ? [`${prefix}.${name}`] : leafNames(t, `${prefix}.${name}`)));
}

/**
 * The list read's cursor after a resume token's row (the same filters and account): the page it
 * starts is where the export resumes (a Parquet export's look: is there a row after its last one?).
 */
export function resumeCursor(ctx: ReadContext, op: string, query: Record<string, unknown>, resume: string): string {
  const filters = fingerprint(op, query);
  const policy = ctx.cursors.policyPrint(ctx.principal);
  return ctx.cursors.encode(ctx.cursors.resumed(resume, filters, policy), filters, policy);
}

/**
 * Where a native export starts, as the list read's pages would: the key after the resume token's
 * row (checked as the list read checks a cursor, its window clamped alike), the window of a
 * historical read, and the seal every row's resume token carries.
 */
export function nativeStart(
  ctx: ReadContext,
  spec: {
    op: string;
    query: Record<string, unknown> & { startTime?: string; endTime?: string };
    keyParts: readonly KeyPart[];
    unboundedDefault?: boolean;
  },
  resume: string | undefined,
): { after: CursorState['k'] | undefined; window: Window; seal: string } {
  const filters = fingerprint(spec.op, spec.query);
  const policy = ctx.cursors.policyPrint(ctx.principal);
  let cur: CursorState | undefined;
  if (resume !== undefined) {
    const cursor = resumeCursor(ctx, spec.op, spec.query, resume);
    try {
      cur = ctx.cursors.decode(cursor, spec.keyParts, filters, policy, true);
    } catch (err) {
      throw asResumeError(err);
    }
  }
  const window = windowAt(
    windowRule(spec.query, ctx.principal, { fromCursor: cur?.w, unboundedDefault: spec.unboundedDefault }),
    ctx.now.getTime(),
  );
  return { after: cur?.k, window, seal: ctx.cursors.resumeSeal([window.start, window.end], filters, policy) };
}

/**
 * A native export's statement over a statement table (alias `s`, storage/statements.ts): `inner`
 * reads each row's columns, the newest version of each key is kept and then only live ones (and
 * those `keep` keeps, a condition on `outer`'s columns), newest key first, at most {exportRows};
 * `outer` shapes them, with `resumeTokenSql` for the token.
 */
export function exportStatement(o: {
  outer: string;
  inner: string;
  table: Table;
  where: string;
  before: string;
  timeCol: string;
  keep?: string;
}): string {
  return `
    SELECT ${o.outer}
    FROM (
      SELECT ${o.inner}, s.live AS x_live, s.tomb AS x_tomb
      FROM ${o.table} AS s WHERE ${o.where} AND ${o.before}
      ORDER BY s.${o.timeCol} DESC, s.id DESC, s.seq DESC
      LIMIT 1 BY s.${o.timeCol}, s.id
    )
    WHERE x_live = 1 AND x_tomb = 0${o.keep ? ` AND ${o.keep}` : ''}
    LIMIT {exportRows:UInt64}`;
}

/** The resume token of a row (CursorCodec.resumeSeal's seal, then the key [t, id] as base64url JSON: what CursorCodec.resumed reads back). */
export const resumeTokenSql = (t: string, idJson: string): string =>
  `concat({seal:String}, '.', base64URLEncode(concat('[', toString(${t}), ',', ${idJson}, ']'))) AS ${RESUME_COLUMN}`;

/**
 * The position (from 1) of `key` in the parameter `keys` of `count` values, 0 when it is not
 * there: what `arrayElement` takes to read the same position of another parameter (NULL or the
 * type's default for 0, as `transform`'s default would be).
 */
export const lookedUp = (key: string, keys: string, count: string): string =>
  `transform(${key}, {${keys}}, range(1, {${count}:UInt32} + 1), toUInt32(0))`;

/**
 * A message's source in a native export (the messages and feed exports, over a table `s` with
 * platform, sourceIdentityId and attachment columns), from the facts as parameter sets: the
 * columns `${p}_key`, `${p}_trader` (0: no live trader) and the identity's `${p}_name`,
 * `${p}_handle`, `${p}_avatar`, `${p}_profile`, `${p}_audience` (NULL: none), to select in the
 * inner statement, and the attachments as `{type, url}` objects over them. The identity's keys
 * are looked up once (its position, then each field by it): the store parses every parameter
 * where it occurs before the export's first byte.
 */
export function sourceColumns(facts: Facts, p: string): { sql: string; attachments: string; params: Params } {
  const traders = [...facts.sourceTrader];
  const identities = [...facts.identities];
  const field = <K extends keyof Identity>(k: K) => identities.map(([, i]) => i[k]);
  const identity = (param: string, column: string) => `arrayElement({${param}}, ${p}_identity) AS ${p}_${column}`;
  return {
    sql: `${sourceKeySql('s').text} AS ${p}_key,
        transform(${p}_key, {traderKeys:Array(String)}, {traderIds:Array(UInt64)}, toUInt64(0)) AS ${p}_trader,
        ${lookedUp(`${p}_key`, 'identityKeys:Array(String)', 'identityCount')} AS ${p}_identity,
        ${identity('names:Array(Nullable(String))', 'name')}, ${identity('handles:Array(Nullable(String))', 'handle')},
        ${identity('avatars:Array(Nullable(String))', 'avatar')}, ${identity('profiles:Array(Nullable(String))', 'profile')},
        ${identity('audiences:Array(Nullable(Int64))', 'audience')},
        s.attachmentTypes AS ${p}_types, s.attachmentUrls AS ${p}_urls`,
    attachments: `arrayMap((t, u) -> CAST(tuple(t, u), 'Tuple(type String, url String)'), ${p}_types, ${p}_urls)`,
    params: {
      traderKeys: traders.map(([k]) => k),
      traderIds: traders.map(([, id]) => id),
      identityKeys: identities.map(([k]) => k),
      identityCount: identities.length,
      names: field('displayName'),
      handles: field('handle'),
      avatars: field('avatarUrl'),
      profiles: field('profileUrl'),
      audiences: field('audienceCount'),
    },
  };
}

/** A row's quote symbol in a native export (events, positions), from the facts as parameter sets: `s.assetId`'s, NULL for none. */
export function quoteColumn(facts: Facts): { sql: string; params: Params } {
  const quotes = [...facts.assetQuote];
  return {
    sql: 'transform(s.assetId, {quoteAssets:Array(UInt64)}, {quoteSymbols:Array(Nullable(String))}, NULL)',
    params: { quoteAssets: quotes.map(([id]) => id), quoteSymbols: quotes.map(([, symbol]) => symbol) },
  };
}
