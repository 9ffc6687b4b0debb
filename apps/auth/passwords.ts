import { randomBytes, type ScryptOptions, scrypt, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/**
 * Account passwords of the dev authorization server (embedded mode), hashed with scrypt (Node's
 * crypto; memory-hard: N=2^15, r=8 takes 32 MiB per hash) and kept in DATA_DIR/auth/passwords.json
 * (mode 0600), not on the log: a changed password leaves no old hash behind.
 */
const PARAMS = { N: 2 ** 15, r: 8, p: 1 } as const;
const KEY_BYTES = 32;
export const MIN_PASSWORD_LENGTH = 8;

const derive = (password: string, salt: Buffer, o: ScryptOptions & { N: number }) =>
  new Promise<Buffer>((resolve, reject) =>
    scrypt(password.normalize('NFC'), salt, KEY_BYTES, { ...o, maxmem: 128 * o.N * (o.r ?? 8) * 2 }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  );

/** `scrypt$N$r$p$salt$hash` (salt and hash base64url). */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, PARAMS);
  return `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${salt.toString('base64url')}$${key.toString('base64url')}`;
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [kind, n, r, p, salt, hash] = stored.split('$');
  if (kind !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await derive(password, Buffer.from(salt, 'base64url'), { N: Number(n), r: Number(r), p: Number(p) });
  return key.length === expected.length && timingSafeEqual(key, expected);
}

export const passwordsFile = (dataDir: string) => join(dataDir, 'auth', 'passwords.json');

export function readPasswords(dataDir: string): Record<string, string> {
  const file = passwordsFile(dataDir);
  return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : {};
}

/** Sets an account's password (the CLI, and the demo account at the first start); a running server reads the file at each sign-in. */
export async function setPassword(dataDir: string, accountId: string, password: string): Promise<void> {
  if (password.length < MIN_PASSWORD_LENGTH) throw new Error(`a password has at least ${MIN_PASSWORD_LENGTH} characters`);
  const hash = await hashPassword(password);
  const file = passwordsFile(dataDir);
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
  const all = { ...readPasswords(dataDir), [accountId]: hash };
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(all, null, 1), { mode: 0o600 });
  renameSync(tmp, file);
}

/**
 * Password checks hashing at the same time: each holds 32 MiB and a thread of libuv's pool (which
 * file and DNS work share), so a burst of sign-ins cannot take the process's memory or threads.
 */
export const MAX_CONCURRENT_PASSWORD_CHECKS = 4;
let checking = 0;

/** A password check refused because MAX_CONCURRENT_PASSWORD_CHECKS are running: try again in a moment. */
export class PasswordCheckBusy extends Error {
  constructor() {
    super('Too many sign-ins are being checked just now; try again in a moment');
  }
}

/**
 * Checks an account's password; false when it has none. The work is done either way, so timing
 * does not tell which accounts have one. Throws PasswordCheckBusy, without hashing, past the bound.
 */
export async function checkPassword(dataDir: string, accountId: string, password: string): Promise<boolean> {
  if (checking >= MAX_CONCURRENT_PASSWORD_CHECKS) throw new PasswordCheckBusy();
  checking++;
  try {
    const all = readPasswords(dataDir);
    // Own keys only: an account named `__proto__` or `constructor` has no password.
    const stored = Object.hasOwn(all, accountId) && typeof all[accountId] === 'string' ? all[accountId] : undefined;
    const ok = await verifyPassword(password, stored ?? DUMMY);
    return stored !== undefined && ok;
  } finally {
    checking--;
  }
}
const DUMMY = `scrypt$${PARAMS.N}$${PARAMS.r}$${PARAMS.p}$${Buffer.alloc(16).toString('base64url')}$${Buffer.alloc(KEY_BYTES).toString('base64url')}`;
