import { defineConfig } from 'vitest/config';

/**
 * The contract and oracle suites that run a second time on the ClickHouse server store
 * (@clickhouse/client over real HTTP; the test peer on chdb unless CLICKHOUSE_URL is set): the
 * same SQL, the same answers (issue 10, item 2).
 */
const ON_CLICKHOUSE = [
  'test/api/contract.test.ts', 'test/api/analytics-contract.test.ts', 'test/api/reads-oracle.test.ts', 'test/api/analytics-oracle.test.ts',
  'test/api/oracle-policies.test.ts', 'test/api/v1.test.ts', 'test/api/feed.test.ts', 'test/api/summaries.test.ts', 'test/api/pagination.test.ts',
  'test/api/hardening.test.ts',
];

export default defineConfig({
  test: {
    pool: 'forks',
    // chdb keeps one data directory per process; files run in parallel processes, each with its own.
    testTimeout: 60_000,
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    hookTimeout: 120_000,
    projects: [
      { extends: true, test: { name: 'chdb', include: ['test/**/*.test.ts'] } },
      { extends: true, test: { name: 'clickhouse-http', include: ON_CLICKHOUSE, env: { SIGNALBASE_TEST_STORE: 'clickhouse' } } },
      { extends: true, test: { name: 'distributed', include: ON_CLICKHOUSE, env: { SIGNALBASE_TEST_WIRING: 'distributed' } } },
    ],
  },
});
