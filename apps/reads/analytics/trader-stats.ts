import type { TraderStatsRow } from '../../../schemas/api/analytics.ts';
import { splitIds, splitList } from '../../../schemas/api/common-params.ts';
import type { TraderStatsQuery } from '../../../schemas/api/queries.ts';
import { type SourceIdentity, WINDOWS, type WindowName } from '../../../schemas/api/resources.ts';
import { parseSourceKey, TRADER_TAGS_TABLE } from '../../../storage/tables/traders.ts';
import { withFacts } from '../clock.ts';
import { perDataVersion, type ReadContext } from '../context.ts';
import { factsOf } from '../facts.ts';
import { appliedTimeRange, explicitBounds, windowRule } from '../window.ts';
import {
  clampToHistory,
  directionBias,
  mayComeOfAge,
  performanceByGroup,
  performanceByTrader,
  sampleClock,
  sampleWhere,
  timeBasedPerformance,
  traderEligible,
} from './sample.ts';

/** Tags in their order: category `thematic` first, then the other categories, then names (bytes). */
export function orderTags(tags: { category: string; name: string }[]): { category: string; name: string }[] {
  const bytes = (s: string) => Buffer.from(s, 'utf8');
  return [...tags].sort(
    (a, b) =>
      (a.category === 'thematic' ? 0 : 1) - (b.category === 'thematic' ? 0 : 1) ||
      Buffer.compare(bytes(a.category), bytes(b.category)) ||
      Buffer.compare(bytes(a.name), bytes(b.name)),
  );
}

/**
 * Every live trader's tags in their order, per data version (a small table, like the facts: one
 * read of it per version instead of one per request).
 */
const traderTags = perDataVersion(async (store) => {
  const rows = await store.query<{ traderId: number; categories: string[]; names: string[] }>(
    `SELECT traderId, categories, names FROM ${TRADER_TAGS_TABLE} FINAL WHERE deleted = 0`,
  );
  return new Map(rows.map((t) => [Number(t.traderId), orderTags(t.categories.map((category, i) => ({ category, name: t.names[i]! })))]));
});

/**
 * Trader stats (README "Analytics reads"): one row per requested trader that is live,
 * signal-visible and on one of `sourcePlatforms`, in request order; the others are missing. The
 * figures come from one aggregate over the traders' evaluation rows (a range of the table's key
 * per trader); names and sources from the facts, tags from traderTags.
 */
export async function traderStats(ctx: ReadContext, q: TraderStatsQuery) {
  const now = ctx.now.getTime();
  const window = clampToHistory(explicitBounds(q), ctx.principal, now);
  const facts = await factsOf(ctx);
  const platforms = splitList(q.sourcePlatforms);
  const requested = splitIds(q.traderIds) ?? [];
  const found = requested.filter((id) => traderEligible(facts, ctx.principal, id, platforms));
  const missingTraderIds = requested.filter((id) => !found.includes(id));
  const bounds = explicitBounds(q);
  // The default question (every position of the trader, no history window): from the aggregates of
  // every trader, kept across requests and commits (performanceByTrader); else the traders' own.
  const everyTrader = found.length > 0 && bounds.start === null && bounds.end === null && ctx.principal.historyWindowDays == null;
  const where = found.length ? await sampleWhere(ctx, facts, everyTrader ? { window } : { window, traderIds: found }) : undefined;
  const kept = everyTrader ? await performanceByTrader(ctx, where!, { endAtNow: false, need: found }) : undefined;
  const perf = kept ? kept.groups : where ? await performanceByGroup(ctx, where, 'traderId') : new Map();
  const tagsOf = found.length ? await traderTags(ctx) : new Map<number, { category: string; name: string }[]>();
  const results: TraderStatsRow[] = found.map((id) => {
    const key = facts.traderSource.get(id);
    const identity = key === undefined ? undefined : facts.identities.get(key);
    const source: SourceIdentity | null = key !== undefined && identity ? { ...sourceOf(key), ...identity } : null;
    const windows = perf.get(id);
    const any = windows?.get('1D');
    const positionCount = any?.sampled ?? 0;
    const longs = any?.longs ?? 0;
    return {
      traderId: id,
      name: facts.traderName.get(id)!,
      source,
      tags: tagsOf.get(id) ?? [],
      summary: {
        positionCount,
        directionBias: directionBias(longs, positionCount - longs),
        timeBasedPerformances: Object.fromEntries(WINDOWS.map((w) => [w, timeBasedPerformance(w, windows?.get(w))])) as Record<
          WindowName,
          ReturnType<typeof timeBasedPerformance>
        >,
      },
    };
  });
  const answer = { results, meta: { missingTraderIds, serverTime: ctx.now.toISOString(), appliedTimeRange: appliedTimeRange(window) } };
  // The clock (DESIGN 9): the bounds given, or none, with the start clamped to the account's history
  // window (each answer gets its own), and what moves the figures: a `ready` window coming of age
  // (scored from its evaluation time on), the oldest sample row leaving the history window. No
  // bound is defaulted to serverTime, so no row enters with the clock.
  const rule = windowRule(q, ctx.principal, { unboundedDefault: true });
  const ripen = where !== undefined && (await mayComeOfAge(ctx));
  const ripensBy = kept?.ripensBy;
  return withFacts(ctx, answer, {
    window: rule,
    later:
      ripensBy && rule.startLagMs === null
        ? ripen
          ? async () => Math.min(...found.map((id) => ripensBy.get(id) ?? Number.POSITIVE_INFINITY))
          : undefined
        : where
          ? sampleClock(where, { ripen, lagMs: rule.startLagMs })
          : undefined,
  });
}

/** The platform and id of a source key (a key of the facts: a platform the contract knows). */
function sourceOf(key: string): Pick<SourceIdentity, 'platform' | 'sourceIdentityId'> {
  const { platform, sourceIdentityId } = parseSourceKey(key);
  return { platform: platform as SourceIdentity['platform'], sourceIdentityId };
}
