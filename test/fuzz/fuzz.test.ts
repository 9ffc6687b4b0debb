import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FuzzContext, formatSummary, PROPERTIES, runFuzz, setupContext } from './suite.ts';

/**
 * The schema-driven fuzz suite (DESIGN section 8) as a fixed-seed bounded run: 2,000 generated
 * requests over every (version, operation) of the registry plus the fixed HTTP-level cases, over a
 * real socket. Long runs: `npm run fuzz -- --runs N --seed S`.
 */
const SEED = 20_260_105;
const RUNS = 2000;

let ctx: FuzzContext;
beforeAll(async () => {
  ctx = await setupContext();
});
afterAll(async () => {
  await ctx?.server.close();
});

describe('fuzz: every route of the registry', () => {
  it(`${RUNS} generated requests + the fixed HTTP cases hold ${Object.keys(PROPERTIES).length} properties (seed ${SEED})`, async () => {
    expect(ctx.routes.length).toBeGreaterThan(0);
    expect(ctx.pool.length, 'real cursors obtained from the server').toBeGreaterThan(0);
    const summary = await runFuzz(ctx, { runs: RUNS, seed: SEED });
    expect(summary.cases).toBeGreaterThanOrEqual(RUNS);
    expect(summary.failures.length, formatSummary(summary, 40)).toBe(0);
  }, 180_000);
});
