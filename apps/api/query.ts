import type { TObject } from 'typebox';
import type { ValidationDetail } from '../../schemas/api/errors.ts';

/**
 * The query string as callers send it, parsed strictly (DESIGN 6 Validation): a malformed
 * percent-escape or an empty parameter name is reported by name instead of being passed on
 * half-decoded. The parser cannot throw (it runs inside the router), so problems travel with the
 * parsed object under a symbol and `queryProblems` turns them into a 400 before validation.
 */
const PROBLEMS = Symbol('query problems');
type Parsed = Record<string, string | string[]> & { [PROBLEMS]?: ValidationDetail[] };

/** More parameters than any read takes, by far; a flood of them is refused, not parsed. */
export const MAX_PARAMETERS = 256;

function decode(s: string): string | null {
  try {
    return decodeURIComponent(s.replaceAll('+', ' '));
  } catch {
    return null;
  }
}

export function parseQuery(qs: string): Parsed {
  // No prototype: `__proto__` or `constructor` is an ordinary (unknown) parameter name.
  const out = Object.create(null) as Parsed;
  const problems: ValidationDetail[] = [];
  const segments = qs.split('&');
  if (segments.length > MAX_PARAMETERS) problems.push({ param: '', message: `at most ${MAX_PARAMETERS} parameters` });
  for (const segment of segments.slice(0, MAX_PARAMETERS)) {
    if (segment === '') continue; // `a=1&&b=2`: an empty segment carries nothing
    const eq = segment.indexOf('=');
    const rawName = eq === -1 ? segment : segment.slice(0, eq);
    const name = decode(rawName);
    const value = decode(eq === -1 ? '' : segment.slice(eq + 1));
    if (name === null) {
      problems.push({ param: rawName, message: 'parameter name has malformed percent-encoding' });
      continue;
    }
    if (name === '') {
      problems.push({ param: '', message: `a parameter has an empty name ("${segment.slice(0, 40)}"); every parameter needs a name` });
      continue;
    }
    if (value === null) {
      problems.push({ param: name, message: 'value has malformed percent-encoding' });
      continue;
    }
    const prev = out[name];
    out[name] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  if (problems.length) Object.defineProperty(out, PROBLEMS, { value: problems, enumerable: false });
  return out;
}

const DIGITS = /^[0-9]+$/;

/** One member of a list against its `x-list` item schema; null when it is valid. */
function memberProblem(item: any, member: string): string | null {
  if (item.type === 'integer') {
    if (!DIGITS.test(member)) return 'members must be decimal integers (digits only)';
    const n = Number(member);
    if (n < (item.minimum ?? 0) || n > (item.maximum ?? Number.MAX_SAFE_INTEGER)) {
      return `members must be integers from ${item.minimum ?? 0} to ${item.maximum ?? Number.MAX_SAFE_INTEGER}`;
    }
    return null;
  }
  if (item.enum && !item.enum.includes(member)) return `members must be among: ${item.enum.join(', ')}`;
  if (member === '') return 'members must not be empty';
  if (item.maxLength !== undefined && member.length > item.maxLength) return `members must be at most ${item.maxLength} characters`;
  return null;
}

/**
 * What the query schema's JSON Schema keywords cannot say, checked on the raw strings before
 * type coercion: integers are plain decimal digits within the schema's range, and list members are checked one by one against the list's `x-list` item schema and `x-list-max`.
 */
export function queryProblems(schema: TObject, query: Parsed): ValidationDetail[] {
  const out: ValidationDetail[] = [...(query[PROBLEMS] ?? [])];
  const props = (schema as any).properties as Record<string, any>;
  for (const [name, value] of Object.entries(query)) {
    const prop = props[name];
    if (!prop || typeof value !== 'string') continue; // unknown or repeated: reported by schema validation
    if (prop.type === 'integer') {
      // ajv would coerce `0x10`, `1e1` or ` 5`, and turns 400 nines into an Infinity it lets through.
      const n = Number(value);
      const [min, max] = [prop.minimum ?? 0, prop.maximum ?? Number.MAX_SAFE_INTEGER];
      if (!DIGITS.test(value)) out.push({ param: name, message: 'must be a decimal integer (digits only, no sign, exponent or blanks)' });
      else if (!(n >= min && n <= max)) out.push({ param: name, message: `must be an integer from ${min} to ${max}` });
      continue;
    }
    const item = prop['x-list'];
    if (!item || (value === '' && prop['x-list-empty'])) continue;
    const members = value.split(',');
    const max = prop['x-list-max'];
    if (max !== undefined && members.length > max) {
      out.push({ param: name, message: `must have at most ${max} values` });
      continue;
    }
    const problem = members.map((m) => memberProblem(item, m)).find((p) => p !== null);
    if (problem) out.push({ param: name, message: problem });
  }
  return out;
}
