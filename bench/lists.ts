// List-read benchmark (DESIGN 8 and 9): every figure is a ratio against a floor built and measured
// in the same run, in the same chdb store, on the same machine.
//   SQL floor:       per list read, a plain MergeTree ordered by the read's keyset order holding
//                    exactly the rows the read may return (denormalized, no FINAL), queried for the
//                    top-(limit+1) with the same filters.
//   HTTP floor:      a bare fastify route sending the same body bytes (hot reads).
//   Projector floor: a raw chdb insert of as many rows as the projector applied records.
// Usage: npx tsx bench/lists.ts --help
import { rmSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { isCacheable } from '../apps/api/read-cache.ts';
import { buildApi } from '../apps/api/server.ts';
import { ApiKeyAuthenticator } from '../apps/auth/keys.ts';
import { MemoryCache } from '../apps/cache/memory.ts';
import { type Embedded, storePath } from '../apps/embedded.ts';
import { CursorCodec } from '../apps/reads/cursor.ts';
import type { Principal } from '../apps/reads/principal.ts';
import { OPERATIONS, type Operation } from '../apps/registry.ts';
import { READ_MODEL_GRAPH } from '../projectors/index.ts';
import { EmbeddedLog } from '../projectors/log/embedded.ts';
import { ensureSchema, MAX_BATCH, runProjector, validateBatch } from '../projectors/runner.ts';
import { SCOPES, TOPIC_NAMES, type VisibilityPolicy } from '../schemas/topics/index.ts';
import { versionChanges } from '../storage/changes.ts';
import { type ChdbStore, openChdbStore } from '../storage/chdb.ts';
import { checkIdentifier, type Params } from '../storage/port.ts';
import { ASSETS_TABLE } from '../storage/tables/assets.ts';
import { MESSAGES_CURRENT_TABLE } from '../storage/tables/messages.ts';
import { PRICES_TABLE } from '../storage/tables/prices.ts';
import { SOURCE_IDENTITIES_TABLE, TRADERS_TABLE } from '../storage/tables/traders.ts';
import { EVENTS_CURRENT_TABLE, POSITIONS_CURRENT_TABLE } from '../storage/tables/trading.ts';
import {
  benchArgs,
  benchCleanup,
  benchDataDir,
  buildFloorTable,
  fmtInt,
  fmtMs,
  fmtRatio,
  HOT_CLIENTS,
  HOT_SECS,
  handlerQuery,
  hotVersusBare,
  interleaved,
  machineLine,
  pct,
  printTable,
  progress,
  reportFailure,
  settle,
  sortNum,
  startBenchService,
} from './args.ts';

/** The reads' change log: the data stands still during a bench (memos made once). */
const STATIC = versionChanges(() => 0, READ_MODEL_GRAPH);

const USAGE = `Usage: npx tsx bench/lists.ts [options]

Benchmarks the list reads (events, messages, positions, open positions, trader directory,
assets), each with no filter, one trader, one asset and a restricted visibility policy, against
floors built in the same run in the same store:
  handler  p50 of the read's handler called directly / p50 of the top-(limit+1) over a plain
           MergeTree ordered by the read's keyset order holding the same rows, same filters
  http     p50 and p99 of the real route (no read cache, one request at a time) / floor p50, p99
  hot      req/s of the real route with the read cache at 50 concurrent clients / req/s of a
           bare fastify route sending the same bytes
  projector  records/s projecting the data dir's log into a fresh database / records/s of a raw
           chdb insert of as many rows into a plain MergeTree with the events table's columns

Options:
  --data-dir DIR      an existing seeded DATA_DIR (e.g. made by
                      'node bin/signalbase.cjs seed --scale large --data-dir /tmp/sblarge');
                      default: a fresh temp dir seeded with the small demo set, removed afterwards.
                      No server may be running on DIR (chdb: one process per data directory).
  --reps N            measured handler calls, HTTP requests and floor queries per case (default 30)
  --max-seconds S     budget for the handler and HTTP measurements; each case gets an equal share
                      of what is left and stops early past it (default 90)
  --skip-projector    leave out the projector measurement (a minute or more on the large seed)
  -h, --help          this text

Client, servers and floors share this process (chdb opens a data directory from one process
only). The floor tables (bench_floor_*) and the projector's scratch database are dropped at the
end. The result table goes to stdout, progress to stderr.`;

const {
  values: argv,
  die,
  posInt,
} = benchArgs('bench/lists', USAGE, {
  'data-dir': { type: 'string' },
  reps: { type: 'string', default: '30' },
  'max-seconds': { type: 'string', default: '90' },
  'skip-projector': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
});
const REPS = posInt('reps', argv.reps);
const MAX_SECONDS = posInt('max-seconds', argv['max-seconds']);
const SKIP_PROJECTOR = argv['skip-projector'] === true;
const WARMUP = 3;
const BATCH = MAX_BATCH; // the projector's batch size when it catches up (the raw floor's too)
const LIMIT = 50; // the reads' default page size: the floor takes LIMIT + 1
const DAY_MS = 86_400_000;
const WINDOW_MS = 90 * DAY_MS; // the historical reads' default window
const PROJECTOR_DB = 'bench_lists_projector';
const GOALS = { handler: 1.5, httpP99: 3, hot: 0.9, projectorRps: 150_000 };

// ---------------------------------------------------------------------------------------------
// Data directory: refuse a directory a running server holds, seed a fresh one by default.

const { ownDir, dataDir } = benchDataDir(argv['data-dir'], 'signalbase-bench-lists-', die);

// ---------------------------------------------------------------------------------------------
// Measurement helpers (pct, timed, handlerQuery, ... in args.ts).

const ALL: VisibilityPolicy = { mode: 'all' };
const TELEGRAM: VisibilityPolicy = { mode: 'platforms', platforms: ['TELEGRAM'] };
const principalFor = (restricted: boolean): Principal => ({
  accountId: 'bench',
  keyId: 'bench',
  scopes: new Set(SCOPES),
  messageVisibility: restricted ? TELEGRAM : ALL,
  signalVisibility: restricted ? TELEGRAM : ALL,
  historyWindowDays: null,
});
/** Suffix of the x-api-key that makes the measurement app's authenticator restrict the demo principal. */
const RESTRICTED_KEY_SUFFIX = '~telegram-only';

// ---------------------------------------------------------------------------------------------
// The reads and their floors. Floors are built from the current-state views of the read models
// with the eligibility rules of apps/reads/*.ts, and hold what the read returns (joined columns
// included) plus the denormalized columns the filters need (the trader's source platform).

const TRADERS_LIVE = `SELECT id, sourcePlatform FROM ${TRADERS_TABLE} FINAL WHERE deleted = 0`;
const ASSETS_ELIGIBLE = `SELECT id, quoteSymbol FROM ${ASSETS_TABLE} FINAL WHERE deleted = 0 AND hasActiveMarket = 1`;
const PRICES_LIVE = `SELECT assetId, at, price FROM ${PRICES_TABLE} FINAL WHERE deleted = 0`;

interface FloorTable {
  name: string;
  ddl: (now: number) => string;
}

const FLOOR_TABLES: FloorTable[] = [
  {
    name: 'bench_floor_events',
    ddl: () => `ENGINE = MergeTree ORDER BY (timeOfEvent, id) AS
      SELECT e.id AS id, e.type AS type, e.price AS price, a.quoteSymbol AS quoteSymbol, e.timeOfEvent AS timeOfEvent,
             e.assumed AS assumed, e.retrospective AS retrospective, e.autoGenerated AS autoGenerated,
             e.positionId AS positionId, e.traderId AS traderId, e.assetId AS assetId, e.messageId AS messageId,
             t.sourcePlatform AS sourcePlatform
      FROM ${EVENTS_CURRENT_TABLE} AS e
      INNER JOIN (${TRADERS_LIVE}) AS t ON t.id = e.traderId
      INNER JOIN (${ASSETS_ELIGIBLE}) AS a ON a.id = e.assetId
      WHERE e.live = 1`,
  },
  {
    // A message belongs to the lowest live trader id assigned its source; source identity columns joined in.
    name: 'bench_floor_messages',
    ddl: () => `ENGINE = MergeTree ORDER BY (writtenAt, id) AS
      SELECT m.id AS id, t.traderId AS traderId, m.platform AS platform, m.sourceIdentityId AS sourceIdentityId, m.writtenAt AS writtenAt,
             m.url AS url, m.text AS text, m.attachmentTypes AS attachmentTypes, m.attachmentUrls AS attachmentUrls,
             m.isEdited AS isEdited, m.isReply AS isReply, m.isQuote AS isQuote, m.isRepost AS isRepost,
             s.displayName AS displayName, s.handle AS handle, s.avatarUrl AS avatarUrl, s.profileUrl AS profileUrl, s.audienceCount AS audienceCount
      FROM ${MESSAGES_CURRENT_TABLE} AS m
      INNER JOIN (SELECT sourcePlatform, sourceIdentityId, min(id) AS traderId FROM ${TRADERS_TABLE} FINAL
                  WHERE deleted = 0 AND sourcePlatform != '' GROUP BY sourcePlatform, sourceIdentityId) AS t
        ON t.sourcePlatform = m.platform AND t.sourceIdentityId = m.sourceIdentityId
      LEFT JOIN (SELECT * FROM ${SOURCE_IDENTITIES_TABLE} FINAL WHERE deleted = 0) AS s
        ON s.platform = m.platform AND s.sourceIdentityId = m.sourceIdentityId
      WHERE m.live = 1
      SETTINGS join_use_nulls = 1`,
  },
  {
    // timeBasedPerformances are part of what the read returns: the forward price samples (first
    // sample at or after openAt + 24 h / 168 h / 720 h) and whether the asset has a price series
    // are denormalized, so the floor answers the whole page in one top-(limit+1).
    name: 'bench_floor_positions',
    ddl: () => `ENGINE = MergeTree ORDER BY (openAt, id) AS
      SELECT b.id AS id, b.direction AS direction, b.openAt AS openAt, b.openPrice AS openPrice, b.quoteSymbol AS quoteSymbol,
             b.traderId AS traderId, b.assetId AS assetId, b.sourcePlatform AS sourcePlatform, b.hasSeries AS hasSeries,
             f1.price AS fwd1dPrice, f1.at AS fwd1dAt, f7.price AS fwd7dPrice, f7.at AS fwd7dAt, f30.price AS fwd30dPrice, f30.at AS fwd30dAt
      FROM (
        SELECT p.id AS id, p.direction AS direction, p.openAt AS openAt, p.openPrice AS openPrice, a.quoteSymbol AS quoteSymbol,
               p.traderId AS traderId, p.assetId AS assetId, t.sourcePlatform AS sourcePlatform,
               toUInt8(p.assetId IN (SELECT assetId FROM ${PRICES_TABLE} FINAL WHERE deleted = 0)) AS hasSeries,
               p.openAt + toIntervalHour(24) AS e1, p.openAt + toIntervalHour(168) AS e7, p.openAt + toIntervalHour(720) AS e30
        FROM ${POSITIONS_CURRENT_TABLE} AS p
        INNER JOIN (${TRADERS_LIVE}) AS t ON t.id = p.traderId
        INNER JOIN (${ASSETS_ELIGIBLE}) AS a ON a.id = p.assetId
        WHERE p.live = 1
      ) AS b
      ASOF LEFT JOIN (${PRICES_LIVE}) AS f1 ON b.assetId = f1.assetId AND f1.at >= b.e1
      ASOF LEFT JOIN (${PRICES_LIVE}) AS f7 ON b.assetId = f7.assetId AND f7.at >= b.e7
      ASOF LEFT JOIN (${PRICES_LIVE}) AS f30 ON b.assetId = f30.assetId AND f30.at >= b.e30
      SETTINGS join_use_nulls = 1`,
  },
  {
    // The live mark (latest price at or before the build time) and the return are denormalized.
    name: 'bench_floor_open_positions',
    ddl: (now) => `ENGINE = MergeTree ORDER BY (openAt, id) AS
      SELECT p.id AS id, p.direction AS direction, p.openAt AS openAt, p.openPrice AS openPrice, a.quoteSymbol AS quoteSymbol,
             m.price AS currentPrice,
             if(p.direction = 'long', (m.price / p.openPrice - 1) * 100, (1 - m.price / p.openPrice) * 100) AS currentReturnPercentage,
             p.traderId AS traderId, p.assetId AS assetId, t.sourcePlatform AS sourcePlatform
      FROM ${POSITIONS_CURRENT_TABLE} AS p
      INNER JOIN (${TRADERS_LIVE}) AS t ON t.id = p.traderId
      INNER JOIN (${ASSETS_ELIGIBLE}) AS a ON a.id = p.assetId
      INNER JOIN (SELECT assetId, argMax(price, at) AS price FROM ${PRICES_TABLE} FINAL
                  WHERE deleted = 0 AND at <= fromUnixTimestamp64Milli(${Math.trunc(now)}, 'UTC') GROUP BY assetId) AS m ON m.assetId = p.assetId
      WHERE p.live = 1 AND p.isOpen = 1 AND p.openPrice IS NOT NULL AND p.openPrice != 0 AND isFinite(currentReturnPercentage)`,
  },
  {
    name: 'bench_floor_traders',
    ddl: () => `ENGINE = MergeTree ORDER BY (name, id) AS
      SELECT t.id AS id, t.name AS name, t.slug AS slug, t.avatarUrl AS avatarUrl, t.sourcePlatform AS sourcePlatform,
             t.sourceIdentityId AS sourceIdentityId, toUInt8(s.sourceIdentityId IS NOT NULL) AS hasSource,
             s.displayName AS displayName, s.handle AS handle, s.avatarUrl AS sAvatarUrl, s.profileUrl AS profileUrl, s.audienceCount AS audienceCount
      FROM (SELECT * FROM ${TRADERS_TABLE} FINAL WHERE deleted = 0) AS t
      LEFT JOIN (SELECT * FROM ${SOURCE_IDENTITIES_TABLE} FINAL WHERE deleted = 0) AS s
        ON s.platform = t.sourcePlatform AND s.sourceIdentityId = t.sourceIdentityId
      SETTINGS join_use_nulls = 1`,
  },
  {
    name: 'bench_floor_assets',
    ddl: () => `ENGINE = MergeTree ORDER BY (symbol, id) AS
      SELECT id, name, symbol, logoUrl, assetClass, resolvedAssetClass, category, quoteSymbol
      FROM ${ASSETS_TABLE} FINAL WHERE deleted = 0 AND hasActiveMarket = 1`,
  },
  {
    // assets?traderIds=: the assets a live trader holds live positions in, keyed by trader.
    name: 'bench_floor_trader_assets',
    ddl: () => `ENGINE = MergeTree ORDER BY (traderId, assetId) AS
      SELECT DISTINCT p.traderId AS traderId, p.assetId AS assetId
      FROM ${POSITIONS_CURRENT_TABLE} AS p INNER JOIN (${TRADERS_LIVE}) AS t ON t.id = p.traderId
      WHERE p.live = 1`,
  },
];

type CaseKind = 'none' | 'trader' | 'asset' | 'restricted';
const CASE_KINDS: CaseKind[] = ['none', 'trader', 'asset', 'restricted'];

interface ReadSpec {
  name: string;
  path: string;
  table: string;
  /** Window column of a historical read (default window: the last 90 days ending now); null: no window. */
  timeCol: string | null;
  orderBy: string;
  columns: string;
  /** Plain WHERE clauses of each case on the floor table ({id:UInt64} is the chosen trader or asset); null: n/a. */
  filters: Record<Exclude<CaseKind, 'none'>, string | null>;
  /** SQL giving the busy trader / asset ids for this read (column `id`); null: n/a. */
  pick: { trader: string | null; asset: string | null };
  /** Query parameter carrying the chosen id. */
  param: { trader: string; asset: string };
}

const busiest = (table: string, col: string) =>
  `SELECT ${col} AS id FROM $db.${table} GROUP BY ${col} ORDER BY count() DESC, ${col} LIMIT 1`;

const READS: ReadSpec[] = [
  {
    name: 'events',
    path: '/events',
    table: 'bench_floor_events',
    timeCol: 'timeOfEvent',
    orderBy: 'timeOfEvent DESC, id DESC',
    columns: `id, type, price, quoteSymbol, toUnixTimestamp64Milli(timeOfEvent) AS t, assumed, retrospective, autoGenerated,
              positionId, traderId, assetId, messageId`,
    filters: { trader: 'traderId = {id:UInt64}', asset: 'assetId = {id:UInt64}', restricted: "sourcePlatform = 'TELEGRAM'" },
    pick: { trader: busiest('bench_floor_events', 'traderId'), asset: busiest('bench_floor_events', 'assetId') },
    param: { trader: 'traderIds', asset: 'assetIds' },
  },
  {
    name: 'messages',
    path: '/messages',
    table: 'bench_floor_messages',
    timeCol: 'writtenAt',
    orderBy: 'writtenAt DESC, id DESC',
    columns: `id, traderId, platform, sourceIdentityId, toUnixTimestamp64Milli(writtenAt) AS t, url, text, attachmentTypes, attachmentUrls,
              isEdited, isReply, isQuote, isRepost, displayName, handle, avatarUrl, profileUrl, audienceCount`,
    filters: { trader: 'traderId = {id:UInt64}', asset: null, restricted: "platform = 'TELEGRAM'" },
    pick: { trader: busiest('bench_floor_messages', 'traderId'), asset: null },
    param: { trader: 'traderIds', asset: 'assetIds' },
  },
  {
    name: 'positions',
    path: '/positions',
    table: 'bench_floor_positions',
    timeCol: 'openAt',
    orderBy: 'openAt DESC, id DESC',
    columns: `id, direction, toUnixTimestamp64Milli(openAt) AS t, openPrice, quoteSymbol, traderId, assetId, hasSeries,
              fwd1dPrice, toUnixTimestamp64Milli(fwd1dAt) AS fwd1dAt, fwd7dPrice, toUnixTimestamp64Milli(fwd7dAt) AS fwd7dAt,
              fwd30dPrice, toUnixTimestamp64Milli(fwd30dAt) AS fwd30dAt`,
    filters: { trader: 'traderId = {id:UInt64}', asset: 'assetId = {id:UInt64}', restricted: "sourcePlatform = 'TELEGRAM'" },
    pick: { trader: busiest('bench_floor_positions', 'traderId'), asset: busiest('bench_floor_positions', 'assetId') },
    param: { trader: 'traderIds', asset: 'assetIds' },
  },
  {
    name: 'open positions',
    path: '/positions/open',
    table: 'bench_floor_open_positions',
    timeCol: null,
    orderBy: 'openAt DESC, id DESC',
    columns: `id, direction, toUnixTimestamp64Milli(openAt) AS t, openPrice, quoteSymbol, currentPrice, currentReturnPercentage, traderId, assetId`,
    filters: { trader: 'traderId = {id:UInt64}', asset: 'assetId = {id:UInt64}', restricted: "sourcePlatform = 'TELEGRAM'" },
    pick: { trader: busiest('bench_floor_open_positions', 'traderId'), asset: busiest('bench_floor_open_positions', 'assetId') },
    param: { trader: 'traderIds', asset: 'assetIds' },
  },
  {
    // Needs message or signal visibility: with both restricted to TELEGRAM, the trader's source platform.
    name: 'trader directory',
    path: '/traders',
    table: 'bench_floor_traders',
    timeCol: null,
    orderBy: 'name, id',
    columns: `id, name, slug, avatarUrl, sourcePlatform, sourceIdentityId, hasSource, displayName, handle, sAvatarUrl, profileUrl, audienceCount`,
    filters: { trader: null, asset: null, restricted: "sourcePlatform = 'TELEGRAM'" },
    pick: { trader: null, asset: null },
    param: { trader: 'traderIds', asset: 'assetIds' },
  },
  {
    // Assets are not subject to visibility (only their traderIds filter is): the restricted case is n/a.
    name: 'assets',
    path: '/assets',
    table: 'bench_floor_assets',
    timeCol: null,
    orderBy: 'symbol, id',
    columns: 'id, name, symbol, logoUrl, assetClass, resolvedAssetClass, category, quoteSymbol',
    filters: {
      trader: 'id IN (SELECT assetId FROM $db.bench_floor_trader_assets WHERE traderId = {id:UInt64})',
      asset: 'id = {id:UInt64}',
      restricted: null,
    },
    pick: { trader: busiest('bench_floor_trader_assets', 'traderId'), asset: busiest('bench_floor_events', 'assetId') },
    param: { trader: 'traderIds', asset: 'assetIds' },
  },
];

interface Case {
  read: ReadSpec;
  kind: CaseKind;
  label: string;
  op: Operation;
  search: URLSearchParams;
  restricted: boolean;
  floor: (now: number) => { sql: string; params: Params };
}

function floorQuery(read: ReadSpec, clause: string | null, id: number | null) {
  return (now: number) => {
    const where: string[] = [];
    const params: Params = {};
    if (read.timeCol) {
      where.push(
        `${read.timeCol} >= fromUnixTimestamp64Milli({wStart:Int64}, 'UTC')`,
        `${read.timeCol} <= fromUnixTimestamp64Milli({wEnd:Int64}, 'UTC')`,
      );
      params.wStart = now - WINDOW_MS;
      params.wEnd = now;
    }
    if (clause) where.push(clause);
    if (id !== null) params.id = id;
    return {
      sql: `SELECT ${read.columns} FROM $db.${read.table} ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
            ORDER BY ${read.orderBy} LIMIT ${LIMIT + 1}`,
      params,
    };
  };
}

const opFor = (path: string): Operation => {
  const op = OPERATIONS.find((o) => o.versions.includes('v2') && o.path === path);
  if (!op) throw new Error(`no v2 operation for ${path}`);
  return op;
};
const hasParam = (op: Operation, name: string) => Boolean(((op.query as any).properties as Record<string, unknown>)[name]);

async function buildCases(emb: Embedded): Promise<{ cases: Case[]; na: { read: ReadSpec; kind: CaseKind; why: string }[] }> {
  const cases: Case[] = [];
  const na: { read: ReadSpec; kind: CaseKind; why: string }[] = [];
  for (const read of READS) {
    const op = opFor(read.path);
    for (const kind of CASE_KINDS) {
      if (kind === 'none') {
        cases.push({
          read,
          kind,
          label: 'no filter',
          op,
          search: new URLSearchParams(),
          restricted: false,
          floor: floorQuery(read, null, null),
        });
        continue;
      }
      const clause = read.filters[kind];
      if (kind === 'restricted') {
        if (!clause) {
          na.push({ read, kind, why: 'no visibility applies' });
          continue;
        }
        cases.push({
          read,
          kind,
          label: 'TELEGRAM only',
          op,
          search: new URLSearchParams(),
          restricted: true,
          floor: floorQuery(read, clause, null),
        });
        continue;
      }
      const param = read.param[kind];
      const pick = read.pick[kind];
      if (!clause || !pick || !hasParam(op, param)) {
        na.push({ read, kind, why: `no ${param} parameter` });
        continue;
      }
      const [row] = await emb.store.query<{ id: number }>(pick);
      if (!row) {
        na.push({ read, kind, why: 'floor is empty' });
        continue;
      }
      const id = Number(row.id);
      cases.push({
        read,
        kind,
        label: `${kind} ${id}`,
        op,
        search: new URLSearchParams({ [param]: String(id) }),
        restricted: false,
        floor: floorQuery(read, clause, id),
      });
    }
  }
  return { cases, na };
}

// ---------------------------------------------------------------------------------------------
// Handler and HTTP (uncached) against the SQL floor.

interface CaseResult {
  c: Case;
  n: number;
  rows: number;
  floorRows: number;
  handlerP50: number;
  floorP50: number;
  floorP99: number;
  httpP50: number;
  httpP99: number;
  truncated: boolean;
  mismatch: string | null;
  httpErrors: number;
}

const idsOf = (rows: { id: unknown }[]) => rows.map((r) => String(r.id));

async function measureCase(emb: Embedded, c: Case, httpBase: string, demoKey: string, until: number): Promise<CaseResult> {
  const principal = principalFor(c.restricted);
  const cursors = CursorCodec.random();
  const query = handlerQuery(c.op, c.search);
  const url = `${httpBase}/v2${c.op.path}${[...c.search].length ? `?${c.search}` : ''}`;
  const headers = { 'x-api-key': c.restricted ? demoKey + RESTRICTED_KEY_SUFFIX : demoKey };
  const handler = (now: Date) =>
    c.op.handler({ store: emb.store, principal, now, cursors, changes: STATIC }, query) as Promise<{ results: { id: unknown }[] }>;
  const floor = (now: number) => {
    const f = c.floor(now);
    return emb.store.query<{ id: unknown }>(f.sql, f.params);
  };
  let httpErrors = 0;
  const http = async () => {
    const res = await fetch(url, { headers, signal: AbortSignal.timeout(60_000) });
    const body = await res.arrayBuffer();
    if (res.status !== 200) {
      httpErrors++;
      if (httpErrors === 1) progress(`${c.read.name} / ${c.label}: HTTP ${res.status} ${Buffer.from(body).toString().slice(0, 200)}`);
    }
  };

  // Same clock for both: does the floor hold the page the handler answers?
  const now = new Date();
  const [page, floorPage] = await Promise.all([handler(now), floor(now.getTime())]);
  const a = idsOf(page.results);
  const b = idsOf(floorPage).slice(0, LIMIT);
  let mismatch: string | null = null;
  if (a.length !== b.length || a.some((x, i) => x !== b[i])) {
    const i = a.findIndex((x, j) => x !== b[j]);
    mismatch =
      `${c.read.name} / ${c.label}: handler page (${a.length} rows) and floor (${b.length} rows) differ` +
      (i >= 0 ? ` from row ${i}: handler id ${a[i]}, floor id ${b[i] ?? '-'}` : ` after row ${Math.min(a.length, b.length)}`);
  }

  const { hMs, fMs, httpMs, truncated } = await interleaved(
    () => handler(new Date()),
    () => floor(Date.now()),
    http,
    REPS,
    WARMUP,
    until,
  );
  const h = sortNum(hMs);
  const f = sortNum(fMs);
  const t = sortNum(httpMs);
  return {
    c,
    n: h.length,
    rows: a.length,
    floorRows: b.length,
    handlerP50: pct(h, 50),
    floorP50: pct(f, 50),
    floorP99: pct(f, 99),
    httpP50: pct(t, 50),
    httpP99: pct(t, 99),
    truncated,
    mismatch,
    httpErrors,
  };
}

// ---------------------------------------------------------------------------------------------
// Hot reads: the real route with its read cache vs a bare fastify route sending the same bytes.

interface HotResult {
  read: ReadSpec;
  bytes: number;
  cacheable: boolean;
  real: number;
  bare: number;
  errors: number;
  url: string;
}

async function measureHot(emb: Embedded, read: ReadSpec, demoKey: string, floors: FastifyInstance[]): Promise<HotResult> {
  const op = opFor(read.path);
  // The most common read: the first page with no bounds (a default window ending at serverTime,
  // which the read cache keeps while its answer cannot change).
  const search = new URLSearchParams();
  const path = `/v2${op.path}${[...search].length ? `?${search}` : ''}`;
  const { body, real, bare, errors } = await hotVersusBare(emb.url, `/v2${op.path}`, path, { 'x-api-key': demoKey }, floors);
  const cacheable = isCacheable(op.cache, handlerQuery(op, search), principalFor(false));
  return { read, bytes: body.length, cacheable, url: path, real, bare, errors };
}

// ---------------------------------------------------------------------------------------------
// Projector vs raw insert.

interface ProjectorResult {
  records: number;
  secs: number;
  dead: number;
  perTopic: { topic: string; records: number; secs: number }[];
  rawRows: number;
  rawSecs: number;
  /** The layout floor: the rows the projector left in its tables, raw-inserted into empty copies of those tables. */
  layout: { rows: number; secs: number; cpuSecs: number; tables: { table: string; rows: number; secs: number }[] };
  /** CPU seconds of reading and validating the whole log, the projector's first step (no store). */
  validateCpuSecs: number;
}

/** CPU seconds of reading every topic of the log in the projector's batches and validating them (validateBatch), without a store. */
function validationCpu(log: EmbeddedLog): number {
  progress('validation: reading and validating the whole log');
  const c0 = process.cpuUsage();
  for (const topic of TOPIC_NAMES) {
    for (let from = 0; ; ) {
      const { records, next } = log.read(topic, from, BATCH);
      if (next === from) break;
      from = next;
      validateBatch({ topic, partition: 0, records });
    }
  }
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1e6;
}

/**
 * The layout floor of the projector: every row it left in its read-model tables (after merges:
 * one row per key, fewer than it wrote), encoded beforehand (not timed) as JSONCompactEachRow in
 * batches of BATCH rows, and inserted through the session into an empty copy of each table (the
 * same DDL: engine, sorting key, partitions, projections, indexes). No projector can write its
 * tables faster than this: it is the cost of the layout itself, whatever the projection's logic.
 * The materialized-view copies (position_samples, the activity tables by owner) get their rows
 * directly: the copies of their source tables have no views.
 */
async function measureLayoutFloor(proj: ChdbStore): Promise<ProjectorResult['layout']> {
  await settle(proj, 'layout floor', 60_000);
  const session = (
    proj as unknown as {
      session?: RawSession & { queryBindAsync(sql: string, p: object, o: { format: string }): Promise<{ text(): string }> };
    }
  ).session;
  if (!session) throw new Error('the chdb store exposes no session to insert through');
  const db = proj.database;
  const tables = await proj.query<{ name: string; key: string; rows: number }>(
    `
    SELECT name, sorting_key AS key, total_rows AS rows FROM system.tables
    WHERE database = {db:String} AND engine LIKE '%MergeTree' AND total_rows > 0 ORDER BY name`,
    { db },
  );
  const out: ProjectorResult['layout'] = { rows: 0, secs: 0, cpuSecs: 0, tables: [] };
  for (const t of tables) {
    const name = checkIdentifier(t.name);
    const copy = `bench_layout_${name}`;
    const columns = (
      await proj.query<{ name: string }>(
        `SELECT name FROM system.columns WHERE database = {db:String} AND table = {t:String}
      AND default_kind NOT IN ('MATERIALIZED', 'ALIAS') ORDER BY position`,
        { db, t: name },
      )
    ).map((c) => checkIdentifier(c.name));
    const first = checkIdentifier(t.key.split(',')[0]!.trim());
    const rows = Number(t.rows);
    const chunks = Math.max(1, Math.ceil(rows / BATCH));
    progress(`layout floor: ${name} (${fmtInt(rows)} rows)`);
    await proj.exec(`DROP TABLE IF EXISTS $db.${copy}`);
    await proj.exec(`CREATE TABLE $db.${copy} AS $db.${name}`);
    let secs = 0;
    for (let i = 0; i < chunks; i++) {
      // Disjoint batches covering the table, each in no particular order of the sorting key (as a projector's batch).
      const res = await session.queryBindAsync(
        `SELECT ${columns.join(', ')} FROM ${db}.${name}
        WHERE cityHash64(${first}, ${columns.at(-1)!}) % ${chunks} = ${i}`,
        {},
        { format: 'JSONCompactEachRow' },
      );
      const values = Buffer.from(res.text());
      const s0 = performance.now();
      const c0 = process.cpuUsage();
      await session.insert({
        table: `${db}.${copy}`,
        columns,
        values,
        format: 'JSONCompactEachRow',
        settings: { max_partitions_per_insert_block: 0 },
      });
      const c = process.cpuUsage(c0);
      out.cpuSecs += (c.user + c.system) / 1e6; // the process's CPU while the insert ran (chdb's threads included)
      secs += (performance.now() - s0) / 1000;
    }
    await proj.exec(`DROP TABLE $db.${copy}`);
    out.tables.push({ table: name, rows, secs });
    out.rows += rows;
    out.secs += secs;
  }
  return out;
}

const RAW_COLUMNS = [
  'id',
  'positionId',
  'traderId',
  'assetId',
  'type',
  'direction',
  'price',
  'timeOfEvent',
  'assumed',
  'retrospective',
  'autoGenerated',
  'messageId',
  'version',
  'deleted',
];
const RAW_DDL = (table: string) => `CREATE TABLE ${table} (
    id UInt64, positionId UInt64, traderId UInt64, assetId UInt64, type LowCardinality(String), direction LowCardinality(String),
    price Nullable(Float64), timeOfEvent DateTime64(3, 'UTC'), assumed UInt8, retrospective UInt8, autoGenerated UInt8,
    messageId Nullable(String), version UInt64, deleted UInt8
  ) ENGINE = MergeTree ORDER BY id`;

type RawSession = {
  insert(p: {
    table: string;
    values: Buffer;
    format: 'JSONCompactEachRow';
    columns?: readonly string[];
    settings?: object;
  }): Promise<unknown>;
};

async function measureProjector(store: ChdbStore): Promise<ProjectorResult> {
  const log = new EmbeddedLog(dataDir);
  const proj = await openChdbStore(storePath(dataDir), PROJECTOR_DB);
  try {
    await proj.drop();
    await proj.init();
    await ensureSchema(proj);
    // The real projector (runProjector: its batch size, lanes and read-ahead) under a group of
    // its own, from the start of the log; topics interleave, so per topic the bench tells when
    // the topic's last batch was committed.
    const group = `bench-lists-${process.pid}`;
    log.writeOffsets(group, {});
    const perTopic: ProjectorResult['perTopic'] = [];
    const byTopic = new Map<string, { records: number; secs: number }>();
    let records = 0;
    let dead = 0;
    const t0 = performance.now();
    const ticker = setInterval(
      () => progress(`projector: ${fmtInt(records)} records after ${((performance.now() - t0) / 1000).toFixed(0)} s`),
      5000,
    );
    try {
      const sub = runProjector(
        log,
        proj,
        {
          onCommit: ({ batches }) => {
            for (const { topic, applied, dead: d } of batches) {
              const t = byTopic.get(topic) ?? { records: 0, secs: 0 };
              t.records += applied + d;
              t.secs = (performance.now() - t0) / 1000;
              byTopic.set(topic, t);
              records += applied + d;
              dead += d;
            }
          },
          onError: (err, topic) => progress(`projector: a batch of ${topic} failed, retried: ${(err as Error).message}`),
        },
        group,
      );
      await sub.caughtUp();
      await sub.stop();
    } finally {
      clearInterval(ticker);
      rmSync(join(dataDir, 'log', 'offsets', `${group}.json`), { force: true });
    }
    for (const topic of TOPIC_NAMES) {
      const t = byTopic.get(topic);
      if (t) perTopic.push({ topic, ...t });
    }
    const secs = (performance.now() - t0) / 1000;
    const layout = await measureLayoutFloor(proj);
    const validateCpuSecs = validationCpu(log);
    // The projected database goes before the floor runs, and its merges with it.
    await proj.drop();
    await proj.init();
    await settle(store, 'raw insert', 60_000);

    // Floor: the same number of rows as JSONCompactEachRow batches of the same size, encoded
    // beforehand (not timed) from the log's trade events, inserted straight through the session.
    const session = (store as unknown as { session?: RawSession }).session;
    if (!session || typeof session.insert !== 'function') throw new Error('the chdb store exposes no session to insert through');
    const payloads: Buffer[] = [];
    const POOL = 10; // batches encoded once and cycled: a plain MergeTree keeps duplicates
    let text = '';
    let rows = 0;
    for (let from = 0; payloads.length < POOL; ) {
      const { records: recs, next } = log.read('trade-events', from, BATCH - rows);
      if (next === from) break;
      from = next;
      for (const r of recs) {
        let e: any;
        try {
          e = JSON.parse(r.value);
        } catch {
          continue;
        }
        if (!e || typeof e.timeOfEvent !== 'string') continue;
        text +=
          JSON.stringify([
            e.id,
            e.positionId,
            e.traderId,
            e.assetId,
            e.type,
            e.direction,
            e.price ?? null,
            new Date(e.timeOfEvent).toISOString(),
            e.assumed ? 1 : 0,
            e.retrospective ? 1 : 0,
            e.autoGenerated ? 1 : 0,
            e.messageId ?? null,
            e.version,
            e.deleted ? 1 : 0,
          ]) + '\n';
        rows++;
      }
      if (rows === BATCH) {
        payloads.push(Buffer.from(text));
        text = '';
        rows = 0;
      }
    }
    if (!payloads.length) throw new Error(`no full batch of ${BATCH} trade events in the log for the raw insert floor`);
    const rawTable = `${PROJECTOR_DB}.bench_floor_insert`;
    await proj.exec(RAW_DDL(rawTable));
    let rawRows = 0;
    const r0 = performance.now();
    for (let i = 0; rawRows < records; i++) {
      await session.insert({ table: rawTable, values: payloads[i % payloads.length]!, format: 'JSONCompactEachRow', columns: RAW_COLUMNS });
      rawRows += BATCH;
    }
    const rawSecs = (performance.now() - r0) / 1000;
    return { records, secs, dead, perTopic, rawRows, rawSecs, layout, validateCpuSecs };
  } finally {
    await proj.drop().catch(() => {});
    await proj.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Run.

const tStart = performance.now();
let emb: Embedded | undefined;
let measureApp: FastifyInstance | undefined;
const bareApps: FastifyInstance[] = [];
let exitCode = 0;
/** Drops the floors and closes everything, once (also on Ctrl-C). */
const { cleanup, interrupted } = benchCleanup({
  emb: () => emb,
  measureApp: () => measureApp,
  bareApps,
  ownDir,
  dataDir,
  dropFloors: async (store) => {
    for (const t of FLOOR_TABLES) await store.exec(`DROP TABLE IF EXISTS $db.${t.name}`).catch(() => {});
    await store.exec(`DROP DATABASE IF EXISTS ${PROJECTOR_DB}`).catch(() => {});
  },
});

try {
  progress(`data dir ${dataDir}${ownDir ? ' (fresh, small demo set)' : ''}`);
  const started = await startBenchService(
    dataDir,
    progress,
    ['events_current', 'positions_current', 'messages_current'],
    (e) => {
      emb = e;
    },
    tStart,
  );
  const { demoKey, setupSecs } = started;
  emb = started.emb;

  // Floors, in the same store.
  const tFloors = performance.now();
  const floorNow = Date.now();
  const floorRows: Record<string, number> = {};
  for (const t of FLOOR_TABLES)
    floorRows[t.name] = await buildFloorTable(emb.store, t.name, [`CREATE TABLE $db.${t.name} ${t.ddl(floorNow)}`]);
  const floorSecs = (performance.now() - tFloors) / 1000;
  // A rebuild on start (or the floors) leaves merges running: they would land in random reps.
  await settle(emb.store, 'reads', 120_000);

  // The measurement app: the same API on the same store without a read cache (every request runs
  // the read); its authenticator is the real one, and a key with RESTRICTED_KEY_SUFFIX gets the
  // demo principal with both visibilities restricted to TELEGRAM.
  const realAuth = new ApiKeyAuthenticator(emb.store, new MemoryCache());
  const auth = {
    async authenticate(key: string | undefined): Promise<Principal> {
      if (key?.endsWith(RESTRICTED_KEY_SUFFIX)) {
        const p = await realAuth.authenticate(key.slice(0, -RESTRICTED_KEY_SUFFIX.length));
        return { ...p, messageVisibility: TELEGRAM, signalVisibility: TELEGRAM };
      }
      return realAuth.authenticate(key);
    },
  } as unknown as ApiKeyAuthenticator;
  measureApp = buildApi({ store: emb.store, auth, dataVersion: () => 0, cursors: CursorCodec.random(), logger: false });
  const httpBase = await measureApp.listen({ port: 0, host: '127.0.0.1' });

  const { cases, na } = await buildCases(emb);
  const budgetEnd = performance.now() + MAX_SECONDS * 1000;
  const hotSecs = READS.length * HOT_SECS;
  // Hard stop if something hangs: the soft deadlines end loops, this ends the process.
  setTimeout(
    () => {
      console.error('bench/lists: still running long past its budget; giving up');
      process.exit(1);
    },
    (MAX_SECONDS + hotSecs + 600 + (SKIP_PROJECTOR ? 0 : 1800)) * 1000,
  ).unref();

  const results: CaseResult[] = [];
  for (const [i, c] of cases.entries()) {
    const share = Math.max(0, budgetEnd - performance.now()) / (cases.length - i);
    progress(`${c.read.name} / ${c.label} ...`);
    results.push(await measureCase(emb, c, httpBase, demoKey, performance.now() + share));
  }

  const hot: HotResult[] = [];
  // One read measured first and thrown away: the first legs of a process warm up the client loop,
  // the HTTP stack and the JIT for every read after it (events, measured first, showed 0.8x in several runs).
  progress('hot reads: warming up ...');
  await measureHot(emb, READS[0]!, demoKey, bareApps);
  for (const read of READS) {
    progress(`hot ${read.name} ...`);
    hot.push(await measureHot(emb, read, demoKey, bareApps));
  }

  let projector: ProjectorResult | undefined;
  if (!SKIP_PROJECTOR) {
    progress('projector: projecting the log into a fresh database ...');
    projector = await measureProjector(emb.store);
  }

  // ---------------------------------------------------------------------------------------------
  // The table.
  const notes: string[] = [];

  const caseRows: string[][] = [];
  for (const read of READS) {
    for (const kind of CASE_KINDS) {
      const r = results.find((x) => x.c.read === read && x.c.kind === kind);
      if (!r) {
        const why = na.find((x) => x.read === read && x.kind === kind)?.why ?? '';
        caseRows.push([read.name, kind === 'restricted' ? 'TELEGRAM only' : kind, 'n/a', ...Array(9).fill('n/a'), `(${why})`]);
        continue;
      }
      const hr = r.handlerP50 / r.floorP50;
      const p50r = r.httpP50 / r.floorP50;
      const p99r = r.httpP99 / r.floorP99;
      caseRows.push([
        read.name,
        r.c.label,
        String(r.rows),
        fmtMs(r.handlerP50),
        fmtMs(r.floorP50),
        fmtRatio(hr, hr > GOALS.handler),
        fmtMs(r.httpP50),
        fmtMs(r.httpP99),
        fmtMs(r.floorP99),
        fmtRatio(p50r, false),
        fmtRatio(p99r, p99r > GOALS.httpP99),
        String(r.n),
        '',
      ]);
      if (r.mismatch) {
        notes.push(r.mismatch);
        exitCode = 1;
      }
      if (r.httpErrors) {
        notes.push(`${read.name} / ${r.c.label}: ${r.httpErrors} HTTP requests did not answer 200`);
        exitCode = 1;
      }
      if (r.truncated) notes.push(`${read.name} / ${r.c.label}: stopped at the time budget after ${r.n} of ${REPS} reps`);
    }
  }

  console.log('');
  console.log(
    `List reads vs floors (plain MergeTree in (time, id) / keyset order, same rows, same filters, top ${LIMIT + 1}); ` +
      `${REPS} reps per case after ${WARMUP} warm-up, handler/floor/HTTP interleaved; times in ms`,
  );
  printTable(
    [
      'read',
      'case',
      'rows',
      'handler p50',
      'floor p50',
      'ratio',
      'HTTP p50',
      'HTTP p99',
      'floor p99',
      'p50 ratio',
      'p99 ratio',
      'reps',
      '',
    ],
    caseRows,
    2,
  );
  console.log('');
  console.log(
    `Hot reads: first page, ${HOT_CLIENTS} concurrent clients (keep-alive), real route with its read cache vs a bare fastify route sending the same bytes`,
  );
  printTable(
    ['read', 'bytes', 'cacheable', 'real req/s', 'bare req/s', 'ratio'],
    hot.map((h) => {
      const ratio = h.real / h.bare;
      if (h.errors) {
        notes.push(`hot ${h.read.name}: ${h.errors} requests failed`);
        exitCode = 1;
      }
      return [h.read.name, String(h.bytes), h.cacheable ? 'yes' : 'no', fmtInt(h.real), fmtInt(h.bare), fmtRatio(ratio, ratio < GOALS.hot)];
    }),
  );
  if (projector) {
    const rps = projector.records / projector.secs;
    const raw = projector.rawRows / projector.rawSecs;
    console.log('');
    console.log(
      `Projector: the data dir's log (${fmtInt(projector.records)} records) into a fresh database by the real projector ` +
        `(runProjector, batches up to ${fmtInt(BATCH)}), vs a raw chdb insert of ${fmtInt(projector.rawRows)} rows (JSONCompactEachRow, events columns, plain MergeTree)`,
    );
    const layoutRps = projector.records / projector.layout.secs;
    printTable(
      ['projector rec/s', 'raw rec/s', 'ratio', 'layout floor rec/s', 'ratio', 'projector s', 'raw s', 'layout floor s'],
      [
        [
          fmtInt(rps) + (rps < GOALS.projectorRps ? ' !' : ''),
          fmtInt(raw),
          fmtRatio(rps / raw, false),
          fmtInt(layoutRps),
          fmtRatio(rps / layoutRps, false),
          projector.secs.toFixed(1),
          projector.rawSecs.toFixed(1),
          projector.layout.secs.toFixed(1),
        ],
      ],
      0,
    );
    console.log(
      `layout floor: the ${fmtInt(projector.layout.rows)} rows the projector left in its tables, raw-inserted (JSONCompactEachRow, ` +
        `batches of ${fmtInt(BATCH)}) into empty copies of the same tables; layout floor rec/s = the log's records / those seconds. Per table: ` +
        projector.layout.tables
          .filter((t) => t.secs >= 0.05)
          .sort((a, b) => b.secs - a.secs)
          .map((t) => `${t.table} ${fmtInt(t.rows)} rows ${t.secs.toFixed(1)} s`)
          .join(', '),
    );
    const budget = (projector.records / GOALS.projectorRps) * cpus().length;
    console.log(
      `CPU: the layout floor's inserts took ${projector.layout.cpuSecs.toFixed(1)} CPU s (${(projector.layout.cpuSecs / projector.layout.secs).toFixed(2)} cores while they ran); ` +
        `reading and validating the log takes ${projector.validateCpuSecs.toFixed(1)} CPU s; together ${(projector.layout.cpuSecs + projector.validateCpuSecs).toFixed(1)} CPU s, ` +
        `against the ${budget.toFixed(1)} CPU s that ${fmtInt(projector.records)} records at ${fmtInt(GOALS.projectorRps)} rec/s leave on ${cpus().length} CPUs`,
    );
    console.log(
      `per topic (topics are projected side by side): ${projector.perTopic.map((t) => `${t.topic} ${fmtInt(t.records)} done at ${t.secs.toFixed(1)} s`).join(', ')}`,
    );
    if (projector.dead) notes.push(`projector: ${projector.dead} records dead-lettered`);
  }
  console.log('');
  console.log(
    `! marks a figure past the goal: handler ratio <= ${GOALS.handler}x, HTTP p99 ratio <= ${GOALS.httpP99}x, hot ratio >= ${GOALS.hot}x, ` +
      `projector >= ${fmtInt(GOALS.projectorRps)} rec/s`,
  );
  console.log(
    `one trader / one asset: the busiest id of the read's floor; TELEGRAM only: message and signal visibility { mode: 'platforms', platforms: ['TELEGRAM'] }`,
  );
  for (const n of notes) console.log(`note: ${n}`);
  console.log(machineLine({ ownDir, dataDir, floorRows, setupSecs, floorSecs, tStart }));
} catch (err) {
  reportFailure('bench/lists', err, interrupted());
  exitCode = 1;
} finally {
  await cleanup();
}
process.exit(interrupted() ? 130 : exitCode);
