import { resolve } from 'node:path';
import { DEFAULT_RATE_LIMITS, parseRateLimits, type RateLimits } from './api/rate-limit.ts';
import { REDIS_COMMAND_TIMEOUT_MS } from './cache/redis.ts';

/**
 * One configuration for every process (issue 25): each setting the environment can give, once,
 * with its meaning, the processes that read it, its default there and how it is checked. Every
 * process loads its settings through `readSettings` (all problems reported at once, before
 * anything starts), and each command's `--help` lists them from here (`environmentHelp`).
 */
export type ProcessKind = 'start' | 'projector' | 'api' | 'mcp' | 'topics' | 'ingest' | 'admin';

interface Setting<K extends string, T> {
  /** The environment variable. */
  name: string;
  /** Its field in the loaded settings. */
  key: K;
  /** What it means (for --help). */
  help: string;
  /** The processes that read it, each with its default there (undefined: none), or `required`. */
  in: Partial<Record<ProcessKind, { default?: string; defaultHelp?: string; required?: true }>>;
  /** Checks a value and gives what the process uses; throws a message saying what is allowed. */
  parse: (value: string, env: NodeJS.ProcessEnv) => T;
}
const setting = <K extends string, T>(s: Setting<K, T>) => s;

const port = (v: string): number => {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || !Number.isInteger(n) || n > 65535) throw new Error(`must be an integer 0..65535, got ${v}`);
  return n;
};
const positiveMs = (v: string): number => {
  const n = Number(v);
  if (!/^\d+$/.test(v.trim()) || n < 1) throw new Error(`must be a positive number of milliseconds, got ${v}`);
  return n;
};
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const text = (v: string): string => v;

/** An absolute http(s) URL. */
export function absoluteUrl(v: string): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new Error(`must be an absolute http(s) URL, got ${v}`);
  }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error(`must be an absolute http(s) URL, got ${v}`);
  return u.href;
}

/** MCP_ALLOWED_ORIGINS: comma-separated http(s) origins (`https://app.example`, `http://localhost:3000`). */
export function parseOrigins(v: string): string[] {
  return v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const u = new URL(absoluteUrl(s));
      if (u.pathname !== '/' || u.search || u.hash || u.username || u.password)
        throw new Error(`lists origins (scheme://host[:port]) only, got ${s}`);
      return u.origin;
    });
}

/**
 * Longest a read replica's request to the ClickHouse server may go without an answer (ms;
 * CLICKHOUSE_REQUEST_TIMEOUT_MS): the read deadline, so a credential look-up on a server that hangs
 * fails within it too (a read's own queries stop earlier, at their bounds).
 */
export const READ_STORE_TIMEOUT_MS = 10_000;

/**
 * The live projector's default cadence (LIVE_CADENCE_MS, issue 26): what arrives within it is one
 * batch per topic, and the batches of a round of both lanes are one commit, so at any ingest rate
 * the projector's per-batch work and the cached answers commits end stay bounded, and a record
 * waits at most this long before its batch starts. Shorter, the rounds ran back to back under load
 * and left records waiting behind a whole round; longer, reads keep more of the cores under ingest
 * and new records show later (figures: bench/README, live.ts).
 */
export const DEFAULT_LIVE_CADENCE_MS = 500;

export const SETTINGS = [
  setting({
    name: 'PORT',
    key: 'port',
    help: 'HTTP port',
    in: { start: { default: '8080' }, api: { default: '8080' }, mcp: { default: '8081' } },
    parse: port,
  }),
  setting({
    name: 'HOST',
    key: 'host',
    help: 'listen address (0.0.0.0 to expose it)',
    in: {
      start: { default: '127.0.0.1' },
      api: { default: '127.0.0.1' },
      mcp: { default: '127.0.0.1' },
      projector: { default: '127.0.0.1' },
    },
    parse: text,
  }),
  setting({
    name: 'DATA_DIR',
    key: 'dataDir',
    help: 'log, offsets, chdb data, demo key, auth files',
    in: { start: { default: './.data' }, ingest: { default: './.data' }, admin: { default: './.data' } },
    parse: (v) => resolve(v),
  }),
  setting({
    name: 'LOG_LEVEL',
    key: 'logLevel',
    help: `request log level (${LOG_LEVELS.join(', ')}; silent turns request logs off)`,
    in: { start: { default: 'info' }, api: { default: 'info' }, mcp: { default: 'info' } },
    parse: (v) => {
      if (!LOG_LEVELS.includes(v)) throw new Error(`must be one of ${LOG_LEVELS.join(', ')}, got ${v}`);
      return v;
    },
  }),
  setting({
    name: 'STATEMENT_LOG',
    key: 'statementLog',
    help: "a file to append a line per store statement to: when it ended, its session, ms waited, ms run, its text's start",
    in: { start: {} },
    parse: (v) => resolve(v),
  }),
  setting({
    name: 'LIVE_CADENCE_MS',
    key: 'liveCadenceMs',
    help: 'how often the projector takes live records (a round of the topics and one commit at most this often, 50..10000): longer leaves more of the cores to reads under ingest, shorter shows new records sooner',
    in: { start: { default: String(DEFAULT_LIVE_CADENCE_MS) } },
    parse: (v) => {
      const n = positiveMs(v);
      if (n < 50 || n > 10_000) throw new Error(`must be 50..10000 milliseconds, got ${v}`);
      return n;
    },
  }),
  setting({
    name: 'RATE_LIMITS',
    key: 'rateLimits',
    help: 'requests per minute per account and per client address, e.g. default=600,address=6000,ACCOUNT_ID=6000; off: none',
    in: { start: { default: DEFAULT_RATE_LIMITS }, api: { default: DEFAULT_RATE_LIMITS }, mcp: { default: DEFAULT_RATE_LIMITS } },
    parse: (v): RateLimits | undefined => parseRateLimits(v),
  }),
  setting({
    name: 'CURSOR_SECRET',
    key: 'cursorSecret',
    help: 'key (32 bytes or more) that signs pagination cursors; the same for every API replica',
    in: { start: { defaultHelp: 'a key kept in DATA_DIR' }, api: { required: true }, mcp: { required: true } },
    parse: (v) => {
      if (Buffer.byteLength(v) < 32) throw new Error('must be 32 bytes or more');
      return v;
    },
  }),
  setting({
    name: 'MCP_URL',
    key: 'mcpUrl',
    help: 'public address of /mcp, the audience of its tokens',
    in: { start: { defaultHelp: 'http://HOST:PORT/mcp' }, mcp: { required: true } },
    parse: (v) => absoluteUrl(v),
  }),
  setting({
    name: 'AUTH_ISSUER',
    key: 'authIssuer',
    help: 'the OAuth authorization server whose tokens /mcp accepts',
    in: { start: { defaultHelp: 'the built-in dev one, at the origin of MCP_URL' }, mcp: { required: true } },
    parse: (v) => absoluteUrl(v).replace(/\/$/, ''),
  }),
  setting({
    name: 'MCP_ALLOWED_ORIGINS',
    key: 'mcpAllowedOrigins',
    help: "browser origins allowed to call /mcp besides MCP_URL's own, comma-separated, e.g. https://app.example; requests without Origin are allowed",
    in: { start: { defaultHelp: 'none' }, mcp: { defaultHelp: 'none' } },
    parse: parseOrigins,
  }),
  setting({
    name: 'METRICS_PORT',
    key: 'metricsPort',
    help: 'serve /metrics on this port only (not on the API port)',
    in: {
      start: { defaultHelp: 'on the API port' },
      api: { defaultHelp: 'on PORT' },
      mcp: { defaultHelp: 'on PORT' },
      projector: { default: '9464' },
    },
    parse: port,
  }),
  setting({
    name: 'METRICS_HOST',
    key: 'metricsHost',
    help: 'the listen address of METRICS_PORT',
    in: {
      start: { default: '127.0.0.1' },
      api: { default: '127.0.0.1' },
      mcp: { default: '127.0.0.1' },
      projector: { defaultHelp: 'HOST' },
    },
    parse: text,
  }),
  setting({
    name: 'KAFKA_BROKERS',
    key: 'kafkaBrokers',
    help: 'the Kafka bootstrap brokers, host:port,host:port',
    in: {
      projector: { required: true },
      topics: { defaultHelp: 'none; needed unless SIGNALBASE_CREATE_TOPICS=false' },
      ingest: { defaultHelp: 'none; needed by --to kafka' },
    },
    parse: (v) => {
      const b = v
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      if (!b.length) throw new Error('names no broker');
      return b;
    },
  }),
  setting({
    name: 'KAFKA_TOPIC_PREFIX',
    key: 'kafkaTopicPrefix',
    help: 'prepended to every topic name, for deployments sharing a cluster',
    in: { projector: { default: '' }, topics: { default: '' }, ingest: { default: '' } },
    parse: text,
  }),
  setting({
    name: 'SIGNALBASE_CREATE_TOPICS',
    key: 'createTopics',
    help: 'false: topics are managed elsewhere, `topics create` does nothing',
    in: { topics: { default: 'true' } },
    parse: (v) => {
      if (v !== 'true' && v !== 'false') throw new Error(`must be true or false, got ${v}`);
      return v === 'true';
    },
  }),
  setting({
    name: 'CLICKHOUSE_URL',
    key: 'clickhouseUrl',
    help: 'the ClickHouse server, e.g. http://user:password@clickhouse:8123',
    in: { projector: { required: true }, api: { required: true }, mcp: { required: true } },
    parse: (v) => absoluteUrl(v),
  }),
  setting({
    name: 'CLICKHOUSE_DATABASE',
    key: 'clickhouseDatabase',
    help: 'the database of the read models',
    in: { projector: { default: 'signalbase' }, api: { default: 'signalbase' }, mcp: { default: 'signalbase' } },
    parse: text,
  }),
  setting({
    name: 'CLICKHOUSE_REQUEST_TIMEOUT_MS',
    key: 'clickhouseRequestTimeoutMs',
    help: 'the longest a request to the ClickHouse server may go without an answer',
    in: { api: { default: String(READ_STORE_TIMEOUT_MS) }, mcp: { default: String(READ_STORE_TIMEOUT_MS) } },
    parse: positiveMs,
  }),
  setting({
    name: 'REDIS_URL',
    key: 'redisUrl',
    help: 'Redis, e.g. redis://redis:6379: the state API replicas and projectors share',
    in: { projector: { defaultHelp: 'none; needed for more than one instance' }, api: { required: true }, mcp: { required: true } },
    parse: text,
  }),
  setting({
    name: 'REDIS_PREFIX',
    key: 'redisPrefix',
    help: 'prefix of every Redis key, for deployments sharing a Redis',
    in: { projector: { default: 'signalbase' }, api: { default: 'signalbase' }, mcp: { default: 'signalbase' } },
    parse: text,
  }),
  setting({
    name: 'REDIS_COMMAND_TIMEOUT_MS',
    key: 'redisCommandTimeoutMs',
    help: 'a Redis command that takes longer fails (reads are then answered from the store; a batch is applied again later)',
    in: {
      projector: { default: String(REDIS_COMMAND_TIMEOUT_MS) },
      api: { default: String(REDIS_COMMAND_TIMEOUT_MS) },
      mcp: { default: String(REDIS_COMMAND_TIMEOUT_MS) },
    },
    parse: positiveMs,
  }),
] as const;

type Settings = typeof SETTINGS;
/** The settings a process loaded: each field the parsed value, undefined where the process has no value for it. */
export type ProcessSettings = { [S in Settings[number] as S['key']]: ReturnType<S['parse']> | undefined };

/** An environment that does not give a process what it needs, or gives a value that is not allowed; `problems` are all of them. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`configuration: ${problems.join('; ')}`);
  }
}

/** Reads and checks every setting `kind` uses from `env`; throws a ConfigError naming every problem at once. */
export function readSettings(kind: ProcessKind, env: NodeJS.ProcessEnv = process.env): ProcessSettings {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const s of SETTINGS as readonly Setting<string, unknown>[]) {
    const use = s.in[kind];
    if (!use) continue;
    const given = env[s.name];
    const value = given !== undefined && given !== '' ? given : use.default;
    if (value === undefined) {
      if (use.required) problems.push(`${s.name} is not set: ${s.help}`);
      continue;
    }
    try {
      out[s.key] = s.parse(value, env);
    } catch (err) {
      const message = (err as Error).message;
      problems.push(message.startsWith(`${s.name}:`) ? message : `${s.name} ${message}`);
    }
  }
  // METRICS_HOST of a projector defaults to its HOST.
  if (kind === 'projector' && !env.METRICS_HOST) out.metricsHost = out.host;
  if (problems.length) throw new ConfigError(problems);
  return out as ProcessSettings;
}

/** The "Environment:" part of a command's --help: every setting the process reads, a line each, with its default there. */
export function environmentHelp(kind: ProcessKind): string {
  const used = (SETTINGS as readonly Setting<string, unknown>[]).filter((s) => s.in[kind]);
  const width = Math.max(...used.map((s) => s.name.length));
  const lines = used.map((s) => {
    const use = s.in[kind]!;
    const d = use.required
      ? 'required'
      : use.defaultHelp
        ? `default: ${use.defaultHelp}`
        : use.default
          ? `default ${use.default}`
          : 'default none';
    return `  ${s.name.padEnd(width)}  ${s.help} (${d})`;
  });
  return `Environment:\n${lines.join('\n')}`;
}

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  logLevel: string;
  rateLimits?: RateLimits;
  /** MCP_URL: the public address of /mcp, the audience of its tokens (default: this server's /mcp). */
  mcpUrl?: string;
  /** AUTH_ISSUER: the authorization server of the MCP surface (default: the dev one of the embedded mode, at MCP_URL's origin). */
  authIssuer?: string;
  /** MCP_ALLOWED_ORIGINS: browser origins allowed on /mcp besides MCP_URL's own. */
  mcpAllowedOrigins?: string[];
  /** METRICS_PORT (and METRICS_HOST): where /metrics is served instead of the API port. */
  metrics?: MetricsListen;
  /** CURSOR_SECRET (default: a key kept in DATA_DIR). */
  cursorSecret?: string;
  /** STATEMENT_LOG: where the store's statements are noted (storage/statement-log.ts). */
  statementLog?: string;
  /** LIVE_CADENCE_MS: the live projector's rounds and commits at most this often (default DEFAULT_LIVE_CADENCE_MS). */
  liveCadenceMs?: number;
}

/** A listen address of its own for /metrics. */
export interface MetricsListen {
  port: number;
  host: string;
}

/** The embedded mode's configuration (`signalbase start`; flags override the environment in the CLI). */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const s = readSettings('start', env);
  return {
    port: s.port!,
    host: s.host!,
    dataDir: s.dataDir!,
    logLevel: s.logLevel!,
    ...(s.rateLimits ? { rateLimits: s.rateLimits } : {}),
    ...(s.mcpUrl ? { mcpUrl: s.mcpUrl } : {}),
    ...(s.authIssuer ? { authIssuer: s.authIssuer } : {}),
    ...(s.mcpAllowedOrigins ? { mcpAllowedOrigins: s.mcpAllowedOrigins } : {}),
    ...(s.metricsPort !== undefined ? { metrics: { port: s.metricsPort, host: s.metricsHost! } } : {}),
    ...(s.cursorSecret ? { cursorSecret: s.cursorSecret } : {}),
    ...(s.statementLog ? { statementLog: s.statementLog } : {}),
    liveCadenceMs: s.liveCadenceMs!,
  };
}

/** The data directory of a command that works on one (`--data-dir`, else DATA_DIR, else ./.data). */
export function dataDirOf(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return readSettings('admin', flag ? { ...env, DATA_DIR: flag } : env).dataDir!;
}

/** The MCP URL and token issuer of a server listening at `origin` (e.g. http://127.0.0.1:8080); `dev`: the embedded dev authorization server issues the tokens. */
export function authUrls(cfg: Pick<Config, 'mcpUrl' | 'authIssuer'>, origin: string): { mcpUrl: string; issuer: string; dev: boolean } {
  const mcpUrl = cfg.mcpUrl ?? `${origin}/mcp`;
  const own = new URL(mcpUrl).origin;
  const issuer = cfg.authIssuer ?? own;
  return { mcpUrl, issuer, dev: issuer === own };
}

/** This machine's origin for a listen address (a wildcard address is reached as localhost). */
export const originOf = (host: string, port: number) =>
  `http://${host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host}:${port}`;
