// The list reads as the oracle answers them, by endpoint and query parameters (the parameters as a
// caller sends them): one dispatch for every test that walks the list reads against the oracle.

import * as O from './oracle.ts';
import type { Params } from './walk.ts';

export type Ep = 'events' | 'positions' | 'open' | 'messages' | 'traders' | 'assets';
export const PATH: Record<Ep, string> = {
  events: '/v2/events',
  positions: '/v2/positions',
  open: '/v2/positions/open',
  messages: '/v2/messages',
  traders: '/v2/traders',
  assets: '/v2/assets',
};

/** A comma-separated parameter as the oracle takes it (numbers where the member is all digits). */
export const list = (v: string | number | undefined): any[] | undefined =>
  v === undefined || v === ''
    ? undefined
    : String(v)
        .split(',')
        .map((x) => (/^\d+$/.test(x) ? Number(x) : x));

/** Every row the read at `ep` with parameters `q` answers at `serverTime`, in the oracle's order. */
export function expectedFor(ep: Ep, input: readonly O.TopicRec[] | O.World, q: Params, serverTime: number): any[] {
  switch (ep) {
    case 'events':
      return O.events(input, {
        traderIds: list(q.traderIds),
        assetIds: list(q.assetIds),
        directions: list(q.directions),
        types: list(q.types),
        window: O.resolveWindow(q as any, serverTime),
      });
    case 'positions':
      return O.positions(
        input,
        {
          traderIds: list(q.traderIds),
          assetIds: list(q.assetIds),
          directions: list(q.directions),
          positionIds: list(q.positionIds),
          window: O.resolveWindow(q as any, serverTime, q.positionIds !== undefined),
        },
        serverTime,
      );
    case 'open':
      return O.openPositions(
        input,
        { traderIds: list(q.traderIds), assetIds: list(q.assetIds), directions: list(q.directions) },
        serverTime,
      );
    case 'messages':
      return O.messages(input, {
        traderIds: list(q.traderIds),
        ids: list(q.ids)?.map(String),
        sourcePlatforms: list(q.sourcePlatforms),
        window: O.resolveWindow(q as any, serverTime, q.ids !== undefined),
      });
    case 'traders':
      return O.traders(input, { search: q.search as string | undefined, sourcePlatforms: list(q.sourcePlatforms) });
    case 'assets':
      return O.assets(input, {
        search: q.search as string | undefined,
        assetClass: list(q.assetClass),
        assetIds: list(q.assetIds),
        traderIds: list(q.traderIds),
      });
  }
}
