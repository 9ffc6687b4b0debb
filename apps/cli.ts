import { existsSync, readFileSync, rmSync } from 'node:fs';
import { type ParseArgsConfig, parseArgs } from 'node:util';
import { Presets, SingleBar } from 'cli-progress';
import { EmbeddedLog } from '../projectors/log/embedded.ts';
import { MAX_RECORD_BYTES } from '../projectors/log/port.ts';
import { SCOPES, TOPIC_NAMES } from '../schemas/topics/index.ts';
import {
  accountScopes,
  createKey,
  DEMO_ACCOUNT,
  listAccounts,
  listKeys,
  parseScopes,
  parseVisibility,
  putAccount,
  revokeKey,
  scopesBeyond,
} from './admin.ts';
import { ConfigError, dataDirOf as configuredDataDir, environmentHelp, loadConfig, type ProcessKind, readSettings } from './config.ts';

// The engine, the projectors and the HTTP server load only for the commands that use them,
// so `--help`, `keys` and `accounts` answer quickly.
const embedded = () => import('./embedded.ts');

interface Command {
  usage: string;
  help: string;
  options: NonNullable<ParseArgsConfig['options']>;
  /** Whose settings the command reads (apps/config.ts): its --help lists them. */
  env: ProcessKind;
  /** Internal: left out of the main help. */
  hidden?: boolean;
  run(values: any, positionals: string[]): Promise<number | void>;
}

const die = (msg: string): never => {
  throw new UsageError(msg);
};
class UsageError extends Error {}

/**
 * Projects the log into the store when no server runs on DATA_DIR (otherwise the server does it):
 * up to what the log holds now, then stops.
 */
async function projectNow(dataDir: string, total?: number): Promise<void> {
  const p = await startProjection(dataDir, total);
  if (p) await p.finish();
}

/**
 * Starts projecting the log into the store in this process, unless a `start` runs on DATA_DIR
 * (then null: it projects the records itself). The projector follows the log as it grows until
 * `finish()`, which waits until it has caught up with what the log holds then, and stops.
 */
async function startProjection(dataDir: string, total?: number, bar = true): Promise<{ finish(): Promise<void> } | null> {
  const { runningServerPid, storePath } = await embedded();
  const { counted, migrateReadModels, PROJECTOR_GROUP, runProjector } = await import('../projectors/runner.ts');
  const { openChdbStore } = await import('../storage/chdb.ts');
  const pid = runningServerPid(dataDir);
  if (pid) {
    console.error(`signalbase start (pid ${pid}) is running on ${dataDir}: it projects the new records itself.`);
    return null;
  }
  const log = new EmbeddedLog(dataDir, 50);
  // A crash mid-append may have left a torn last line: end it, so it is dead-lettered on its own.
  for (const topic of log.sealTornTails())
    console.error(`${topic}: a torn last line (an interrupted append) goes to the dead-letter table`);
  const store = await openChdbStore(storePath(dataDir));
  await migrateReadModels(
    store,
    () => log.writeOffsets(PROJECTOR_GROUP, {}),
    (l) => console.error(l),
  );
  const progress = bar
    ? new SingleBar(
        {
          format: 'project |{bar}| {percentage}% {value}/{total} records {eta_formatted} left',
          noTTYOutput: true,
          notTTYSchedule: 5000,
          stream: process.stderr,
        },
        Presets.shades_classic,
      )
    : null;
  let done = 0;
  let dead = 0;
  progress?.start(total ?? 0, 0);
  const sub = runProjector(log, store, {
    onCommit: (c) => {
      const n = counted(c);
      done += n.applied + n.dead;
      dead += n.dead;
      progress?.setTotal(Math.max(total ?? 0, done));
      progress?.update(done);
    },
  });
  return {
    async finish() {
      await sub.caughtUp();
      progress?.stop();
      await sub.stop();
      await store.close();
      console.error(`projected ${done} records${dead ? `, ${dead} went to the dead-letter table` : ''}`);
    },
  };
}

/** How long a streamed record may wait for others before its group is appended (ms). */
const STREAM_DELAY_MS = 20;
/** How often `ingest --follow` looks whether its file grew (ms). */
const FOLLOW_POLL_MS = 20;

const dataDirOption = { 'data-dir': { type: 'string' as const } };
const dataDirOf = (v: { 'data-dir'?: string }) => configuredDataDir(v['data-dir']);

const COMMANDS: Record<string, Command> = {
  start: {
    env: 'start',
    usage: 'signalbase start [--port N] [--data-dir DIR] [--no-seed]',
    help: "Runs the embedded service: log, projectors, chdb, the REST API, the MCP tool server at /mcp and its dev OAuth authorization server, in one process. Seeds the small demo data set on the first start and prints a demo API key with every scope and the demo account's sign-in password.",
    options: { port: { type: 'string' }, ...dataDirOption, 'no-seed': { type: 'boolean' } },
    async run(v) {
      const cfg = loadConfig({
        ...process.env,
        ...(v.port ? { PORT: v.port } : {}),
        ...(v['data-dir'] ? { DATA_DIR: v['data-dir'] } : {}),
      });
      const say = (l: string) => console.log(`[signalbase] ${l}`);
      const { demoKeyFile, demoPasswordFile, startEmbedded } = await embedded();
      const emb = await startEmbedded(cfg, { seed: !v['no-seed'], say });
      const read = (f: string) => (existsSync(f) ? readFileSync(f, 'utf8').trim() : null);
      const key = read(demoKeyFile(cfg.dataDir));
      const password = read(demoPasswordFile(cfg.dataDir));
      say(`REST v2:  ${emb.url}/v2   (v1: ${emb.url}/v1)`);
      say(`OpenAPI:  ${emb.url}/v2/openapi.json   docs: ${emb.url}/docs   health: ${emb.url}/healthz`);
      say(
        `MCP:      ${emb.mcp.mcpUrl}   (OAuth: ${emb.mcp.dev ? `built-in dev authorization server at ${emb.mcp.issuer}` : `tokens of ${emb.mcp.issuer}`})   agents: ${emb.url}/llms.txt`,
      );
      if (emb.metricsUrl) say(`metrics:  ${emb.metricsUrl}   (not on the API port)`);
      if (key) say(`demo API key (every scope, also in ${demoKeyFile(cfg.dataDir)}):\n${key}`);
      if (password && emb.mcp.dev) say(`MCP sign-in: account demo, password ${password} (also in ${demoPasswordFile(cfg.dataDir)})`);
      say(`try: curl -H "x-api-key: $(cat ${demoKeyFile(cfg.dataDir)})" "${emb.url}/v2/events?limit=5"`);
      const stop = async () => {
        say('stopping');
        await emb.close();
        process.exit(0);
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      return new Promise<number>(() => {}); // runs until a signal
    },
  },
  seed: {
    env: 'admin',
    usage: 'signalbase seed [--scale small|large] [--seed N] [--data-dir DIR]',
    help: 'Writes the deterministic demo data set through the log and projects it meanwhile (unless a running `start` does). small: ~200 traders, ~50k events; large: >= 2M events, 500k positions, 1M messages.',
    options: { scale: { type: 'string', default: 'small' }, seed: { type: 'string', default: '42' }, ...dataDirOption },
    async run(v) {
      if (v.scale !== 'small' && v.scale !== 'large') die(`--scale is small or large (got ${v.scale})`);
      const seed = Number(v.seed);
      if (!Number.isInteger(seed)) die(`--seed takes an integer (got ${v.seed})`);
      const dataDir = dataDirOf(v);
      const { demoKeyFile } = await embedded();
      const { seedDemo } = await import('./seed.ts');
      // One bar: the projector follows the log while the generator writes it (on a worker thread).
      const bar = new SingleBar(
        {
          format: 'seed    |{bar}| {percentage}% {value}/{total} records {eta_formatted} left ({written} written)',
          noTTYOutput: true,
          notTTYSchedule: 5000,
          stream: process.stderr,
        },
        Presets.shades_classic,
      );
      bar.start(1, 0, { written: 0 });
      const t0 = Date.now();
      const r = await seedDemo(dataDir, {
        scale: v.scale,
        seed,
        now: new Date(),
        say: (l) => console.error(l),
        onProgress: (p) => {
          bar.setTotal(p.total);
          bar.update(p.done, { written: p.written });
        },
      });
      const done = r.serverPid === null ? r.projected : r.records;
      bar.setTotal(done);
      bar.update(done, { written: r.records });
      bar.stop();
      console.error(
        `wrote ${r.records} demo records to ${dataDir}/log${r.serverPid === null ? ` and projected them${r.dead ? ` (${r.dead} went to the dead-letter table)` : ''}` : ''}`,
      );
      console.error(`seed done in ${((Date.now() - t0) / 1000).toFixed(1)} s; demo API key in ${demoKeyFile(dataDir)}`);
    },
  },
  ingest: {
    env: 'ingest',
    usage: 'signalbase ingest FILE.ndjson [--data-dir DIR] [--to embedded|kafka] | ingest - | ingest --follow FILE   [--data-dir DIR]',
    help:
      `Appends records to the log, then projects them (unless a running \`start\` does). One JSON object per line: {"topic": "<topic>", "value": {...}} and no other member; blank lines are skipped. Topics: ${TOPIC_NAMES.join(', ')}. Every value is validated first, as the projector validates it: its topic's schema, no number out of the range of a 64-bit float (such as 1e400), ids up to 2^53-1, date-times in RFC 3339 with a real calendar date, no leap second, within 1970..2299, and at most ${MAX_RECORD_BYTES} bytes (16 MiB) of JSON. If any line is refused, nothing is appended: each refused line is listed with its number and reason, and the command exits with status 1. The value is appended exactly as written in the file (numbers, key order and spacing are kept). --to kafka appends to the topics on KAFKA_BROKERS instead (distributed mode; their names prefixed with KAFKA_TOPIC_PREFIX when set), each record keyed by the id that orders it; every record is acknowledged before the command ends.` +
      ` Streaming (embedded mode): \`ingest -\` reads standard input and \`ingest --follow FILE\` reads FILE from its start and then what is appended to it (like tail -f), until end of input, SIGINT or SIGTERM. Each line is validated as above and appended within about ${STREAM_DELAY_MS} ms of arriving, in small groups, with no process start per record. A refused line cannot stop what was already appended: it is reported on stderr with its number and reason ("line N: ..."), skipped, and the stream goes on; at the end (EOF, SIGINT or SIGTERM: the records validated so far are appended first) the command prints "appended N records, refused M lines" and exits with status 1 if any line was refused, 0 otherwise. When no \`start\` runs on DATA_DIR, the command projects the records itself while it runs (in a child process: chdb would take standard input for its own) and catches up before it exits; otherwise the server projects them.`,
    options: { ...dataDirOption, to: { type: 'string', default: 'embedded' }, follow: { type: 'string' } },
    async run(v, pos) {
      if (v.follow !== undefined || pos[0] === '-') {
        if (v.follow !== undefined && pos.length) die('ingest --follow FILE takes no other file');
        if (pos.length > 1) die('ingest - takes no other file');
        if (v.to !== 'embedded') die('the streaming ingest (- or --follow) appends to the embedded log; --to kafka takes a file');
        if (v.follow !== undefined && !existsSync(v.follow)) die(`no such file: ${v.follow}`);
        return streamIngest(dataDirOf(v), v.follow);
      }
      const file = pos[0] ?? die('ingest needs a file: signalbase ingest FILE.ndjson (or - for standard input, or --follow FILE)');
      if (!existsSync(file)) die(`no such file: ${file}`);
      const { readIngestFile } = await import('../projectors/ingest.ts');
      const { byTopic, count, refused } = readIngestFile(readFileSync(file));
      if (refused.length) {
        const SHOWN = 100;
        for (const r of refused.slice(0, SHOWN)) console.error(`line ${r.line}: ${r.reason}`);
        if (refused.length > SHOWN) console.error(`... and ${refused.length - SHOWN} more refused lines`);
        console.error(`nothing was appended: ${refused.length} line(s) of ${file} refused`);
        return 1;
      }
      if (v.to === 'kafka') {
        const cfg = readSettings('ingest');
        const brokers = cfg.kafkaBrokers ?? die('--to kafka needs KAFKA_BROKERS (host:port,...)');
        const { KafkaAppender } = await import('../projectors/log/kafka.ts');
        const appender = new KafkaAppender({ brokers, clientId: 'signalbase-ingest', topicPrefix: cfg.kafkaTopicPrefix! });
        try {
          let resent = 0;
          for (const [topic, recs] of byTopic)
            for (let i = 0; i < recs.length; i += 1000) resent += (await appender.append(topic, recs.slice(i, i + 1000))).resent;
          console.error(
            `appended ${count} records from ${file} to Kafka (${brokers.join(',')})${resent ? `; ${resent} partition sends repeated after leader moves` : ''}`,
          );
        } finally {
          await appender.close();
        }
        return;
      }
      if (v.to !== 'embedded') die(`--to is embedded or kafka (got ${v.to})`);
      const dataDir = dataDirOf(v);
      const log = new EmbeddedLog(dataDir);
      for (const [topic, recs] of byTopic) log.appendSync(topic, recs);
      console.error(`appended ${count} records from ${file}`);
      await projectNow(dataDir, count);
    },
  },
  _project: {
    env: 'ingest',
    hidden: true,
    usage: 'signalbase _project [--data-dir DIR]   (internal: spawned by the streaming ingest)',
    help: "Internal: projects the log into the store while its parent, a streaming `signalbase ingest` with no `start` on DATA_DIR, appends to it; when the parent disconnects, catches up with the log and exits. It runs apart because chdb reads its host process's standard input as the data of an INSERT, and the streaming ingest's standard input is the record stream.",
    options: { ...dataDirOption },
    async run(v) {
      if (!process.send) die('_project is spawned by the streaming ingest (over an IPC channel)');
      const projection = await startProjection(dataDirOf(v), undefined, false);
      // The parent decides when to stop (after its last append): a signal to the group is its to handle.
      const ignore = () => {};
      process.on('SIGINT', ignore);
      process.on('SIGTERM', ignore);
      await new Promise<void>((resolve) => {
        process.once('disconnect', resolve);
        if (!process.connected) resolve();
      });
      await projection?.finish();
      return 0;
    },
  },
  keys: {
    env: 'admin',
    usage: 'signalbase keys create [--account ID] [--scopes a,b] | keys list [--account ID] | keys revoke KEY_ID   [--data-dir DIR]',
    help: `Manages API keys through the log (works while start runs). create prints the key on its last stdout line; it is shown only once. Scopes: ${SCOPES.join(', ')} (default: every scope the account holds; a scope the account does not hold is refused).`,
    options: { account: { type: 'string' }, scopes: { type: 'string' }, ...dataDirOption },
    async run(v, pos) {
      const log = new EmbeddedLog(dataDirOf(v));
      const [sub, arg] = pos;
      if (sub === 'create') {
        const { key, record } = createKey(log, v.account ?? DEMO_ACCOUNT, v.scopes ? parseScopes(v.scopes) : undefined);
        console.log(`created key ${record.id} for account ${record.accountId} with scopes ${record.scopes.join(',')}`);
        console.log(key);
      } else if (sub === 'list') {
        for (const k of listKeys(log).filter((k) => !v.account || k.accountId === v.account)) {
          console.log(
            `${k.id}  account=${k.accountId}  scopes=${k.scopes.join(',')}  ${k.revoked ? 'REVOKED' : 'active'}  created=${k.createdAt}`,
          );
        }
      } else if (sub === 'revoke') {
        const r = revokeKey(log, arg ?? die('keys revoke needs a key id (see keys list)'));
        console.log(`revoked key ${r.id}`);
      } else die(`unknown keys subcommand ${sub ?? ''}; use create, list or revoke`);
    },
  },
  projector: {
    env: 'projector',
    usage: 'signalbase projector',
    help: 'Distributed mode: consumes the ingest topics from Kafka in the consumer group "projector" and writes the read models to a ClickHouse server; run several to share the partitions (they take turns at the store through Redis). Rebuilds read models of another version from the start of the topics. Serves Prometheus metrics (records applied and dead-lettered per topic, consumer lag, feed watermark) on METRICS_PORT.',
    options: {},
    async run() {
      const { runProjectorProcess } = await import('./distributed.ts');
      return serveUntilSignal(await runProjectorProcess(process.env, (l) => console.log(`[signalbase] ${l}`)));
    },
  },
  api: {
    env: 'api',
    usage: 'signalbase api',
    help: 'Distributed mode: the REST API (v1, v2) over the read models of a ClickHouse server; run several replicas behind a load balancer: they share the read cache, the data version, rate-limit counts and the cursor secret through Redis.',
    options: {},
    async run() {
      const { runReadProcess } = await import('./distributed.ts');
      return serveUntilSignal(await runReadProcess('api', process.env, (l) => console.log(`[signalbase] ${l}`)));
    },
  },
  mcp: {
    env: 'mcp',
    usage: 'signalbase mcp',
    help: 'Distributed mode: the MCP tool server at /mcp over the read models of a ClickHouse server, accepting the access tokens of AUTH_ISSUER for the audience MCP_URL (no dev authorization server). Also serves /llms.txt and /agent-guide.md.',
    options: {},
    async run() {
      const { runReadProcess } = await import('./distributed.ts');
      return serveUntilSignal(await runReadProcess('mcp', process.env, (l) => console.log(`[signalbase] ${l}`)));
    },
  },
  topics: {
    env: 'topics',
    usage: 'signalbase topics create [--partitions N] [--replication R]',
    help: `Deploy step of the distributed mode: creates the ingest topics that do not exist yet (${TOPIC_NAMES.join(', ')}, each prefixed with KAFKA_TOPIC_PREFIX when set) on KAFKA_BROKERS, with N partitions (default 12) and replication R (default 3). Skipped (exit 0) with SIGNALBASE_CREATE_TOPICS=false, where topics are managed elsewhere. Records are keyed by the id that orders them (a position's events by positionId, prices by assetId, ...).`,
    options: { partitions: { type: 'string', default: '12' }, replication: { type: 'string', default: '3' } },
    async run(v, pos) {
      if (pos[0] !== 'create') die(`unknown topics subcommand ${pos[0] ?? ''}; use create`);
      const partitions = Number(v.partitions);
      const replication = Number(v.replication);
      if (!Number.isInteger(partitions) || partitions < 1) die('--partitions is a positive integer');
      if (!Number.isInteger(replication) || replication < 1) die('--replication is a positive integer');
      const { createTopics } = await import('./distributed.ts');
      await createTopics(process.env, partitions, replication, (l) => console.log(l));
    },
  },
  tokens: {
    env: 'admin',
    usage: 'signalbase tokens create [--account ID] [--scopes a,b] [--minutes N] [--data-dir DIR]',
    help: `Mints an MCP access token (a JWT of the built-in dev authorization server, signed with its key in DATA_DIR) for scripts: for the demo account unless --account says otherwise, with every scope unless --scopes (${SCOPES.join(', ')}), valid --minutes (default 60). Its audience is the MCP URL of the last start on DATA_DIR (or MCP_URL, or http://HOST:PORT/mcp). The token is the last stdout line; send it as "Authorization: Bearer <token>" to /mcp. With AUTH_ISSUER set to another server, tokens come from that server instead.`,
    options: { account: { type: 'string' }, scopes: { type: 'string' }, minutes: { type: 'string', default: '60' }, ...dataDirOption },
    async run(v, pos) {
      if (pos[0] !== 'create') die(`unknown tokens subcommand ${pos[0] ?? ''}; use create`);
      const minutes = Number(v.minutes);
      if (!Number.isInteger(minutes) || minutes < 1 || minutes > 60 * 24 * 30) die('--minutes is a whole number from 1 to 43200 (30 days)');
      const dataDir = dataDirOf(v);
      const cfg = loadConfig({ ...process.env, DATA_DIR: dataDir });
      const { authUrlsFile } = await embedded();
      const { authUrls, originOf } = await import('./config.ts');
      const derived = authUrls(cfg, originOf(cfg.host, cfg.port));
      const last =
        existsSync(authUrlsFile(dataDir)) && !cfg.mcpUrl && !cfg.authIssuer
          ? (JSON.parse(readFileSync(authUrlsFile(dataDir), 'utf8')) as { mcpUrl: string; issuer: string })
          : null;
      if (!last && !derived.dev) die(`AUTH_ISSUER names another authorization server (${derived.issuer}): get tokens from it`);
      const { mcpUrl, issuer } = last ?? derived;
      const accountId = v.account ?? DEMO_ACCOUNT;
      const log = new EmbeddedLog(dataDir);
      const account = listAccounts(log).find((a) => a.id === accountId);
      if (!account) die(`no account ${accountId}; create it with \`signalbase accounts create ${accountId}\``);
      if (account!.status !== 'active' || !account!.emailVerified)
        die(
          `account ${accountId} is ${account!.status !== 'active' ? 'blocked' : 'not email-verified'}: MCP access needs an active, verified account`,
        );
      // Limited to the account's scopes (DESIGN 6 "Account scopes"); by default all of them.
      const scopes = v.scopes ? parseScopes(v.scopes) : accountScopes(account!);
      const beyond = scopesBeyond(account!, scopes, 'its tokens');
      if (beyond) die(beyond.message);
      if (!scopes.length) die(`account ${accountId} holds no scopes: a token would read nothing`);
      const { loadSigningKey, mintAccessToken } = await import('./auth/signing.ts');
      const token = await mintAccessToken(await loadSigningKey(dataDir), {
        issuer,
        audience: mcpUrl,
        accountId,
        scopes,
        clientId: 'signalbase-cli',
        ttlSeconds: minutes * 60,
      });
      console.error(`token for account ${accountId} with scopes ${scopes.join(',')}, valid ${minutes} min, for ${mcpUrl}`);
      console.log(token);
    },
  },
  accounts: {
    env: 'admin',
    usage:
      'signalbase accounts create ID | accounts set ID | accounts password ID | accounts list   [--status active|blocked] [--email-verified true|false] [--message-visibility V] [--signal-visibility V] [--history-days N|none] [--scopes a,b|all] [--data-dir DIR]',
    help:
      `Manages accounts through the log. A visibility V is all, none, platforms:TELEGRAM,X or traders:1,2. --scopes lists the scopes the account may hold (${SCOPES.join(', ')}, or all): its API keys and MCP tokens are limited to them, and narrowing them takes effect on the keys and tokens it already has. New accounts default to active, verified, all visibility, unlimited history, every scope.` +
      ' `accounts password ID` sets the password the account signs in with on the MCP sign-in page (the dev authorization server): it reads the first line of stdin, or asks twice on a terminal; at least 8 characters; stored as a scrypt hash in DATA_DIR/auth.',
    options: {
      status: { type: 'string' },
      'email-verified': { type: 'string' },
      'message-visibility': { type: 'string' },
      'signal-visibility': { type: 'string' },
      'history-days': { type: 'string' },
      scopes: { type: 'string' },
      ...dataDirOption,
    },
    async run(v, pos) {
      const log = new EmbeddedLog(dataDirOf(v));
      const [sub, id] = pos;
      if (sub === 'list') {
        for (const a of listAccounts(log)) {
          console.log(
            `${a.id}  status=${a.status}  emailVerified=${a.emailVerified}  messages=${JSON.stringify(a.messageVisibility)}  signals=${JSON.stringify(a.signalVisibility)}  historyDays=${a.historyWindowDays ?? 'unlimited'}  scopes=${accountScopes(a).join(',')}`,
          );
        }
        return;
      }
      if (sub === 'password') {
        if (!id || !listAccounts(log).some((a) => a.id === id))
          die(`accounts password needs an existing account id${id ? ` (no account ${id})` : ''}`);
        const password = await readPassword();
        const { setPassword, MIN_PASSWORD_LENGTH } = await import('./auth/passwords.ts');
        if (password.length < MIN_PASSWORD_LENGTH) die(`a password has at least ${MIN_PASSWORD_LENGTH} characters`);
        await setPassword(dataDirOf(v), id!, password);
        // The demo password file printed at start would no longer be true.
        if (id === DEMO_ACCOUNT) rmSync((await embedded()).demoPasswordFile(dataDirOf(v)), { force: true });
        console.log(`password of account ${id} set`);
        return;
      }
      if (sub !== 'create' && sub !== 'set') die(`unknown accounts subcommand ${sub ?? ''}; use create, set, password or list`);
      if (!id || !/^[A-Za-z0-9_.@-]+$/.test(id)) die('accounts create|set needs an id of letters, digits and _ . @ -');
      const prev = listAccounts(log).find((a) => a.id === id);
      if (sub === 'create' && prev) die(`account ${id} exists; use accounts set`);
      if (sub === 'set' && !prev) die(`no account ${id}; use accounts create`);
      if (v.status && v.status !== 'active' && v.status !== 'blocked') die('--status is active or blocked');
      if (v['email-verified'] && !['true', 'false'].includes(v['email-verified'])) die('--email-verified is true or false');
      const days = v['history-days'];
      if (days && days !== 'none' && !(Number.isInteger(Number(days)) && Number(days) > 0))
        die('--history-days is a positive integer or none');
      const rec = putAccount(log, {
        id,
        status: v.status ?? prev?.status ?? 'active',
        emailVerified: v['email-verified'] ? v['email-verified'] === 'true' : (prev?.emailVerified ?? true),
        messageVisibility: v['message-visibility']
          ? parseVisibility(v['message-visibility'])
          : (prev?.messageVisibility ?? { mode: 'all' }),
        signalVisibility: v['signal-visibility'] ? parseVisibility(v['signal-visibility']) : (prev?.signalVisibility ?? { mode: 'all' }),
        historyWindowDays: days === undefined ? (prev?.historyWindowDays ?? null) : days === 'none' ? null : Number(days),
        scopes: v.scopes === undefined ? accountScopes(prev ?? {}) : v.scopes === 'all' ? [...SCOPES] : [...new Set(parseScopes(v.scopes))],
      });
      console.log(`${sub === 'create' ? 'created' : 'updated'} account ${rec.id} (version ${rec.version})`);
    },
  },
};

/**
 * When no `start` runs on DATA_DIR: a child process (`signalbase _project`) that projects the log
 * while the streaming ingest appends to it, and catches up and exits when `finish()` disconnects
 * it. Not in this process: chdb would read this process's standard input (the record stream) as
 * the data of its INSERTs.
 */
async function projectAside(dataDir: string): Promise<{ finish(): Promise<void> } | null> {
  const { runningServerPid } = await embedded();
  const pid = runningServerPid(dataDir);
  if (pid) {
    console.error(`signalbase start (pid ${pid}) is running on ${dataDir}: it projects the new records itself.`);
    return null;
  }
  const { spawn } = await import('node:child_process');
  const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, '_project', '--data-dir', dataDir], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  console.error(`no signalbase start runs on ${dataDir}: this command projects the records while it runs`);
  return {
    async finish() {
      if (child.connected) child.disconnect();
      const code = await exited;
      if (code !== 0) console.error(`the projection ended with status ${code}: the next start on ${dataDir} projects the records`);
    },
  };
}

/**
 * `signalbase ingest -` (standard input) or `ingest --follow FILE`: appends the records as they
 * arrive (projectors/ingest.ts `IngestStream`), reports and skips refused lines, and ends at end
 * of input, SIGINT or SIGTERM after appending what was validated. Exit status 1 if a line was refused.
 */
async function streamIngest(dataDir: string, follow: string | undefined): Promise<number> {
  const { IngestStream } = await import('../projectors/ingest.ts');
  const from = follow ?? 'standard input';
  const log = new EmbeddedLog(dataDir);
  const stream = new IngestStream({
    append: (byTopic) => {
      for (const [topic, recs] of byTopic) log.appendSync(topic, recs);
    },
    onRefused: (line, reason) => console.error(`line ${line}: ${reason}`),
    onFailed: () => stop(),
    maxDelayMs: STREAM_DELAY_MS,
  });
  const projection = await projectAside(dataDir);
  let stopped = false;
  let stop = () => {};
  const onSignal = () => {
    stopped = true;
    stop();
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    if (follow === undefined) {
      const input = process.stdin;
      await new Promise<void>((resolve, reject) => {
        stop = () => {
          input.pause();
          input.destroy();
          resolve();
        };
        // push() is synchronous: the next chunk is read only once this one is validated (and
        // its group appended when full), so a fast producer blocks on the pipe, not on memory.
        input.on('data', (chunk: Buffer) => stream.push(chunk));
        input.once('end', resolve);
        input.once('error', reject);
        if (stopped) stop();
      });
    } else {
      const { closeSync, fstatSync, openSync, readSync } = await import('node:fs');
      const fd = openSync(follow, 'r');
      const buf = Buffer.allocUnsafe(1 << 20);
      let pos = 0;
      try {
        await new Promise<void>((resolve) => {
          let timer: NodeJS.Timeout | undefined;
          stop = () => {
            clearTimeout(timer);
            resolve();
          };
          const poll = () => {
            if (stopped) return;
            if (fstatSync(fd).size < pos) {
              console.error(`${follow} was truncated: following it from its start`);
              pos = 0;
            }
            // At most 64 MiB per turn, so that a signal and the group timer get their turn.
            for (let turn = 0; turn < 64 && !stopped; turn++) {
              const n = readSync(fd, buf, 0, buf.length, pos);
              if (n === 0) break;
              pos += n;
              stream.push(buf.subarray(0, n));
            }
            timer = setTimeout(poll, FOLLOW_POLL_MS);
          };
          poll();
        });
      } finally {
        closeSync(fd);
      }
    }
  } finally {
    stream.end();
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    console.error(
      `appended ${stream.appended} records from ${from}, refused ${stream.refused} line${stream.refused === 1 ? '' : 's'}${stopped ? ' (stopped by a signal)' : ''}`,
    );
    await projection?.finish();
  }
  if (stream.failed !== undefined)
    throw new Error(`appending to the log failed, the input after it was not read: ${(stream.failed as Error).message}`);
  return stream.refused ? 1 : 0;
}

/** Runs until SIGINT or SIGTERM, then stops the process's work. */
function serveUntilSignal(p: { stop(): Promise<void> }): Promise<number> {
  return new Promise<number>((resolve) => {
    const stop = async () => {
      await p.stop().catch(() => {});
      resolve(0);
      process.exit(0);
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}

/** A password from the first line of stdin, or typed twice without echo on a terminal. */
async function readPassword(): Promise<string> {
  const { createInterface } = await import('node:readline');
  if (!process.stdin.isTTY) {
    const rl = createInterface({ input: process.stdin });
    for await (const line of rl) {
      rl.close();
      return line;
    }
    return '';
  }
  const ask = (prompt: string) =>
    new Promise<string>((resolve) => {
      const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true });
      const out = rl as unknown as { _writeToOutput: (s: string) => void };
      out._writeToOutput = (s: string) => {
        if (s.startsWith(prompt)) process.stderr.write(prompt);
      };
      rl.question(prompt, (answer) => {
        rl.close();
        process.stderr.write('\n');
        resolve(answer);
      });
    });
  const first = await ask('new password: ');
  if ((await ask('again: ')) !== first) die('the two passwords differ');
  return first;
}

function mainHelp(): string {
  return `signalbase: read-only trading-signal data service\n\nUsage:\n${Object.values(COMMANDS)
    .filter((c) => !c.hidden)
    .map((c) => `  ${c.usage}`)
    .join('\n')}\n\nRun signalbase COMMAND --help for details (each lists the environment it reads).\n${environmentHelp('start')}\n`;
}

async function main(argv: string[]): Promise<number> {
  // What any command creates under DATA_DIR (chdb's own files too) is the owner's alone.
  process.umask(0o077);
  const [name, ...rest] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(mainHelp());
    return name ? 0 : 1;
  }
  const cmd = COMMANDS[name];
  if (!cmd) {
    process.stderr.write(`unknown command ${name}\n\n${mainHelp()}`);
    return 2;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(`Usage: ${cmd.usage}\n\n${cmd.help}\n\n${environmentHelp(cmd.env)}\n`);
    return 0;
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: rest, options: cmd.options, allowPositionals: true, strict: true });
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n\nUsage: ${cmd.usage}\n`);
    return 2;
  }
  try {
    return (await cmd.run(parsed.values, parsed.positionals)) ?? 0;
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`${e.message}\n\nUsage: ${cmd.usage}\n`);
      return 2;
    }
    if (e instanceof ConfigError) {
      process.stderr.write(
        `signalbase ${name}: the environment is not usable:\n${e.problems.map((p) => `  ${p}\n`).join('')}(signalbase ${name} --help lists what it reads)\n`,
      );
      return 2;
    }
    process.stderr.write(`signalbase ${name}: ${(e as Error).message}\n`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
