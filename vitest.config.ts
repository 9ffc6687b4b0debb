import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    // chdb keeps one data directory per process; files run in parallel processes, each with its own.
    testTimeout: 60_000,
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    hookTimeout: 120_000,
  },
});
