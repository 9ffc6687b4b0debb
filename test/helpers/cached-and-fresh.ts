import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, vi } from 'vitest';
import { ReadCache } from '../../apps/api/read-cache.ts';
import { buildApi } from '../../apps/api/server.ts';
import { ApiKeyAuthenticator } from '../../apps/auth/keys.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { CursorCodec } from '../../apps/reads/cursor.ts';
import { createHarness, type Harness, type TopicRecord } from './harness.ts';

/**
 * Two apps on the harness's store with one clock and one cursor key (issue 26): `cached` with the
 * read cache and the harness's change log (what each projector commit changed), `fresh` with
 * neither (its answer is the expected one). Keys' answers are kept for an hour (not 5 s), so the
 * queries a test counts are the reads' own.
 */
export async function cachedAndFresh(
  h: Harness,
  clock: { now: number },
): Promise<{ cached: FastifyInstance; fresh: FastifyInstance; close(): Promise<void> }> {
  const deps = {
    store: h.store,
    auth: new ApiKeyAuthenticator(h.store, new MemoryCache(), 3_600_000),
    dataVersion: () => h.dataVersion(),
    clock: () => clock.now,
    cursors: CursorCodec.random(),
  };
  const cached = buildApi({
    ...deps,
    changes: h.changes!,
    readCache: new ReadCache(new MemoryCache(undefined, undefined, deps.clock), deps.clock),
  });
  const fresh = buildApi(deps);
  await Promise.all([cached.ready(), fresh.ready()]);
  return { cached, fresh, close: async () => void (await Promise.all([cached.close(), fresh.close()])) };
}

/**
 * What `run` read of groups kept across commits (apps/reads/analytics/kept-groups.ts): per query
 * of the harness's store matching `pattern`, the ids it read (the first of `params` it has), or 'all'.
 */
export async function groupReads<T>(
  h: Harness,
  pattern: RegExp,
  params: string | readonly string[],
  run: () => Promise<T>,
): Promise<{ result: T; reads: (number[] | 'all')[] }> {
  const spy = vi.spyOn(h.store, 'query');
  const names = typeof params === 'string' ? [params] : params;
  try {
    const result = await run();
    const reads = spy.mock.calls
      .filter(([sql]) => pattern.test(String(sql)))
      .map(([, given]) => {
        const p = given as Record<string, unknown> | undefined;
        const name = names.find((n) => p?.[n] !== undefined);
        return name ? (p![name] as number[]) : ('all' as const);
      });
    return { result, reads };
  } finally {
    spy.mockRestore();
  }
}

/**
 * For one describe block: a harness on an injected clock (`clock.now`, starting at `start`) given
 * `records`, a key, and both apps (cachedAndFresh), set up before its tests and closed after.
 */
export function cachedPair(start: number, records: () => TopicRecord[]) {
  const pair = {
    clock: { now: start },
    h: undefined as unknown as Harness,
    key: '',
    cached: undefined as unknown as FastifyInstance,
    fresh: undefined as unknown as FastifyInstance,
    close: async () => {},
  };
  beforeAll(async () => {
    pair.h = await createHarness({ clock: () => pair.clock.now });
    await pair.h.given(records());
    pair.key = await pair.h.key();
    Object.assign(pair, await cachedAndFresh(pair.h, pair.clock));
  });
  afterAll(async () => {
    await pair.close();
    await pair.h?.close();
  });
  return pair;
}
