import { resolve } from 'node:path';
import { parseRateLimits, type RateLimits } from './api/rate-limit.ts';

export interface Config {
  port: number; host: string; dataDir: string; logLevel: string; rateLimits?: RateLimits;
  /** MCP_URL: the public address of /mcp, the audience of its tokens (default: this server's /mcp). */
  mcpUrl?: string;
  /** AUTH_ISSUER: the authorization server of the MCP surface (default: the dev one of the embedded mode, at MCP_URL's origin). */
  authIssuer?: string;
  /** MCP_ALLOWED_ORIGINS: browser origins allowed on /mcp besides MCP_URL's own. */
  mcpAllowedOrigins?: string[];
  /** METRICS_PORT (and METRICS_HOST): where /metrics is served instead of the API port. */
  metrics?: MetricsListen;
}

/** A listen address of its own for /metrics. */
export interface MetricsListen { port: number; host: string }

/** Embedded-mode configuration from the environment (flags override it in the CLI). */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const port = Number(env.PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be an integer 0..65535, got ${env.PORT}`);
  return {
    port,
    host: env.HOST ?? '127.0.0.1',
    dataDir: resolve(env.DATA_DIR ?? './.data'),
    logLevel: env.LOG_LEVEL ?? 'info',
    rateLimits: parseRateLimits(env.RATE_LIMITS),
    ...(env.MCP_URL ? { mcpUrl: absoluteUrl('MCP_URL', env.MCP_URL) } : {}),
    ...(env.AUTH_ISSUER ? { authIssuer: absoluteUrl('AUTH_ISSUER', env.AUTH_ISSUER).replace(/\/$/, '') } : {}),
    ...(env.MCP_ALLOWED_ORIGINS ? { mcpAllowedOrigins: parseOrigins(env.MCP_ALLOWED_ORIGINS) } : {}),
    ...(env.METRICS_PORT ? { metrics: metricsListen(env)! } : {}),
  };
}

/** MCP_ALLOWED_ORIGINS: comma-separated http(s) origins (`https://app.example`, `http://localhost:3000`). */
export function parseOrigins(v: string): string[] {
  return v.split(',').map((s) => s.trim()).filter(Boolean).map((s) => {
    const u = new URL(absoluteUrl('MCP_ALLOWED_ORIGINS', s));
    if (u.pathname !== '/' || u.search || u.hash || u.username || u.password) throw new Error(`MCP_ALLOWED_ORIGINS lists origins (scheme://host[:port]) only, got ${s}`);
    return u.origin;
  });
}

/**
 * METRICS_PORT and METRICS_HOST: /metrics on a listener of its own (loopback unless METRICS_HOST
 * says otherwise) and not on the API port; undefined when METRICS_PORT is not set.
 */
export function metricsListen(env: NodeJS.ProcessEnv, defaultHost = '127.0.0.1'): MetricsListen | undefined {
  if (!env.METRICS_PORT) return undefined;
  const port = Number(env.METRICS_PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`METRICS_PORT must be an integer 0..65535, got ${env.METRICS_PORT}`);
  return { port, host: env.METRICS_HOST ?? defaultHost };
}

function absoluteUrl(name: string, v: string): string {
  let u: URL;
  try { u = new URL(v); } catch { throw new Error(`${name} must be an absolute http(s) URL, got ${v}`); }
  if (u.protocol !== 'https:' && u.protocol !== 'http:') throw new Error(`${name} must be an absolute http(s) URL, got ${v}`);
  return u.href;
}

/** The MCP URL and token issuer of a server listening at `origin` (e.g. http://127.0.0.1:8080); `dev`: the embedded dev authorization server issues the tokens. */
export function authUrls(cfg: Pick<Config, 'mcpUrl' | 'authIssuer'>, origin: string): { mcpUrl: string; issuer: string; dev: boolean } {
  const mcpUrl = cfg.mcpUrl ?? `${origin}/mcp`;
  const own = new URL(mcpUrl).origin;
  const issuer = cfg.authIssuer ?? own;
  return { mcpUrl, issuer, dev: issuer === own };
}

/** This machine's origin for a listen address (a wildcard address is reached as localhost). */
export const originOf = (host: string, port: number) => `http://${host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host}:${port}`;
