import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATIONS } from '../../apps/registry.ts';
import { demoSlice } from '../helpers/demo-slice.ts';
import { createHarness, type Harness, type TopicRecord } from '../helpers/harness.ts';
import { connect } from '../helpers/mcp-client.ts';

/**
 * Issue 9: each tool's result equals the REST read with the same parameters, over every entry of
 * the registry (a property test): random arguments of the tool's advertised inputSchema are sent
 * to the tool (the SDK client, which also checks structuredContent against the tool's
 * outputSchema) and, written as the contract's REST query (lists comma-separated), to the REST
 * route with an API key of the same account. Success: structuredContent equals `data`. Failure:
 * the tool error carries the REST error's code and details (and its message, outside validation,
 * where REST says "query parameter" and the tool says "argument"). Pages after the first are
 * compared too, through the cursor the tool handed out. The server clock is fixed, so both
 * answers are made at the same serverTime. Issue 27: a tool page may be shorter than REST's (its
 * own default page size, its token budget); then it is REST's answer for that many rows (see both).
 */

const NOW = Date.parse('2026-06-01T00:00:00Z');
const DAY = 86_400_000;
const RUNS = 20;

/** A slice of the small demo data set: 20 traders and what belongs to them, 15 assets with their prices. */
const records = (): TopicRecord[] => demoSlice({ seed: 11, now: NOW - DAY, traders: 20, assets: 15 });

let h: Harness;
let client: Client;
let key: string;
const pools = {
  traderIds: [] as number[],
  assetIds: [] as number[],
  positionIds: [] as number[],
  ids: [] as string[],
  names: [] as string[],
};

beforeAll(async () => {
  h = await createHarness({ mcp: true, clock: () => NOW });
  const recs = records();
  await h.given(recs);
  for (const r of recs) {
    const v = r.value as any;
    if (r.topic === 'traders') {
      pools.traderIds.push(v.id);
      pools.names.push(v.name);
    }
    if (r.topic === 'trade-events') {
      pools.positionIds.push(v.positionId);
      pools.assetIds.push(v.assetId);
    }
    if (r.topic === 'messages') pools.ids.push(v.id);
  }
  pools.assetIds = [...new Set(pools.assetIds)];
  pools.positionIds = [...new Set(pools.positionIds)].slice(0, 300);
  pools.ids = pools.ids.slice(0, 300);
  key = await h.key({ account: { id: 'same' } });
  await h.listen();
  client = await connect(h.urls().mcpUrl, { token: await h.token({ account: 'same' }) });
}, 300_000);
afterAll(async () => {
  await client?.close();
  await h?.close();
});

/** Arbitrary values of one input property, from its JSON Schema (ids and texts from the data, plus some that are not in it). */
function valueArb(name: string, s: any): fc.Arbitrary<unknown> {
  if (s.type === 'array') {
    const max = Math.min(s.maxItems ?? 5, 5);
    const min = s.minItems ?? 0;
    if (s.items.enum) return fc.subarray(s.items.enum as string[], { minLength: min });
    if (s.items.type === 'integer') {
      const pool = name === 'assetIds' ? pools.assetIds : name === 'positionIds' ? pools.positionIds : pools.traderIds;
      return fc.array(
        fc.oneof({ weight: 9, arbitrary: fc.constantFrom(...pool) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 9_999_999 }) }),
        { minLength: Math.max(min, 1), maxLength: max },
      );
    }
    return fc.array(fc.constantFrom(...pools.ids, 'tg-nonexistent'), { minLength: Math.max(min, 1), maxLength: max });
  }
  if (s.enum) return fc.constantFrom(...(s.enum as string[]));
  if (s.type === 'boolean') return fc.boolean();
  // Small limits mostly, so that there is a next page to compare.
  if (name === 'limit')
    return fc.oneof(
      { weight: 3, arbitrary: fc.integer({ min: s.minimum, max: 4 }) },
      { weight: 1, arbitrary: fc.integer({ min: s.minimum, max: s.maximum }) },
    );
  if (s.type === 'integer') return fc.integer({ min: s.minimum ?? 0, max: Math.min(s.maximum ?? 100, 12) });
  if (s.format === 'date-time') return fc.integer({ min: NOW - 200 * DAY, max: NOW + DAY }).map((t) => new Date(t).toISOString());
  if (name === 'since') return fc.constant('0');
  if (name === 'search')
    return fc
      .constantFrom(...pools.names)
      .chain((n) => fc.integer({ min: 0, max: Math.max(0, n.length - 3) }).map((i) => n.slice(i, i + 3)));
  return fc.string({ minLength: 1, maxLength: 8 });
}

function argsArb(input: any): fc.Arbitrary<Record<string, unknown>> {
  const props = input.properties as Record<string, any>;
  const required = new Set<string>(input.required ?? []);
  const entries = Object.entries(props).filter(([n]) => n !== 'cursor');
  // Each optional parameter in a third of the cases: narrow enough questions that still have rows.
  const maybe = (n: string, a: fc.Arbitrary<unknown>) =>
    required.has(n) ? a : fc.oneof({ weight: 2, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: a });
  return fc
    .record(Object.fromEntries(entries.map(([n, s]) => [n, maybe(n, valueArb(n, s))])))
    .map((r) => Object.fromEntries(Object.entries(r).filter(([, v]) => v !== undefined)));
}

/**
 * Equal, numbers within a relative 1e-12: the store sums floating-point values in parallel, so
 * two runs of one read may differ in the last bits of an average (REST against REST too).
 */
function expectSame(actual: unknown, expected: unknown, at = 'data'): void {
  if (typeof expected === 'number' && typeof actual === 'number' && !Number.isInteger(expected)) {
    expect(Math.abs(actual - expected), at).toBeLessThanOrEqual(1e-12 * Math.max(1, Math.abs(expected)));
    return;
  }
  if (expected && typeof expected === 'object' && actual && typeof actual === 'object') {
    expect(Object.keys(actual).sort(), at).toEqual(Object.keys(expected).sort());
    for (const k of Object.keys(expected)) expectSame((actual as any)[k], (expected as any)[k], `${at}.${k}`);
    return;
  }
  expect(actual, at).toEqual(expected);
}

/** The contract's REST form of the same parameters (section 1, common query rule 5: lists are comma-separated). */
function restUrl(path: string, args: Record<string, unknown>): string {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(args)) qs.set(k, Array.isArray(v) ? v.join(',') : String(v));
  return `/v2${path}${qs.size ? `?${qs}` : ''}`;
}

/** The ids a shortened stats answer left for the next call, as its text names them (issue 27). */
function notAnswered(text: string): { param: string; ids: string[] } | null {
  const m = /Not answered yet: call \w+ again with the same arguments and (\w+) \[([^\]]*)\]/.exec(text);
  return m ? { param: m[1]!, ids: m[2]!.split(',') } : null;
}

async function rest(op: (typeof OPERATIONS)[number], args: Record<string, unknown>) {
  return h.get(op.versions.includes('v2') ? restUrl(op.path, args) : restUrl(op.path, args).replace('/v2', '/v1'), key);
}

/**
 * One call on each surface. A tool page may be shorter than REST's (issue 27), never different: it
 * is REST's answer with `limit` at the tool's advertised default (inputSchema) when the call gives
 * none, or at the limit its text says it was shortened to (its token budget), meta and nextCursor
 * included, so its cursor continues exactly where REST's would; and its rows are the first rows of
 * the REST page for the same arguments. A stats tool may answer the first of the requested ids
 * only: then it is REST's answer for those ids, and its text names the others.
 */
async function both(op: (typeof OPERATIONS)[number], args: Record<string, unknown>, input?: any) {
  const r = await rest(op, args);
  const tool = await client.callTool({ name: op.tool, arguments: args });
  if (r.status === 200) {
    const text = (tool.content as any)[0].text as string;
    expect(tool.isError, `${op.tool} ${JSON.stringify(args)}: ${text.slice(0, 300)}`).toBeFalsy();
    const sc = tool.structuredContent as any;
    const left = notAnswered(text);
    if (left) {
      const asked = (args[left.param] as unknown[]).map(String);
      expect(left.ids.length).toBeGreaterThan(0);
      expect(asked.slice(asked.length - left.ids.length), `${op.tool}: the ids left are the last ones asked`).toEqual(left.ids);
      expectSame(sc, (await rest(op, { ...args, [left.param]: asked.slice(0, asked.length - left.ids.length) })).body.data);
      return sc;
    }
    const shortened = /\(as with limit (\d+)\)/.exec(text)?.[1];
    const advertised = input?.properties?.limit?.default;
    const limit = shortened !== undefined ? Number(shortened) : (args.limit ?? advertised);
    expectSame(sc, limit === undefined || limit === args.limit ? r.body.data : (await rest(op, { ...args, limit })).body.data);
    // A since-poll's limit counts changes, not rows; every other page is the start of REST's page.
    if (args.since === undefined)
      expectSame(sc.results, (r.body.data.results as unknown[]).slice(0, sc.results.length), 'data.results (the start of the REST page)');
    return sc;
  }
  expect(tool.isError, `${op.tool} ${JSON.stringify(args)}: REST ${r.status} ${JSON.stringify(r.body.error)}`).toBe(true);
  const { error } = JSON.parse((tool.content as any)[0].text);
  expect({ code: error.code, details: error.details }).toEqual({ code: r.body.error.code, details: r.body.error.details });
  if (error.code !== 'VALIDATION_ERROR') expect(error.message).toBe(r.body.error.message);
  return null;
}

describe('every tool answers what its REST read answers', () => {
  for (const op of OPERATIONS) {
    it(`${op.tool}`, async () => {
      const input = (await client.listTools()).tools.find((t) => t.name === op.tool)!.inputSchema;
      let pages = 0;
      let withRows = 0;
      await fc.assert(
        fc.asyncProperty(argsArb(input), async (args) => {
          const first = await both(op, args, input);
          if (first?.results?.length) withRows++;
          const cursor = first?.meta?.nextCursor;
          if (cursor) {
            pages++;
            await both(op, { ...args, cursor }, input);
          }
        }),
        { numRuns: RUNS, seed: 20261123 },
      );
      // Answers with rows were compared, not only refusals and empty answers.
      expect(withRows, `${op.tool}: no answer with rows compared`).toBeGreaterThan(RUNS / 4);
      // The paginated reads were asked for a second page at least once (limits are drawn small enough).
      if ('cursor' in (input.properties as object) && op.tool !== 'list_feed')
        expect(pages, `${op.tool}: no second page compared`).toBeGreaterThan(0);
    });
  }

  it('a rankings window that has not elapsed: the same 422 details (requested, resolved, alternatives) as a tool error', async () => {
    const args = { metric: 'win_rate', timeBasedPerformanceWindow: '30D', startTime: new Date(NOW - 5 * DAY).toISOString() };
    const rest = await h.get(restUrl('/traders/rankings', args), key);
    expect(rest.status).toBe(422);
    expect(rest.body.error.details.alternatives.length).toBeGreaterThan(0);
    await both(OPERATIONS.find((o) => o.tool === 'rank_traders')!, args);
  });

  it('a page over the token budget: fewer rows, the first of the REST page, with a cursor that continues exactly', async () => {
    const op = OPERATIONS.find((o) => o.tool === 'list_events')!;
    const args = { limit: 200, startTime: new Date(NOW - 200 * DAY).toISOString() };
    const restPage = (await rest(op, args)).body.data;
    const first = await both(op, args);
    expect(first.results.length).toBeLessThan(restPage.results.length);
    const second = await both(op, { ...args, cursor: first.meta.nextCursor });
    // Together the two tool pages are the REST page's rows, in order, without a gap or a repeat.
    const joined = [...first.results, ...second.results].slice(0, restPage.results.length);
    expectSame(joined, restPage.results.slice(0, joined.length));
  });

  it('trader stats over the budget: the first ids answered, the rest named for the next call', async () => {
    const op = OPERATIONS.find((o) => o.tool === 'list_trader_stats')!;
    const ids = pools.traderIds.slice(0, 20);
    const tool = await client.callTool({ name: op.tool, arguments: { traderIds: ids } });
    const left = notAnswered((tool.content as any)[0].text);
    expect(left?.param).toBe('traderIds');
    expect(left!.ids.length).toBeGreaterThan(0);
    await both(op, { traderIds: ids });
  });

  it('too many buckets: BUCKET_LIMIT_EXCEEDED as a tool error, as REST answers it', async () => {
    const args = { interval: 'hour', startTime: new Date(NOW - 30 * DAY).toISOString() };
    expect((await h.get(restUrl('/activity-summaries', args), key)).status).toBe(422);
    await both(OPERATIONS.find((o) => o.tool === 'summarize_message_activity')!, args);
  });
});
