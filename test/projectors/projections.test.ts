import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyBatch } from '../../projectors/runner.ts';
import { ProjectorSession } from '../../projectors/session.ts';
import type { ChdbStore } from '../../storage/chdb.ts';
import { table } from '../../storage/table.ts';
import { build } from '../helpers/harness.ts';
import { openSchemaStore, projectionSpec } from '../helpers/spec.ts';

let db: Awaited<ReturnType<typeof openSchemaStore>>;
let store: ChdbStore;
let spec: ReturnType<typeof projectionSpec>;
beforeAll(async () => {
  db = await openSchemaStore('proj');
  store = db.store;
  spec = projectionSpec(db.session);
});
afterAll(() => db?.close());

const finalRows = (table: string, where = '1') =>
  store.query<any>(`SELECT * EXCEPT version FROM $db.${table} FINAL WHERE ${where} ORDER BY 1`);

describe('traders projection', () => {
  it('keeps the highest version whatever the arrival order, and honours tombstones', () =>
    spec
      .given([
        build.trader(101, { name: 'New name', version: 2 }),
        build.trader(101, { name: 'Old name', version: 1 }),
        build.trader(102, { name: 'Gone' }),
        build.trader(102, { name: 'Gone', version: 2, deleted: true }),
      ])
      .when(() => finalRows('traders', 'id IN (101, 102)'))
      .then((rows) => {
        expect(rows.map((r) => [r.id, r.name, r.deleted])).toEqual([
          [101, 'New name', 0],
          [102, 'Gone', 1],
        ]);
      }));
});

describe('assets projection', () => {
  it('normalises the class, splits equities and resolves the preferred active market', () =>
    spec
      .given([
        build.asset(201, {
          assetClass: 'equities',
          category: 'Indices',
          markets: [
            { quoteSymbol: 'EUR', active: true, preferred: false },
            { quoteSymbol: 'USD', active: true, preferred: true },
          ],
        }),
        build.asset(202, { assetClass: 'equities', category: 'Technology' }),
        build.asset(203, { assetClass: 'bonds' }),
        build.asset(204, { assetClass: null, markets: [{ quoteSymbol: 'USD', active: false, preferred: true }] }),
      ])
      .when(() =>
        store.query<any>(
          'SELECT id, assetClass, resolvedAssetClass, quoteSymbol, hasActiveMarket FROM $db.assets FINAL WHERE id >= 201 AND id <= 204 ORDER BY id',
        ),
      )
      .then([
        { id: 201, assetClass: 'equities', resolvedAssetClass: 'indices', quoteSymbol: 'USD', hasActiveMarket: 1 },
        { id: 202, assetClass: 'equities', resolvedAssetClass: 'stocks', quoteSymbol: 'USD', hasActiveMarket: 1 },
        { id: 203, assetClass: 'other', resolvedAssetClass: 'other', quoteSymbol: 'USD', hasActiveMarket: 1 },
        { id: 204, assetClass: 'other', resolvedAssetClass: 'other', quoteSymbol: null, hasActiveMarket: 0 },
      ]));
});

describe('positions fold', () => {
  const positions = () =>
    store.query<any>(`SELECT id, traderId, assetId, direction, toUnixTimestamp64Milli(openAt) AS openAt, openPrice, isOpen, deleted
    FROM $db.positions_current WHERE id >= 300 AND id < 400 ORDER BY id`);
  it('folds open, increase, decrease and close per position, in any arrival order', () =>
    spec
      .given([
        build.event(3003, {
          positionId: 301,
          type: 'close',
          price: 120,
          timeOfEvent: '2026-01-03T00:00:00.000Z',
          traderId: 7,
          assetId: 8,
          direction: 'short',
        }),
        build.event(3001, {
          positionId: 301,
          type: 'open',
          price: 100,
          timeOfEvent: '2026-01-01T00:00:00.000Z',
          traderId: 7,
          assetId: 8,
          direction: 'short',
        }),
        build.event(3002, {
          positionId: 301,
          type: 'increase',
          price: 110,
          timeOfEvent: '2026-01-02T00:00:00.000Z',
          traderId: 7,
          assetId: 8,
          direction: 'short',
        }),
        build.event(3010, { positionId: 302, type: 'open', price: null, timeOfEvent: '2026-01-05T00:00:00.000Z' }),
        build.event(3011, { positionId: 302, type: 'decrease', price: 90, timeOfEvent: '2026-01-06T00:00:00.000Z' }),
      ])
      .when(positions)
      .then([
        {
          id: 301,
          traderId: 7,
          assetId: 8,
          direction: 'short',
          openAt: Date.parse('2026-01-01T00:00:00Z'),
          openPrice: 100,
          isOpen: 0,
          deleted: 0,
        },
        {
          id: 302,
          traderId: 1,
          assetId: 1,
          direction: 'long',
          openAt: Date.parse('2026-01-05T00:00:00Z'),
          openPrice: null,
          isOpen: 1,
          deleted: 0,
        },
      ]));

  // Regression: argMinIf skips NULL arguments, so a later open's price used to replace a null entry price.
  it('the earliest open gives openPrice even when that price is null', () =>
    spec
      .given([
        build.event(3040, { positionId: 305, type: 'open', price: null, timeOfEvent: '2026-02-01T00:00:00.000Z' }),
        build.event(3041, { positionId: 305, type: 'open', price: 100, timeOfEvent: '2026-02-01T01:00:00.000Z' }),
      ])
      .when(() => store.query<any>('SELECT id, openPrice FROM $db.positions_current WHERE id = 305'))
      .then([{ id: 305, openPrice: null }]));

  it('a deleted open event deletes the position; a deleted close reopens it', () =>
    spec
      .given([
        build.event(3020, { positionId: 303, type: 'open', timeOfEvent: '2026-02-01T00:00:00.000Z' }),
        build.event(3021, { positionId: 303, type: 'close', timeOfEvent: '2026-02-02T00:00:00.000Z' }),
        build.event(3021, { positionId: 303, type: 'close', timeOfEvent: '2026-02-02T00:00:00.000Z', version: 2, deleted: true }),
        build.event(3030, { positionId: 304, type: 'open', timeOfEvent: '2026-02-01T00:00:00.000Z' }),
        build.event(3030, { positionId: 304, type: 'open', timeOfEvent: '2026-02-01T00:00:00.000Z', version: 2, deleted: true }),
      ])
      .when(() => store.query<any>('SELECT id, isOpen, deleted FROM $db.positions_current WHERE id IN (303, 304) ORDER BY id'))
      .then([
        { id: 303, isOpen: 1, deleted: 0 },
        { id: 304, isOpen: 0, deleted: 1 },
      ]));
});

describe('messages projection', () => {
  it('an edit (higher version) replaces the text; a tombstone deletes', () =>
    spec
      .given([
        build.message('m-1', 's', '2026-03-01T00:00:00.000Z', { text: 'first' }),
        build.message('m-1', 's', '2026-03-01T00:00:00.000Z', { text: 'edited', isEdited: true, version: 2 }),
        build.message('m-2', 's', '2026-03-01T00:00:00.000Z'),
        build.message('m-2', 's', '2026-03-01T00:00:00.000Z', { version: 2, deleted: true }),
      ])
      .when(() => store.query<any>("SELECT id, text, isEdited, deleted FROM $db.messages_current WHERE id IN ('m-1', 'm-2') ORDER BY id"))
      .then([
        { id: 'm-1', text: 'edited', isEdited: 1, deleted: 0 },
        { id: 'm-2', text: 'message m-2', isEdited: 0, deleted: 1 },
      ]));
});

describe('issue 5: sanitized text and URLs through the message projection', () => {
  it('stores plain text and http(s) URLs only; a javascript: attachment is dropped', () =>
    spec
      .given([
        build.message('m-san', 's', '2026-03-01T00:00:00.000Z', {
          text: '<script>alert(1)</script><b>bold</b> &lt;script&gt;x&lt;/script&gt;\u0007\u202Edone e\u0301',
          url: '/relative',
          attachments: [
            { type: 'image', url: 'javascript:alert(1)' },
            { type: 'image', url: 'https://cdn.test/a.png' },
          ],
        }),
      ])
      .when(() => store.query<any>("SELECT text, url, attachmentTypes, attachmentUrls FROM $db.messages_current WHERE id = 'm-san'"))
      .then([{ text: 'bold done \u00e9', url: null, attachmentTypes: ['image'], attachmentUrls: ['https://cdn.test/a.png'] }]));
});

describe('issue 5: date-times are stored as the validated instant', () => {
  it('lower-case t/z, offsets and nanosecond fractions', () =>
    spec
      .given([
        build.event(3101, { timeOfEvent: '2026-01-02t03:04:05.123456789+02:00' }),
        build.event(3102, { timeOfEvent: '2026-01-02T03:04:05z' }),
        build.price(3101, '2026-01-01T23:30:00.5-05:30', 1),
      ])
      .when(async () => ({
        events: await store.query<any>(
          'SELECT id, toUnixTimestamp64Milli(timeOfEvent) AS t FROM $db.events_current WHERE id IN (3101, 3102) ORDER BY id',
        ),
        prices: await store.query<any>('SELECT toUnixTimestamp64Milli(at) AS t FROM $db.prices FINAL WHERE assetId = 3101'),
      }))
      .then({
        events: [
          { id: 3101, t: Date.parse('2026-01-02T01:04:05.123Z') },
          { id: 3102, t: Date.parse('2026-01-02T03:04:05Z') },
        ],
        prices: [{ t: Date.parse('2026-01-02T05:00:00.500Z') }],
      }));
});

describe('trader directory', () => {
  const directory = () =>
    store.query<any>(`SELECT id, name, sourcePlatform, hasSource, displayName, handle, live FROM (
      SELECT * FROM $db.trader_directory WHERE id >= 601 AND id < 700 ORDER BY id, seq DESC LIMIT 1 BY id) ORDER BY id`);
  it('restates a trader when it changes and when its assigned identity changes, in any order', () =>
    spec
      .given([
        build.trader(601, { name: 'Before identity', source: { platform: 'TELEGRAM', sourceIdentityId: 'dir-a' } }),
        build.source('dir-a', { displayName: 'A one' }),
        build.source('dir-a', { displayName: 'A two', version: 2 }),
        build.trader(602, { name: 'No source', source: null }),
        build.trader(603, { name: 'Renamed later', source: { platform: 'X', sourceIdentityId: 'dir-b' } }),
        build.trader(603, { name: 'Zed renamed', source: { platform: 'X', sourceIdentityId: 'dir-b' }, version: 2 }),
        build.source('dir-b', { platform: 'X', handle: 'bee' }),
        build.trader(604, { name: 'Deleted', version: 1 }),
        build.trader(604, { name: 'Deleted', version: 2, deleted: true }),
        build.source('dir-a', { displayName: 'stale', version: 1 }), // an older version arriving late changes nothing
      ])
      .when(directory)
      .then([
        { id: 601, name: 'Before identity', sourcePlatform: 'TELEGRAM', hasSource: 1, displayName: 'A two', handle: 'dir-a', live: 1 },
        { id: 602, name: 'No source', sourcePlatform: '', hasSource: 0, displayName: null, handle: null, live: 1 },
        { id: 603, name: 'Zed renamed', sourcePlatform: 'X', hasSource: 1, displayName: 'Source dir-b', handle: 'bee', live: 1 },
        { id: 604, name: 'Deleted', sourcePlatform: 'TELEGRAM', hasSource: 0, displayName: null, handle: null, live: 0 },
      ]));
});

describe('validation at the edge', () => {
  it('sends an invalid record to the dead-letter table with its reason and keeps going', () =>
    spec
      .given([
        { topic: 'traders', raw: '{"id": "not a number"}' },
        { topic: 'traders', raw: 'not json at all' },
        build.trader(501, { name: 'Valid after invalid' }),
      ])
      .when(async () => ({
        dead: await store.query<any>(
          "SELECT topic, raw, reason FROM $db.dead_letters FINAL WHERE topic = 'traders' ORDER BY toUInt64(offset)",
        ),
        trader: await store.query<any>('SELECT name FROM $db.traders FINAL WHERE id = 501'),
      }))
      .then((r) => {
        expect(r.dead).toHaveLength(2);
        expect(r.dead.map((d) => d.raw)).toEqual(['{"id": "not a number"}', 'not json at all']); // issue 5: the bytes received
        expect(r.dead[0].reason).toMatch(/^schema: /);
        expect(r.dead[1].reason).toMatch(/^invalid JSON/);
        expect(r.trader).toEqual([{ name: 'Valid after invalid' }]);
      }));
});

describe('records the store refuses', () => {
  // A projection whose rows the store rejects for one record (a string in a UInt64 column).
  const poisonable = {
    name: 'poisonable',
    canHandle: ['traders'],
    table: table('poison_probe'),
    ddl: [],
    handle: (batch: readonly { value: any }[]) => batch.map((r) => ({ id: r.value.name === 'poison' ? 'not-a-number' : r.value.id })),
  };
  const batchOf = (names: string[]) => ({
    topic: 'traders',
    partition: 0,
    // Spaced as a producer may write it: the dead letter must keep this text, not a re-serialisation.
    records: names.map((name, i) => ({ key: '', offset: String(9000 + i), value: rawTrader(800 + i, name) })),
  });
  const rawTrader = (id: number, name: string) => JSON.stringify(build.trader(id, { name }).value, null, 1).replaceAll('\n', '');

  it('dead-letters only the refused record and applies the rest of the batch', async () => {
    await store.exec('CREATE TABLE IF NOT EXISTS $db.poison_probe (id UInt64) ENGINE = MergeTree ORDER BY id');
    const res = await applyBatch(new ProjectorSession(store, [poisonable]), batchOf(['a', 'b', 'poison', 'c', 'd']));
    expect(res).toEqual({ applied: 4, dead: 1 });
    expect(await store.query<any>('SELECT id FROM $db.poison_probe ORDER BY id')).toEqual([
      { id: 800 },
      { id: 801 },
      { id: 803 },
      { id: 804 },
    ]);
    const dead = await store.query<any>("SELECT offset, raw, reason FROM $db.dead_letters FINAL WHERE offset = '9002'");
    expect(dead).toEqual([{ offset: '9002', raw: rawTrader(802, 'poison'), reason: expect.stringMatching(/^store: /) }]);
  });

  it('during a store outage the batch fails as a whole, to be retried', async () => {
    const down = {
      ...store,
      database: store.database,
      query: async () => {
        throw new Error('connection refused');
      },
      exec: async () => {
        throw new Error('connection refused');
      },
      insert: async () => {
        throw new Error('connection refused');
      },
      insertCompact: async () => {
        throw new Error('connection refused');
      },
      close: async () => {},
    };
    await expect(applyBatch(new ProjectorSession(down, [poisonable]), batchOf(['x']))).rejects.toThrow('connection refused');
  });
});
