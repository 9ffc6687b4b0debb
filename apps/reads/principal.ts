import type { Scope, VisibilityPolicy } from '../../schemas/topics/index.ts';

/** Who is reading, after authentication: scopes and the account's access policy. */
export interface Principal {
  accountId: string;
  keyId: string;
  scopes: ReadonlySet<Scope>;
  messageVisibility: VisibilityPolicy;
  signalVisibility: VisibilityPolicy;
  historyWindowDays: number | null;
}
