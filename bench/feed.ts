// Partner-feed benchmark (DESIGN 8 and 9): every figure is a ratio against a floor built and
// measured in the same run, in the same chdb store, on the same machine.
//   SQL floor:  per case, plain MergeTrees laid out for the read holding the groups it may return
//               (current statement per id, visible to an all-visibility caller), queried for the
//               top-(limit+1) with the same filters; a since-poll's floor is the top-(limit+1) of
//               the current stamps after the watermark, each with its group's row.
//   HTTP:       the real route (app.inject) of a second API instance without a read cache.
//   HTTP floor: a bare fastify route sending the same bytes (the hot since-poll).
// Usage: npx tsx bench/feed.ts --help

import type { FastifyInstance } from 'fastify';
import { isCacheable } from '../apps/api/read-cache.ts';
import { buildApi } from '../apps/api/server.ts';
import { ApiKeyAuthenticator } from '../apps/auth/keys.ts';
import { MemoryCache } from '../apps/cache/memory.ts';
import { cursorCodec, type Embedded } from '../apps/embedded.ts';
import type { ReadContext } from '../apps/reads/context.ts';
import { type CursorCodec, fingerprint } from '../apps/reads/cursor.ts';
import { factsOf } from '../apps/reads/facts.ts';
import type { Principal } from '../apps/reads/principal.ts';
import { OPERATIONS, type Operation } from '../apps/registry.ts';
import { READ_MODEL_GRAPH } from '../projectors/index.ts';
import { versionChanges } from '../storage/changes.ts';
import type { ChdbStore } from '../storage/chdb.ts';
import type { Params } from '../storage/port.ts';
import { curateFeedEvents, decodeFeedEvents, FEED_CHANGES_TABLE, FEED_GROUPS_TABLE, feedWatermark } from '../storage/tables/feed-groups.ts';
import { sourceKey } from '../storage/tables/traders.ts';
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

const USAGE = `Usage: npx tsx bench/feed.ts [options]

Benchmarks the partner feed read GET /v2/feed (first page unfiltered, one trader, one asset,
a since-poll from 0 and one with 1,000 changes waiting, and a hot since-poll with nothing new)
against floors built in the same run in the same store:
  handler  p50 of the read's handler called directly / p50 of the floor: the top-(limit+1) over a
           plain MergeTree laid out for the case holding the groups the read may return (since-polls:
           the top-(limit+1) current stamps after the watermark, each with its group's row)
  http     p50 and p99 of the real route (app.inject on a second instance without a read cache,
           one request at a time) / floor p50, p99
  hot      req/s of since=<current watermark> on the real service (read cache on) at 50
           concurrent clients / req/s of a bare fastify route sending the same bytes

Options:
  --data-dir DIR      an existing seeded DATA_DIR (e.g. made by
                      'node bin/signalbase.cjs seed --scale large --data-dir /tmp/sblarge');
                      default: a fresh temp dir seeded with the small demo set, removed afterwards.
                      No server may be running on DIR (chdb: one process per data directory).
  --reps N            measured handler calls, HTTP requests and floor queries per case (default 30)
  --max-seconds S     budget for the handler and HTTP measurements; each case gets an equal share
                      of what is left and stops early past it (default 90)
  -h, --help          this text

Client, servers and floors share this process (chdb opens a data directory from one process
only). The floor tables (bench_floor_feed*) are dropped at the end. The result table goes to
stdout, progress to stderr.`;

const {
  values: argv,
  die,
  posInt,
} = benchArgs('bench/feed', USAGE, {
  'data-dir': { type: 'string' },
  reps: { type: 'string', default: '30' },
  'max-seconds': { type: 'string', default: '90' },
  help: { type: 'boolean', short: 'h' },
});
const REPS = posInt('reps', argv.reps);
const MAX_SECONDS = posInt('max-seconds', argv['max-seconds']);
const WARMUP = 3;
const LIMIT = 20; // the feed's default page size: the floor takes LIMIT + 1
const SINCE_LIMIT = 100; // the since-polls' page size (the most a request may ask)
const BACKLOG = 1_000; // changes waiting for the second since-poll
const DAY_MS = 86_400_000;
const WINDOW_MS = 90 * DAY_MS; // the feed pages' default window
const GOALS = { handler: 1.5, httpP99: 3, hot: 0.9 };

// ---------------------------------------------------------------------------------------------
// Data directory: refuse a directory a running server holds, seed a fresh one by default.

const { ownDir, dataDir } = benchDataDir(argv['data-dir'], 'signalbase-bench-feed-', die);

// ---------------------------------------------------------------------------------------------
// Floors. The groups the feed may return to an all-visibility caller: the current statement of
// each group (the newest row per id of feed_groups), live, whose source has a live trader (the
// lowest live trader id assigned it: the group's trader) and with at least one event left after
// the contract's curation on a live trader and an asset with an active market. Which groups
// those are, with their trader and the assets of their shown events, is decided once in JS with
// the read's own curation and facts (not timed) into bench_floor_feed_seen; the floor tables are
// then filled with INSERT ... SELECT from feed_groups (no FINAL at query time, no join).

const CURRENT_GROUPS = `SELECT * FROM ${FEED_GROUPS_TABLE} ORDER BY id, seq DESC LIMIT 1 BY id`;
const SEEN = 'bench_floor_feed_seen';

interface FloorTable {
  name: string;
  order: string;
  select: (watermark: number) => string;
}

const FLOOR_TABLES: FloorTable[] = [
  {
    // Pages, newest first: (writtenAt, id). assetIds: the assets of the group's shown events.
    name: 'bench_floor_feed',
    order: 'writtenAt, id',
    select: () => `SELECT g.id AS id, g.platform AS platform, g.sourceIdentityId AS sourceIdentityId, g.writtenAt AS writtenAt,
             g.url AS url, g.text AS text, g.attachmentTypes AS attachmentTypes, g.attachmentUrls AS attachmentUrls, g.events AS events,
             g.traderIds AS traderIds, s.traderId AS traderId, s.shownAssetIds AS assetIds
      FROM (${CURRENT_GROUPS}) AS g INNER JOIN $db.${SEEN} AS s ON s.id = g.id
      WHERE g.live = 1 AND g.tomb = 0`,
  },
  {
    // traderIds=: a trader's groups are those of its source.
    name: 'bench_floor_feed_by_source',
    order: 'platform, sourceIdentityId, writtenAt, id',
    select: () => 'SELECT * FROM $db.bench_floor_feed',
  },
  {
    // assetIds=: one row per group and shown asset.
    name: 'bench_floor_feed_by_asset',
    order: 'assetId, writtenAt, id',
    select: () => 'SELECT assetId, * EXCEPT (assetIds) FROM $db.bench_floor_feed ARRAY JOIN assetIds AS assetId',
  },
  {
    // since: the current stamps (at each (fseq, id) key the newest row decides; a tombstone cancels) up to the
    // watermark, each with its group's row (feed_changes carries it), in one table ordered for the poll.
    name: 'bench_floor_feed_changes',
    order: 'fseq, id',
    select: (watermark) => `SELECT * FROM (SELECT * FROM ${FEED_CHANGES_TABLE} ORDER BY fseq, id, seq DESC LIMIT 1 BY fseq, id)
      WHERE tomb = 0 AND fseq <= ${Math.trunc(watermark)}`,
  },
];
const ALL_FLOOR_TABLES = [SEEN, ...FLOOR_TABLES.map((t) => t.name)];

/** Decides which current groups the read shows (see above) and stores them in SEEN; returns how many. */
async function buildSeen(store: ChdbStore, ctx: ReadContext): Promise<number> {
  await store.exec(`DROP TABLE IF EXISTS $db.${SEEN}`);
  await store.exec(`CREATE TABLE $db.${SEEN} (id String, traderId UInt64, shownAssetIds Array(UInt64)) ENGINE = MergeTree ORDER BY id`);
  const facts = await factsOf(ctx);
  const groups = await store.query<{ id: string; platform: string; sourceIdentityId: string; events: string }>(
    `SELECT id, platform, sourceIdentityId, events FROM (${CURRENT_GROUPS}) WHERE live = 1 AND tomb = 0`,
  );
  const rows: unknown[][] = [];
  for (const g of groups) {
    const traderId = facts.sourceTrader.get(sourceKey(g.platform, g.sourceIdentityId));
    if (traderId === undefined) continue;
    const shown = curateFeedEvents(decodeFeedEvents(g.events)).filter(
      (e) => facts.traderPlatform.has(e.traderId) && facts.assetById.has(e.assetId),
    );
    if (!shown.length) continue;
    rows.push([g.id, traderId, [...new Set(shown.map((e) => e.assetId))].sort((a, b) => a - b)]);
  }
  for (let i = 0; i < rows.length; i += 50_000)
    await store.insertCompact(SEEN, ['id', 'traderId', 'shownAssetIds'], rows.slice(i, i + 50_000));
  return rows.length;
}

// ---------------------------------------------------------------------------------------------
// Cases.

const PAGE_COLUMNS = `id, platform, sourceIdentityId, toUnixTimestamp64Milli(writtenAt) AS t, url, text, attachmentTypes, attachmentUrls,
  events, traderIds, traderId`;
const GROUP_COLUMNS = `id, platform, sourceIdentityId, toUnixTimestamp64Milli(writtenAt) AS t, url, text, attachmentTypes, attachmentUrls,
  hasMessage, events, assetIds, traderIds, live, tomb`;

type FeedAnswer = { results: { id: string }[]; meta: { hasMore: boolean; removedIds?: string[] } };
/** What a floor returns: the ids of its page (in order) and whether there is more. */
type FloorAnswer = { ids: string[]; hasMore: boolean; rows: number };

interface Case {
  label: string;
  kind: 'page' | 'since';
  search: URLSearchParams;
  floor: (now: number) => Promise<FloorAnswer>;
}

const opFor = (path: string): Operation => {
  const op = OPERATIONS.find((o) => o.versions.includes('v2') && o.path === path);
  if (!op) throw new Error(`no v2 operation for ${path}`);
  return op;
};

function pageFloor(store: ChdbStore, table: string, clause: string | null, params: Params): (now: number) => Promise<FloorAnswer> {
  const sql = `SELECT ${PAGE_COLUMNS} FROM $db.${table}
    WHERE writtenAt >= fromUnixTimestamp64Milli({wStart:Int64}, 'UTC') AND writtenAt <= fromUnixTimestamp64Milli({wEnd:Int64}, 'UTC')
      ${clause ? `AND ${clause}` : ''}
    ORDER BY writtenAt DESC, id DESC LIMIT ${LIMIT + 1}`;
  return async (now) => {
    const rows = await store.query<{ id: string }>(sql, { ...params, wStart: now - WINDOW_MS, wEnd: now });
    return { ids: rows.slice(0, LIMIT).map((r) => r.id), hasMore: rows.length > LIMIT, rows: rows.length };
  };
}

/** The top-(limit+1) stamps after the watermark with their groups: one read in (fseq, id) order. */
function sinceFloor(store: ChdbStore, from: number): (now: number) => Promise<FloorAnswer> {
  return async () => {
    const stamps = await store.query<{ fseq: number; id: string }>(
      `
      SELECT fseq, ${GROUP_COLUMNS} FROM $db.bench_floor_feed_changes WHERE fseq > {from:UInt64} ORDER BY fseq, id LIMIT ${SINCE_LIMIT + 1}`,
      { from },
    );
    return { ids: stamps.slice(0, SINCE_LIMIT).map((r) => r.id), hasMore: stamps.length > SINCE_LIMIT, rows: stamps.length };
  };
}

/** A since-cursor for a watermark, signed as sincePoll (apps/reads/feed.ts) signs its nextCursor. */
function sinceCursor(op: Operation, codec: CursorCodec, principal: Principal, search: URLSearchParams, watermark: number): string {
  const { since: _s, cursor: _c, limit: _l, ...filters } = handlerQuery(op, search);
  return codec.encode({ k: [watermark] }, fingerprint('list_feed:since', filters), codec.policyPrint(principal));
}

async function buildCases(
  store: ChdbStore,
  op: Operation,
  codec: CursorCodec,
  principal: Principal,
): Promise<{ cases: Case[]; notes: string[] }> {
  const cases: Case[] = [];
  const notes: string[] = [];
  const windowClause = `writtenAt >= now64(3, 'UTC') - toIntervalDay(90)`;
  cases.push({ label: 'first page', kind: 'page', search: new URLSearchParams(), floor: pageFloor(store, 'bench_floor_feed', null, {}) });

  // One trader: the one with the most groups in the window.
  const [trader] = await store.query<{ id: number; platform: string; sid: string; n: number }>(`
    SELECT traderId AS id, any(platform) AS platform, any(sourceIdentityId) AS sid, count() AS n FROM $db.bench_floor_feed
    WHERE ${windowClause} GROUP BY traderId ORDER BY n DESC, traderId LIMIT 1`);
  if (trader) {
    cases.push({
      label: `trader ${trader.id}`,
      kind: 'page',
      search: new URLSearchParams({ traderIds: String(trader.id) }),
      floor: pageFloor(store, 'bench_floor_feed_by_source', 'platform = {platform:String} AND sourceIdentityId = {sid:String}', {
        platform: trader.platform,
        sid: trader.sid,
      }),
    });
    notes.push(`trader ${trader.id}: the trader with the most groups in the window (${fmtInt(Number(trader.n))})`);
  } else notes.push('one trader: n/a (no group in the window)');

  // One asset, mid-popular: the median by groups in the window among the assets with a full page.
  const assets = await store.query<{ id: number; n: number }>(`
    SELECT assetId AS id, count() AS n FROM $db.bench_floor_feed_by_asset WHERE ${windowClause}
    GROUP BY assetId HAVING n > ${LIMIT} ORDER BY n DESC, assetId`);
  const asset = assets[Math.floor(assets.length / 2)];
  if (asset) {
    cases.push({
      label: `asset ${asset.id}`,
      kind: 'page',
      search: new URLSearchParams({ assetIds: String(asset.id) }),
      floor: pageFloor(store, 'bench_floor_feed_by_asset', 'assetId = {id:UInt64}', { id: Number(asset.id) }),
    });
    notes.push(
      `asset ${asset.id}: the median of the ${assets.length} assets with more than ${LIMIT} groups in the window (${fmtInt(Number(asset.n))} groups)`,
    );
  } else notes.push(`one asset: n/a (no asset with more than ${LIMIT} groups in the window)`);

  cases.push({
    label: 'since=0',
    kind: 'since',
    search: new URLSearchParams({ since: '0', limit: String(SINCE_LIMIT) }),
    floor: sinceFloor(store, 0),
  });

  // A watermark with BACKLOG changes after it: the fseq of the (BACKLOG + 1)-th newest current stamp.
  const [back] = await store.query<{ fseq: number }>(
    `SELECT fseq FROM $db.bench_floor_feed_changes ORDER BY fseq DESC LIMIT 1 OFFSET ${BACKLOG}`,
  );
  if (back) {
    const from = Number(back.fseq);
    const cursor = sinceCursor(op, codec, principal, new URLSearchParams(), from);
    cases.push({
      label: `since=-${fmtInt(BACKLOG)}`,
      kind: 'since',
      search: new URLSearchParams({ since: cursor, limit: String(SINCE_LIMIT) }),
      floor: sinceFloor(store, from),
    });
    notes.push(`since=-${fmtInt(BACKLOG)}: a signed since-cursor at fseq ${from}, ${fmtInt(BACKLOG)} changes after it`);
  } else notes.push(`since=-${fmtInt(BACKLOG)}: n/a (fewer than ${BACKLOG + 1} current stamps)`);
  return { cases, notes };
}

// ---------------------------------------------------------------------------------------------
// Handler and HTTP (uncached, app.inject) against the SQL floor.

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

/** The handler's answer against the floor's: the same page ids in the same order (since-polls: the same changes). */
function compare(c: Case, ans: FeedAnswer, floor: FloorAnswer): string | null {
  const diff = (what: string) => `${c.label}: handler and floor differ: ${what}`;
  const a = ans.results.map((r) => r.id);
  if (c.kind === 'page') {
    if (a.length !== floor.ids.length || a.some((x, i) => x !== floor.ids[i])) {
      const i = a.findIndex((x, j) => x !== floor.ids[j]);
      return diff(
        `page (${a.length} groups) vs floor (${floor.ids.length})` +
          (i >= 0
            ? ` from row ${i}: handler id ${a[i]}, floor id ${floor.ids[i] ?? '-'}`
            : ` after row ${Math.min(a.length, floor.ids.length)}`),
      );
    }
  } else {
    // A change is a group (results) or a removal (meta.removedIds); the groups keep the changes' order.
    const removed = ans.meta.removedIds ?? [];
    const changes = new Set([...a, ...removed]);
    const missing = floor.ids.filter((id) => !changes.has(id));
    const extra = [...changes].filter((id) => !floor.ids.includes(id));
    if (missing.length || extra.length || changes.size !== a.length + removed.length) {
      return diff(
        `${a.length} groups + ${removed.length} removed vs ${floor.ids.length} floor changes` +
          (missing.length ? `; not in the answer: ${missing.slice(0, 3).join(', ')}` : '') +
          (extra.length ? `; not in the floor: ${extra.slice(0, 3).join(', ')}` : ''),
      );
    }
    const shown = new Set(a);
    const order = floor.ids.filter((id) => shown.has(id));
    const i = a.findIndex((x, j) => x !== order[j]);
    if (i >= 0) return diff(`groups out of change order at row ${i}: handler id ${a[i]}, floor id ${order[i]}`);
  }
  if (ans.meta.hasMore !== floor.hasMore) return diff(`hasMore ${ans.meta.hasMore} vs ${floor.hasMore}`);
  return null;
}

async function measureCase(
  emb: Embedded,
  app: FastifyInstance,
  op: Operation,
  c: Case,
  principal: Principal,
  codec: CursorCodec,
  demoKey: string,
  until: number,
): Promise<CaseResult> {
  const query = handlerQuery(op, c.search);
  const url = `/v2${op.path}${[...c.search].length ? `?${c.search}` : ''}`;
  const headers = { 'x-api-key': demoKey };
  const handler = (now: Date) =>
    op.handler({ store: emb.store, principal, now, cursors: codec, changes: STATIC }, query) as Promise<FeedAnswer>;
  let httpErrors = 0;
  const http = async () => {
    const res = await app.inject({ method: 'GET', url, headers });
    if (res.statusCode !== 200) {
      httpErrors++;
      if (httpErrors === 1) progress(`${c.label}: HTTP ${res.statusCode} ${res.body.slice(0, 200)}`);
    }
  };

  // Same clock for both: does the floor hold the page the handler answers?
  const now = new Date();
  const [ans, floorAns] = await Promise.all([handler(now), c.floor(now.getTime())]);
  const mismatch = compare(c, ans, floorAns);

  const { hMs, fMs, httpMs, truncated } = await interleaved(
    () => handler(new Date()),
    () => c.floor(Date.now()),
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
    rows: ans.results.length + (ans.meta.removedIds?.length ?? 0),
    floorRows: floorAns.ids.length,
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
// Hot since-poll: the real service with its read cache vs a bare fastify route sending the same bytes.

interface HotResult {
  bytes: number;
  cacheable: boolean;
  real: number;
  bare: number;
  errors: number;
  changes: number;
}

async function measureHot(
  emb: Embedded,
  op: Operation,
  search: URLSearchParams,
  principal: Principal,
  demoKey: string,
  bareApps: FastifyInstance[],
): Promise<HotResult> {
  const path = `/v2${op.path}?${search}`;
  const { body, real, bare, errors } = await hotVersusBare(emb.url, `/v2${op.path}`, path, { 'x-api-key': demoKey }, bareApps);
  const answer = JSON.parse(body.toString()) as { data: FeedAnswer };
  const cacheable = isCacheable(op.cache, handlerQuery(op, search), principal);
  return {
    bytes: body.length,
    cacheable,
    real,
    bare,
    errors,
    changes: answer.data.results.length + (answer.data.meta.removedIds?.length ?? 0),
  };
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
    for (const t of ALL_FLOOR_TABLES) await store.exec(`DROP TABLE IF EXISTS $db.${t}`).catch(() => {});
  },
});

try {
  progress(`data dir ${dataDir}${ownDir ? ' (fresh, small demo set)' : ''}`);
  const started = await startBenchService(
    dataDir,
    progress,
    ['feed_groups', 'feed_changes', 'feed_watermark'],
    (e) => {
      emb = e;
    },
    tStart,
  );
  const { demoKey, setupSecs } = started;
  emb = started.emb;
  const op = opFor('/feed');

  // The cursor codec the service signs with (the secret in DATA_DIR), and the demo key's principal:
  // since-cursors are bound to both, and the handler, the measurement app and the service share them.
  const codec = cursorCodec(dataDir);
  const auth = new ApiKeyAuthenticator(emb.store, new MemoryCache());
  const principal = await auth.authenticate(demoKey);
  if (principal.messageVisibility.mode !== 'all' || principal.signalVisibility.mode !== 'all' || principal.historyWindowDays !== null) {
    throw new Error(
      "the demo key's account is not an all-visibility account with no history window (the floors hold what such a caller reads)",
    );
  }

  // Floors, in the same store.
  const tFloors = performance.now();
  const watermark = await feedWatermark(emb.store);
  const floorRows: Record<string, number> = {};
  floorRows[SEEN] = await buildSeen(emb.store, { store: emb.store, principal, now: new Date(), cursors: codec, changes: STATIC });
  progress(`floor ${SEEN}: ${floorRows[SEEN]} rows (the groups the feed shows)`);
  for (const t of FLOOR_TABLES) {
    floorRows[t.name] = await buildFloorTable(emb.store, t.name, [
      `CREATE TABLE $db.${t.name} ENGINE = MergeTree ORDER BY (${t.order}) EMPTY AS ${t.select(watermark)}`,
      `INSERT INTO $db.${t.name} ${t.select(watermark)}`,
    ]);
  }
  const floorSecs = (performance.now() - tFloors) / 1000;
  // A rebuild on start (or the floors) leaves merges running: they would land in random reps.
  await settle(emb.store, 'reads', 120_000);

  // The measurement app: the same API on the same store without a read cache (every request runs
  // the read), the real authenticator and the service's cursor codec; requests by app.inject.
  measureApp = buildApi({
    store: emb.store,
    auth: new ApiKeyAuthenticator(emb.store, new MemoryCache()),
    dataVersion: () => 0,
    cursors: codec,
    logger: false,
  });
  await measureApp.ready();

  const { cases, notes: caseNotes } = await buildCases(emb.store, op, codec, principal);
  const budgetEnd = performance.now() + MAX_SECONDS * 1000;
  const hotSecs = 2 * HOT_SECS;
  // Hard stop if something hangs: the soft deadlines end loops, this ends the process.
  setTimeout(
    () => {
      console.error('bench/feed: still running long past its budget; giving up');
      process.exit(1);
    },
    (MAX_SECONDS + hotSecs + 600) * 1000,
  ).unref();

  const results: CaseResult[] = [];
  for (const [i, c] of cases.entries()) {
    const share = Math.max(0, budgetEnd - performance.now()) / (cases.length - i);
    progress(`${c.label} ...`);
    results.push(await measureCase(emb, measureApp, op, c, principal, codec, demoKey, performance.now() + share));
  }

  // Hot: a poll at the current watermark (nothing new), as a partner polls between changes.
  const hotSearch = new URLSearchParams({
    since: sinceCursor(op, codec, principal, new URLSearchParams(), await feedWatermark(emb.store)),
  });
  // Measured once first and thrown away: the first legs of a process warm up the client loop, the HTTP stack and the JIT.
  progress('hot since-poll: warming up ...');
  await measureHot(emb, op, hotSearch, principal, demoKey, bareApps);
  progress('hot since-poll ...');
  const hot = await measureHot(emb, op, hotSearch, principal, demoKey, bareApps);

  // ---------------------------------------------------------------------------------------------
  // The table.
  const notes: string[] = [];

  const caseRows: string[][] = [];
  for (const r of results) {
    const hr = r.handlerP50 / r.floorP50;
    const p50r = r.httpP50 / r.floorP50;
    const p99r = r.httpP99 / r.floorP99;
    caseRows.push([
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
    ]);
    if (r.mismatch) {
      notes.push(r.mismatch);
      exitCode = 1;
    }
    if (r.httpErrors) {
      notes.push(`${r.c.label}: ${r.httpErrors} HTTP requests did not answer 200`);
      exitCode = 1;
    }
    if (r.truncated) notes.push(`${r.c.label}: stopped at the time budget after ${r.n} of ${REPS} reps`);
  }
  const hotRatio = hot.real / hot.bare;
  if (hot.errors) {
    notes.push(`hot since-poll: ${hot.errors} requests failed`);
    exitCode = 1;
  }
  if (hot.changes) notes.push(`hot since-poll: the poll at the watermark answered ${hot.changes} changes (expected none)`);

  console.log('');
  console.log(
    `Partner feed GET /v2/feed vs floors (plain MergeTrees laid out for the case, the groups the feed shows, top ${LIMIT + 1}; ` +
      `since-polls: top ${SINCE_LIMIT + 1} stamps with their groups); ${REPS} reps per case after ${WARMUP} warm-up, handler/floor/HTTP interleaved; times in ms`,
  );
  printTable(
    ['case', 'rows', 'handler p50', 'floor p50', 'ratio', 'HTTP p50', 'HTTP p99', 'floor p99', 'p50 ratio', 'p99 ratio', 'reps'],
    caseRows,
    1,
  );
  console.log('');
  console.log(
    `Hot since-poll: since=<current watermark> (nothing new), ${HOT_CLIENTS} concurrent clients (keep-alive), ` +
      'the service with its read cache vs a bare fastify route sending the same bytes',
  );
  printTable(
    ['read', 'bytes', 'cacheable', 'real req/s', 'bare req/s', 'ratio'],
    [
      [
        'since=watermark',
        String(hot.bytes),
        hot.cacheable ? 'yes' : 'no',
        fmtInt(hot.real),
        fmtInt(hot.bare),
        fmtRatio(hotRatio, hotRatio < GOALS.hot),
      ],
    ],
  );
  console.log('');
  console.log(
    `! marks a figure past the goal: handler ratio <= ${GOALS.handler}x, HTTP p99 ratio <= ${GOALS.httpP99}x, hot ratio >= ${GOALS.hot}x`,
  );
  console.log(
    `pages: limit ${LIMIT}, the default window (the last 90 days); since-polls: limit ${SINCE_LIMIT}, rows = changes (groups + removedIds); ` +
      "HTTP: app.inject on an instance without a read cache; principal: the demo key's (all visibility)",
  );
  for (const n of [...caseNotes, ...notes]) console.log(`note: ${n}`);
  console.log(machineLine({ ownDir, dataDir, extra: `watermark ${watermark}`, floorRows, setupSecs, floorSecs, tStart }));
} catch (err) {
  reportFailure('bench/feed', err, interrupted());
  exitCode = 1;
} finally {
  await cleanup();
}
process.exit(interrupted() ? 130 : exitCode);
