import { describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projectors/index.ts';
import { validateRecord } from '../../projectors/validate.ts';
import { TOPICS } from '../../schemas/topics/index.ts';
import { event, message } from './records.ts';

/**
 * Every date-time a projection passes to the store is the canonical ISO form of the validated
 * instant: the store parses with best_effort, which must never see `t`/`z`, offsets or long
 * fractions. Date-time fields are found in the topic schemas, so a new one is covered too.
 */
const dateTimeFields = (schema: any): string[] =>
  Object.entries<any>(schema.properties ?? {})
    .filter(([, p]) => p.format === 'date-time' || (p.anyOf ?? []).some((x: any) => x.format === 'date-time'))
    .map(([k]) => k);

const summaryHead = {
  id: 's1',
  windowStart: '2026-01-01T00:00:00Z',
  windowEnd: '2026-01-02T00:00:00Z',
  generatedAt: '2026-01-02T00:00:00Z',
  status: 'safe',
  version: 1,
};
/** One valid record of each topic that has a date-time field. */
const SAMPLES: Record<string, object> = {
  messages: message('m').value,
  'trade-events': event(1).value,
  prices: { assetId: 1, at: '2026-01-01T00:00:00Z', price: 1, version: 1 },
  'api-keys': {
    id: 'a'.repeat(16),
    keyHash: 'b'.repeat(64),
    accountId: 'acct',
    scopes: [],
    revoked: false,
    createdAt: '2026-01-01T00:00:00Z',
    version: 1,
  },
  'channel-summaries': { ...summaryHead, traderId: 1, overview: '', keyInsights: [], marketBias: 'mixed', mentionedAssets: [] },
  'aggregate-summaries': {
    ...summaryHead,
    headline: '',
    overview: '',
    dominantNarratives: [],
    contrarianTheses: [],
    marketDrivers: [],
    assetSentiment: [],
    risks: [],
    coverage: { eligibleSourceCount: 0, activeSourceCount: 0, messageCount: 0, attachmentCount: 0 },
  },
};

/** Valid variants of one instant that a lenient parser could read differently. */
const VARIANTS: [string, string][] = [
  ['2026-01-02t03:04:05.123456789+02:00', '2026-01-02T01:04:05.123Z'],
  ['2026-01-02T03:04:05z', '2026-01-02T03:04:05.000Z'],
  ['2026-01-01T23:30:00-05:30', '2026-01-02T05:00:00.000Z'],
];

describe('projections normalise date-times', () => {
  for (const topic of TOPICS) {
    const fields = dateTimeFields(topic.schema);
    if (!fields.length) continue;
    it(`issue 5: ${topic.name}: ${fields.join(', ')} reach the store as canonical ISO`, () => {
      const sample = SAMPLES[topic.name];
      expect(sample, `add a sample ${topic.name} record to SAMPLES`).toBeDefined();
      for (const [input, canonical] of VARIANTS) {
        const value: Record<string, unknown> = { ...sample };
        for (const f of fields) value[f] = input;
        const raw = JSON.stringify(value);
        const v = validateRecord(topic.name, raw);
        expect(v.ok, JSON.stringify(v)).toBe(true);
        const rec = { topic: topic.name, key: 'k', offset: '1', value: (v as { value: unknown }).value, raw };
        const projections = PROJECTIONS.filter((p) => p.canHandle.includes(topic.name) && p.handle);
        expect(projections.length).toBeGreaterThan(0);
        for (const p of projections) {
          const row = p.handle!([rec])[0] as Record<string, unknown>;
          for (const f of fields) expect(row[f], `${p.name}.${f} from ${input}`).toBe(canonical);
        }
      }
    });
  }
});

describe('parseDateTime', () => {
  // The canonical form `...sssZ` has a fast path; its `+00:00` spelling takes the general one. Both must agree on every input,
  // valid or not (impossible dates, hour 24, second 60, years 0000-0099, 1969 and 2300 out of range).
  it('reads the canonical form exactly as the same instant spelled with an offset', async () => {
    const { parseDateTime } = await import('../../schemas/formats.ts');
    const { prng } = await import('../helpers/prng.ts');
    const r = prng(2026);
    const pad = (v: number, k: number) => String(v).padStart(k, '0');
    let valid = 0;
    for (let i = 0; i < 50_000; i++) {
      const s =
        `${pad(r.pick([0, 1, 99, 100, 1969, 1970, 2000, 2024, 2100, 2299, 2300, 9999]), 4)}-${pad(r.int(0, 13), 2)}-${pad(r.int(0, 32), 2)}` +
        `T${pad(r.int(0, 24), 2)}:${pad(r.int(0, 60), 2)}:${pad(r.int(0, 60), 2)}.${pad(r.int(0, 999), 3)}`;
      const fast = parseDateTime(`${s}Z`);
      expect(fast, s).toBe(parseDateTime(`${s}+00:00`));
      if (fast !== null) {
        valid++;
        expect(new Date(fast).toISOString()).toBe(`${s}Z`);
      }
    }
    expect(valid).toBeGreaterThan(10_000);
  });
});
