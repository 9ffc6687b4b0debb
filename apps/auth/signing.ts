import { randomUUID } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';
import type { Scope } from '../../schemas/topics/index.ts';

/** The dev issuer's signing key: ES256, created once per DATA_DIR and kept there (mode 0600), so tokens outlive restarts. */
export const signingKeyFile = (dataDir: string) => join(dataDir, 'auth', 'signing-key.json');
const ALG = 'ES256';

export interface SigningKey {
  privateKey: CryptoKey;
  publicJwk: JWK & { kid: string };
  kid: string;
}

export async function loadSigningKey(dataDir: string): Promise<SigningKey> {
  const file = signingKeyFile(dataDir);
  if (!existsSync(file)) {
    const { privateKey } = await generateKeyPair(ALG, { extractable: true });
    const jwk = await exportJWK(privateKey);
    const kid = await calculateJwkThumbprint(jwk);
    mkdirSync(join(dataDir, 'auth'), { recursive: true, mode: 0o700 });
    // `wx`: a second process creating it at the same moment keeps the first one's key.
    try {
      writeFileSync(file, JSON.stringify({ ...jwk, kid, alg: ALG, use: 'sig' }), { mode: 0o600, flag: 'wx' });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
  const jwk = JSON.parse(readFileSync(file, 'utf8')) as JWK & { kid: string };
  const privateKey = (await importJWK(jwk, ALG)) as CryptoKey;
  const { d: _d, ...pub } = jwk;
  return { privateKey, publicJwk: { ...pub, kid: jwk.kid, alg: ALG, use: 'sig' }, kid: jwk.kid };
}

export interface AccessTokenClaims {
  issuer: string;
  audience: string;
  accountId: string;
  scopes: readonly Scope[];
  clientId: string;
  ttlSeconds: number;
  now?: number;
}

/** An access token as RFC 9068 has it: `sub` is the signalbase account, `scope` the approved scopes, `aud` the MCP URL. */
export async function mintAccessToken(key: SigningKey, c: AccessTokenClaims): Promise<string> {
  const iat = Math.floor((c.now ?? Date.now()) / 1000);
  return new SignJWT({ scope: c.scopes.join(' '), client_id: c.clientId })
    .setProtectedHeader({ alg: ALG, kid: key.kid, typ: 'at+jwt' })
    .setIssuer(c.issuer)
    .setAudience(c.audience)
    .setSubject(c.accountId)
    .setIssuedAt(iat)
    .setExpirationTime(iat + c.ttlSeconds)
    .setJti(randomUUID())
    .sign(key.privateKey);
}
