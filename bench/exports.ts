// Export benchmark (issue 28): rows/s of each export and format (downloaded to a file by curl, or by
// a Node client where curl is not installed, in a process of its own) against two references
// measured in the same run, on the same machine and data:
//   floor:   the same rows written by the store straight to a file in that format: the export's own
//            rows loaded into a plain MergeTree (NDJSON's from the NDJSON export, CSV's and Parquet's
//            from the Parquet export: the same flat columns), then `SELECT * ... INTO OUTFILE ...
//            FORMAT F` (JSONEachRow, CSVWithNames, Parquet): what the store's own writer costs for them.
//   send:    the export's own file sent by a bare route (fastify, a file stream) to the same client:
//            what moving these bytes to a client costs here.
//   bound:   the least time this machine allows an export: it must make the floor's bytes and move
//            them as send does, both on the same cores, so at least the slower of the two and at
//            least their CPU time (this process's and the client's) over the cores. `bound vs
//            floor` is the best ratio to the floor that any export could reach here.
//   paging:  the same filters paged through the list read over HTTP (limit 200, the feed 100) for at
//            most --paging-seconds, as a client walks them.
//   loop max ms: the longest the service's event loop was held while the export ran (the other
//            requests on the service wait that long at most).
// Usage: npx tsx bench/exports.ts --help
import { execFile } from 'node:child_process';
import { createReadStream, existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { get } from 'node:http';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import Fastify from 'fastify';
import { parquetMetadata } from 'hyparquet';
import type { Embedded } from '../apps/embedded.ts';
import {
  benchArgs,
  benchCleanup,
  benchDataDir,
  fmtInt,
  fmtRatio,
  machineLine,
  printTable,
  progress,
  reportFailure,
  startBenchService,
} from './args.ts';

const USAGE = `Usage: npx tsx bench/exports.ts [options]

Streams each export (/v2/exports/events, positions, messages, feed) of the last --days days in
NDJSON, CSV and Parquet over HTTP, one at a time (each downloaded to a file by a client in a
process of its own), and prints rows/s against
  floor   the store writing the same rows straight to a file in that format (a plain MergeTree
          holding the export's rows: NDJSON's nested, CSV's and Parquet's flat as those exports
          have them; SELECT * INTO OUTFILE ... FORMAT JSONEachRow / CSVWithNames / Parquet):
          goal export/floor >= 0.7
  send    the export's own file sent by a bare route to the same client (what moving the bytes
          costs)
  bound   the least time an export can take on this machine: the slower of floor and send, and
          at least their CPU seconds (this process's and the client's) over the cores; 'bound vs
          floor' is the best ratio to the floor any export could reach here, 'vs bound' the
          export against it, and 'CPU s' the export's CPU seconds against floor + send
  paging  the same filters paged through the list read (limit 200; the feed 100) for at most
          --paging-seconds: goal export/paging >= 20
  loop max ms  the longest the service's event loop was held during the export (what every
          other request on the service waited at most meanwhile)

Options:
  --data-dir DIR        an existing seeded DATA_DIR (e.g. made by 'node bin/signalbase.cjs seed
                        --scale large --data-dir /tmp/sblarge'); default: a fresh temp dir seeded
                        with the small demo set, removed afterwards. No server may run on DIR.
  --days N              the exports' window: startTime = now - N days (default 30)
  --paging-seconds S    how long each paging reference runs (default 20)
  --only FAMILIES       these families only, comma-separated (events,positions,messages,feed)
  -h, --help            this text`;

const { values, die, posInt } = benchArgs('bench/exports.ts', USAGE, {
  'data-dir': { type: 'string' },
  days: { type: 'string' },
  'paging-seconds': { type: 'string' },
  only: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
});
const days = values.days === undefined ? 30 : posInt('days', values.days);
const pagingSecs = values['paging-seconds'] === undefined ? 20 : posInt('paging-seconds', values['paging-seconds']);
const only = values.only?.split(',');
if (only?.some((f) => !['events', 'positions', 'messages', 'feed'].includes(f)))
  die(`--only: families are events, positions, messages, feed`);
const { ownDir, dataDir } = benchDataDir(values['data-dir'], 'signalbase-bench-exports-', die);
const tStart = performance.now();

const FAMILIES = [
  { name: 'events', list: '/v2/events', limit: 200 },
  { name: 'positions', list: '/v2/positions', limit: 200 },
  { name: 'messages', list: '/v2/messages', limit: 200 },
  { name: 'feed', list: '/v2/feed', limit: 100 },
] as const;
const FORMATS = [
  { name: 'ndjson', store: 'JSONEachRow' },
  { name: 'csv', store: 'CSVWithNames' },
  { name: 'parquet', store: 'Parquet' },
] as const;

const work = mkdtempSync(join(tmpdir(), 'signalbase-bench-exports-files-'));
let emb: Embedded | undefined;
/** The send reference: a bare route sending a file's bytes as they are (GET /send?file=). */
const bare = Fastify({ logger: false });
bare.get('/send', (req, reply) => {
  reply.header('content-type', 'application/octet-stream').send(createReadStream((req.query as { file: string }).file));
});
const floors: string[] = [];
const { cleanup, interrupted } = benchCleanup({
  emb: () => emb,
  measureApp: () => undefined,
  bareApps: [bare],
  dropFloors: async (store) => {
    for (const f of floors) await store.exec(`DROP TABLE IF EXISTS $db.${f}`);
  },
  ownDir,
  dataDir,
});

/**
 * The downloading client: another process, as a bulk reader is, so that its reading and writing do
 * not take turns with the service on one event loop: curl (the README's example) where it is
 * installed, else a small Node client. On a machine of few cores the client's own CPU competes with
 * the service's: curl spends little of it, a Node client parsing and writing hundreds of MiB much
 * more, so the machine line says which one measured.
 */
const CURL = ['/usr/bin/curl', '/usr/local/bin/curl'].find((p) => existsSync(p));
const NODE_CLIENT = `
const [url, key, file] = process.argv.slice(1);
const t0 = performance.now();
require('node:http').get(url, { headers: { 'x-api-key': key }, agent: false }, (res) => {
  if (res.statusCode !== 200) {
    let text = '';
    res.on('data', (c) => (text += c));
    res.on('end', () => { process.stdout.write(JSON.stringify({ error: res.statusCode + ' ' + text.slice(0, 300) })); });
    return;
  }
  let bytes = 0;
  res.on('data', (c) => (bytes += c.length));
  res.pipe(require('node:fs').createWriteStream(file)).on('finish', () =>
    process.stdout.write(JSON.stringify({ bytes, secs: (performance.now() - t0) / 1000, trailers: res.trailers })));
}).on('error', (err) => process.stdout.write(JSON.stringify({ error: String(err) })));`;
/** The cores the service, the store and the client share. */
const CORES = availableParallelism();
const CLIENT_NAME = CURL ? `curl (${CURL})` : 'a Node client (no curl installed)';

/** `secs`: the client's own timing; `clientCpu`: the client process's CPU seconds (NaN where unknown). */
type Downloaded = { bytes: number; secs: number; trailers: NodeJS.Dict<string>; clientCpu: number };

/**
 * Runs a client under bash, whose `times` then gives the CPU seconds of the children it waited
 * for (user and system, to the millisecond): the client's CPU, which competes with the service's.
 */
function timedClient(cmd: string, args: string[], done: (err: Error | null, stdout: string, clientCpu: number) => void): void {
  execFile('bash', ['-c', '"$@"; s=$?; times >&2; exit $s', 'bash', cmd, ...args], { maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
    const child = stderr.trim().split('\n').pop() ?? '';
    const secs = [...child.matchAll(/(\d+)m([\d.]+)s/g)].map((m) => Number(m[1]) * 60 + Number(m[2]));
    done(err, stdout, secs.length === 2 ? secs[0]! + secs[1]! : Number.NaN);
  });
}

/** Streams one export to `file` from a client process; resolves with its bytes, seconds and trailers. */
function download(url: string, key: string, file: string): Promise<Downloaded> {
  return CURL ? curlDownload(CURL, url, key, file) : nodeDownload(url, key, file);
}

function nodeDownload(url: string, key: string, file: string): Promise<Downloaded> {
  return new Promise((resolve, reject) =>
    timedClient(process.execPath, ['-e', NODE_CLIENT, url, key, file], (err, stdout, clientCpu) => {
      if (err) return reject(err);
      const r = JSON.parse(stdout);
      if (r.error) reject(new Error(`GET ${url}: ${r.error}`));
      else resolve({ ...r, clientCpu });
    }),
  );
}

/** curl's own timing (request to last byte); the trailers are the fields after the headers in its header dump. */
function curlDownload(curl: string, url: string, key: string, file: string): Promise<Downloaded> {
  const head = `${file}.headers`;
  const args = [
    '-sS',
    '-o',
    file,
    '-D',
    head,
    '-w',
    '%{http_code} %{size_download} %{time_total}',
    ...(key ? ['-H', `x-api-key: ${key}`] : []),
    url,
  ];
  return new Promise((resolve, reject) =>
    timedClient(curl, args, (err, stdout, clientCpu) => {
      if (err) return reject(new Error(`curl ${url}: ${err.message}`));
      const [code, bytes, secs] = stdout.trim().split(' ');
      if (code !== '200') return reject(new Error(`GET ${url}: ${code} ${readFileSync(file, 'utf8').slice(0, 300)}`));
      const dump = readFileSync(head, 'utf8').split(/\r?\n\r?\n/);
      rmSync(head, { force: true });
      const trailers: NodeJS.Dict<string> = {};
      for (const line of (dump[1] ?? '').split(/\r?\n/)) {
        const field = /^([^:\s]+):\s*(.*)$/.exec(line);
        if (field) trailers[field[1]!.toLowerCase()] = field[2]!.trim();
      }
      resolve({ bytes: Number(bytes), secs: Number(secs), trailers, clientCpu });
    }),
  );
}

/** This process's CPU seconds so far (the service's and the bare route's: they run here). */
const ownCpu = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1e6;
};

/** Runs `f`, with the seconds it took and the CPU seconds this process spent meanwhile. */
async function timed<T>(f: () => Promise<T>): Promise<{ value: T; secs: number; cpu: number }> {
  const t0 = performance.now();
  const c0 = ownCpu();
  const value = await f();
  return { value, secs: (performance.now() - t0) / 1000, cpu: ownCpu() - c0 };
}

/** Counts an export file's rows: NDJSON lines, CSV records (a quoted field may hold a line break), Parquet's own count. */
async function rowsOf(file: string, format: string): Promise<number> {
  const buf = readFileSync(file);
  if (format === 'parquet') return Number(parquetMetadata(new Uint8Array(buf).buffer).num_rows);
  if (format === 'ndjson') {
    let n = 0;
    for (let i = buf.indexOf(10); i !== -1; i = buf.indexOf(10, i + 1)) n++;
    return n;
  }
  let n = 0;
  let quoted = false;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i];
    if (c === 34) quoted = !quoted;
    else if (c === 10 && !quoted) n++;
  }
  return n - 1; // the header
}

try {
  const started = await startBenchService(dataDir, progress, [], (e) => (emb = e), tStart);
  emb = started.emb;
  const { demoKey, setupSecs } = started;
  const origin = emb.url;
  const bareUrl = await bare.listen({ port: 0, host: '127.0.0.1' });
  const startTime = new Date(Date.now() - days * 86_400_000).toISOString();
  const rows: string[][] = [];
  // Backpressure: a reader that takes 1 MiB a second of the events export for 5 s, then leaves; first,
  // before any export has grown the process, so that its growth is the slow reader's.
  progress('events: a slow reader (1 MiB/s for 5 s)');
  const rss0 = process.memoryUsage().rss;
  let peak = rss0;
  /** The resident memory once the first pages are read (after 1 s), and the largest after it. */
  let rss1 = 0;
  let peakAfter = 0;
  let taken = 0;
  await new Promise<void>((resolve, reject) => {
    const req = get(
      `${origin}/v2/exports/events?startTime=${encodeURIComponent(startTime)}`,
      { headers: { 'x-api-key': demoKey }, agent: false },
      (res) => {
        const t0 = performance.now();
        const sample = setInterval(() => {
          const rss = process.memoryUsage().rss;
          peak = Math.max(peak, rss);
          const elapsed = (performance.now() - t0) / 1000;
          if (elapsed >= 1) {
            rss1 ||= rss;
            peakAfter = Math.max(peakAfter, rss);
          }
          if (elapsed >= 5) {
            clearInterval(sample);
            req.destroy();
            resolve();
          } else if (res.isPaused() && taken < (Math.floor(elapsed) + 1) * 1048576) res.resume();
        }, 50);
        res.on('data', (c: Buffer) => {
          taken += c.length;
          if (taken >= (Math.floor((performance.now() - t0) / 1000) + 1) * 1048576) res.pause();
        });
        res.on('error', () => {});
      },
    );
    req.on('error', (err) => (taken ? resolve() : reject(err)));
  });
  const slowReader =
    `slow reader (first, on a fresh process): took ${(taken / 1048576).toFixed(1)} MiB of the events export (its size: the table) in 5 s; ` +
    `this process's resident memory (service and bench) rose ${((peak - rss0) / 1048576).toFixed(1)} MiB at most (the store's first ` +
    `reads and chunks), of which ${((peakAfter - rss1) / 1048576).toFixed(1)} MiB after the first second (an export that ignored the ` +
    'reader would have grown by about its size meanwhile)';
  let floorSecs = 0;
  const floorRows: Record<string, number> = {};
  for (const fam of FAMILIES.filter((f) => only === undefined || only.includes(f.name))) {
    const q = `startTime=${encodeURIComponent(startTime)}`;
    // Paging the list read: rows/s of a client that walks the pages.
    progress(`${fam.name}: paging ${fam.list} for up to ${pagingSecs} s`);
    let paged = 0;
    let cursor: string | null = null;
    const tp = performance.now();
    do {
      const r = await fetch(`${origin}${fam.list}?${q}&limit=${fam.limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, {
        headers: { 'x-api-key': demoKey },
      });
      if (r.status !== 200) throw new Error(`paging ${fam.list}: ${r.status} ${(await r.text()).slice(0, 300)}`);
      const body = (await r.json()) as { data: { results: unknown[]; meta: { nextCursor: string | null } } };
      paged += body.data.results.length;
      cursor = body.data.meta.nextCursor;
    } while (cursor && performance.now() - tp < pagingSecs * 1000);
    const pagingRate = paged / ((performance.now() - tp) / 1000);

    const done: {
      fmt: (typeof FORMATS)[number];
      file: string;
      rows: number;
      bytes: number;
      secs: number;
      cpu: number;
      loopMaxMs: number;
      send: { secs: number; cpu: number };
    }[] = [];
    for (const fmt of FORMATS) {
      const file = join(work, `${fam.name}.${fmt.name}`);
      progress(`${fam.name}: exporting ${fmt.name}`);
      // How long the service's event loop was held at most during the export (other requests wait that long).
      const loop = monitorEventLoopDelay({ resolution: 1 });
      loop.enable();
      const exported = await timed(() => download(`${origin}/v2/exports/${fam.name}?${q}&format=${fmt.name}`, demoKey, file));
      loop.disable();
      const part = exported.value;
      if (part.trailers['x-export-complete'] !== 'true')
        throw new Error(`${fam.name} ${fmt.name}: the export stopped at a limit (${JSON.stringify(part.trailers)}); use a shorter --days`);
      // The send reference: the same bytes from a bare route, to the same client (best of two, and its CPU).
      let send = { secs: Number.POSITIVE_INFINITY, cpu: Number.NaN };
      for (let i = 0; i < 2; i++) {
        const sent = await timed(() => download(`${bareUrl}/send?file=${encodeURIComponent(file)}`, '', `${file}.sent`));
        if (sent.value.secs < send.secs) send = { secs: sent.value.secs, cpu: sent.cpu + sent.value.clientCpu };
      }
      rmSync(`${file}.sent`);
      const cpu = exported.cpu + part.clientCpu;
      const loopMaxMs = loop.max / 1e6;
      done.push({ fmt, file, rows: await rowsOf(file, fmt.name), bytes: part.bytes, secs: part.secs, cpu, loopMaxMs, send });
    }

    // The floors: the export's rows in plain MergeTrees, written by the store to a file in each
    // format. NDJSON from the NDJSON export's rows (its nested objects); CSV and Parquet from the
    // Parquet export's (the same flat columns and types the CSV and Parquet exports have).
    const tf = performance.now();
    const fileOf = (name: string) => done.find((d) => d.fmt.name === name)!.file;
    const tables = { ndjson: `bench_floor_export_${fam.name}`, flat: `bench_floor_export_${fam.name}_flat` };
    for (const [shape, from] of [
      ['ndjson', `file('${fileOf('ndjson')}', JSONEachRow)`],
      ['flat', `file('${fileOf('parquet')}', Parquet)`],
    ] as const) {
      const floor = tables[shape];
      floors.push(floor);
      await emb.store.exec(`DROP TABLE IF EXISTS $db.${floor}`);
      await emb.store.exec(
        `CREATE TABLE $db.${floor} ENGINE = MergeTree ORDER BY tuple() AS SELECT * FROM ${from}
         SETTINGS input_format_json_read_objects_as_strings = 1, input_format_json_read_arrays_as_strings = 1, max_insert_threads = 1, max_threads = 1`,
      );
      await emb.store.exec(`OPTIMIZE TABLE $db.${floor} FINAL`);
      const [c] = await emb.store.query<{ n: number }>(`SELECT count() AS n FROM $db.${floor}`);
      floorRows[floor] = Number(c?.n ?? 0);
      const n = done[0]!.rows;
      if (floorRows[floor] !== n) throw new Error(`${floor}: ${floorRows[floor]} rows, the export ${n}`);
    }
    for (const d of done) {
      const floor = d.fmt.name === 'ndjson' ? tables.ndjson : tables.flat;
      const out = join(work, `${fam.name}.floor.${d.fmt.name}`);
      let best = { secs: Number.POSITIVE_INFINITY, cpu: Number.NaN };
      for (let i = 0; i < 3; i++) {
        const rep = await timed(() =>
          emb!.store.exec(
            `SELECT * FROM $db.${floor} ORDER BY _part_offset INTO OUTFILE '${out}' TRUNCATE FORMAT ${d.fmt.store}
             SETTINGS date_time_output_format = 'iso', output_format_csv_crlf_end_of_line = 1, output_format_parquet_compression_method = 'snappy'`,
          ),
        );
        if (rep.secs < best.secs) best = rep;
      }
      const floorRate = d.rows / best.secs;
      const sendRate = d.rows / d.send.secs;
      const rate = d.rows / d.secs;
      // The least time any export of these rows could take here (NaN CPU: the slower of the two only).
      const cpuBound = (best.cpu + d.send.cpu) / CORES;
      const bound = Math.max(best.secs, d.send.secs, Number.isNaN(cpuBound) ? 0 : cpuBound);
      rows.push([
        `${fam.name} ${d.fmt.name}`,
        fmtInt(d.rows),
        `${(d.bytes / 1048576).toFixed(1)} / ${(statSync(out).size / 1048576).toFixed(1)}`,
        fmtInt(rate),
        fmtInt(floorRate),
        fmtRatio(rate / floorRate, rate / floorRate < 0.7),
        fmtInt(sendRate),
        `${d.cpu.toFixed(2)} / ${(best.cpu + d.send.cpu).toFixed(2)}`,
        fmtRatio(best.secs / bound, false),
        fmtRatio(bound / d.secs, false),
        fmtInt(pagingRate),
        fmtRatio(rate / pagingRate, rate / pagingRate < 20),
        d.loopMaxMs.toFixed(0),
      ]);
    }
    floorSecs += (performance.now() - tf) / 1000;
  }
  printTable(
    [
      'export',
      'rows',
      'MiB export / floor',
      'rows/s',
      'floor rows/s',
      'vs floor',
      'send rows/s',
      'CPU s export / floor+send',
      'bound vs floor',
      'vs bound',
      'paging rows/s',
      'vs paging',
      'loop max ms',
    ],
    rows,
  );
  console.log(slowReader);

  console.log(
    machineLine({
      ownDir,
      dataDir,
      extra: `last ${days} days, one export at a time, downloaded by ${CLIENT_NAME}, paging ${pagingSecs} s per read; bound over ${CORES} cores`,
      floorRows,
      setupSecs,
      floorSecs,
      tStart,
    }),
  );
} catch (err) {
  reportFailure('bench/exports.ts', err, interrupted());
  process.exitCode = 1;
} finally {
  await cleanup();
  rmSync(work, { recursive: true, force: true });
}
