// The summary reads as the contract states them, from the records alone (no SQL, nothing shared
// with apps/ or projectors/): the latest version of each summary, tombstones gone; a window
// overlaps [startTime, endTime] when windowEnd > startTime and windowStart < endTime; only `safe`
// unless includeLowSignal; newest windowStart first, ties by id descending (bytes). A channel
// summary needs its trader live and permitted by the caller's message visibility.
import { buildWorld, cmpBytes, type Policy, permits, type TopicRec, type Win } from './oracle.ts';

const ms = (s: string): number => Date.parse(s);
const iso = (t: number): string => new Date(t).toISOString();

function latest(records: readonly TopicRec[], topic: string): any[] {
  const out = new Map<string, any>();
  for (const r of records) {
    if (r.topic !== topic) continue;
    const cur = out.get(r.value.id);
    if (cur === undefined || r.value.version >= cur.version) out.set(r.value.id, r.value);
  }
  return [...out.values()].filter((v) => v.deleted !== true);
}

export interface SummaryFilters {
  window: Win;
  includeLowSignal?: boolean;
  policy: Policy;
}

function select(rows: any[], f: SummaryFilters): any[] {
  return rows
    .filter(
      (s) =>
        (f.includeLowSignal || s.status === 'safe') &&
        (f.window.start === null || ms(s.windowEnd) > f.window.start) &&
        (f.window.end === null || ms(s.windowStart) < f.window.end),
    )
    .sort((a, b) => ms(b.windowStart) - ms(a.windowStart) || cmpBytes(b.id, a.id));
}

const headOf = (s: any) => ({
  id: s.id,
  windowStart: iso(ms(s.windowStart)),
  windowEnd: iso(ms(s.windowEnd)),
  generatedAt: iso(ms(s.generatedAt)),
  status: s.status,
});

export function channelSummaries(records: readonly TopicRec[], f: SummaryFilters): any[] {
  const w = buildWorld(records as TopicRec[]);
  const visible = latest(records, 'channel-summaries').filter((s) => {
    const trader = w.traders.get(s.traderId);
    return trader !== undefined && permits(f.policy.messageVisibility, trader);
  });
  return select(visible, f).map((s) => ({
    ...headOf(s),
    traderId: s.traderId,
    overview: s.overview,
    keyInsights: s.keyInsights,
    marketBias: s.marketBias,
    mentionedAssets: s.mentionedAssets,
  }));
}

export function aggregateSummaries(records: readonly TopicRec[], f: SummaryFilters): any[] {
  return select(latest(records, 'aggregate-summaries'), f).map((s) => ({
    ...headOf(s),
    headline: s.headline,
    overview: s.overview,
    dominantNarratives: s.dominantNarratives,
    contrarianTheses: s.contrarianTheses,
    marketDrivers: s.marketDrivers,
    assetSentiment: s.assetSentiment,
    risks: s.risks,
    coverage: s.coverage,
  }));
}
