import type { TSchema } from 'typebox';
import { accounts } from './accounts.ts';
import { aggregateSummaries } from './aggregate-summaries.ts';
import { apiKeys } from './api-keys.ts';
import { assets } from './assets.ts';
import { channelSummaries } from './channel-summaries.ts';
import { messages } from './messages.ts';
import { prices } from './prices.ts';
import { sourceIdentities } from './source-identities.ts';
import { tradeEvents } from './trade-events.ts';
import { traderTags } from './trader-tags.ts';
import { traders } from './traders.ts';

export interface Topic<T = any> {
  name: string;
  schema: TSchema;
  key: (r: T) => string;
}

/** Every ingest topic (DESIGN section 4). The order is the order the embedded projector applies them in. */
export const TOPICS = [
  accounts,
  apiKeys,
  sourceIdentities,
  traders,
  traderTags,
  assets,
  prices,
  messages,
  tradeEvents,
  channelSummaries,
  aggregateSummaries,
] as const satisfies readonly Topic[];
export type TopicName = (typeof TOPICS)[number]['name'];
export const TOPIC_NAMES = TOPICS.map((t) => t.name) as TopicName[];
export const topicByName = new Map<string, Topic>(TOPICS.map((t) => [t.name, t as Topic]));

export * from './accounts.ts';
export * from './aggregate-summaries.ts';
export * from './api-keys.ts';
export * from './assets.ts';
export * from './channel-summaries.ts';
export * from './common.ts';
export * from './messages.ts';
export * from './prices.ts';
export * from './source-identities.ts';
export * from './trade-events.ts';
export * from './trader-tags.ts';
export * from './traders.ts';
