import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { countTokens as cl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { countTokens as o200k } from 'gpt-tokenizer/encoding/o200k_base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateDemo } from '../../projectors/demo/generate.ts';
import { createHarness, type Harness, type TopicRecord } from '../helpers/harness.ts';
import { connect } from '../helpers/mcp-client.ts';

/**
 * Issue 27: assistants pay per token. On the small demo data set (the whole of it, seed 42 as
 * `signalbase seed` makes it), every tool's result, with its default arguments and with its
 * largest `limit` (the stats tools: 20 ids, and 200), is at most 2,500 tokens of text and 2,500 of
 * structuredContent for default arguments and at most 10,000 of each for any arguments, counted
 * with two real tokenizers (o200k_base and cl100k_base). Also: a shortened page says so in its
 * text and carries a cursor; the text is the compact rendering (flags only when true, no nulls,
 * ids kept); rankings echo the applied performance window.
 */

const NOW = Date.parse('2026-06-01T00:00:00Z');
const DEFAULT_GOAL = 2_500;
const ANY_GOAL = 10_000;

let h: Harness;
let client: Client;
let traderIds: number[] = [];
let assetIds: number[] = [];

beforeAll(async () => {
  h = await createHarness({ mcp: true, clock: () => NOW });
  const records = [...generateDemo({ scale: 'small', seed: 42, now: new Date(NOW - 3_600_000) })].map(
    (r) => ({ topic: r.topic, value: r.value }) as TopicRecord,
  );
  await h.given(records);
  traderIds = records
    .filter((r) => r.topic === 'traders')
    .map((r) => r.value.id)
    .slice(0, 200);
  assetIds = records
    .filter((r) => r.topic === 'assets')
    .map((r) => r.value.id)
    .slice(0, 200);
  await h.key({ account: { id: 'reader' } });
  await h.listen();
  client = await connect(h.urls().mcpUrl, { token: await h.token({ account: 'reader' }) });
}, 600_000);
afterAll(async () => {
  await client?.close();
  await h?.close();
});

/** Each tool's calls: its defaults (stats: 20 ids) and its largest size (the maximum `limit`; stats: 200 ids). */
async function cases(): Promise<{ tool: string; label: string; args: Record<string, unknown>; goal: number }[]> {
  const out: { tool: string; label: string; args: Record<string, unknown>; goal: number }[] = [];
  for (const t of (await client.listTools()).tools) {
    const props = (t.inputSchema.properties ?? {}) as Record<string, any>;
    const ids =
      t.name === 'list_trader_stats'
        ? (['traderIds', traderIds] as const)
        : t.name === 'list_asset_stats'
          ? (['assetIds', assetIds] as const)
          : null;
    if (ids) {
      out.push({ tool: t.name, label: '20 ids', args: { [ids[0]]: ids[1].slice(0, 20) }, goal: DEFAULT_GOAL });
      out.push({ tool: t.name, label: '200 ids', args: { [ids[0]]: ids[1].slice(0, 200) }, goal: ANY_GOAL });
    } else {
      out.push({ tool: t.name, label: 'defaults', args: {}, goal: DEFAULT_GOAL });
      if (props.limit)
        out.push({ tool: t.name, label: `limit ${props.limit.maximum}`, args: { limit: props.limit.maximum }, goal: ANY_GOAL });
    }
  }
  return out;
}

describe("every tool result fits an assistant's budget", () => {
  it('text and structuredContent: at most 2,500 tokens with default arguments, at most 10,000 with the largest limit', async () => {
    const all = await cases();
    expect(new Set(all.map((c) => c.tool)).size).toBe(15);
    const over: string[] = [];
    let withRows = 0;
    for (const c of all) {
      const r = await client.callTool({ name: c.tool, arguments: c.args });
      expect(r.isError, `${c.tool} ${c.label}: ${JSON.stringify(r.content).slice(0, 300)}`).toBeFalsy();
      const text = (r.content as { type: string; text: string }[]).map((x) => x.text).join('');
      const structured = JSON.stringify(r.structuredContent);
      if ((r.structuredContent as any).results.length) withRows++;
      for (const [name, count] of [
        ['o200k', o200k],
        ['cl100k', cl100k],
      ] as const) {
        const t = count(text);
        const s = count(structured);
        if (t > c.goal || s > c.goal) over.push(`${c.tool} ${c.label} (${name}): text ${t}, structuredContent ${s} tokens; goal ${c.goal}`);
      }
    }
    expect(over).toEqual([]);
    // The data answered with rows nearly everywhere: the budgets were measured on real pages.
    expect(withRows).toBeGreaterThanOrEqual(all.length - 2);
  });

  it('a page over the budget comes back shorter, says so, and its cursor continues after its last row', async () => {
    const r = await client.callTool({ name: 'list_messages', arguments: { limit: 200 } });
    const sc = r.structuredContent as any;
    const text = (r.content as any)[0].text as string;
    expect(sc.results.length).toBeGreaterThan(0);
    expect(sc.results.length).toBeLessThan(200);
    expect(sc.meta.hasMore).toBe(true);
    expect(text).toMatch(/Shortened to \d+ rows/);
    expect(text).toContain(`cursor "${sc.meta.nextCursor}"`);
    const next = await client.callTool({ name: 'list_messages', arguments: { limit: 200, cursor: sc.meta.nextCursor } });
    const page2 = (next.structuredContent as any).results;
    expect(page2.length).toBeGreaterThan(0);
    // Newest first (contract: messages by writtenAt descending): the next page starts after the last row.
    const last = sc.results.at(-1);
    expect(page2.map((m: any) => m.id)).not.toContain(last.id);
    expect(Date.parse(page2[0].source.preview.writtenAt)).toBeLessThanOrEqual(Date.parse(last.source.preview.writtenAt));
  });

  it('the stats tools answer the first ids within the budget and name the rest', async () => {
    const r = await client.callTool({ name: 'list_trader_stats', arguments: { traderIds: traderIds.slice(0, 200) } });
    const sc = r.structuredContent as any;
    const text = (r.content as any)[0].text as string;
    const answered = [...sc.results.map((x: any) => x.traderId), ...sc.meta.missingTraderIds];
    expect(answered.length).toBeGreaterThan(0);
    expect(new Set(answered)).toEqual(new Set(traderIds.slice(0, answered.length)));
    expect(text).toContain(`traderIds [${traderIds.slice(answered.length).join(',')}]`);
  });
});

describe('the text is compact and keeps what a follow-up needs', () => {
  it('events: a header with the count, the time range and the next call; a table with ids, flags only when true, no nulls', async () => {
    const r = await client.callTool({ name: 'list_events', arguments: { limit: 30 } });
    const sc = r.structuredContent as any;
    const text = (r.content as any)[0].text as string;
    const lines = text.split('\n');
    expect(lines[0]).toMatch(new RegExp(`^list_events: ${sc.results.length} results; time range \\S+ \\.\\. \\S+`));
    expect(text).toMatch(/Next: list_messages/);
    expect(text).not.toMatch(/\bnull\b|\bfalse\b/);
    // Every event id and position id is in the text, for the follow-up calls.
    for (const e of sc.results) {
      expect(text).toContain(String(e.id));
      expect(text).toContain(String(e.positionId));
    }
    // A flag is named on the row of an event that has it, and nowhere else (contract 2: false is the normal case).
    const header = lines.find((l) => l.startsWith('id | '))!.split(' | ');
    const rows = lines.slice(lines.indexOf(lines.find((l) => l.startsWith('id | '))!) + 1);
    expect(rows.length).toBe(sc.results.length);
    sc.results.forEach((e: any, i: number) => {
      const cells = rows[i]!.split(' | ');
      expect(cells[header.indexOf('id')]).toBe(String(e.id));
      const flags = header.includes('flags') ? cells[header.indexOf('flags')]!.split(',').filter(Boolean) : [];
      expect(flags.sort()).toEqual(['assumed', 'retrospective', 'autoGenerated'].filter((f) => e[f]).sort());
    });
  });
});

describe('rankings echo the applied performance window (contract 4: default 30D)', () => {
  it('for an activity metric too, on MCP', async () => {
    for (const metric of ['event_count', 'position_count']) {
      const r = await client.callTool({ name: 'rank_traders', arguments: { metric } });
      expect((r.structuredContent as any).filtersApplied.timeBasedPerformanceWindow, metric).toBe('30D');
      const seven = await client.callTool({ name: 'rank_traders', arguments: { metric, timeBasedPerformanceWindow: '7D' } });
      expect((seven.structuredContent as any).filtersApplied.timeBasedPerformanceWindow, metric).toBe('7D');
    }
  });
});
