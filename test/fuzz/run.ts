import { formatSummary, runFuzz, setupContext } from './suite.ts';

/**
 * Long fuzz runs outside vitest: `npm run fuzz -- --runs 20000 --seed 7 [--concurrency 4] [--groups 200]`.
 * Prints the summary (cases, failures by property, grouped failing requests, the seed) and exits 1
 * on any failure.
 */
function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0) return process.argv[i + 1];
  const eq = process.argv.find((a) => a.startsWith(`--${name}=`));
  return eq?.slice(name.length + 3);
}

const runs = Number(arg('runs') ?? 2000);
const seed = Number(arg('seed') ?? Math.floor(Math.random() * 2 ** 31));
const concurrency = Number(arg('concurrency') ?? 4);
const maxGroups = Number(arg('groups') ?? 200);
if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(seed) || !Number.isInteger(concurrency) || concurrency < 1) {
  console.error('usage: npm run fuzz -- [--runs N] [--seed S] [--concurrency C] [--groups G]');
  process.exit(2);
}

const ctx = await setupContext();
let code = 1;
try {
  let last = 0;
  const summary = await runFuzz(ctx, {
    runs,
    seed,
    concurrency,
    progress: (done, total) => {
      if (process.stderr.isTTY && (done - last >= 250 || done === total)) {
        last = done;
        process.stderr.write(`\r${done}/${total}`);
      }
    },
  });
  if (process.stderr.isTTY) process.stderr.write('\n');
  console.log(formatSummary(summary, maxGroups));
  code = summary.failures.length ? 1 : 0;
} finally {
  await ctx.server.close();
}
process.exit(code);
