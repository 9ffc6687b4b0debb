import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { ClockSequencer } from './port.ts';

/**
 * Where the members of a consumer group take turns to apply batches to the store (DESIGN 5).
 * The projections keep state of the store in process (id bounds, sequence counters, the feed's
 * watermark) and fold read-modify-write: one writer at a time. Members of a group fetch and
 * validate their partitions' batches in parallel, and apply them one at a time group-wide, each
 * under a number above every number before it (LogBatch.seq). So the feed watermark, the last
 * feed sequence written, never passes a sequence still in flight: none is, when it is written.
 */
export interface Turn {
  /** The batch's number: above every number given to a batch before, by any member. */
  seq: bigint;
  /** Another member applied batches since this member's last turn: in-process state of the store must be read again. */
  otherWrote: boolean;
}

export interface ApplyGate {
  run<T>(apply: (turn: Turn) => Promise<T>): Promise<T>;
}

/** One process: turns in call order, numbers from the clock. */
export class LocalGate implements ApplyGate {
  private chain: Promise<unknown> = Promise.resolve();
  private readonly sequencer = new ClockSequencer();
  run<T>(apply: (turn: Turn) => Promise<T>): Promise<T> {
    const turn = this.chain.then(async () => apply({ seq: await this.sequencer.next(), otherWrote: false }));
    this.chain = turn.catch(() => undefined);
    return turn;
  }
}

/**
 * `SET key token NX PX ttl` to take the turn; the number: INCR above the clock in microseconds
 * (so a Redis that lost its data still counts on above what was given); the member that took the
 * last turn, swapped for this one.
 */
const TAKE = `
local floor = tonumber(ARGV[2])
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if cur < floor then redis.call('SET', KEYS[2], ARGV[2]) end
local seq = redis.call('INCR', KEYS[2])
local last = redis.call('GETSET', KEYS[3], ARGV[1])
return {seq, last or ''}`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;

/**
 * Several projector processes (distributed mode): the turn is a Redis lock held for `ttlMs` and
 * renewed every third of it while the batch is applied, so a member that dies frees the turn
 * within `ttlMs`. A member that cannot renew (Redis gone, or paused past the ttl) stops the
 * batch's commit: `apply` rejects, the batch is applied again later, which the idempotent sink
 * takes without change.
 */
export class RedisGate implements ApplyGate {
  private readonly local = new LocalGate();
  private readonly member = randomUUID();
  private readonly keys: { lock: string; seq: string; last: string; wanted: string };

  constructor(
    private readonly redis: Redis,
    group: string,
    private readonly opts: { ttlMs?: number; clock?: () => number; prefix?: string } = {},
  ) {
    const p = `${opts.prefix ?? 'signalbase'}:projector:${group}`;
    this.keys = { lock: `${p}:turn`, seq: `${p}:seq`, last: `${p}:last-writer`, wanted: `${p}:wanted` };
  }

  run<T>(apply: (turn: Turn) => Promise<T>): Promise<T> {
    // One turn at a time in this process too; the lock is taken inside it.
    return this.local.run(() => this.turn(apply));
  }

  private async turn<T>(apply: (turn: Turn) => Promise<T>): Promise<T> {
    const ttl = this.opts.ttlMs ?? 30_000;
    const token = randomUUID();
    // Fair enough turns: a member that another is waiting for steps back a moment before it takes the next one.
    const wanted = await this.redis.get(this.keys.wanted);
    if (wanted && wanted !== this.member) await new Promise((r) => setTimeout(r, 150));
    for (let wait = 10; ; wait = Math.min(wait * 2, 100)) {
      if ((await this.redis.set(this.keys.lock, token, 'PX', ttl, 'NX')) === 'OK') break;
      await this.redis.set(this.keys.wanted, this.member, 'PX', 1000);
      await new Promise((r) => setTimeout(r, wait * (0.5 + Math.random())));
    }
    await this.redis.eval(RELEASE, 1, this.keys.wanted, this.member);
    let lost = false;
    const renew = setInterval(() => {
      this.redis.eval(RENEW, 1, this.keys.lock, token, String(ttl)).then(
        (ok) => {
          if (ok !== 1) lost = true;
        },
        () => {
          lost = true;
        },
      );
    }, ttl / 3);
    try {
      const floor = BigInt(Math.floor((this.opts.clock ?? Date.now)())) * 1000n;
      // An integer reply (exact: numbers stay below 2^53 for centuries of microseconds).
      const [seq, last] = (await this.redis.eval(
        TAKE,
        3,
        this.keys.lock,
        this.keys.seq,
        this.keys.last,
        this.member,
        floor.toString(),
      )) as [number, string];
      // No last writer known is not "nobody wrote": Redis may have restarted without its data after another member's turns.
      const result = await apply({ seq: BigInt(seq), otherWrote: last !== this.member });
      if (lost)
        throw new Error(
          'the apply turn was lost while the batch was applied (Redis unreachable or the member paused); the batch is applied again',
        );
      return result;
    } finally {
      clearInterval(renew);
      await this.redis.eval(RELEASE, 1, this.keys.lock, token).catch(() => undefined);
    }
  }
}
