// Issue 10, observability: Prometheus metrics at /metrics (prom-client). Operation names are the
// contract's section 4 tool names; record counts come from the records given.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Metrics } from '../../apps/metrics.ts';
import { feedWatermark } from '../../storage/tables/feed-groups.ts';
import { build, createHarness, type Harness } from '../helpers/harness.ts';

/** The value of one sample of the text exposition, by metric name and labels (0 when absent). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const m = /^[^{\s]+(?:\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m) continue;
    const have = Object.fromEntries([...(m[1] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v) && Object.keys(have).length === Object.keys(labels).length)
      return Number(m[2]);
  }
  return 0;
}

/** How much a sample grew between two scrapes. */
const grew = (before: string, after: string, name: string, labels: Record<string, string>) =>
  sample(after, name, labels) - sample(before, name, labels);

const T0 = Date.parse('2026-03-01T10:00:00Z');
const at = (min: number) => new Date(T0 + min * 60_000).toISOString();

describe('/metrics (Prometheus)', () => {
  let h: Harness;
  let key: string;
  const scrape = async () => {
    const res = await h.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    return res.body;
  };
  beforeAll(async () => {
    h = await createHarness({ metrics: ({ lag, store }) => new Metrics({ projectorLag: lag, feedWatermark: () => feedWatermark(store) }) });
    key = await h.key();
  }, 60_000);
  afterAll(() => h?.close());

  it('counts the records projected and dead-lettered per topic', async () => {
    const before = await scrape();
    const events = [1, 2, 3].map((i) => build.event(9000 + i, { positionId: 900 + i, timeOfEvent: at(i), messageId: `m-${i}` }));
    const broken = { topic: 'trade-events' as const, value: { id: 9100, type: 'open' } }; // no direction, price, ...: dead-lettered
    await h.given([
      build.trader(1),
      build.source('src-1'),
      build.asset(1),
      ...events,
      broken,
      ...[1, 2, 3].map((i) => build.message(`m-${i}`, 'src-1', at(i))),
    ]);
    const after = await scrape();
    const delta = (topic: string, outcome: string) => grew(before, after, 'signalbase_projector_records_total', { topic, outcome });
    expect(delta('trade-events', 'applied')).toBe(3);
    expect(delta('trade-events', 'dead_lettered')).toBe(1);
    expect(delta('messages', 'applied')).toBe(3);
    expect(delta('traders', 'applied')).toBe(1);
    expect(sample(after, 'signalbase_projector_lag_records')).toBe(0);
  });

  it('times requests per operation and status, with no route as `unmatched`', async () => {
    const before = await scrape();
    await h.get('/v2/assets', key);
    await h.get('/v1/assets', key);
    await h.get('/v2/assets');
    await h.get('/v2/events?limit=0', key);
    await h.get('/v2/no-such-read', key);
    const after = await scrape();
    const count = (operation: string, status: string) =>
      grew(before, after, 'signalbase_http_request_duration_seconds_count', { operation, status });
    expect(count('list_assets', '200')).toBe(2);
    expect(count('list_assets', '401')).toBe(1);
    expect(count('list_events', '400')).toBe(1);
    expect(count('unmatched', '404')).toBe(1);
    expect(sample(after, 'signalbase_http_request_duration_seconds_bucket', { operation: 'list_assets', status: '200', le: '+Inf' })).toBe(
      sample(after, 'signalbase_http_request_duration_seconds_count', { operation: 'list_assets', status: '200' }),
    );
  });

  it('counts read-cache misses and hits: the same first page three times on unchanged data is one miss, then hits', async () => {
    const before = await scrape();
    const url = `/v2/events?startTime=${encodeURIComponent(at(0))}&endTime=${encodeURIComponent(at(30))}`;
    for (let i = 0; i < 3; i++) expect((await h.get(url, key)).status).toBe(200);
    const after = await scrape();
    const d = (result: string) => grew(before, after, 'signalbase_read_cache_requests_total', { result });
    expect([d('miss'), d('hit')]).toEqual([1, 2]);
  });

  it('reports the feed watermark, which grows when a message with an event is projected', async () => {
    const w0 = sample(await scrape(), 'signalbase_feed_watermark');
    expect(w0).toBeGreaterThan(0);
    await h.given([build.event(9201, { positionId: 921, timeOfEvent: at(40), messageId: 'm-40' }), build.message('m-40', 'src-1', at(40))]);
    expect(sample(await scrape(), 'signalbase_feed_watermark')).toBeGreaterThan(w0);
  });

  it('includes the process metrics and needs no key', async () => {
    const text = await scrape();
    expect(sample(text, 'signalbase_process_resident_memory_bytes')).toBeGreaterThan(0);
  });
});
