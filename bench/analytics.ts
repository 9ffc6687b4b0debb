// Analytics-read benchmark (DESIGN 8 and 9): every figure is a ratio against a floor built and
// measured in the same run, in the same chdb store, on the same machine.
//   SQL floor: per read, plain MergeTrees laid out for the read (ordered by the key its floor
//              query wants) holding exactly the rows the read aggregates for an all-visibility
//              caller, precomputed (eligibility applied, a `ready` flag per position and window),
//              and the same aggregate as one GROUP BY over them (no FINAL, no join).
//   HTTP:      the real route of a second API instance without a read cache, against the same floor.
// Usage: npx tsx bench/analytics.ts --help

import type { FastifyInstance } from 'fastify';
import { buildApi } from '../apps/api/server.ts';
import { ApiKeyAuthenticator } from '../apps/auth/keys.ts';
import { MemoryCache } from '../apps/cache/memory.ts';
import type { Embedded } from '../apps/embedded.ts';
import { CursorCodec } from '../apps/reads/cursor.ts';
import type { Principal } from '../apps/reads/principal.ts';
import { OPERATIONS, type Operation } from '../apps/registry.ts';
import { READ_MODEL_GRAPH } from '../projectors/index.ts';
import { ACTIVITY_METRICS, RANKING_METRICS, type RankingMetric } from '../schemas/api/queries.ts';
import { WINDOWS, type WindowName } from '../schemas/api/resources.ts';
import { SCOPES } from '../schemas/topics/index.ts';
import { versionChanges } from '../storage/changes.ts';
import type { ChdbStore } from '../storage/chdb.ts';
import type { Params } from '../storage/port.ts';
import { ASSETS_TABLE } from '../storage/tables/assets.ts';
import { MESSAGES_CURRENT_TABLE } from '../storage/tables/messages.ts';
import { POSITION_PERFORMANCES_TABLE } from '../storage/tables/performance.ts';
import { TRADERS_TABLE } from '../storage/tables/traders.ts';
import { EVENTS_CURRENT_TABLE, POSITIONS_CURRENT_TABLE } from '../storage/tables/trading.ts';
import {
  benchArgs,
  benchCleanup,
  benchDataDir,
  buildFloorTable,
  fmtMs,
  fmtRatio,
  handlerQuery,
  interleaved,
  machineLine,
  pct,
  printTable,
  progress,
  reportFailure,
  settle,
  sortNum,
  startBenchService,
  timed,
} from './args.ts';

/** The reads' change log: the data stands still during a bench (memos made once). */
const STATIC = versionChanges(() => 0, READ_MODEL_GRAPH);

const USAGE = `Usage: npx tsx bench/analytics.ts [options]

Benchmarks the five analytics reads (trader stats for 200 traders, asset stats for 200 assets,
rankings with each metric on defaults and with an asset filter, activity summaries over 7 days by
hour and over 168 days by day, trader activity) against floors built in the same run in the same
store:
  handler  p50 of the read's handler called directly / p50 of the same aggregate as one GROUP BY
           over a plain MergeTree laid out for the read holding the precomputed rows it aggregates
  http     p50 of the real route (a second instance without a read cache, one request at a time)
           / floor p50

Options:
  --data-dir DIR      an existing seeded DATA_DIR (e.g. made by
                      'node bin/signalbase.cjs seed --scale large --data-dir /tmp/sblarge');
                      default: a fresh temp dir seeded with the small demo set, removed afterwards.
                      No server may be running on DIR (chdb: one process per data directory).
  --reps N            measured handler calls, floor queries and HTTP requests per case (default 20)
  --max-seconds S     budget for the measurements; cases are measured cheapest first, each gets an
                      equal share of what is left and stops early past it (default 360)
  --skip-http         leave out the HTTP measurement
  -h, --help          this text

Client, server and floors share this process (chdb opens a data directory from one process only).
The floor tables (bench_floor_*) are dropped at the end. The result table goes to stdout,
progress to stderr.`;

const {
  values: argv,
  die,
  posInt,
} = benchArgs('bench/analytics', USAGE, {
  'data-dir': { type: 'string' },
  reps: { type: 'string', default: '20' },
  'max-seconds': { type: 'string', default: '360' },
  'skip-http': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
});
const REPS = posInt('reps', argv.reps);
const MAX_SECONDS = posInt('max-seconds', argv['max-seconds']);
const SKIP_HTTP = argv['skip-http'] === true;
const WARMUP = 3;
const HOUR_MS = 3_600_000;
const DAY_MS = 86_400_000;
const STATS_IDS = 200; // trader and asset stats: the busiest 200 (the most a request may name)
const RANKING_ASSETS = 5; // rankings' asset filter: the 5 busiest assets
const MIN_POSITION_COUNT = 3; // trader activity's default minPositionCount
const GOAL = 2; // handler p50 at most 2x the floor's

// ---------------------------------------------------------------------------------------------
// Data directory: refuse a directory a running server holds, seed a fresh one by default.

const { ownDir, dataDir } = benchDataDir(argv['data-dir'], 'signalbase-bench-analytics-', die);

// ---------------------------------------------------------------------------------------------
// Measurement helpers (pct, timed, handlerQuery, ... in args.ts).

const PRINCIPAL: Principal = {
  accountId: 'bench',
  keyId: 'bench',
  scopes: new Set(SCOPES),
  messageVisibility: { mode: 'all' },
  signalVisibility: { mode: 'all' },
  historyWindowDays: null,
};

/** Same figure? Counts exactly; reals to 1e-9 relative (the floor sums in another order); null and NaN alike. */
function near(a: number | null | undefined, b: number | null | undefined): boolean {
  const none = (x: number | null | undefined) => x === null || x === undefined || Number.isNaN(x);
  if (none(a) || none(b)) return none(a) && none(b);
  return Math.abs(a! - b!) <= 1e-9 * Math.max(1, Math.abs(a!), Math.abs(b!));
}

// ---------------------------------------------------------------------------------------------
// Floors: what the reads aggregate for an all-visibility caller, precomputed with the eligibility
// rules of apps/reads/analytics/ (README "Analytics reads"), from the current-state views and the
// trader and asset tables (FINAL, deleted = 0), each in a plain MergeTree ordered for its reads.
//   sample:   per live position of a live trader on a live asset with an active market and per
//             window: traderId, assetId, direction, openAt (ms), window, ready (status ready and
//             evaluated at or before the bench's serverTime) and r (the return when ready, else 0).
//   events:   counted events: live trade events of live traders on eligible assets (at: ms).
//   activity: counted events and counted messages (a message's trader: the lowest live trader id
//             assigned its source) in one table: at (ms), traderId, isEvent.

const TRADERS_LIVE = `SELECT id FROM ${TRADERS_TABLE} FINAL WHERE deleted = 0`;
const ASSETS_ELIGIBLE = `SELECT id FROM ${ASSETS_TABLE} FINAL WHERE deleted = 0 AND hasActiveMarket = 1`;

interface FloorTable {
  name: string;
  ddl: (serverTime: number) => string;
}

const FLOOR_TABLES: FloorTable[] = [
  {
    // Trader stats: a trader's rows are one range of the key.
    name: 'bench_floor_sample_by_trader',
    ddl: (serverTime) => `ENGINE = MergeTree ORDER BY (traderId, window, openAt) AS
      SELECT p.traderId AS traderId, p.assetId AS assetId, p.direction AS direction, toUnixTimestamp64Milli(p.openAt) AS openAt,
             e.window AS window, toUInt8(e.status = 'ready' AND e.evaluatedAt <= ${Math.trunc(serverTime)}) AS ready,
             if(ready = 1, ifNull(e.returnPercentage, 0), 0) AS r
      FROM ${POSITIONS_CURRENT_TABLE} AS p
      INNER JOIN (${TRADERS_LIVE}) AS t ON t.id = p.traderId
      INNER JOIN (${ASSETS_ELIGIBLE}) AS a ON a.id = p.assetId
      INNER JOIN (SELECT positionId, window, status, evaluatedAt, returnPercentage FROM ${POSITION_PERFORMANCES_TABLE} FINAL WHERE live = 1) AS e
        ON e.positionId = p.id
      WHERE p.live = 1`,
  },
  {
    // Rankings (one window, openAt since 1 January) and trader activity (the 1D rows: one per position).
    name: 'bench_floor_sample_by_time',
    ddl: () => 'ENGINE = MergeTree ORDER BY (window, openAt) AS SELECT * FROM $db.bench_floor_sample_by_trader',
  },
  {
    // Asset stats (1D rows of 200 assets) and rankings with an asset filter.
    name: 'bench_floor_sample_by_asset',
    ddl: () => 'ENGINE = MergeTree ORDER BY (window, assetId, openAt) AS SELECT * FROM $db.bench_floor_sample_by_trader',
  },
  {
    // Rankings' event counts over a time range.
    name: 'bench_floor_events_by_time',
    ddl: () => `ENGINE = MergeTree ORDER BY (at) AS
      SELECT e.traderId AS traderId, e.assetId AS assetId, e.direction AS direction, e.type AS type, toUnixTimestamp64Milli(e.timeOfEvent) AS at
      FROM ${EVENTS_CURRENT_TABLE} AS e
      INNER JOIN (${TRADERS_LIVE}) AS t ON t.id = e.traderId
      INNER JOIN (${ASSETS_ELIGIBLE}) AS a ON a.id = e.assetId
      WHERE e.live = 1`,
  },
  {
    // Rankings' event counts with an asset filter.
    name: 'bench_floor_events_by_asset',
    ddl: () => 'ENGINE = MergeTree ORDER BY (assetId, at) AS SELECT * FROM $db.bench_floor_events_by_time',
  },
  {
    // Activity summaries: counted events and counted messages side by side, by time.
    name: 'bench_floor_activity',
    ddl: () => `ENGINE = MergeTree ORDER BY (at) AS
      SELECT at, traderId, toUInt8(1) AS isEvent FROM $db.bench_floor_events_by_time
      UNION ALL
      SELECT toUnixTimestamp64Milli(m.writtenAt) AS at, t.traderId AS traderId, toUInt8(0) AS isEvent
      FROM ${MESSAGES_CURRENT_TABLE} AS m
      INNER JOIN (SELECT sourcePlatform, sourceIdentityId, min(id) AS traderId FROM ${TRADERS_TABLE} FINAL
                  WHERE deleted = 0 AND sourcePlatform != '' GROUP BY sourcePlatform, sourceIdentityId) AS t
        ON t.sourcePlatform = m.platform AND t.sourceIdentityId = m.sourceIdentityId
      WHERE m.live = 1`,
  },
];

/** Per group and window, the figures of a timeBasedPerformance (the floor's side of performanceSql). */
const PERF_COLUMNS = `count() AS sampled, countIf(ready = 1) AS scored, avgIf(r, ready = 1) AS mean,
  quantileExactInclusiveIf(0.5)(r, ready = 1) AS median, countIf(ready = 1 AND r > 0) AS wins,
  stddevSampStableIf(r, ready = 1) AS sd, countIf(direction = 'long') AS longs`;

interface PerfRow {
  g: number;
  window: WindowName;
  sampled: number;
  scored: number;
  mean: number;
  median: number;
  wins: number;
  sd: number;
  longs: number;
}

// ---------------------------------------------------------------------------------------------
// Cases: per read, a query, its floor (the queries, timed as one) and the check of the handler's
// answer against what the floor returned.

interface Case {
  read: string;
  label: string;
  op: Operation;
  search: URLSearchParams;
  /** The floor's queries, one after the other; returns what `check` compares. */
  floor: () => Promise<unknown>;
  /** null when the answer agrees with the floor on the main figures, else what differs. */
  check: (answer: any, floor: any) => string | null;
  rowsOf: (answer: any) => number;
}

const opFor = (tool: string): Operation => {
  const op = OPERATIONS.find((o) => o.tool === tool && o.versions.includes('v2'));
  if (!op) throw new Error(`no v2 operation ${tool}`);
  return op;
};

/** Up to `n` ids, the busiest first (most rows of `col` in `table` where `where`), ties by id. */
async function busiest(store: ChdbStore, table: string, col: string, where: string, n: number): Promise<number[]> {
  const rows = await store.query<{ id: number }>(
    `SELECT ${col} AS id FROM $db.${table} WHERE ${where} GROUP BY ${col} ORDER BY count() DESC, ${col} LIMIT ${n}`,
  );
  return rows.map((r) => Number(r.id));
}

const num = (x: unknown) => (x === null || x === undefined ? null : Number(x));
const first = (diffs: string[]) => (diffs.length ? `${diffs.length} figures differ, first: ${diffs[0]}` : null);

function perfIndex(rows: PerfRow[]): Map<number, Map<string, PerfRow>> {
  const out = new Map<number, Map<string, PerfRow>>();
  for (const r of rows) {
    const g = Number(r.g);
    let m = out.get(g);
    if (!m) out.set(g, (m = new Map()));
    m.set(r.window, r);
  }
  return out;
}

/** The contract's metric of a floor aggregate (README "Analytics reads"). */
function floorMetric(metric: RankingMetric, eventCount: number, a: PerfRow | undefined): number | null {
  const sampled = Number(a?.sampled ?? 0);
  const scored = Number(a?.scored ?? 0);
  switch (metric) {
    case 'event_count':
      return eventCount;
    case 'position_count':
      return sampled;
    case 'win_rate':
      return scored ? (Number(a!.wins) / scored) * 100 : null;
    case 'avg_return':
      return scored ? Number(a!.mean) : null;
    case 'median_return':
      return scored ? Number(a!.median) : null;
    case 'sharpe_ratio':
      return scored >= 2 && Number(a!.sd) !== 0 && !Number.isNaN(Number(a!.sd)) ? Number(a!.mean) / Number(a!.sd) : null;
  }
}

async function buildCases(emb: Embedded, serverTime: number): Promise<Case[]> {
  const store = emb.store;
  const cases: Case[] = [];

  // Trader stats: the 200 busiest traders, unbounded (the default), all three windows.
  const traders = await busiest(store, 'bench_floor_sample_by_trader', 'traderId', "window = '1D'", STATS_IDS);
  cases.push({
    read: 'trader stats',
    label: `${traders.length} busiest traders`,
    op: opFor('list_trader_stats'),
    search: new URLSearchParams({ traderIds: traders.join(',') }),
    floor: () =>
      store.query<PerfRow>(
        `SELECT traderId AS g, window, ${PERF_COLUMNS} FROM $db.bench_floor_sample_by_trader
      WHERE traderId IN {ids:Array(UInt64)} GROUP BY traderId, window`,
        { ids: traders },
      ),
    check: (ans, rows: PerfRow[]) => {
      const f = perfIndex(rows);
      const diffs: string[] = [];
      if (ans.results.length !== traders.length) diffs.push(`${ans.results.length} rows for ${traders.length} traders`);
      for (const r of ans.results) {
        const w = f.get(r.traderId);
        const one = w?.get('1D');
        if (r.summary.positionCount !== Number(one?.sampled ?? 0))
          diffs.push(`trader ${r.traderId} positionCount ${r.summary.positionCount} vs ${one?.sampled ?? 0}`);
        if (r.summary.directionBias.longCount !== Number(one?.longs ?? 0))
          diffs.push(`trader ${r.traderId} longCount ${r.summary.directionBias.longCount} vs ${one?.longs ?? 0}`);
        for (const win of WINDOWS) {
          const t = r.summary.timeBasedPerformances[win];
          const a = w?.get(win);
          const scored = Number(a?.scored ?? 0);
          if (t.positionsCount !== scored) diffs.push(`trader ${r.traderId} ${win} scored ${t.positionsCount} vs ${scored}`);
          if (t.coverage.sampledPositionsCount !== Number(a?.sampled ?? 0))
            diffs.push(`trader ${r.traderId} ${win} sampled ${t.coverage.sampledPositionsCount} vs ${a?.sampled ?? 0}`);
          if (scored && !near(t.averageReturnPercentage, num(a!.mean)))
            diffs.push(`trader ${r.traderId} ${win} mean ${t.averageReturnPercentage} vs ${a!.mean}`);
          if (scored && !near(t.medianReturnPercentage, num(a!.median)))
            diffs.push(`trader ${r.traderId} ${win} median ${t.medianReturnPercentage} vs ${a!.median}`);
        }
      }
      return first(diffs);
    },
    rowsOf: (ans) => ans.results.length,
  });

  // Asset stats: the 200 busiest assets, unbounded, no trader or direction filter. The answer is,
  // per asset and direction, a count and the 5 traders with the most positions (ties by id): one
  // query, the GROUP BY (asset, trader, direction) the read runs and, over it, one per (asset,
  // direction) keeping the top 5, so that the floor returns the answer's figures (400 rows) rather
  // than every (asset, trader, direction) group.
  const assets = await busiest(store, 'bench_floor_sample_by_asset', 'assetId', "window = '1D'", STATS_IDS);
  type AssetRow = { assetId: number; direction: 'long' | 'short'; total: number; top: number[] };
  cases.push({
    read: 'asset stats',
    label: `${assets.length} busiest assets`,
    op: opFor('list_asset_stats'),
    search: new URLSearchParams({ assetIds: assets.join(',') }),
    floor: () =>
      store.query<AssetRow>(
        `
      SELECT assetId, direction, sum(n) AS total, arrayMap(x -> x.2, arraySlice(arraySort(x -> (-x.1, x.2), groupArray((n, traderId))), 1, 5)) AS top
      FROM (SELECT assetId, traderId, direction, count() AS n FROM $db.bench_floor_sample_by_asset
            WHERE window = '1D' AND assetId IN {ids:Array(UInt64)} GROUP BY assetId, traderId, direction)
      GROUP BY assetId, direction`,
        { ids: assets },
      ),
    check: (ans, rows: AssetRow[]) => {
      const per = new Map(rows.map((r) => [`${r.assetId}/${r.direction}`, r]));
      const diffs: string[] = [];
      if (ans.results.length !== assets.length) diffs.push(`${ans.results.length} rows for ${assets.length} assets`);
      for (const r of ans.results) {
        const m = r.summary.marketPositioning;
        for (const d of ['long', 'short'] as const) {
          const f = per.get(`${r.assetId}/${d}`);
          const count = d === 'long' ? m.longCount : m.shortCount;
          if (count !== Number(f?.total ?? 0)) diffs.push(`asset ${r.assetId} ${d} count ${count} vs ${f?.total ?? 0}`);
          const top = (f?.top ?? []).map(Number).join(',');
          if (r.summary.topTraderIds[d].join(',') !== top)
            diffs.push(`asset ${r.assetId} top ${d} ${r.summary.topTraderIds[d].join(',')} vs ${top}`);
        }
      }
      return first(diffs);
    },
    rowsOf: (ans) => ans.results.length,
  });

  // Rankings: each metric on defaults (openAt since 1 January of serverTime's year, window 30D,
  // minPositions 3, limit 10), then with the 5 busiest assets of that sample as the filter.
  const yearStart = Date.UTC(new Date(serverTime).getUTCFullYear(), 0, 1);
  const rankAssets = await busiest(
    store,
    'bench_floor_sample_by_asset',
    'assetId',
    `window = '1D' AND openAt >= ${yearStart} AND openAt <= ${Math.trunc(serverTime)}`,
    RANKING_ASSETS,
  );
  const rankingOp = opFor('rank_traders');
  for (const filtered of [false, true]) {
    for (const metric of RANKING_METRICS) {
      const search = new URLSearchParams(metric === 'event_count' ? {} : { metric });
      if (filtered) search.set('assetIds', rankAssets.join(','));
      const q = handlerQuery(rankingOp, search) as { timeBasedPerformanceWindow?: WindowName; minPositions: number; limit: number };
      const activity = ACTIVITY_METRICS.includes(metric);
      // The read's sample for activity metrics is the 1D rows (one per position); its default window is 30D.
      const w: WindowName = activity ? '1D' : (q.timeBasedPerformanceWindow ?? '30D');
      const params: Params = { w, start: yearStart, end: Math.trunc(serverTime), ids: rankAssets };
      const assetWhere = filtered ? ' AND assetId IN {ids:Array(UInt64)}' : '';
      // Activity metrics answer counts and the direction bias only; performance metrics the window's figures too.
      const positionsSql = `SELECT traderId AS g, window, ${activity ? "count() AS sampled, countIf(direction = 'long') AS longs" : PERF_COLUMNS}
        FROM $db.${filtered ? 'bench_floor_sample_by_asset' : 'bench_floor_sample_by_time'}
        WHERE window = {w:String}${assetWhere} AND openAt >= {start:Int64} AND openAt <= {end:Int64} GROUP BY traderId, window`;
      const eventsSql = `SELECT traderId, count() AS n FROM $db.${filtered ? 'bench_floor_events_by_asset' : 'bench_floor_events_by_time'}
        WHERE at >= {start:Int64} AND at <= {end:Int64}${assetWhere} GROUP BY traderId`;
      cases.push({
        read: 'rankings',
        label: `${metric}${filtered ? `, ${rankAssets.length} assets` : ''}`,
        op: rankingOp,
        search,
        floor: async () => {
          const positions = await store.query<PerfRow>(positionsSql, params);
          const events = await store.query<{ traderId: number; n: number }>(eventsSql, params);
          return { positions, events };
        },
        check: (ans, f: { positions: PerfRow[]; events: { traderId: number; n: number }[] }) => {
          const perf = new Map(f.positions.map((r) => [Number(r.g), r]));
          const events = new Map(f.events.map((r) => [Number(r.traderId), Number(r.n)]));
          const cands: { id: number; metric: number | null; positionCount: number; eventCount: number }[] = [];
          for (const id of new Set([...perf.keys(), ...events.keys()])) {
            const a = perf.get(id);
            const positionCount = Number(a?.sampled ?? 0);
            const eventCount = events.get(id) ?? 0;
            const m = floorMetric(metric, eventCount, a);
            if (activity ? m === 0 : positionCount === 0 || Number(a?.scored ?? 0) < q.minPositions) continue;
            cands.push({ id, metric: m, positionCount, eventCount });
          }
          cands.sort(
            (x, y) =>
              (x.metric === null ? 1 : 0) - (y.metric === null ? 1 : 0) ||
              (y.metric ?? 0) - (x.metric ?? 0) ||
              y.positionCount - x.positionCount ||
              x.id - y.id,
          );
          const byId = new Map(cands.map((c) => [c.id, c]));
          const diffs: string[] = [];
          if (!activity && ans.filtersApplied.timeBasedPerformanceWindow !== w)
            diffs.push(`window ${ans.filtersApplied.timeBasedPerformanceWindow} vs ${w}`);
          if (ans.meta.totalCandidates !== cands.length) diffs.push(`totalCandidates ${ans.meta.totalCandidates} vs ${cands.length}`);
          for (const [i, r] of (
            ans.results as { traderId: number; metricValue: number | null; positionCount: number; eventCount: number }[]
          ).entries()) {
            const c = byId.get(r.traderId);
            if (!c) {
              diffs.push(`trader ${r.traderId} (rank ${i + 1}) is no candidate of the floor`);
              continue;
            }
            if (r.positionCount !== c.positionCount || r.eventCount !== c.eventCount) {
              diffs.push(`trader ${r.traderId} positions/events ${r.positionCount}/${r.eventCount} vs ${c.positionCount}/${c.eventCount}`);
            }
            if (!near(r.metricValue, c.metric)) diffs.push(`trader ${r.traderId} metric ${r.metricValue} vs ${c.metric}`);
            // The place: the floor's value at the same rank (ties of reals may order differently).
            if (!near(r.metricValue, cands[i]?.metric)) diffs.push(`rank ${i + 1} metric ${r.metricValue} vs ${cands[i]?.metric ?? '-'}`);
          }
          if (ans.results.length !== Math.min(q.limit, cands.length))
            diffs.push(`${ans.results.length} rows vs ${Math.min(q.limit, cands.length)}`);
          return first(diffs);
        },
        rowsOf: (ans) => ans.results.length,
      });
    }
  }

  // Activity summaries, grouped by trader (the default, top 10): 168 aligned hours (7 days) and 168
  // aligned days ending at serverTime. Floor: the totals per trader, then the buckets of the top
  // traders (the two GROUP BYs of the read, over one table of both kinds).
  const activityOp = opFor('summarize_message_activity');
  for (const [interval, size] of [
    ['hour', HOUR_MS],
    ['day', DAY_MS],
  ] as const) {
    const start = Math.floor(serverTime / size) * size - 167 * size;
    const search = new URLSearchParams({ interval, startTime: new Date(start).toISOString() });
    const q = handlerQuery(activityOp, search) as { limit: number };
    const params: Params = { start, end: Math.trunc(serverTime) };
    cases.push({
      read: 'activity summaries',
      label: `${interval === 'hour' ? '7 days by hour' : '168 days by day'}`,
      op: activityOp,
      search,
      floor: async () => {
        const totals = await store.query<{ traderId: number; m: number; e: number }>(
          `
          SELECT traderId, countIf(isEvent = 0) AS m, countIf(isEvent = 1) AS e FROM $db.bench_floor_activity
          WHERE at >= {start:Int64} AND at <= {end:Int64} GROUP BY traderId`,
          params,
        );
        const top = totals
          .map((r) => ({ id: Number(r.traderId), n: Number(r.m) + Number(r.e) }))
          .sort((x, y) => y.n - x.n || x.id - y.id)
          .slice(0, q.limit)
          .map((x) => x.id);
        const buckets = await store.query<{ traderId: number; b: number; m: number; e: number }>(
          `
          SELECT traderId, intDiv(at, ${size}) * ${size} AS b, countIf(isEvent = 0) AS m, countIf(isEvent = 1) AS e FROM $db.bench_floor_activity
          WHERE at >= {start:Int64} AND at <= {end:Int64} AND traderId IN {top:Array(UInt64)} GROUP BY traderId, b`,
          { ...params, top },
        );
        return { totals, top, buckets };
      },
      check: (
        ans,
        f: {
          totals: { traderId: number; m: number; e: number }[];
          top: number[];
          buckets: { traderId: number; b: number; m: number; e: number }[];
        },
      ) => {
        const diffs: string[] = [];
        const m = f.totals.reduce((s, r) => s + Number(r.m), 0);
        const e = f.totals.reduce((s, r) => s + Number(r.e), 0);
        if (ans.meta.totalMessages !== m || ans.meta.totalEvents !== e)
          diffs.push(`totals ${ans.meta.totalMessages}/${ans.meta.totalEvents} vs ${m}/${e}`);
        const ids = ans.results.map((g: { traderId: number }) => g.traderId).join(',');
        if (ids !== f.top.join(',')) diffs.push(`top traders ${ids} vs ${f.top.join(',')}`);
        const totals = new Map(f.totals.map((r) => [Number(r.traderId), r]));
        const buckets = new Map(f.buckets.map((r) => [`${r.traderId}/${r.b}`, r]));
        for (const g of ans.results as {
          traderId: number;
          messageCount: number;
          eventCount: number;
          buckets: { start: string; messageCount: number; eventCount: number }[];
        }[]) {
          const t = totals.get(g.traderId);
          if (g.messageCount !== Number(t?.m ?? 0) || g.eventCount !== Number(t?.e ?? 0))
            diffs.push(`trader ${g.traderId} ${g.messageCount}/${g.eventCount} vs ${t?.m ?? 0}/${t?.e ?? 0}`);
          let n = 0;
          for (const b of g.buckets) {
            const x = buckets.get(`${g.traderId}/${Date.parse(b.start)}`);
            n++;
            if (b.messageCount !== Number(x?.m ?? 0) || b.eventCount !== Number(x?.e ?? 0))
              diffs.push(`trader ${g.traderId} bucket ${b.start} ${b.messageCount}/${b.eventCount} vs ${x?.m ?? 0}/${x?.e ?? 0}`);
          }
          const floorBuckets = f.buckets.filter((r) => Number(r.traderId) === g.traderId).length;
          if (n !== floorBuckets) diffs.push(`trader ${g.traderId}: ${n} buckets vs ${floorBuckets}`);
        }
        return first(diffs);
      },
      rowsOf: (ans) => ans.results.length,
    });
  }

  // Trader activity: the first page on defaults (unbounded, minPositionCount 3, 50 by name).
  const activityPage = opFor('list_trader_activity');
  cases.push({
    read: 'trader activity',
    label: 'first page',
    op: activityPage,
    search: new URLSearchParams(),
    floor: () =>
      store.query<{ traderId: number; n: number }>(`
      SELECT traderId, count() AS n FROM $db.bench_floor_sample_by_time WHERE window = '1D'
      GROUP BY traderId HAVING n >= ${MIN_POSITION_COUNT}`),
    check: (ans, rows: { traderId: number; n: number }[]) => {
      const counts = new Map(rows.map((r) => [Number(r.traderId), Number(r.n)]));
      const diffs: string[] = [];
      for (const r of ans.results as { traderId: number; positionCount: number }[]) {
        if (r.positionCount !== counts.get(r.traderId))
          diffs.push(`trader ${r.traderId} positionCount ${r.positionCount} vs ${counts.get(r.traderId) ?? '< 3'}`);
      }
      if (ans.results.length !== Math.min(50, counts.size)) diffs.push(`${ans.results.length} rows vs ${Math.min(50, counts.size)}`);
      return first(diffs);
    },
    rowsOf: (ans) => ans.results.length,
  });
  return cases;
}

// ---------------------------------------------------------------------------------------------
// Handler and HTTP (uncached) against the floor.

interface CaseResult {
  c: Case;
  n: number;
  rows: number;
  handlerP50: number;
  floorP50: number;
  httpP50: number;
  truncated: boolean;
  mismatch: string | null;
  failed: string | null;
  httpErrors: number;
}

/** A case ready to measure: its calls, and what one round of them took in the check. */
interface Prepared {
  c: Case;
  handler: () => Promise<any>;
  http: () => Promise<void>;
  estimateMs: number;
  result: CaseResult;
}

/**
 * Runs the case's handler and floor once and compares the figures, before anything is timed.
 * What the round took (handler, floor, and the handler again for the HTTP request) orders the
 * measurements: the cheapest first, so that the slow ones get the budget the others left.
 */
async function prepareCase(emb: Embedded, c: Case, serverTime: Date, httpBase: string | null, demoKey: string): Promise<Prepared> {
  const cursors = CursorCodec.random();
  const query = handlerQuery(c.op, c.search);
  const url = httpBase === null ? null : `${httpBase}/v2${c.op.path}${[...c.search].length ? `?${c.search}` : ''}`;
  const headers = { 'x-api-key': demoKey };
  // One clock for the handler, the floors (ready flags, default bounds) and the measurement app.
  const handler = () =>
    c.op.handler({ store: emb.store, principal: PRINCIPAL, now: serverTime, cursors, changes: STATIC }, query) as Promise<any>;
  const result: CaseResult = {
    c,
    n: 0,
    rows: 0,
    handlerP50: NaN,
    floorP50: NaN,
    httpP50: NaN,
    truncated: false,
    mismatch: null,
    failed: null,
    httpErrors: 0,
  };
  const http = async () => {
    if (url === null) return;
    const res = await fetch(url, { headers, signal: AbortSignal.timeout(120_000) });
    const body = await res.arrayBuffer();
    if (res.status !== 200) {
      result.httpErrors++;
      if (result.httpErrors === 1) progress(`${c.read} / ${c.label}: HTTP ${res.status} ${Buffer.from(body).toString().slice(0, 200)}`);
    }
  };
  let answer: any;
  let handlerMs: number;
  try {
    [handlerMs, answer] = await timed(handler);
  } catch (err) {
    result.failed = `${c.read} / ${c.label}: the handler failed: ${(err as Error).message}`;
    return { c, handler, http, estimateMs: 0, result };
  }
  const [floorMs, floor] = await timed(c.floor);
  const mismatch = c.check(answer, floor);
  result.rows = c.rowsOf(answer);
  result.mismatch = mismatch && `${c.read} / ${c.label}: handler and floor differ: ${mismatch}`;
  return { c, handler, http, estimateMs: handlerMs * (url === null ? 1 : 2) + floorMs, result };
}

async function measureCase(p: Prepared, until: number): Promise<void> {
  const { c, handler, http, result } = p;
  const { hMs, fMs, httpMs, truncated } = await interleaved(handler, c.floor, SKIP_HTTP ? null : http, REPS, WARMUP, until);
  if (truncated) result.truncated = true;
  result.n = hMs.length;
  result.handlerP50 = pct(sortNum(hMs), 50);
  result.floorP50 = pct(sortNum(fMs), 50);
  result.httpP50 = pct(sortNum(httpMs), 50);
}

// ---------------------------------------------------------------------------------------------
// Run.

const tStart = performance.now();
let emb: Embedded | undefined;
let measureApp: FastifyInstance | undefined;
let exitCode = 0;
/** Drops the floors and closes everything, once (also on Ctrl-C). */
const { cleanup, interrupted } = benchCleanup({
  emb: () => emb,
  measureApp: () => measureApp,
  bareApps: [],
  ownDir,
  dataDir,
  dropFloors: async (store) => {
    for (const t of FLOOR_TABLES) await store.exec(`DROP TABLE IF EXISTS $db.${t.name}`).catch(() => {});
  },
});

try {
  progress(`data dir ${dataDir}${ownDir ? ' (fresh, small demo set)' : ''}`);
  const started = await startBenchService(
    dataDir,
    progress,
    ['events_current', 'positions_current', 'messages_current', 'position_performances'],
    (e) => {
      emb = e;
    },
    tStart,
  );
  const { demoKey, setupSecs } = started;
  emb = started.emb;

  // The bench's serverTime: the floors' ready flags are as of it, and every handler call, floor
  // query and HTTP request resolves its default bounds and statuses against it.
  const serverTime = new Date();

  // Floors, in the same store.
  const tFloors = performance.now();
  const floorRows: Record<string, number> = {};
  for (const t of FLOOR_TABLES)
    floorRows[t.name] = await buildFloorTable(emb.store, t.name, [`CREATE TABLE $db.${t.name} ${t.ddl(serverTime.getTime())}`]);
  const floorSecs = (performance.now() - tFloors) / 1000;
  // A rebuild on start (or the floors) leaves merges running: they would land in random reps.
  await settle(emb.store, 'reads', 120_000);

  // The measurement app: the same API on the same store without a read cache (every request runs
  // the read), the real authenticator, the bench's serverTime as its clock.
  let httpBase: string | null = null;
  if (!SKIP_HTTP) {
    measureApp = buildApi({
      store: emb.store,
      auth: new ApiKeyAuthenticator(emb.store, new MemoryCache()),
      dataVersion: () => 0,
      cursors: CursorCodec.random(),
      clock: () => serverTime.getTime(),
      logger: false,
    });
    httpBase = await measureApp.listen({ port: 0, host: '127.0.0.1' });
  }

  const cases = await buildCases(emb, serverTime.getTime());
  // Hard stop if something hangs: the soft deadlines end loops, this ends the process.
  setTimeout(
    () => {
      console.error('bench/analytics: still running long past its budget; giving up');
      process.exit(1);
    },
    (MAX_SECONDS + 900) * 1000,
  ).unref();

  const prepared: Prepared[] = [];
  for (const c of cases) {
    progress(`check ${c.read} / ${c.label} ...`);
    prepared.push(await prepareCase(emb, c, serverTime, httpBase, demoKey));
  }
  const budgetEnd = performance.now() + MAX_SECONDS * 1000;
  const queue = prepared.filter((p) => !p.result.failed).sort((a, b) => a.estimateMs - b.estimateMs);
  for (const [i, p] of queue.entries()) {
    const share = Math.max(0, budgetEnd - performance.now()) / (queue.length - i);
    progress(`${p.c.read} / ${p.c.label} ...`);
    await measureCase(p, performance.now() + share);
  }
  const results = prepared.map((p) => p.result);

  // ---------------------------------------------------------------------------------------------
  // The table.
  const notes: string[] = [];

  const rows: string[][] = [];
  for (const r of results) {
    if (r.failed) {
      rows.push([r.c.read, r.c.label, '-', '-', '-', '-', '-', '-', '0']);
      notes.push(r.failed);
      exitCode = 1;
      continue;
    }
    const hr = r.handlerP50 / r.floorP50;
    rows.push([
      r.c.read,
      r.c.label,
      String(r.rows),
      fmtMs(r.handlerP50),
      fmtMs(r.floorP50),
      fmtRatio(hr, hr > GOAL),
      SKIP_HTTP ? 'n/a' : fmtMs(r.httpP50),
      SKIP_HTTP ? 'n/a' : fmtRatio(r.httpP50 / r.floorP50, false),
      String(r.n),
    ]);
    if (r.mismatch) {
      notes.push(r.mismatch);
      exitCode = 1;
    }
    if (r.httpErrors) {
      notes.push(`${r.c.read} / ${r.c.label}: ${r.httpErrors} HTTP requests did not answer 200`);
      exitCode = 1;
    }
    if (r.truncated) notes.push(`${r.c.read} / ${r.c.label}: stopped at the time budget after ${r.n} of ${REPS} reps`);
  }

  console.log('');
  console.log(
    `Analytics reads vs floors (the same aggregate as one GROUP BY over plain MergeTrees laid out for the read, precomputed rows); ` +
      `${REPS} reps per case after ${WARMUP} warm-up, handler/floor${SKIP_HTTP ? '' : '/HTTP'} interleaved; times in ms; serverTime ${serverTime.toISOString()}`,
  );
  printTable(['read', 'case', 'rows', 'handler p50', 'floor p50', 'ratio', 'HTTP p50', 'HTTP ratio', 'reps'], rows, 2);
  console.log('');
  console.log(`! marks a figure past the goal: handler p50 <= ${GOAL}x floor p50`);
  console.log(
    `rankings: defaults are openAt since 1 January (UTC) of serverTime's year, window 30D, minPositions 3, limit 10; ` +
      `floor: the positions GROUP BY, then the events GROUP BY (one after the other)`,
  );
  console.log(
    'asset stats: floor in one query, the GROUP BY (asset, trader, direction) and over it per (asset, direction) the count and top 5 traders',
  );
  console.log(
    'activity summaries: grouped by trader (top 10); floor: the totals per trader, then the buckets of the top 10 (one after the other)',
  );
  for (const n of notes) console.log(`note: ${n}`);
  console.log(machineLine({ ownDir, dataDir, floorRows, setupSecs, floorSecs, tStart }));
} catch (err) {
  reportFailure('bench/analytics', err, interrupted());
  exitCode = 1;
} finally {
  await cleanup();
}
process.exit(interrupted() ? 130 : exitCode);
