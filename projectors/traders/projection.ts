import type { SourceIdentityRecord, TraderRecord, TraderTagsRecord } from '../../schemas/topics/index.ts';
import type { Store } from '../../storage/port.ts';
import { param, sql } from '../../storage/sql.ts';
import { batchSeq, newestById, type Statement, sameFields, statementRows } from '../../storage/statements.ts';
import {
  SOURCE_IDENTITIES_DDL,
  SOURCE_IDENTITIES_TABLE,
  sourceKey,
  TRADER_DIRECTORY_DDL,
  TRADER_DIRECTORY_TABLE,
  TRADER_SOURCE_KEY_SQL,
  TRADER_TAGS_DDL,
  TRADER_TAGS_TABLE,
  TRADERS_DDL,
  TRADERS_TABLE,
} from '../../storage/tables/traders.ts';
import { del, type Projection } from '../projection.ts';
import { httpUrl } from '../sanitize.ts';

export const tradersProjection: Projection = {
  name: 'traders',
  canHandle: ['traders'],
  table: TRADERS_TABLE,
  // sourcePlatform/sourceIdentityId are '' for a trader with no assigned source.
  ddl: [TRADERS_DDL],
  handle: (batch) =>
    batch.map(({ value: t }: { value: TraderRecord }) => ({
      id: t.id,
      name: t.name,
      slug: t.slug,
      avatarUrl: httpUrl(t.avatarUrl),
      sourcePlatform: t.source?.platform ?? '',
      sourceIdentityId: t.source?.sourceIdentityId ?? '',
      version: t.version,
      deleted: del(t),
    })),
};

export const sourceIdentitiesProjection: Projection = {
  name: 'source-identities',
  canHandle: ['source-identities'],
  table: SOURCE_IDENTITIES_TABLE,
  ddl: [SOURCE_IDENTITIES_DDL],
  handle: (batch) =>
    batch.map(({ value: s }: { value: SourceIdentityRecord }) => ({
      platform: s.platform,
      sourceIdentityId: s.sourceIdentityId,
      displayName: s.displayName,
      handle: s.handle,
      avatarUrl: httpUrl(s.avatarUrl),
      profileUrl: httpUrl(s.profileUrl),
      audienceCount: s.audienceCount,
      version: s.version,
      deleted: del(s),
    })),
};

export const traderTagsProjection: Projection = {
  name: 'trader-tags',
  canHandle: ['trader-tags'],
  table: TRADER_TAGS_TABLE,
  ddl: [TRADER_TAGS_DDL],
  handle: (batch) =>
    batch.map(({ value: t }: { value: TraderTagsRecord }) => ({
      traderId: t.traderId,
      categories: t.tags.map((x) => x.category.toLowerCase()),
      names: t.tags.map((x) => x.name.toLowerCase()),
      version: t.version,
      deleted: del(t),
    })),
};

interface DirectoryStatement extends Statement {
  id: number;
  name: string;
  slug: string | null;
  avatarUrl: string | null;
  sourcePlatform: string;
  sourceIdentityId: string;
  hasSource: number;
  displayName: string | null;
  handle: string | null;
  sAvatarUrl: string | null;
  profileUrl: string | null;
  audienceCount: number | null;
  deleted: number;
}
const DIRECTORY_FIELDS = [
  'id',
  'name',
  'slug',
  'avatarUrl',
  'sourcePlatform',
  'sourceIdentityId',
  'hasSource',
  'displayName',
  'handle',
  'sAvatarUrl',
  'profileUrl',
  'audienceCount',
  'deleted',
] as const;
const DIRECTORY_COLUMNS = [...DIRECTORY_FIELDS, 'live', 'tomb', 'seq'] as const;
const sameDirectory = sameFields<DirectoryStatement>([...DIRECTORY_FIELDS, 'live']);
const sameDirectoryKey = sameFields<DirectoryStatement>(['name', 'id', 'sourcePlatform']);

async function restateDirectory(store: Store, ids: number[], version: bigint): Promise<void> {
  if (!ids.length) return;
  const [states, prevRows] = await Promise.all([
    store.query<Omit<DirectoryStatement, 'live' | 'tomb' | 'seq'>>(
      `
      SELECT t.id AS id, t.name AS name, t.slug AS slug, t.avatarUrl AS avatarUrl, t.sourcePlatform AS sourcePlatform,
             t.sourceIdentityId AS sourceIdentityId, s.sourceIdentityId IS NOT NULL AS hasSource,
             s.displayName AS displayName, s.handle AS handle, s.avatarUrl AS sAvatarUrl, s.profileUrl AS profileUrl,
             s.audienceCount AS audienceCount, t.deleted AS deleted
      FROM (SELECT * FROM ${TRADERS_TABLE} FINAL WHERE id IN {ids:Array(UInt64)}) AS t
      LEFT JOIN (SELECT * FROM ${SOURCE_IDENTITIES_TABLE} FINAL WHERE deleted = 0) AS s
        ON s.platform = t.sourcePlatform AND s.sourceIdentityId = t.sourceIdentityId
      SETTINGS join_use_nulls = 1`,
      { ids },
    ),
    store.query<DirectoryStatement>(
      `SELECT ${DIRECTORY_COLUMNS.join(', ')} FROM ${TRADER_DIRECTORY_TABLE} WHERE id IN {ids:Array(UInt64)}`,
      {
        ids,
      },
    ),
  ]);
  const prev = newestById(prevRows, (r) => r.id);
  const base = batchSeq(version);
  const out: unknown[][] = [];
  for (const s of states) {
    const next = { ...s, hasSource: Number(s.hasSource), live: s.deleted ? 0 : 1 };
    for (const row of statementRows(prev.get(s.id), next, base, sameDirectory, sameDirectoryKey))
      out.push(DIRECTORY_COLUMNS.map((c) => row[c]));
  }
  await store.insertCompact(TRADER_DIRECTORY_TABLE.name, DIRECTORY_COLUMNS, out);
}

export const traderDirectoryProjection: Projection = {
  name: 'trader-directory',
  canHandle: ['traders', 'source-identities'],
  ddl: [TRADER_DIRECTORY_DDL],
  async afterStore({ store }, batch, version) {
    if (batch[0]?.topic === 'traders')
      return restateDirectory(store, [...new Set(batch.map((r) => (r.value as TraderRecord).id))], version);
    // An identity changed: restate the traders assigned to it.
    const keys = [
      ...new Set(
        batch.map((r) => {
          const s = r.value as SourceIdentityRecord;
          return sourceKey(s.platform, s.sourceIdentityId);
        }),
      ),
    ];
    const assigned = sql`SELECT id FROM ${TRADERS_TABLE} FINAL WHERE ${TRADER_SOURCE_KEY_SQL} IN ${param('keys', 'Array(String)', keys)}`;
    const ids = (await store.query<{ id: number }>(assigned.text, assigned.params)).map((r) => Number(r.id));
    return restateDirectory(store, ids, version);
  },
};
