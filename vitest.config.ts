import { defineConfig } from 'vitest/config';

/**
 * The contract and oracle suites that run a second time, unchanged, over the distributed wiring
 * (issue 10; test/helpers/distributed-harness.ts): records on Kafka (the mock cluster), the
 * projector into the ClickHouse server store over real HTTP (the test peer on chdb unless
 * CLICKHOUSE_URL is set), two read replicas sharing Redis. `SIGNALBASE_TEST_STORE=clickhouse`
 * runs them on the ClickHouse server store alone, with the embedded log and no Redis.
 */
const DISTRIBUTED = [
  'test/api/contract.test.ts',
  'test/api/analytics-contract.test.ts',
  'test/api/reads-oracle.test.ts',
  'test/api/analytics-oracle.test.ts',
  'test/api/oracle-policies.test.ts',
  'test/api/v1.test.ts',
  'test/api/feed.test.ts',
  'test/api/summaries.test.ts',
  'test/api/pagination.test.ts',
  'test/api/hardening.test.ts',
  'test/api/issue-26-replicas.test.ts',
  'test/api/issue-28-exports.test.ts',
];

export default defineConfig({
  test: {
    pool: 'forks',
    // chdb keeps one data directory per process; files run in parallel processes, each with its own.
    // Two at a time on two cores: many files spend their time waiting on Kafka, Redis or a child process.
    maxWorkers: 2,
    testTimeout: 60_000,
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    hookTimeout: 120_000,
    projects: [
      { extends: true, test: { name: 'chdb', include: ['test/**/*.test.ts'] } },
      { extends: true, test: { name: 'distributed', include: DISTRIBUTED, env: { SIGNALBASE_TEST_WIRING: 'distributed' } } },
      // The contract and MCP suites alone, embedded: what .ci/run runs again on the current Node.js LTS (not part of `npm test`).
      { extends: true, test: { name: 'contract', include: [...DISTRIBUTED, 'test/mcp/**/*.test.ts'] } },
    ],
  },
});
