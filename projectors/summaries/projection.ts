import { parseDateTime } from '../../schemas/formats.ts';
import type { AggregateSummaryRecord, ChannelSummaryRecord } from '../../schemas/topics/index.ts';
import { applyVersioned, currentViewDdl, type Statement, sameFields, type VersionedStatements } from '../../storage/statements.ts';
import type { Table } from '../../storage/table.ts';
import {
  AGGREGATE_SUMMARIES_CURRENT_TABLE,
  AGGREGATE_SUMMARIES_DDL,
  AGGREGATE_SUMMARIES_TABLE,
  CHANNEL_SUMMARIES_CURRENT_TABLE,
  CHANNEL_SUMMARIES_DDL,
  CHANNEL_SUMMARIES_TABLE,
} from '../../storage/tables/summaries.ts';
import type { Projection } from '../projection.ts';

export interface SummaryStatement extends Statement {
  id: string;
  start: number;
  end: number;
  generatedAt: number;
  status: string;
  body: string;
  version: number;
  deleted: number;
  traderId: number;
}

const head = (s: { windowStart: string; windowEnd: string; generatedAt: string }) => {
  return { start: parseDateTime(s.windowStart)!, end: parseDateTime(s.windowEnd)!, generatedAt: parseDateTime(s.generatedAt)! };
};
const SELECT = (
  table: Table,
  extra: string,
) => `SELECT id, toUnixTimestamp64Milli(windowStart) AS start, toUnixTimestamp64Milli(windowEnd) AS end,
  toUnixTimestamp64Milli(generatedAt) AS generatedAt, status, body, version, deleted, live, tomb, seq${extra} FROM ${table}`;
const same = sameFields<SummaryStatement>([
  'id',
  'start',
  'end',
  'generatedAt',
  'status',
  'body',
  'version',
  'deleted',
  'live',
  'traderId',
]);
const sameKey = sameFields<SummaryStatement>(['start', 'id', 'end', 'status', 'traderId']);
const HEAD_COLUMNS = ['id', 'windowStart', 'windowEnd', 'generatedAt', 'status', 'body', 'version', 'deleted', 'live', 'tomb', 'seq'];
/** A statement as the store gets it (date-times in canonical ISO), by column. */
const stored = (s: Omit<SummaryStatement, 'seq' | 'tomb'> & Partial<SummaryStatement>) => ({
  id: s.id,
  windowStart: new Date(s.start).toISOString(),
  windowEnd: new Date(s.end).toISOString(),
  generatedAt: new Date(s.generatedAt).toISOString(),
  status: s.status,
  body: s.body,
  version: s.version,
  deleted: s.deleted,
  live: s.live,
  tomb: s.tomb ?? 0,
  seq: s.seq ?? 0,
  traderId: s.traderId,
});
const headValues = (s: SummaryStatement): unknown[] => {
  const r = stored(s);
  return HEAD_COLUMNS.map((c) => r[c as keyof typeof r]);
};

const CHANNEL: VersionedStatements<ChannelSummaryRecord, SummaryStatement> = {
  table: CHANNEL_SUMMARIES_TABLE,
  columns: [...HEAD_COLUMNS, 'traderId'],
  select: SELECT(CHANNEL_SUMMARIES_TABLE, ', traderId'),
  idOf: (s) => s.id,
  same,
  sameKey,
  values: (s) => [...headValues(s), s.traderId],
  state: (r) => {
    const { id, traderId, windowStart, windowEnd, generatedAt, status, version, deleted, ...body } = r;
    return { id, traderId, ...head(r), status, body: JSON.stringify(body), version, deleted: deleted ? 1 : 0, live: deleted ? 0 : 1 };
  },
};

const AGGREGATE: VersionedStatements<AggregateSummaryRecord, SummaryStatement> = {
  table: AGGREGATE_SUMMARIES_TABLE,
  columns: HEAD_COLUMNS,
  select: SELECT(AGGREGATE_SUMMARIES_TABLE, ', 0 AS traderId'),
  idOf: (s) => s.id,
  same,
  sameKey,
  values: headValues,
  state: (r) => {
    const { id, windowStart, windowEnd, generatedAt, status, version, deleted, ...body } = r;
    return { id, traderId: 0, ...head(r), status, body: JSON.stringify(body), version, deleted: deleted ? 1 : 0, live: deleted ? 0 : 1 };
  },
};

export const channelSummariesProjection: Projection = {
  name: 'channel-summaries',
  canHandle: ['channel-summaries'],
  ddl: [CHANNEL_SUMMARIES_DDL, currentViewDdl(CHANNEL_SUMMARIES_CURRENT_TABLE, CHANNEL_SUMMARIES_TABLE)],
  // What each record states, as stored (no `table`: the rows are written by `afterStore`).
  handle: (batch) => batch.map((r) => stored(CHANNEL.state(r.value))),
  afterStore: async ({ store }, batch, version) => {
    await applyVersioned(store, CHANNEL, batch, version);
  },
};

export const aggregateSummariesProjection: Projection = {
  name: 'aggregate-summaries',
  canHandle: ['aggregate-summaries'],
  ddl: [AGGREGATE_SUMMARIES_DDL, currentViewDdl(AGGREGATE_SUMMARIES_CURRENT_TABLE, AGGREGATE_SUMMARIES_TABLE)],
  handle: (batch) => batch.map((r) => stored(AGGREGATE.state(r.value))),
  afterStore: async ({ store }, batch, version) => {
    await applyVersioned(store, AGGREGATE, batch, version);
  },
};
