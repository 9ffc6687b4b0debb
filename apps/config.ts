import { resolve } from 'node:path';
import { parseRateLimits, type RateLimits } from './api/rate-limit.ts';

export interface Config { port: number; host: string; dataDir: string; logLevel: string; rateLimits?: RateLimits }

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
  };
}
