import { baseStore, type Store } from '../../storage/port.ts';
import type { CursorCodec } from './cursor.ts';
import type { Principal } from './principal.ts';

export interface ReadContext {
  store: Store;
  principal: Principal;
  /** Server time of this request: relative bounds and statuses resolve against it. */
  now: Date;
  /** Signs and checks keyset cursors. */
  cursors: CursorCodec;
  /** The data version (count of projector commits): what is loaded per version is kept for it (facts.ts). */
  dataVersion?: () => number | Promise<number>;
}

/**
 * Visibility as SQL (DESIGN 7): rows outside the policy are omitted inside the query. The
 * expressions passed in are column names of the read's own SQL (constants); the clause is the
 * one of the policy's mode (a policy of `all` needs none, so the query carries no condition and
 * no parameter for it), and the policy's platforms or trader ids travel as parameters.
 */
export function visibilitySql(
  p: Principal,
  kind: 'msg' | 'sig',
  traderIdExpr: string,
  platformExpr: string,
): { sql: string; params: Record<string, unknown> } {
  const policy = kind === 'msg' ? p.messageVisibility : p.signalVisibility;
  switch (policy.mode) {
    case 'all':
      return { sql: '1', params: {} };
    case 'platforms':
      return { sql: `has({${kind}Platforms:Array(String)}, ${platformExpr})`, params: { [`${kind}Platforms`]: policy.platforms ?? [] } };
    case 'traders':
      return { sql: `has({${kind}TraderIds:Array(UInt64)}, ${traderIdExpr})`, params: { [`${kind}TraderIds`]: policy.traderIds ?? [] } };
    default:
      return { sql: '0', params: {} };
  }
}

/**
 * What the reads keep per store for one data version (the facts, quotes, marks, spans, tags...),
 * in one place with one lifecycle: every memo of a store is dropped at once when its version
 * moves (a projector commit may change anything they were made from).
 */
const memos = new WeakMap<Store, { version: number; values: Map<object, unknown> }>();

/**
 * A value kept per store for one data version: made anew when the version moves, never kept for a
 * context without a version, nor for a read of an older version than the one held (made for it
 * alone). A value that is a promise and rejects is dropped, so the next read makes it again.
 */
export function perDataVersion<T>(make: (store: Store) => T): (ctx: ReadContext) => Promise<Awaited<T>> {
  const id = {};
  return async (ctx): Promise<Awaited<T>> => {
    const version = ctx.dataVersion ? await ctx.dataVersion() : undefined;
    // Loaded once for every caller, on the store itself: not one caller's cost nor bounded by its deadline.
    const store = baseStore(ctx.store);
    // No version, or one not known just now (NaN: Redis away in distributed mode): nothing is kept.
    if (version === undefined || !Number.isFinite(version)) return make(store) as Awaited<T>;
    let held = memos.get(store);
    if (held && version < held.version) return make(store) as Awaited<T>;
    if (!held || version > held.version) memos.set(store, (held = { version, values: new Map() }));
    if (held.values.has(id)) return held.values.get(id) as Awaited<T>;
    const value = make(store);
    held.values.set(id, value);
    const values = held.values;
    if (value instanceof Promise)
      value.catch(() => {
        if (values.get(id) === value) values.delete(id);
      });
    return value as Awaited<T>;
  };
}

/** A stored 0/1 flag as the contract's boolean (null stays null). */
export const flag = (v: number | null): boolean | null => (v == null ? null : v === 1);
