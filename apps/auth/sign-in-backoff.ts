import { RateLimiterMemory } from 'rate-limiter-flexible';

/**
 * Per-account backoff of the sign-in page (dev authorization server): the per-address limit alone
 * lets many addresses guess one account's password. Failed sign-ins of an account are remembered
 * for `memorySeconds` from the first; past `freeFailures` each further failure locks the account
 * for a period that doubles (first `firstLockSeconds`, at most `maxLockSeconds`), during which its
 * sign-ins are refused before any password is hashed. A successful sign-in forgets it all. Every
 * account name counts, known or not, so a lock tells nothing about which accounts exist.
 */
export interface BackoffLimits {
  freeFailures: number;
  memorySeconds: number;
  firstLockSeconds: number;
  maxLockSeconds: number;
}

export const SIGN_IN_BACKOFF: BackoffLimits = { freeFailures: 5, memorySeconds: 24 * 3600, firstLockSeconds: 60, maxLockSeconds: 3600 };

/** Account names are short; a long one still counts, under its first characters. */
const keyOf = (account: string) => account.slice(0, 256);

export class SignInBackoff {
  private readonly limits: BackoffLimits;
  private readonly failures: RateLimiterMemory;
  private readonly locks: RateLimiterMemory;

  constructor(limits: Partial<BackoffLimits> = {}) {
    this.limits = { ...SIGN_IN_BACKOFF, ...limits };
    // Counts only (penalty never refuses); the record expires memorySeconds after the first failure.
    this.failures = new RateLimiterMemory({
      keyPrefix: 'sign-in-failures',
      points: Number.MAX_SAFE_INTEGER,
      duration: this.limits.memorySeconds,
    });
    // A lock is a block of this limiter for the lock's period.
    this.locks = new RateLimiterMemory({ keyPrefix: 'sign-in-lock', points: 1, duration: 1 });
  }

  /** Milliseconds until the account may try again (0: now). */
  async lockedFor(account: string): Promise<number> {
    const r = await this.locks.get(keyOf(account));
    return r && r.consumedPoints > 1 && r.msBeforeNext > 0 ? r.msBeforeNext : 0;
  }

  /** Counts a failed sign-in; returns the lock it starts, in milliseconds (0: none). */
  async failed(account: string): Promise<number> {
    const r = await this.failures.penalty(keyOf(account), 1);
    const over = r.consumedPoints - this.limits.freeFailures;
    if (over <= 0) return 0;
    const seconds = Math.min(this.limits.firstLockSeconds * 2 ** (over - 1), this.limits.maxLockSeconds);
    await this.locks.block(keyOf(account), seconds);
    return seconds * 1000;
  }

  async succeeded(account: string): Promise<void> {
    await this.failures.delete(keyOf(account));
    await this.locks.delete(keyOf(account));
  }
}

/** "45 seconds", "2 minutes": how long a lock lasts, for the sign-in page. */
export function waitText(ms: number): string {
  const s = Math.ceil(ms / 1000);
  if (s < 120) return `${s} second${s === 1 ? '' : 's'}`;
  return `${Math.ceil(s / 60)} minutes`;
}
