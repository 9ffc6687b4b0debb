// Issue 24: cost bounds on every read, admission control with a fair share per account, rate
// limits before authentication and per MCP tool call, JSON-RPC batches refused, malformed keys
// refused without a look-up. Expectations come from the issue and DESIGN 6 (rows Cost, Overload).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ApiKeyAuthenticator } from '../../apps/auth/keys.ts';
import { MemoryCache } from '../../apps/cache/memory.ts';
import { Admission, type AdmissionOptions, admissionDefaults, boundedStore, LIST_COST } from '../../apps/reads/cost.ts';
import { ApiError } from '../../schemas/api/errors.ts';
import type { Store } from '../../storage/port.ts';
import { createHarness, type Harness } from '../helpers/harness.ts';
import { rawMcp } from '../helpers/mcp-client.ts';

const opts = (o: Partial<AdmissionOptions>): AdmissionOptions => ({ ...admissionDefaults(2), ...o });
const later = () => Date.now() + 10_000;
const codeOf = async (p: unknown): Promise<string> => {
  try {
    await p;
    return 'granted';
  } catch (e) {
    return (e as ApiError).code;
  }
};

describe('issue 24: admission control', () => {
  it('gives an account at most its share of the slots: another account still gets one at once', async () => {
    const a = new Admission(opts({ slots: 2, perAccount: 1 }));
    const slotA = await a.acquire('noisy', later());
    const waiting = a.acquire('noisy', later());
    expect(waiting).toBeInstanceOf(Promise); // the noisy account waits for its own slot...
    const slotB = a.acquire('quiet', later());
    expect(slotB).not.toBeInstanceOf(Promise); // ...while another account is admitted without waiting
    (slotB as { release: () => void }).release();
    slotA.release();
    (await waiting).release();
    expect(a.inFlight).toBe(0);
  });

  it('serves waiting accounts in turn, not in arrival order', async () => {
    const a = new Admission(opts({ slots: 1, perAccount: 1, perAccountQueue: 10 }));
    const first = await a.acquire('noisy', later());
    const order: string[] = [];
    const queued = [
      ...[1, 2, 3].map((i) =>
        Promise.resolve(a.acquire('noisy', later())).then((s) => {
          order.push(`noisy${i}`);
          s.release();
        }),
      ),
      Promise.resolve(a.acquire('quiet', later())).then((s) => {
        order.push('quiet');
        s.release();
      }),
    ];
    first.release();
    await Promise.all(queued);
    expect(order.indexOf('quiet')).toBeLessThanOrEqual(1); // behind at most one of the noisy account's queries
  });

  it("refuses with OVERLOADED past the account's queue, past the whole queue, and past the longest wait", async () => {
    const a = new Admission(opts({ slots: 1, perAccount: 1, queue: 2, perAccountQueue: 1, maxWaitMs: 50 }));
    const held = (await a.acquire('x', later())).release;
    const queuedX = a.acquire('x', later());
    expect(await codeOf(a.acquire('x', later()))).toBe('OVERLOADED'); // its own queue is full
    const queuedY = a.acquire('y', later());
    expect(await codeOf(a.acquire('z', later()))).toBe('OVERLOADED'); // the whole queue is full
    expect(await codeOf(queuedX)).toBe('OVERLOADED'); // waited longer than maxWaitMs
    expect(await codeOf(queuedY)).toBe('OVERLOADED');
    held();
    try {
      await a.acquire('x', later());
    } catch {
      /* */
    }
    expect(a.waiting).toBe(0);
  });

  it('the account asking most reads at a lower store priority than another', async () => {
    const a = new Admission(opts({ slots: 4, perAccount: 2, perAccountQueue: 10 }));
    const quiet = await a.acquire('quiet', later());
    const busy = [await a.acquire('busy', later()), await a.acquire('busy', later())];
    const queued = [a.acquire('busy', later()), a.acquire('busy', later())];
    for (const q of queued) Promise.resolve(q).catch(() => {}); // a failed expectation below must not leave a rejection unhandled
    busy[0]!.release();
    const third = await queued[0]!;
    expect(quiet.priority).toBe(1); // the highest: no account reading now asks for less
    expect(third.priority).toBeGreaterThan(quiet.priority); // granted with more of its reads running or waiting than the quiet account has
    for (const s of [quiet, busy[1]!, third]) s.release();
    (await queued[1]!).release();
    // Alone, even the busy account reads at the highest priority: nobody else is waiting for the store.
    const alone = await a.acquire('busy', later());
    expect(alone.priority).toBe(1);
    alone.release();
  });

  describe('share of slot time (500 ms per second, 1 s saved up at most)', () => {
    const share = () => new Admission(opts({ slots: 2, perAccount: 1, shareMsPerSecond: 500, shareBurstMs: 1_000 }));
    const deadline = () => Date.now() + 10_000;
    /** Takes a slot, keeps it `ms` (fake time), gives it back. */
    const hold = async (a: Admission, account: string, ms: number) => {
      const s = await a.acquire(account, deadline());
      vi.advanceTimersByTime(ms);
      s.release();
      return s;
    };
    beforeAll(() => {
      vi.useFakeTimers();
    });
    afterAll(() => {
      vi.useRealTimers();
    });

    it('alone, an account is never held back, however long it keeps its slot', async () => {
      const a = share();
      await hold(a, 'noisy', 3_000);
      const next = a.acquire('noisy', deadline());
      expect(next).not.toBeInstanceOf(Promise);
      (next as { release: () => void }).release();
    });

    it('a quiet account reading at its usual pace is admitted at once beside one that keeps its slot busy', async () => {
      const a = share();
      let noisy: { release: () => void } | undefined;
      let noisyWaited = 0;
      for (let i = 0; i < 100; i++) {
        if (!noisy) {
          const next = a.acquire('noisy', deadline()); // held back by its share at times: then it waits
          if (next instanceof Promise) {
            noisyWaited++;
            void next.then((s) => {
              noisy = s;
            });
          } else noisy = next;
        }
        const quiet = a.acquire('quiet', deadline());
        expect(quiet).not.toBeInstanceOf(Promise);
        await vi.advanceTimersByTimeAsync(12);
        (quiet as { release: () => void }).release();
        await vi.advanceTimersByTimeAsync(38);
        if (noisy) {
          noisy.release();
          noisy = undefined;
        }
      }
      expect(noisyWaited).toBeGreaterThan(0); // the noisy account did go past its share
    });

    it('a quiet account whose reads were slowed past its share is neither held back nor lowered while a heavier account reads', async () => {
      const a = share();
      await hold(a, 'noisy', 2_000); // owes 1 s
      const noisy = await a.acquire('noisy', deadline()); // alone: admitted, and it keeps reading
      await hold(a, 'quiet', 1_100); // slowed reads: a little past what it had saved up, far less than the noisy account
      const quiet = a.acquire('quiet', deadline());
      expect(quiet).not.toBeInstanceOf(Promise); // admitted at once: the noisy account uses more
      expect((quiet as { priority: number }).priority).toBe(1);
      (quiet as { release: () => void }).release();
      noisy.release();
    });

    it("an account past its share waits while another reads until it is back under, then reads below the other's priority", async () => {
      const a = share();
      await hold(a, 'noisy', 2_000); // a second more than it had saved up: it owes 1 s, 2 s at 500 ms/s
      const quiet = await a.acquire('quiet', deadline());
      expect(quiet.priority).toBe(1);
      let granted: { priority: number; release: () => void } | undefined;
      const held = a.acquire('noisy', deadline());
      expect(held).toBeInstanceOf(Promise);
      void Promise.resolve(held).then((s) => {
        granted = s;
      });
      await vi.advanceTimersByTimeAsync(1_900);
      expect(granted).toBeUndefined();
      await vi.advanceTimersByTimeAsync(200);
      expect(granted).toBeDefined();
      expect(granted!.priority).toBeGreaterThan(quiet.priority);
      granted!.release();
      quiet.release();
    });
  });

  it('an OVERLOADED refusal says when to retry', async () => {
    const a = new Admission(opts({ slots: 1, perAccount: 1, queue: 0 }));
    void a.acquire('x', later());
    await expect(a.acquire('y', later())).rejects.toMatchObject({
      code: 'OVERLOADED',
      status: 503,
      details: { retryAfterSeconds: expect.any(Number) },
    });
  });
});

describe('issue 24: cost bounds', () => {
  let h: Harness;
  let key: string;
  beforeAll(async () => {
    h = await createHarness({ mcp: true, admission: new Admission({ ...admissionDefaults(2), deadlineMs: 0 }) });
    await h.listen();
    key = await h.key();
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  const bounded = (cost: Partial<typeof LIST_COST>) => boundedStore(h.store, { ...LIST_COST, ...cost }, Date.now() + 10_000);

  it('a query that reads more rows than its bound is QUERY_TOO_LARGE naming the bound', async () => {
    const err = await bounded({ rowsRead: 1000 })
      .query('SELECT count() AS n FROM numbers(100000)')
      .catch((e) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ code: 'QUERY_TOO_LARGE', status: 422, details: { bound: 'rows' } });
    expect(err.message).toMatch(/shorter startTime\.\.endTime|fewer ids/);
  });

  it('a query that runs longer than its time bound stops there: QUERY_TOO_LARGE, not a wait', async () => {
    const t0 = Date.now();
    const err = await bounded({ timeMs: 200, rowsRead: 1e12, bytesRead: 1e13 })
      .query('SELECT count() AS n FROM numbers(100000000000) WHERE sipHash64(number) % 7 = 1')
      .catch((e) => e);
    expect(err).toMatchObject({ code: 'QUERY_TOO_LARGE', details: { bound: 'time' } });
    expect(Date.now() - t0).toBeLessThan(3_000);
  });

  it('a query that needs more memory than its bound is QUERY_TOO_LARGE', async () => {
    const err = await bounded({ memoryBytes: 8 * 2 ** 20 })
      .query('SELECT groupArray(number) AS a FROM numbers(20000000)')
      .catch((e) => e);
    expect(err).toMatchObject({ code: 'QUERY_TOO_LARGE', details: { bound: expect.stringMatching(/memory|result/) } });
  });

  it('the bounds stay with the read, and a failed read leaves nothing behind: the store answers the next query whole and unbounded', async () => {
    await bounded({ rowsRead: 10 })
      .query('SELECT count() FROM numbers(100)')
      .catch(() => {});
    await bounded({ memoryBytes: 8 * 2 ** 20 })
      .query('SELECT groupArray(number) AS a FROM numbers(20000000)')
      .catch(() => {});
    expect(await h.store.query<{ n: number }>('SELECT count() AS n FROM numbers(100000)')).toEqual([{ n: 100000 }]);
  });

  it('REST: a read that cannot finish before the request deadline is 422 QUERY_TOO_LARGE in the error envelope', async () => {
    const r = await h.get('/v2/traders/stats?traderIds=1,2,3', key);
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ success: false, error: { code: 'QUERY_TOO_LARGE', details: { bound: 'deadline' } } });
  });

  it('MCP: the same read is a tool error with the same code', async () => {
    const token = await h.token({ account: 'acct1' });
    const r = await rawMcp(
      h.urls().mcpUrl,
      { authorization: `Bearer ${token}` },
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_trader_stats', arguments: { traderIds: [1, 2, 3] } } },
    );
    expect(r.status).toBe(200);
    expect(r.json.result.isError).toBe(true);
    expect(JSON.parse(r.json.result.content[0].text).error.code).toBe('QUERY_TOO_LARGE');
  });
});

describe('issue 24: overload over HTTP', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await createHarness({
      admission: new Admission({ ...admissionDefaults(1), perAccount: 1, queue: 1, perAccountQueue: 1, maxWaitMs: 5_000 }),
    });
  }, 60_000);
  afterAll(async () => {
    await h?.close();
  });

  it('a burst of one account past its queue is 503 OVERLOADED with Retry-After; the rest are answered; never a 500', async () => {
    const key = await h.key();
    // Analytics reads are not cached: each one goes to the store.
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => h.get(`/v2/traders/rankings?limit=${i + 1}`, key)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.every((s) => s === 200 || s === 503)).toBe(true);
    expect(statuses).toContain(200);
    const refused = answers.find((a) => a.status === 503)!;
    expect(refused.body).toMatchObject({ success: false, error: { code: 'OVERLOADED' } });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
  });
});

describe('issue 24: refusals that cost nothing', () => {
  it('a key not in the key format is refused without a store look-up; a well-formed one is looked up', async () => {
    const failing = { database: 'x', query: () => Promise.reject(new Error('store down')) } as unknown as Store;
    const auth = new ApiKeyAuthenticator(failing, new MemoryCache());
    for (const junk of ['nope', 'sb_nope_nope', `sb_${'0'.repeat(16)}_${'a'.repeat(42)}`, "' OR 1=1 --"]) {
      await expect(auth.authenticate(junk)).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    }
    // The store is down: only a key that reached the look-up learns it.
    await expect(auth.authenticate(`sb_${'0'.repeat(16)}_${'a'.repeat(43)}`)).rejects.toMatchObject({ code: 'AUTHENTICATION_UNAVAILABLE' });
  });

  describe('per-address limit before authentication, per-account limit per MCP tool call, batches', () => {
    let h: Harness;
    beforeAll(async () => {
      h = await createHarness({ mcp: true, rateLimits: { perMinute: 2, perAccount: new Map(), perAddress: 8 } });
      await h.listen();
    }, 60_000);
    afterAll(async () => {
      await h?.close();
    });

    it('MCP: a JSON-RPC batch is refused with a JSON-RPC error, whatever it holds', async () => {
      await h.key({ account: { id: 'batcher' } });
      const token = await h.token({ account: 'batcher' });
      const call = (id: number) => ({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'list_trader_stats', arguments: { traderIds: [1] } },
      });
      const r = await rawMcp(h.urls().mcpUrl, { authorization: `Bearer ${token}` }, [call(1), call(2)]);
      expect(r.status).toBe(400);
      expect(r.json).toMatchObject({ jsonrpc: '2.0', error: { code: -32600, message: expect.stringMatching(/batch/i) }, id: null });
    });

    it("MCP: each tool call counts against the account's requests per minute; past it, a RATE_LIMITED tool error", async () => {
      await h.key({ account: { id: 'caller' } });
      const token = await h.token({ account: 'caller' });
      const call = () =>
        rawMcp(
          h.urls().mcpUrl,
          { authorization: `Bearer ${token}` },
          { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'list_assets', arguments: {} } },
        );
      const results = [await call(), await call(), await call()].map((r) => r.json.result);
      expect(results.slice(0, 2).map((r) => r.isError ?? false)).toEqual([false, false]);
      expect(results[2].isError).toBe(true);
      expect(JSON.parse(results[2].content[0].text).error).toMatchObject({ code: 'RATE_LIMITED', details: { limit: 2 } });
    });

    it('REST: an address is limited before its credential is looked at: junk keys and then a valid key get 429', async () => {
      const key = await h.key();
      // Junk keys from one address: refused (401) until the address has spent its 8 requests, then 429.
      const junk = () => h.app.inject({ method: 'GET', url: '/v2/assets', headers: { 'x-api-key': 'junk' }, remoteAddress: '127.0.0.1' });
      const statuses: number[] = [];
      for (let i = 0; i < 10 && statuses.at(-1) !== 429; i++) statuses.push((await junk()).statusCode);
      expect(statuses.at(-1)).toBe(429);
      expect(statuses.length).toBeLessThanOrEqual(9);
      expect(new Set(statuses.slice(0, -1))).toEqual(new Set([401]));
      const t0 = performance.now();
      const over = await h.app.inject({ method: 'GET', url: '/v2/assets', headers: { 'x-api-key': key }, remoteAddress: '127.0.0.1' });
      expect(over.statusCode).toBe(429);
      // A refusal of a flood is answered after a pause, so that a client ignoring Retry-After cannot loop on refusals.
      expect(performance.now() - t0).toBeGreaterThanOrEqual(400);
      expect(over.json()).toMatchObject({ success: false, error: { code: 'RATE_LIMITED' } });
      expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
      // Another address is not affected.
      expect(
        (await h.app.inject({ method: 'GET', url: '/v2/assets', headers: { 'x-api-key': key }, remoteAddress: '10.0.0.9' })).statusCode,
      ).toBe(200);
    });
  });
});
