import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATIONS } from '../../apps/registry.ts';
import { ERROR_STATUS } from '../../schemas/api/errors.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';
import { rawMcp } from '../helpers/mcp-client.ts';

/**
 * The fuzz suite's MCP side (DESIGN 8, issue 9): hostile arguments for every tool of the registry,
 * sent as tools/call over real HTTP. Properties: an HTTP 200 JSON-RPC answer with the request's
 * id; either a result with structuredContent (the data) or a tool error whose text is
 * `{"error": {code, message, details}}` with a code of the error table, never INTERNAL_ERROR, and
 * VALIDATION_ERROR naming a parameter; never a protocol error for a known tool.
 */
const SEED = 20_261_123;
const RUNS_PER_TOOL = 40;

let h: Harness;
let token: string;
let mcpUrl: string;

beforeAll(async () => {
  h = await createHarness({ mcp: true });
  await h.given([
    build.trader(1),
    build.source('src-1'),
    build.asset(1),
    build.event(1, { timeOfEvent: new Date(Date.now() - 86_400_000).toISOString() }),
  ]);
  await h.key({ account: { id: 'fuzz', historyWindowDays: 30 } });
  await h.listen();
  token = await h.token({ account: 'fuzz' });
  mcpUrl = h.urls().mcpUrl;
});
afterAll(async () => {
  await h.close();
});

/** JSON values a caller could send: of the right type and hostile (huge, negative, fractional, control characters, SQL-like, nested). */
const hostile = fc.oneof(
  fc.constantFrom(
    0,
    -1,
    1.5,
    1e308,
    -1e308,
    2 ** 53,
    2 ** 64,
    Number.MAX_SAFE_INTEGER,
    '',
    ' ',
    '0x10',
    '1e3',
    '9'.repeat(400),
    '2026-02-30T00:00:00Z',
    '2026-01-01T00:00:60Z',
    '1969-12-31T23:59:59Z',
    "'; DROP TABLE events; --",
    '\u0000\u202e\u001b[31m',
    'a,b',
    ',',
    '%zz',
    '__proto__',
    'constructor',
    true,
    false,
    null,
    [],
    [null],
    [[1]],
    {},
    { $gt: 1 },
    'x'.repeat(5000),
  ),
  fc.integer(),
  fc.double(),
  fc.string(),
  fc.array(fc.oneof(fc.integer({ min: -5, max: 10 ** 6 }), fc.string({ maxLength: 6 })), { maxLength: 300 }),
  fc.jsonValue({ maxDepth: 3 }),
);

const CODES = new Set(Object.keys(ERROR_STATUS));

describe('fuzz: hostile tool arguments for every tool of the registry', () => {
  it(`${RUNS_PER_TOOL} generated calls per tool hold the properties (seed ${SEED})`, async () => {
    let id = 0;
    let errors = 0;
    for (const op of OPERATIONS) {
      const names = [...Object.keys((op.query as any).properties), 'unknownParam', ''];
      const args = fc.dictionary(fc.constantFrom(...names), hostile, { maxKeys: 4 });
      await fc.assert(
        fc.asyncProperty(args, async (a) => {
          const rid = ++id;
          const r = await rawMcp(
            mcpUrl,
            { authorization: `Bearer ${token}` },
            { jsonrpc: '2.0', id: rid, method: 'tools/call', params: { name: op.tool, arguments: a } },
          );
          expect(r.status, r.text.slice(0, 300)).toBe(200);
          expect(r.json.id).toBe(rid);
          expect(r.json.error, JSON.stringify(r.json.error)).toBeUndefined();
          const result = r.json.result;
          if (!result.isError) {
            expect(result.structuredContent).toEqual(expect.objectContaining({ results: expect.any(Array) }));
            return;
          }
          errors++;
          const { error } = JSON.parse(result.content[0].text);
          expect(CODES.has(error.code), error.code).toBe(true);
          expect(error.code, JSON.stringify({ a, error })).not.toBe('INTERNAL_ERROR');
          if (error.code === 'VALIDATION_ERROR')
            expect(error.details[0]).toEqual({ param: expect.any(String), message: expect.any(String) });
        }),
        { numRuns: RUNS_PER_TOOL, seed: SEED },
      );
    }
    // Most hostile arguments are refused: the generator reaches the validation, not only the happy path.
    expect(errors).toBeGreaterThan((OPERATIONS.length * RUNS_PER_TOOL) / 2);
  }, 180_000);
});
