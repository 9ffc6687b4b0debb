// Cost-bound benchmark (issue 24): the per-query bounds of apps/reads/cost.ts against the worst
// cases measured on the data. Every read's handler runs in-process with the schema's defaults and
// with every parameter at its widest; each store query it issued is replayed on a chdb session of
// the bench's own (format Null) for the engine's figures (time, rows and bytes read) and under
// `max_memory_usage` steps for its peak memory. Usage: npx tsx bench/costs.ts --help
import { Session } from 'chdb';
import { type Embedded, storePath } from '../apps/embedded.ts';
import { ANALYTICS_COST, LIST_COST, type ReadCost } from '../apps/reads/cost.ts';
import { CursorCodec } from '../apps/reads/cursor.ts';
import type { Principal } from '../apps/reads/principal.ts';
import { costOf, OPERATIONS, type Operation } from '../apps/registry.ts';
import { ApiError } from '../schemas/api/errors.ts';
import { MAX_BUCKETS } from '../schemas/api/queries.ts';
import { SCOPES } from '../schemas/topics/index.ts';
import { bindDatabase, type Params, type Store, storeFailure } from '../storage/port.ts';
import { POSITIONS_CURRENT_TABLE } from '../storage/tables/trading.ts';
import {
  benchArgs,
  benchCleanup,
  benchDataDir,
  handlerQuery,
  machineLine,
  pct,
  printTable,
  progress,
  reportFailure,
  sortNum,
  startBenchService,
} from './args.ts';

const USAGE = `Usage: npx tsx bench/costs.ts --data-dir DIR [options]

Justifies the per-query cost bounds (apps/reads/cost.ts) with measured worst cases: every read of
the registry runs its handler in-process (every scope, all visibilities, no history window) with
(a) the schema defaults and (b) every parameter at its widest (each *Ids list full of real ids,
1970-01-01..2299-12-31, limit at its maximum, minimum counts 0, includeLowSignal, the widest valid
time bucket; once per value of a choice such as rankings' metric). Each store query it issued is
replayed on a chdb session of the bench's own (format Null, the service closed): rows and bytes
read (the SelectedRows and SelectedBytes profile events around it), store time (median of
--reps), and its peak memory bracketed by re-running it under max_memory_usage = 8, 32, 128,
512 MiB, 2 GiB. Printed: the worst query's figures and the headroom (bound / figure) per bound;
' !' marks a headroom under 3x.

Options:
  --data-dir DIR      an existing seeded DATA_DIR (required; e.g. made by
                      'node bin/signalbase.cjs seed --scale large --data-dir /tmp/sblarge').
                      No server may be running on DIR (chdb: one process per data directory).
  --reps N            timed replays of each query; the median counts (default 3)
  -h, --help          this text

The result table goes to stdout, progress to stderr.`;

const {
  values: argv,
  die,
  posInt,
} = benchArgs('bench/costs', USAGE, {
  'data-dir': { type: 'string' },
  reps: { type: 'string', default: '3' },
  help: { type: 'boolean', short: 'h' },
});
if (argv['data-dir'] === undefined) die(`--data-dir DIR is required\n\n${USAGE}`);
const REPS = posInt('reps', argv.reps);
const { ownDir, dataDir } = benchDataDir(argv['data-dir'], 'signalbase-bench-costs-', die);

const MIB = 2 ** 20;
const MEMORY_STEPS = [8, 32, 128, 512, 2048].map((m) => m * MIB);
const HEADROOM_GOAL = 3;
const WIDE_START = '1970-01-01T00:00:00Z';
const WIDE_END = '2299-12-31T00:00:00Z';
const BUCKET_MS: Record<string, number> = { hour: 3_600_000, day: 86_400_000, week: 7 * 86_400_000 };
const PRINCIPAL: Principal = {
  accountId: 'bench',
  keyId: 'bench',
  scopes: new Set(SCOPES),
  messageVisibility: { mode: 'all' },
  signalVisibility: { mode: 'all' },
  historyWindowDays: null,
};

interface Recorded {
  sql: string;
  params: Params;
}
interface Figures {
  ms: number;
  rows: number;
  bytes: number;
  memory: number;
}

/** The store a handler reads through: forwards to `inner` and records each query (facts load on `underlying`, unrecorded, as behind the cost bounds). */
function recordingStore(inner: Store, log: Recorded[]): Store {
  return {
    database: inner.database,
    underlying: inner,
    query: (sql, params, opts) => {
      log.push({ sql, params: params ?? {} });
      return inner.query(sql, params, opts);
    },
    exec: () => Promise.reject(new Error('reads do not write')),
    insert: () => Promise.reject(new Error('reads do not write')),
    insertCompact: () => Promise.reject(new Error('reads do not write')),
    close: async () => {},
  };
}

/**
 * Rows and bytes a statement read from tables: the process's SelectedRows and SelectedBytes profile
 * events around it (ChdbResult's rowsRead and bytesRead count the result), less what reading the
 * counters itself adds (`overhead`). The process runs nothing else meanwhile.
 */
async function selected(
  session: Session,
  run: () => Promise<unknown>,
  overhead = { rows: 0, bytes: 0 },
): Promise<{ rows: number; bytes: number }> {
  const counters = async () => {
    const r = (
      await session.queryAsync(
        "SELECT sumIf(value, event = 'SelectedRows') AS r, sumIf(value, event = 'SelectedBytes') AS b FROM system.events",
        { format: 'JSONEachRow' },
      )
    ).json<{ r: string; b: string }>();
    return { rows: Number(r.r), bytes: Number(r.b) };
  };
  const a = await counters();
  await run();
  const b = await counters();
  return { rows: Math.max(0, b.rows - a.rows - overhead.rows), bytes: Math.max(0, b.bytes - a.bytes - overhead.bytes) };
}

/** One query's engine figures: rows and bytes read (the fewest over the runs), median store time, and the smallest memory step it passes under (Infinity: none). */
async function measure(session: Session, database: string, q: Recorded, overhead: { rows: number; bytes: number }): Promise<Figures> {
  const sql = bindDatabase(q.sql, database);
  const ms: number[] = [];
  let read = { rows: Infinity, bytes: Infinity };
  for (let i = 0; i <= REPS; i++) {
    // the first run warms up: its time does not count
    const r = await selected(
      session,
      async () => {
        const t = (await session.queryBindAsync(sql, q.params, { format: 'Null' })).elapsed;
        if (i) ms.push(t * 1000);
      },
      overhead,
    );
    read = { rows: Math.min(read.rows, r.rows), bytes: Math.min(read.bytes, r.bytes) };
  }
  let memory = Infinity;
  for (const limit of MEMORY_STEPS) {
    try {
      await session.queryBindAsync(`SET max_memory_usage = ${limit}; ${sql}`, q.params, { format: 'Null' });
      memory = limit;
    } catch (err) {
      const f = storeFailure(err);
      if (f?.kind !== 'too_large' || f.bound !== 'memory') throw err;
    } finally {
      await session.queryAsync('SET max_memory_usage = DEFAULT', { format: 'Null' });
    }
    if (memory === limit) break;
  }
  return { ms: pct(sortNum(ms), 50), ...read, memory };
}

/** Real ids for the `*Ids` parameters, busiest first (most positions), as many as any schema allows. */
async function idPools(store: Store, max: number): Promise<Record<string, number[]>> {
  const ids = async (sql: string) => (await store.query<{ id: number }>(sql, { max })).map((r) => Number(r.id));
  const busiest = (table: string, column: string, where: string) =>
    ids(`SELECT t.id AS id FROM (SELECT id FROM $db.${table} FINAL WHERE ${where}) AS t
    LEFT JOIN (SELECT ${column} AS k, count() AS n FROM ${POSITIONS_CURRENT_TABLE} WHERE live = 1 GROUP BY k) AS p ON p.k = t.id
    ORDER BY p.n DESC, t.id LIMIT {max:UInt32}`);
  return {
    traderIds: await busiest('traders', 'traderId', 'deleted = 0'),
    assetIds: await busiest('assets', 'assetId', 'deleted = 0 AND hasActiveMarket = 1'),
    positionIds: await ids(`SELECT id FROM ${POSITIONS_CURRENT_TABLE} WHERE live = 1 ORDER BY openAt DESC LIMIT {max:UInt32}`),
  };
}

type Props = Record<
  string,
  { type?: string; enum?: string[]; default?: unknown; maximum?: number; minimum?: number; 'x-list-max'?: number }
>;
const propsOf = (op: Operation) => (op.query as unknown as { properties: Props }).properties;
const maxListIds = Math.max(
  ...OPERATIONS.flatMap((op) =>
    Object.entries(propsOf(op))
      .filter(([k]) => k.endsWith('Ids'))
      .map(([, s]) => s['x-list-max'] ?? 0),
  ),
);

/** The query at its widest: every *Ids list full, 1970..2299, limit at its maximum, other integers (minimum counts) at their minimum, booleans (includeLowSignal) true. */
function wideQuery(op: Operation, pools: Record<string, number[]>): Record<string, unknown> {
  const q = handlerQuery(op, new URLSearchParams());
  for (const [k, s] of Object.entries(propsOf(op))) {
    if (k.endsWith('Ids')) {
      const pool = pools[k] ?? die(`${op.tool}: no id pool for ${k}`);
      q[k] = pool.slice(0, s['x-list-max']).join(',');
    } else if (k === 'startTime') q[k] = WIDE_START;
    else if (k === 'endTime') q[k] = WIDE_END;
    else if (k === 'limit') q[k] = s.maximum;
    else if (s.type === 'integer' && s.minimum !== undefined) q[k] = s.minimum;
    else if (s.type === 'boolean') q[k] = true;
  }
  return q;
}

/** A case: the first of its tries that answers is measured (`label` says which, when there is a choice). */
interface Case {
  name: string;
  tries: { label: string; query: Record<string, unknown> }[];
}

/**
 * (a) the defaults; (b) the widest, once per value of each choice a read computes by (an enum with a
 * default: rankings' metric, activity's groupBy). A time bucket (`interval`) is tried widest first
 * over 1970..2299; when none is valid, the widest over MAX_BUCKETS buckets ending at serverTime.
 */
function casesOf(op: Operation, pools: Record<string, number[]>, serverTime: Date): Case[] {
  const props = propsOf(op);
  const choices = Object.entries(props).filter(([k, s]) => s.enum && s.default !== undefined && k !== 'interval');
  const wides = choices.reduce<{ name: string; query: Record<string, unknown> }[]>(
    (acc, [k, s]) => acc.flatMap((w) => s.enum!.map((v) => ({ name: `${w.name}, ${k}=${v}`, query: { ...w.query, [k]: v } }))),
    [{ name: 'widest', query: wideQuery(op, pools) }],
  );
  const buckets = props.interval?.enum;
  const tries = (q: Record<string, unknown>) => {
    if (!buckets) return [{ label: '', query: q }];
    const widest = buckets.at(-1)!;
    const start = new Date(serverTime.getTime() - (MAX_BUCKETS - 1) * BUCKET_MS[widest]!).toISOString();
    return [
      ...[...buckets].reverse().map((interval) => ({ label: `, ${interval}`, query: { ...q, interval } })),
      {
        label: `, ${widest}, ${MAX_BUCKETS} ${widest}s to now`,
        query: { ...q, interval: widest, startTime: start, endTime: serverTime.toISOString() },
      },
    ];
  };
  return [
    { name: 'defaults', tries: [{ label: '', query: handlerQuery(op, new URLSearchParams()) }] },
    ...wides.map((w) => ({ name: w.name, tries: tries(w.query) })),
  ];
}

const fmtBytes = (x: number) =>
  x >= 2 ** 30 ? `${(x / 2 ** 30).toFixed(2)} GiB` : x >= MIB ? `${(x / MIB).toFixed(1)} MiB` : `${(x / 1024).toFixed(1)} KiB`;
const headroom = (bound: number, x: number) => {
  if (!(x > 0)) return '-';
  const r = bound / x;
  return `${r >= 10 ? r.toFixed(0) : r.toFixed(1)}x${r < HEADROOM_GOAL ? ' !' : ''}`;
};

const tStart = performance.now();
let emb: Embedded | undefined;
let session: Session | undefined;
const { cleanup, interrupted } = benchCleanup({
  emb: () => emb,
  measureApp: () => undefined,
  bareApps: [],
  dropFloors: async () => {},
  ownDir,
  dataDir,
});
let exitCode = 0;
try {
  const started = await startBenchService(
    dataDir,
    progress,
    ['positions_current', 'traders', 'assets'],
    (e) => {
      emb = e;
    },
    tStart,
  );
  emb = started.emb;
  session = new Session(storePath(dataDir));
  const pools = await idPools(emb.store, maxListIds);
  const poolsLine = `id pools (busiest first; a list takes as many as its schema allows) ${Object.entries(pools)
    .map(([k, v]) => `${k} ${v.length}`)
    .join(', ')}`;
  const serverTime = new Date();
  const database = emb.store.database;
  const ctx = (log: Recorded[]) => ({
    store: recordingStore(emb!.store, log),
    principal: PRINCIPAL,
    now: serverTime,
    cursors: CursorCodec.random(),
    dataVersion: () => 0,
  });
  // Handlers first (recording their queries), then the service closed: the replays run alone in the process.
  const ran: { op: Operation; name: string; log: Recorded[] | string }[] = [];
  const notes: string[] = [];
  for (const op of OPERATIONS) {
    for (const c of casesOf(op, pools, serverTime)) {
      const missing = ((op.query as { required?: string[] }).required ?? []).filter((k) => c.tries[0]!.query[k] === undefined);
      if (missing.length) {
        ran.push({ op, name: c.name, log: `400 VALIDATION_ERROR (${missing.join(', ')} required): skipped` });
        continue;
      }
      const refused: string[] = [];
      for (const t of c.tries) {
        const log: Recorded[] = [];
        try {
          await op.handler(ctx(log), t.query);
          ran.push({ op, name: c.name + t.label, log });
          progress(`${op.tool} ${c.name}${t.label}: ${log.length} queries`);
          break;
        } catch (err) {
          if (!(err instanceof ApiError)) throw err;
          if (err.status >= 500) exitCode = 1;
          refused.push(`${t.label.slice(2) || 'as given'}: ${err.status} ${err.code}`);
          if (refused.length === c.tries.length) ran.push({ op, name: c.name, log: `${err.status} ${err.code}: skipped` });
        }
      }
      if (refused.length && refused.length < c.tries.length) notes.push(`${op.tool} ${c.name}: ${refused.join('; ')}`);
    }
  }
  await emb.close();
  emb = undefined;
  const baseline = await selected(session, () => session!.queryAsync('SELECT 1', { format: 'Null' }));
  const rows: string[][] = [];
  for (const { op, name, log } of ran) {
    if (typeof log === 'string') {
      rows.push([op.tool, `${name}: ${log}`, ...Array<string>(9).fill('-')]);
      continue;
    }
    progress(`${op.tool} ${name}: replaying ${log.length} queries`);
    const figs: Figures[] = [];
    for (const q of log) figs.push(await measure(session, database, q, baseline));
    const worst = (k: keyof Figures) => Math.max(0, ...figs.map((f) => f[k]));
    const [ms, rowsRead, bytes, memory] = [worst('ms'), worst('rows'), worst('bytes'), worst('memory')];
    const bound = costOf(op);
    rows.push([
      op.tool,
      name,
      String(log.length),
      log.length ? rowsRead.toLocaleString('en-US') : '-',
      log.length ? fmtBytes(bytes) : '-',
      log.length ? ms.toFixed(1) : '-',
      memory === Infinity ? '> 2 GiB' : memory ? `<= ${fmtBytes(memory)}` : '-',
      headroom(bound.timeMs, ms),
      headroom(bound.rowsRead, rowsRead),
      headroom(bound.bytesRead, bytes),
      headroom(bound.memoryBytes, memory),
    ]);
  }
  console.log('');
  console.log(`Cost bounds against the worst store query of each read (replayed in chdb, format Null; store ms: median of ${REPS})`);
  printTable(
    ['operation', 'case', 'queries', 'rows read', 'bytes read', 'store ms', 'memory', 'time hr', 'rows hr', 'bytes hr', 'memory hr'],
    rows,
    2,
  );
  const fmtCost = (c: ReadCost) =>
    `${c.timeMs / 1000} s, ${c.rowsRead.toLocaleString('en-US')} rows, ${fmtBytes(c.bytesRead)}, ${fmtBytes(c.memoryBytes)}`;
  console.log(
    `hr = headroom: the read's bound per query (list reads ${fmtCost(LIST_COST)}; analytics reads ${fmtCost(ANALYTICS_COST)}) / the worst query's figure` +
      ` (each figure's own worst query); memory: the smallest max_memory_usage step the query passes under; ' !' under ${HEADROOM_GOAL}x`,
  );
  for (const n of notes) console.log(`note: ${n}`);
  console.log(machineLine({ ownDir, dataDir, extra: poolsLine, floorRows: {}, setupSecs: started.setupSecs, floorSecs: 0, tStart }));
} catch (err) {
  reportFailure('bench/costs', err, interrupted());
  exitCode = 1;
} finally {
  session?.close();
  await cleanup();
}
process.exit(exitCode);
