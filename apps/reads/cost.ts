import { ApiError } from '../../schemas/api/errors.ts';
import type { Params, QueryOptions, Store } from '../../storage/port.ts';
import { storeFailure, wrapStore } from '../../storage/port.ts';

/**
 * Cost bounds and admission control (issue 24, DESIGN 6 rows Cost and Overload): a read that goes
 * to the store (a cache miss) first takes one of a bounded number of slots; each account holds at
 * most its share of the slots and of the queue, and waiters are served account by account in
 * turn, so one account's burst cannot stand in front of everyone else's reads; while others read,
 * an account keeps its slots busy at most its share of the time. Every store query
 * of the read runs under ClickHouse's own limits (time, memory, rows and bytes read, result size)
 * within the request's deadline.
 */

/** A read's bounds per store query. */
export interface ReadCost {
  /** Store time per query, ms. */
  timeMs: number;
  /** Store memory per query, bytes. */
  memoryBytes: number;
  /** Rows (and bytes) a query may read from tables. */
  rowsRead: number;
  bytesRead: number;
}

/**
 * About ten times the worst case of any read of the kind on the large seed (`npm run bench:costs`
 * prints each read's widest case against these), so that only a read far outside the contract's
 * use, or a store in trouble, meets them.
 */
export const LIST_COST: ReadCost = { timeMs: 3_000, memoryBytes: 256 * 2 ** 20, rowsRead: 30_000_000, bytesRead: 2 * 2 ** 30 };
export const ANALYTICS_COST: ReadCost = { timeMs: 6_000, memoryBytes: 1024 * 2 ** 20, rowsRead: 30_000_000, bytesRead: 2 * 2 ** 30 };

/** The largest answer (JSON bytes) a read may send; a larger one is QUERY_TOO_LARGE (no read within the contract's limits comes near). */
export const MAX_ANSWER_BYTES = 8 * 2 ** 20;
/** Rows and bytes a query may return (the store side of the answer bound: what the process parses of one query). */
const MAX_RESULT_ROWS = 2_000_000;
export const MAX_RESULT_BYTES = 64 * 2 ** 20;

export interface AdmissionOptions {
  /** Store queries in flight in this process. */
  slots: number;
  /** Queries waiting for a slot, all accounts together. */
  queue: number;
  /** Slots one account may hold at once. */
  perAccount: number;
  /** Queries one account may have waiting. */
  perAccountQueue: number;
  /** Longest a query waits for a slot before OVERLOADED. */
  maxWaitMs: number;
  /** The whole request's deadline (every query and the wait for slots). */
  deadlineMs: number;
  /**
   * Slot time (ms per second) one account may use while other accounts are reading: past it, its
   * next read waits until it is back under, so an account that keeps its slot busy leaves the
   * machine's cores to the others half the time. Alone, an account is not held back.
   */
  shareMsPerSecond: number;
  /** The most slot time an account may save up (or owe) against its share, ms. */
  shareBurstMs: number;
}

export function admissionDefaults(slots = 4): AdmissionOptions {
  const perAccount = Math.max(1, Math.floor(slots / 4));
  return {
    slots,
    queue: 64,
    perAccount,
    perAccountQueue: 16,
    maxWaitMs: 5_000,
    deadlineMs: 10_000,
    shareMsPerSecond: 500 * perAccount,
    shareBurstMs: 1_000,
  };
}

/** How long after its last read an account counts as reading (for the others' share). */
const ACTIVE_MS = 1_000;

interface Waiter {
  grant: () => void;
  fail: (err: ApiError) => void;
  timer: NodeJS.Timeout;
}

/**
 * A slot: `release` gives it back; `priority` is ClickHouse's query priority for the read's
 * queries (1 is the highest): 1 plus the number of accounts reading now with fewer reads running
 * or waiting, and at least 2 for an account that has spent over half its saved-up share while
 * others read, so the store favours the others' queries over those of the account asking most.
 */
export interface Slot {
  release: () => void;
  priority: number;
}
interface AccountState {
  running: number;
  waiting: Waiter[];
}
/** An account's slot-time credit against its share (ms; negative: owed), as of `at`, and when it last started a read. */
interface Share {
  credit: number;
  at: number;
  lastStart: number;
}

export function overloaded(message: string, retryAfterSeconds = 1): ApiError {
  return new ApiError('OVERLOADED', message, { retryAfterSeconds });
}

export class Admission {
  private running = 0;
  private queued = 0;
  private readonly accounts = new Map<string, AccountState>();
  /** Accounts with waiters, in the order they are served (round robin). */
  private readonly turn: string[] = [];
  /** Counters for the bench; `onRefusal` for /metrics. */
  readonly refused = { queueFull: 0, accountQueueFull: 0, waitedTooLong: 0 };
  onRefusal: (reason: 'queue_full' | 'account_queue_full' | 'waited_too_long') => void = () => {};
  private readonly shares = new Map<string, Share>();
  private wake: NodeJS.Timeout | undefined;

  constructor(
    readonly opts: AdmissionOptions,
    private readonly clock: () => number = Date.now,
  ) {}

  get inFlight(): number {
    return this.running;
  }
  get waiting(): number {
    return this.queued;
  }

  /**
   * Whether a read of `account` would be refused now (its share taken and its queue full): checked
   * right after authentication, so that an account flooding the server is refused before its
   * request costs any more work.
   */
  refusal(account: string): ApiError | undefined {
    const st = this.accounts.get(account);
    if (!st || st.running < this.opts.perAccount || st.waiting.length < this.opts.perAccountQueue) return undefined;
    this.refused.accountQueueFull++;
    this.onRefusal('account_queue_full');
    return overloaded(
      `This account already has ${st.running} reads running and ${st.waiting.length} waiting: send fewer concurrent requests`,
    );
  }

  /** Takes a slot for `account` (waiting at most until `deadline`, ms since the epoch); resolves to its release. */
  acquire(account: string, deadline: number): Promise<Slot> | Slot {
    const st = this.state(account);
    if (st.running < this.opts.perAccount && this.running < this.opts.slots && !st.waiting.length && this.owes(account) === 0)
      return this.grant(st, account);
    if (this.queued >= this.opts.queue) {
      this.refused.queueFull++;
      this.onRefusal('queue_full');
      return Promise.reject(
        overloaded(
          `The server is answering as many reads as it can (${this.opts.slots} at once, ${this.opts.queue} waiting): retry shortly`,
        ),
      );
    }
    if (st.waiting.length >= this.opts.perAccountQueue) {
      this.refused.accountQueueFull++;
      this.onRefusal('account_queue_full');
      return Promise.reject(
        overloaded(`This account already has ${st.running} reads running and ${st.waiting.length} waiting: send fewer concurrent requests`),
      );
    }
    const wait = Math.min(this.opts.maxWaitMs, deadline - Date.now());
    if (wait <= 0) {
      this.refused.waitedTooLong++;
      this.onRefusal('waited_too_long');
      return Promise.reject(overloaded('No slot for this read before its deadline: retry shortly'));
    }
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        grant: () => resolve(this.grant(st, account)),
        fail: reject,
        timer: setTimeout(() => {
          const i = st.waiting.indexOf(w);
          if (i < 0) return;
          st.waiting.splice(i, 1);
          this.queued--;
          this.refused.waitedTooLong++;
          this.onRefusal('waited_too_long');
          this.forget(account, st);
          reject(overloaded(`Waited ${wait} ms for a store slot: the server is busy; retry shortly`));
        }, wait),
      };
      st.waiting.push(w);
      this.queued++;
      if (!this.turn.includes(account)) this.turn.push(account);
      this.dispatch(); // a read held back only by its share is granted when the share allows
    });
  }

  /** The share of `account` brought up to now (credit refilled since it was last looked at). */
  private share(account: string, now: number): Share {
    let sh = this.shares.get(account);
    if (!sh) {
      sh = { credit: this.opts.shareBurstMs, at: now, lastStart: -Infinity };
      this.shares.set(account, sh);
    }
    sh.credit = Math.min(this.opts.shareBurstMs, sh.credit + ((now - sh.at) * this.opts.shareMsPerSecond) / 1000);
    sh.at = now;
    return sh;
  }

  /** How long `account` must wait before its share allows another read (0: now): only while it uses more than every other account reading. */
  private owes(account: string): number {
    const now = this.clock();
    const sh = this.share(account, now);
    if (sh.credit >= 0 || !this.heaviest(account, now)) return 0;
    return Math.ceil((-sh.credit * 1000) / this.opts.shareMsPerSecond);
  }

  /**
   * Whether another account is reading (now, or started a read within ACTIVE_MS) and every such
   * account has more of its share left than `account`: only the account using the most slot time
   * is held back or lowered, so a quiet account whose reads were slowed by a flood never falls
   * below the flooding one.
   */
  private heaviest(account: string, now: number): boolean {
    const own = this.share(account, now).credit;
    let others = false;
    for (const [other, o] of this.shares) {
      if (other === account || !(now - o.lastStart < ACTIVE_MS || this.accounts.get(other)?.running)) continue;
      if (this.share(other, now).credit <= own) return false;
      others = true;
    }
    return others;
  }

  private state(account: string): AccountState {
    let st = this.accounts.get(account);
    if (!st) {
      st = { running: 0, waiting: [] };
      this.accounts.set(account, st);
    }
    return st;
  }

  private forget(account: string, st: AccountState): void {
    if (st.running === 0 && !st.waiting.length) this.accounts.delete(account);
    if (!st.waiting.length) {
      const i = this.turn.indexOf(account);
      if (i >= 0) this.turn.splice(i, 1);
    }
  }

  /** 1 plus the accounts reading now that have fewer reads running or waiting than `st`. */
  private priorityOf(st: AccountState): number {
    const own = st.running + st.waiting.length;
    let fewer = 0;
    for (const other of this.accounts.values()) if (other !== st && other.running + other.waiting.length < own) fewer++;
    return 1 + Math.min(99, fewer);
  }

  private grant(st: AccountState, account: string): Slot {
    const started = this.clock();
    // An account that has used much of its share while others read runs at a lower priority than theirs.
    const priority = Math.max(
      this.priorityOf(st),
      this.share(account, started).credit < this.opts.shareBurstMs / 2 && this.heaviest(account, started) ? 2 : 1,
    );
    st.running++;
    this.running++;
    this.share(account, started).lastStart = started;
    this.pruneShares(started);
    let done = false;
    const release = () => {
      if (done) return;
      done = true;
      const now = this.clock();
      const sh = this.share(account, now);
      sh.credit = Math.max(-this.opts.shareBurstMs, sh.credit - (now - started));
      st.running--;
      this.running--;
      this.forget(account, st);
      this.dispatch();
    };
    return { release, priority };
  }

  /** Forgets the shares of accounts idle long enough to have their whole credit back. */
  private pruneShares(now: number): void {
    if (this.shares.size < 1_000) return;
    const idle = ACTIVE_MS + (this.opts.shareBurstMs * 2 * 1000) / this.opts.shareMsPerSecond;
    for (const [account, sh] of this.shares) if (now - sh.lastStart > idle && !this.accounts.has(account)) this.shares.delete(account);
  }

  /** Hands free slots to waiting accounts in turn, each up to its share. */
  private dispatch(): void {
    let scanned = 0;
    let soonest = Infinity;
    while (this.running < this.opts.slots && this.turn.length && scanned < this.turn.length) {
      const account = this.turn.shift()!;
      const st = this.accounts.get(account);
      if (!st || !st.waiting.length) {
        continue;
      }
      if (st.running >= this.opts.perAccount) {
        this.turn.push(account);
        scanned++;
        continue;
      }
      const owes = this.owes(account);
      if (owes > 0) {
        soonest = Math.min(soonest, owes);
        this.turn.push(account);
        scanned++;
        continue;
      }
      const w = st.waiting.shift()!;
      this.queued--;
      clearTimeout(w.timer);
      if (st.waiting.length) this.turn.push(account);
      scanned = 0;
      w.grant();
    }
    // Nothing else frees a slot for an account held back by its share: look again when it is due.
    if (soonest < Infinity && !this.wake) {
      this.wake = setTimeout(() => {
        this.wake = undefined;
        this.dispatch();
      }, soonest);
      this.wake.unref?.();
    }
  }
}

/** The error a store failure is to the caller: its bound (QUERY_TOO_LARGE), the store away (STORE_UNAVAILABLE), or the failure itself. */
export function readFailure(err: unknown): unknown {
  if (err instanceof ApiError) return err;
  const f = storeFailure(err);
  if (!f) return err;
  if (f.kind === 'unavailable')
    return new ApiError('STORE_UNAVAILABLE', 'The data store is not answering just now; retry shortly', { retryAfterSeconds: 5 });
  return tooLarge(f.bound);
}

const NARROW = 'narrow the read: a shorter startTime..endTime, fewer ids per list parameter, a smaller limit, or a larger interval';
export function tooLarge(bound: 'time' | 'memory' | 'rows' | 'bytes' | 'result' | 'deadline' | 'answer'): ApiError {
  const what = {
    time: 'runs longer than its store time bound',
    memory: 'needs more memory than its bound',
    rows: 'reads more rows than its bound',
    bytes: 'reads more bytes than its bound',
    result: 'returns more rows than its bound',
    deadline: 'cannot finish before the request deadline',
    answer: `makes an answer larger than ${MAX_ANSWER_BYTES / 2 ** 20} MiB`,
  }[bound];
  return new ApiError('QUERY_TOO_LARGE', `This read ${what}: ${NARROW}`, { bound });
}

/**
 * The store a read sees: each query runs under the read's bounds capped by what is left of the
 * request's deadline, and fails as an ApiError when it hits a bound or the store is away.
 */
export function boundedStore(store: Store, cost: ReadCost, deadline: number, slot: { priority: number } = { priority: 1 }): Store {
  const query = async <T>(sql: string, params?: Params, opts?: QueryOptions): Promise<T[]> => {
    try {
      const left = deadline - Date.now();
      if (left <= 0) throw tooLarge('deadline');
      const timeMs = Math.min(cost.timeMs, left);
      const settings = {
        max_execution_time: Math.max(0.001, timeMs / 1000),
        timeout_overflow_mode: 'throw',
        max_memory_usage: cost.memoryBytes,
        max_rows_to_read: cost.rowsRead,
        max_bytes_to_read: cost.bytesRead,
        read_overflow_mode: 'throw',
        max_result_rows: MAX_RESULT_ROWS,
        max_result_bytes: MAX_RESULT_BYTES,
        result_overflow_mode: 'throw',
        // Below the projector's priority 1 (apps/embedded.ts): a read load does not hold new data back.
        priority: slot.priority + 1,
        // A busy account's queries also yield the machine's cores: one thread each, at the highest nice.
        ...(slot.priority > 1 ? { os_thread_priority: 19, max_threads: 1 } : {}),
        ...opts?.settings,
      };
      return await store.query<T>(sql, params, { settings, timeoutMs: timeMs + 2_000 });
    } catch (err) {
      // A timeout that is the deadline's, not the read's own bound, says so.
      const failure = readFailure(err);
      if (
        failure instanceof ApiError &&
        failure.code === 'QUERY_TOO_LARGE' &&
        (failure.details as any)?.bound === 'time' &&
        deadline - Date.now() < 50
      )
        throw tooLarge('deadline');
      throw failure;
    }
  };
  const refused = () => Promise.reject(new Error('reads do not write'));
  return wrapStore(store, { query, exec: refused, insert: refused, insertCompact: refused, close: async () => {} }, store);
}

/**
 * Runs a read that goes to the store: it takes an admission slot for the caller's account first
 * (before any of the read's own work), holds it until the read is over, and must finish within
 * the request's deadline (past it, QUERY_TOO_LARGE; the queries it started stop at their own
 * bounds). What it throws is the caller's error: a store failure becomes QUERY_TOO_LARGE or
 * STORE_UNAVAILABLE.
 */
export async function admitted<T>(
  admission: Admission,
  account: string,
  deadline: number,
  run: () => Promise<T>,
  slot?: { priority: number },
): Promise<T> {
  const { release, priority } = await admission.acquire(account, deadline);
  if (slot) slot.priority = priority;
  try {
    return await withinDeadline(deadline, run);
  } catch (err) {
    throw readFailure(err);
  } finally {
    release();
  }
}

/**
 * A read that takes no admission slot, within its deadline, failing as an admitted read does: for
 * reads that a gate of their own bounds instead (woken long-polls, apps/api/server.ts), which would
 * otherwise wait behind each other's share of the slots.
 */
export async function unadmitted<T>(deadline: number, run: () => Promise<T>): Promise<T> {
  try {
    return await withinDeadline(deadline, run);
  } catch (err) {
    throw readFailure(err);
  }
}

/** Runs a read within the request's deadline: past it, QUERY_TOO_LARGE (the queries it started stop at their own bounds). */
async function withinDeadline<T>(deadline: number, run: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const left = deadline - Date.now();
  if (left <= 0) throw tooLarge('deadline');
  try {
    return await Promise.race([
      run(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(tooLarge('deadline')), left + 250);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
