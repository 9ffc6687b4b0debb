import type { AggregateSummaryRecord, ChannelSummaryRecord } from '../../schemas/topics/index.ts';
import { del, iso, type Projection } from '../projection.ts';

/** Summaries keep their filter columns plus the rest of the record as JSON (`body`). */
export const channelSummariesProjection: Projection = {
  name: 'channel-summaries',
  canHandle: ['channel-summaries'],
  table: 'channel_summaries',
  ddl: [`CREATE TABLE IF NOT EXISTS $db.channel_summaries (
    id String, traderId UInt64, windowStart DateTime64(3, 'UTC'), windowEnd DateTime64(3, 'UTC'),
    generatedAt DateTime64(3, 'UTC'), status LowCardinality(String), body String, version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY id`],
  handle: (batch) => batch.map(({ value: s }: { value: ChannelSummaryRecord }) => {
    const { id, traderId, windowStart, windowEnd, generatedAt, status, version, deleted, ...body } = s;
    return { id, traderId, windowStart: iso(windowStart), windowEnd: iso(windowEnd), generatedAt: iso(generatedAt), status, body: JSON.stringify(body), version, deleted: del({ deleted }) };
  }),
};

export const aggregateSummariesProjection: Projection = {
  name: 'aggregate-summaries',
  canHandle: ['aggregate-summaries'],
  table: 'aggregate_summaries',
  ddl: [`CREATE TABLE IF NOT EXISTS $db.aggregate_summaries (
    id String, windowStart DateTime64(3, 'UTC'), windowEnd DateTime64(3, 'UTC'),
    generatedAt DateTime64(3, 'UTC'), status LowCardinality(String), body String, version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY id`],
  handle: (batch) => batch.map(({ value: s }: { value: AggregateSummaryRecord }) => {
    const { id, windowStart, windowEnd, generatedAt, status, version, deleted, ...body } = s;
    return { id, windowStart: iso(windowStart), windowEnd: iso(windowEnd), generatedAt: iso(generatedAt), status, body: JSON.stringify(body), version, deleted: del({ deleted }) };
  }),
};
