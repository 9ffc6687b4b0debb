import { createServer, type Server } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

/** What the gauges read when Prometheus scrapes (each optional: a process reports what it runs). */
export interface MetricSources {
  /** Records on the log not yet projected. */
  projectorLag?: () => number | Promise<number>;
  /** The partner feed's watermark: the highest sequence below which every stamped group is readable. */
  feedWatermark?: () => number | Promise<number>;
  /** Projector commits so far (the read cache keys on it). */
  dataVersion?: () => number | Promise<number>;
  /** The projector group's lag per Kafka partition (distributed mode). */
  consumerLag?: () => Promise<{ topic: string; partition: number; lag: number }[]>;
}

/**
 * Topics whose record counts are not exported: how many accounts and API keys exist (or change)
 * is business data, and /metrics is read without a credential.
 */
const UNCOUNTED_TOPICS = new Set(['accounts', 'api-keys']);

/**
 * Prometheus metrics of one process (prom-client, a registry of its own), served at `/metrics`:
 * request latency per operation and status, read-cache hits and misses, records projected and
 * dead-lettered per topic (but accounts and API keys), projector lag (and, distributed, consumer
 * lag per Kafka partition), feed watermark, data version, Redis failures (distributed), and Node's
 * process metrics, all named `signalbase_*`.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Histogram({
    name: 'signalbase_http_request_duration_seconds',
    help: 'HTTP requests by operation (the MCP tool name of a read; the path of health, descriptions and docs; "unmatched" for no route) and status',
    labelNames: ['operation', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [this.registry],
  });
  readonly readCache = new Counter({
    name: 'signalbase_read_cache_requests_total',
    help: 'Cacheable reads answered from the read cache (hit) or from the store (miss)',
    labelNames: ['result'] as const,
    registers: [this.registry],
  });
  readonly records = new Counter({
    name: 'signalbase_projector_records_total',
    help: 'Log records projected (applied) or dead-lettered, by topic',
    labelNames: ['topic', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly redisErrors = new Counter({
    name: 'signalbase_redis_errors_total',
    help: 'Redis operations that failed or were skipped while Redis did not answer (the process went on without it), by operation',
    labelNames: ['operation'] as const,
    registers: [this.registry],
  });

  readonly readRefusals = new Counter({
    name: 'signalbase_read_refusals_total',
    help: 'Reads refused by admission control (503 OVERLOADED), by reason: queue_full, account_queue_full, waited_too_long',
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly rateLimitFailOpen = new Counter({
    name: 'signalbase_rate_limit_fail_open_total',
    help: 'Requests answered without being counted because the shared rate-limit counts (Redis) did not answer',
    registers: [this.registry],
  });

  /** Store reads in flight and waiting for a slot (apps/reads/cost.ts), read when scraped. */
  watchAdmission(a: { inFlight: number; waiting: number }): void {
    for (const name of ['signalbase_reads_in_flight', 'signalbase_reads_waiting']) this.registry.removeSingleMetric(name); // the latest app's
    new Gauge({
      name: 'signalbase_reads_in_flight',
      help: 'Reads holding a store slot',
      registers: [this.registry],
      collect() {
        this.set(a.inFlight);
      },
    });
    new Gauge({
      name: 'signalbase_reads_waiting',
      help: 'Reads waiting for a store slot',
      registers: [this.registry],
      collect() {
        this.set(a.waiting);
      },
    });
  }

  constructor(sources: MetricSources = {}) {
    collectDefaultMetrics({ register: this.registry, prefix: 'signalbase_' });
    const gauge = (name: string, help: string, read: (() => number | Promise<number>) | undefined) => {
      if (!read) return;
      new Gauge({
        name,
        help,
        registers: [this.registry],
        async collect() {
          this.set(Number(await read()));
        },
      });
    };
    gauge('signalbase_projector_lag_records', 'Records on the log not yet projected', sources.projectorLag);
    gauge('signalbase_feed_watermark', 'The partner feed watermark: every group stamped at or below it is readable', sources.feedWatermark);
    gauge(
      'signalbase_data_version',
      'The data version: moves on every projector commit (NaN while Redis cannot tell it)',
      sources.dataVersion,
    );
    const consumerLag = sources.consumerLag;
    if (consumerLag) {
      new Gauge({
        name: 'signalbase_consumer_lag_records',
        help: 'Records on a Kafka partition the projector group has not committed yet',
        labelNames: ['topic', 'partition'] as const,
        registers: [this.registry],
        async collect() {
          this.reset();
          for (const p of await consumerLag()) this.set({ topic: p.topic, partition: String(p.partition) }, p.lag);
        },
      });
    }
  }

  /** A projector commit's batches (ProjectorEvents.onCommit). */
  committed(commit: { batches: readonly { topic: string; applied: number; dead: number }[] }): void {
    for (const b of commit.batches) {
      if (UNCOUNTED_TOPICS.has(b.topic)) continue;
      if (b.applied) this.records.inc({ topic: b.topic, outcome: 'applied' }, b.applied);
      if (b.dead) this.records.inc({ topic: b.topic, outcome: 'dead_lettered' }, b.dead);
    }
  }
}

/**
 * /metrics on a listener of its own (METRICS_PORT, on METRICS_HOST: loopback by default), for a
 * scraper that reaches the process where its API callers cannot; anything else is 404.
 */
export async function serveMetrics(
  metrics: Metrics,
  listen: { port: number; host: string },
): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/metrics') {
      res.statusCode = 404;
      res.end();
      return;
    }
    metrics.registry.metrics().then(
      (text) => {
        res.setHeader('content-type', metrics.registry.contentType);
        res.end(text);
      },
      () => {
        res.statusCode = 503;
        res.end();
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, resolve);
  });
  const a = server.address() as import('node:net').AddressInfo;
  return {
    url: `http://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}/metrics`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
