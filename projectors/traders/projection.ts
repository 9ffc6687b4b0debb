import type { SourceIdentityRecord, TraderRecord, TraderTagsRecord } from '../../schemas/topics/index.ts';
import { del, type Projection } from '../projection.ts';
import { httpUrl } from '../sanitize.ts';

export const tradersProjection: Projection = {
  name: 'traders',
  canHandle: ['traders'],
  table: 'traders',
  // sourcePlatform/sourceIdentityId are '' for a trader with no assigned source.
  ddl: [`CREATE TABLE IF NOT EXISTS $db.traders (
    id UInt64, name String, slug Nullable(String), avatarUrl Nullable(String),
    sourcePlatform LowCardinality(String), sourceIdentityId String, version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY id`],
  handle: (batch) => batch.map(({ value: t }: { value: TraderRecord }) => ({
    id: t.id, name: t.name, slug: t.slug, avatarUrl: httpUrl(t.avatarUrl),
    sourcePlatform: t.source?.platform ?? '', sourceIdentityId: t.source?.sourceIdentityId ?? '',
    version: t.version, deleted: del(t),
  })),
};

export const sourceIdentitiesProjection: Projection = {
  name: 'source-identities',
  canHandle: ['source-identities'],
  table: 'source_identities',
  ddl: [`CREATE TABLE IF NOT EXISTS $db.source_identities (
    platform LowCardinality(String), sourceIdentityId String, displayName Nullable(String), handle Nullable(String),
    avatarUrl Nullable(String), profileUrl Nullable(String), audienceCount Nullable(UInt64), version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY (platform, sourceIdentityId)`],
  handle: (batch) => batch.map(({ value: s }: { value: SourceIdentityRecord }) => ({
    platform: s.platform, sourceIdentityId: s.sourceIdentityId, displayName: s.displayName, handle: s.handle,
    avatarUrl: httpUrl(s.avatarUrl), profileUrl: httpUrl(s.profileUrl), audienceCount: s.audienceCount, version: s.version, deleted: del(s),
  })),
};

export const traderTagsProjection: Projection = {
  name: 'trader-tags',
  canHandle: ['trader-tags'],
  table: 'trader_tags',
  ddl: [`CREATE TABLE IF NOT EXISTS $db.trader_tags (
    traderId UInt64, categories Array(String), names Array(String), version UInt64, deleted UInt8
  ) ENGINE = ReplacingMergeTree(version) ORDER BY traderId`],
  handle: (batch) => batch.map(({ value: t }: { value: TraderTagsRecord }) => ({
    traderId: t.traderId, categories: t.tags.map((x) => x.category.toLowerCase()), names: t.tags.map((x) => x.name.toLowerCase()),
    version: t.version, deleted: del(t),
  })),
};
