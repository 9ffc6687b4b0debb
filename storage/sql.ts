import type { Params } from './port.ts';
import type { Table } from './table.ts';

/**
 * SQL with its parameters: `text` holds `{name:Type}` placeholders (storage/port.ts), `params`
 * their values. Built with the `sql` tag from constant text, tables, other fragments and bound
 * parameters, so no value is ever written into the text.
 */
export interface Sql {
  readonly text: string;
  readonly params: Params;
}

/** A value bound as `{name:type}`. */
export interface Param {
  readonly name: string;
  readonly type: string;
  readonly value: unknown;
}

/** What the tag embeds: a fragment, a bound parameter, or a table (`$db.<name>`). */
export type SqlPart = Sql | Param | Table;

const NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const TYPE = /^[A-Za-z][A-Za-z0-9_]*(\([A-Za-z0-9_, ()']*\))?$/;
const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$/;

/** `value` bound as the parameter `name` of ClickHouse type `type` (`Array(UInt64)`, `Int64`, ...). */
export function param(name: string, type: string, value: unknown): Param {
  if (!NAME.test(name)) throw new Error(`not a valid parameter name: ${name}`);
  if (!TYPE.test(type)) throw new Error(`not a valid parameter type: ${type}`);
  return { name, type, value };
}

const isParam = (part: SqlPart): part is Param => 'type' in part && 'value' in part;
const isSql = (part: SqlPart): part is Sql => 'text' in part && 'params' in part;

/** Adds `from`'s parameters to `into`; one name bound to two different values is a mistake of the caller. */
function bind(into: Record<string, unknown>, from: Params): void {
  for (const [name, value] of Object.entries(from)) {
    if (name in into && !Object.is(into[name], value) && JSON.stringify(into[name]) !== JSON.stringify(value))
      throw new Error(`the SQL parameter ${name} is bound to two different values`);
    into[name] = value;
  }
}

/** The tag: constant text with fragments, parameters and tables embedded. */
export function sql(strings: TemplateStringsArray, ...parts: readonly SqlPart[]): Sql {
  let text = strings[0]!;
  const params: Record<string, unknown> = {};
  parts.forEach((part, i) => {
    if (isParam(part)) {
      text += `{${part.name}:${part.type}}`;
      bind(params, { [part.name]: part.value });
    } else if (isSql(part)) {
      text += part.text;
      bind(params, part.params);
    } else {
      text += String(part);
    }
    text += strings[i + 1]!;
  });
  return { text, params };
}

/** Fragments joined by a separator (`sql\` OR \``); none is `empty`. */
export function join(parts: readonly Sql[], separator: Sql, empty: Sql = sql``): Sql {
  if (!parts.length) return empty;
  const params: Record<string, unknown> = {};
  const texts: string[] = [];
  for (const [i, part] of parts.entries()) {
    if (i) bind(params, separator.params);
    texts.push(part.text);
    bind(params, part.params);
  }
  return { text: texts.join(separator.text), params };
}

/** A column, alias or `alias.column` written by the code (checked to be one, never a caller's value). */
export function identifier(name: string): Sql {
  if (!IDENTIFIER.test(name)) throw new Error(`not a valid SQL identifier: ${name}`);
  return { text: name, params: {} };
}

/** An integer constant of the code (a grain's length, a tag), written into the text. */
export function literal(n: number): Sql {
  if (!Number.isSafeInteger(n)) throw new Error(`not an integer constant: ${n}`);
  return { text: String(n), params: {} };
}

/** A DateTime64 in UTC from a parameter of ms since the epoch. */
export const msTime = (name: string, ms: number): Sql => sql`fromUnixTimestamp64Milli(${param(name, 'Int64', ms)}, 'UTC')`;

/**
 * A time window on a DateTime64 column, bounds inclusive (null: unbounded on that side), as
 * conditions (none when both are null); the bounds are the parameters `names.start` and `names.end`.
 */
export function timeWindow(
  column: Sql,
  window: { readonly start: number | null; readonly end: number | null },
  names: { start: string; end: string },
): Sql[] {
  const out: Sql[] = [];
  if (window.start !== null) out.push(sql`${column} >= ${msTime(names.start, window.start)}`);
  if (window.end !== null) out.push(sql`${column} <= ${msTime(names.end, window.end)}`);
  return out;
}
