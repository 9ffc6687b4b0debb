// One-off benchmark: counts the demo records per topic and measures throughput.
// Usage: npx tsx bench/demo-generate.ts [small|large] [--json]
import { estimateDemoRecords, generateDemo, type Scale } from '../projectors/demo/generate.ts';

const scale = (process.argv[2] ?? 'large') as Scale;
const json = process.argv.includes('--json');
const now = new Date('2026-11-01T00:00:00Z');
const counts = new Map<string, number>();
let total = 0;
let bytes = 0;
const t0 = performance.now();
for (const r of generateDemo({ scale, now })) {
  counts.set(r.topic, (counts.get(r.topic) ?? 0) + 1);
  total++;
  if (json) bytes += JSON.stringify(r.value).length;
}
const secs = (performance.now() - t0) / 1000;
for (const [topic, n] of counts) console.log(`${topic.padEnd(20)} ${String(n).padStart(10)}`);
console.log(`${'total'.padEnd(20)} ${String(total).padStart(10)}  (estimate ${estimateDemoRecords(scale)})`);
console.log(
  `${secs.toFixed(2)} s, ${Math.round(total / secs)} records/s${json ? `, ${(bytes / 1e6).toFixed(0)} MB of JSON` : ''}, heap ${(process.memoryUsage().heapUsed / 1e6).toFixed(0)} MB`,
);
