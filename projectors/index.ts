import { TableGraph } from '../storage/changes.ts';
import { accountsProjection, apiKeysProjection } from './access/projection.ts';
import { assetsProjection } from './assets/projection.ts';
import { feedProjection } from './feed/projection.ts';
import { messagesProjection } from './messages/projection.ts';
import { performanceProjection } from './performance/projection.ts';
import { pricesProjection } from './prices/projection.ts';
import type { Projection } from './projection.ts';
import { aggregateSummariesProjection, channelSummariesProjection } from './summaries/projection.ts';
import { sourceIdentitiesProjection, traderDirectoryProjection, tradersProjection, traderTagsProjection } from './traders/projection.ts';
import { tradingProjection } from './trading/projection.ts';

export const PROJECTIONS: readonly Projection[] = [
  accountsProjection,
  apiKeysProjection,
  tradersProjection,
  sourceIdentitiesProjection,
  traderDirectoryProjection,
  traderTagsProjection,
  assetsProjection,
  pricesProjection,
  performanceProjection,
  messagesProjection,
  tradingProjection,
  channelSummariesProjection,
  aggregateSummariesProjection,
  // After the tables it reads (messages, traders, assets, source identities) for each topic.
  feedProjection,
];

/** The read models' tables and views, from their DDL: what a write also changes, what a read of a view depends on (issue 26). */
export const READ_MODEL_GRAPH = new TableGraph(PROJECTIONS.flatMap((p) => p.ddl));
