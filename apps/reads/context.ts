import type { Store } from '../../projectors/store/port.ts';
import type { Scope, VisibilityPolicy } from '../../schemas/topics/index.ts';
import type { CursorCodec } from './cursor.ts';

/** Who is reading, after authentication: scopes and the account's access policy. */
export interface Principal {
  accountId: string;
  keyId: string;
  scopes: ReadonlySet<Scope>;
  messageVisibility: VisibilityPolicy;
  signalVisibility: VisibilityPolicy;
  historyWindowDays: number | null;
}

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
 * expressions passed in are column names of the read's own SQL (constants), the policy itself
 * travels as parameters.
 */
export function visibilitySql(kind: 'msg' | 'sig', traderIdExpr: string, platformExpr: string): string {
  return `({${kind}Mode:String} = 'all'
    OR ({${kind}Mode:String} = 'platforms' AND has({${kind}Platforms:Array(String)}, ${platformExpr}))
    OR ({${kind}Mode:String} = 'traders' AND has({${kind}TraderIds:Array(UInt64)}, ${traderIdExpr})))`;
}

export function policyParams(p: Principal): Record<string, unknown> {
  return {
    msgMode: p.messageVisibility.mode, msgPlatforms: p.messageVisibility.platforms ?? [], msgTraderIds: p.messageVisibility.traderIds ?? [],
    sigMode: p.signalVisibility.mode, sigPlatforms: p.signalVisibility.platforms ?? [], sigTraderIds: p.signalVisibility.traderIds ?? [],
  };
}

/** Eligible traders: not deleted and visible under the given policy kind(s). */
export function visibleTradersSql(kinds: 'sig' | 'msg' | 'either'): string {
  const vis = kinds === 'either'
    ? `(${visibilitySql('msg', 'id', 'sourcePlatform')} OR ${visibilitySql('sig', 'id', 'sourcePlatform')})`
    : visibilitySql(kinds, 'id', 'sourcePlatform');
  return `SELECT id FROM $db.traders FINAL WHERE deleted = 0 AND ${vis}`;
}

/** Assets that may appear anywhere: not deleted and with an active market. */
export const ELIGIBLE_ASSETS_SQL = 'SELECT id FROM $db.assets FINAL WHERE deleted = 0 AND hasActiveMarket = 1';

export const iso = (ms: number | string): string => new Date(Number(ms)).toISOString();
export const b = (v: number | null): boolean | null => (v == null ? null : v === 1);
