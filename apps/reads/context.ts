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
 * A value kept per store for one data version: made anew when the version moves (a projector
 * commit may change anything it was made from), never kept for a context without a version. A
 * value that is a promise and rejects is dropped, so the next read makes it again.
 */
export function perDataVersion<T>(make: (store: Store) => T): (ctx: ReadContext) => Promise<Awaited<T>> {
  const memo = new WeakMap<Store, { version: number; value: T }>();
  return async (ctx): Promise<Awaited<T>> => {
    const version = ctx.dataVersion ? await ctx.dataVersion() : undefined;
    // Loaded once for every caller, on the store itself: not one caller's cost nor bounded by its deadline.
    const store = baseStore(ctx.store);
    if (version === undefined) return make(store) as Awaited<T>;
    const had = memo.get(store);
    if (had && had.version === version) return had.value as Awaited<T>;
    const value = make(store);
    memo.set(store, { version, value });
    if (value instanceof Promise)
      value.catch(() => {
        if (memo.get(store)?.value === value) memo.delete(store);
      });
    return value as Awaited<T>;
  };
}

/** A stored 0/1 flag as the contract's boolean (null stays null). */
export const flag = (v: number | null): boolean | null => (v == null ? null : v === 1);
