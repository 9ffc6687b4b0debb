import { generateDemo } from '../../projectors/demo/generate.ts';
import type { TopicRecord } from './harness.ts';

/**
 * A slice of the small demo data set, small enough to project in seconds: the traders with ids up
 * to `traders` and what belongs to them (sources, tags, messages, channel summaries), their trade
 * events on the assets with ids up to `assets`, those assets' prices from `priceDays` before `now`,
 * and every other record (assets, aggregate summaries).
 */
export function demoSlice(o: { seed: number; now: number; traders: number; assets: number; priceDays?: number }): TopicRecord[] {
  const all = [...generateDemo({ scale: 'small', seed: o.seed, now: new Date(o.now) })];
  const sources = new Set<string>();
  for (const r of all) {
    const v = r.value as any;
    if (r.topic === 'traders' && v.id <= o.traders && v.source) sources.add(v.source.sourceIdentityId);
  }
  const since = o.priceDays === undefined ? -Infinity : o.now - o.priceDays * 86_400_000;
  return all
    .filter((r) => {
      const v = r.value as any;
      switch (r.topic) {
        case 'traders':
        case 'trader-tags':
          return (v.id ?? v.traderId) <= o.traders;
        case 'source-identities':
        case 'messages':
          return sources.has(v.sourceIdentityId);
        case 'trade-events':
          return v.traderId <= o.traders && v.assetId <= o.assets;
        case 'prices':
          return v.assetId <= o.assets && Date.parse(v.at) > since;
        case 'channel-summaries':
          return sources.has(v.sourceIdentityId ?? '') || v.traderId <= o.traders;
        default:
          return true;
      }
    })
    .map((r) => ({ topic: r.topic as TopicRecord['topic'], value: r.value }));
}
