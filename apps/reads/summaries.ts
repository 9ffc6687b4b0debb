import type { SummariesQuery } from '../../schemas/api/queries.ts';
import type { AggregateSummary, ChannelSummary } from '../../schemas/api/resources.ts';
import { iso } from '../../schemas/formats.ts';
import { msTime, sql } from '../../storage/sql.ts';
import { AGGREGATE_SUMMARIES_TABLE, CHANNEL_SUMMARIES_TABLE } from '../../storage/tables/summaries.ts';
import type { ReadContext } from './context.ts';
import { factsOf, permits, setCondition } from './facts.ts';
import { listRead, type StatementRow, statementPage, statementRows, type Where } from './list.ts';
import type { Window } from './window.ts';

interface Row extends StatementRow {
  t: number;
  id: string;
  end: number;
  generatedAt: number;
  status: 'safe' | 'low_signal';
  body: string;
  traderId: number;
}

const COLUMNS = `s.id AS id, toUnixTimestamp64Milli(s.windowEnd) AS end, toUnixTimestamp64Milli(s.generatedAt) AS generatedAt,
  s.status AS status, s.body AS body`;

/**
 * The filters both summary reads share: the window overlaps the bounds (contract 4: windowEnd after
 * startTime, windowStart before endTime; the bounds are the list window, so the 90-day default
 * and the account's history window apply as on the other historical lists), and only `safe`
 * summaries unless includeLowSignal.
 */
function overlap(where: Where, window: Window, q: SummariesQuery): void {
  if (window.start !== null) where.add(sql`s.windowEnd > ${msTime('wStart', window.start)}`);
  if (window.end !== null) where.add(sql`s.windowStart < ${msTime('wEnd', window.end)}`);
  if (!q.includeLowSignal) where.add(`s.status = 'safe'`);
}

const head = (r: Row) => ({ id: r.id, windowStart: iso(r.t), windowEnd: iso(r.end), generatedAt: iso(r.generatedAt), status: r.status });

/**
 * Channel summaries, newest windowStart first (ties by id descending), from the
 * channel_summaries statement table. A summary describes a trader's channel, so it is served
 * while that trader is live and the caller's message visibility permits it; it carries the
 * traderId and nothing else of the trader or the channel.
 */
export function listChannelSummaries(ctx: ReadContext, q: SummariesQuery) {
  return listRead<Row, ChannelSummary>(ctx, {
    op: 'list_channel_summaries',
    query: q,
    historical: true,
    keyParts: ['time', 'string'],
    fetch: async ({ where, after, window, limit }) => {
      const facts = await factsOf(ctx);
      const visible: number[] = [];
      for (const [id, platform] of facts.traderPlatform) if (permits(ctx.principal.messageVisibility, id, platform)) visible.push(id);
      const set = new Set(visible);
      const traderOk = setCondition(
        where,
        's.traderId IN {visibleTraders:Array(UInt64)}',
        'visibleTraders',
        visible,
        facts.knownTraders,
        (r: Row) => set.has(r.traderId),
      );
      overlap(where, window, q);
      const spec = {
        table: CHANNEL_SUMMARIES_TABLE,
        columns: `${COLUMNS}, s.traderId AS traderId`,
        timeCol: 'windowStart',
        idType: 'String' as const,
        where,
        selective: false,
      };
      return statementPage<Row>(limit, after, (before, n) => statementRows<Row>(ctx, spec, before, n), traderOk.keep, traderOk.share);
    },
    keyOf: (r) => [r.t, r.id],
    shape: (rows) =>
      rows.map((r) => {
        const body = JSON.parse(r.body) as Omit<ChannelSummary, 'id' | 'traderId' | 'windowStart' | 'windowEnd' | 'generatedAt' | 'status'>;
        return {
          ...head(r),
          traderId: r.traderId,
          overview: body.overview,
          keyInsights: body.keyInsights,
          marketBias: body.marketBias,
          mentionedAssets: body.mentionedAssets,
        };
      }),
  });
}

/** Aggregate summaries, newest windowStart first (ties by id descending): coverage counts, no trader or channel identity. */
export function listAggregateSummaries(ctx: ReadContext, q: SummariesQuery) {
  return listRead<Row, AggregateSummary>(ctx, {
    op: 'list_aggregate_summaries',
    query: q,
    historical: true,
    keyParts: ['time', 'string'],
    fetch: async ({ where, after, window, limit }) => {
      overlap(where, window, q);
      const spec = {
        table: AGGREGATE_SUMMARIES_TABLE,
        columns: COLUMNS,
        timeCol: 'windowStart',
        idType: 'String' as const,
        where,
        selective: false,
      };
      return statementPage<Row>(limit, after, (before, n) => statementRows<Row>(ctx, spec, before, n));
    },
    keyOf: (r) => [r.t, r.id],
    shape: (rows) =>
      rows.map((r) => {
        const b = JSON.parse(r.body) as Omit<AggregateSummary, 'id' | 'windowStart' | 'windowEnd' | 'generatedAt' | 'status'>;
        return {
          ...head(r),
          headline: b.headline,
          overview: b.overview,
          dominantNarratives: b.dominantNarratives,
          contrarianTheses: b.contrarianTheses,
          marketDrivers: b.marketDrivers,
          assetSentiment: b.assetSentiment,
          risks: b.risks,
          coverage: b.coverage,
        };
      }),
  });
}
