// Issue 25: the `sql` tag binds values as `{name:Type}` parameters and embeds tables and fragments;
// the source key is one definition in TS and in SQL.
import { describe, expect, it } from 'vitest';
import { identifier, join, literal, param, sql, timeWindow } from '../../storage/sql.ts';
import { parseSourceKey, sourceKey, sourceKeySql } from '../../storage/tables/traders.ts';
import { EVENTS_TABLE } from '../../storage/tables/trading.ts';

describe('the sql tag', () => {
  it('writes parameters as placeholders, tables as $db.<name>, and fragments with their parameters', () => {
    const ids = [3, 1];
    const inner = sql`s.traderId IN ${param('traderIds', 'Array(UInt64)', ids)}`;
    const q = sql`SELECT id FROM ${EVENTS_TABLE} AS s WHERE ${inner} AND s.direction = ${param('direction', 'String', "x' OR 1")}`;
    expect(q.text).toBe(
      'SELECT id FROM $db.events AS s WHERE s.traderId IN {traderIds:Array(UInt64)} AND s.direction = {direction:String}',
    );
    expect(q.params).toEqual({ traderIds: ids, direction: "x' OR 1" });
  });

  it('joins fragments, and refuses one name bound to two values, a bad name, identifier or type', () => {
    const a = sql`a = ${param('v', 'Int64', 1)}`;
    expect(join([a, sql`b = ${param('w', 'Int64', 2)}`], sql` OR `)).toEqual({
      text: 'a = {v:Int64} OR b = {w:Int64}',
      params: { v: 1, w: 2 },
    });
    expect(join([], sql` OR `, sql`1`).text).toBe('1');
    expect(sql`${a} AND ${a}`.params).toEqual({ v: 1 });
    expect(() => sql`${a} AND ${sql`c = ${param('v', 'Int64', 3)}`}`).toThrow(/two different values/);
    expect(() => param('v}', 'Int64', 1)).toThrow();
    expect(() => param('v', 'Int64} OR 1', 1)).toThrow();
    expect(() => identifier('a; DROP')).toThrow();
    expect(() => literal(1.5)).toThrow();
    expect(sql`${identifier('s.writtenAt')} + ${literal(3)}`.text).toBe('s.writtenAt + 3');
  });

  it('writes a time window as inclusive bounds, only those given', () => {
    const column = identifier('s.writtenAt');
    expect(timeWindow(column, { start: null, end: null }, { start: 'a', end: 'b' })).toEqual([]);
    const both = join(timeWindow(column, { start: 1, end: 2 }, { start: 'a', end: 'b' }), sql` AND `);
    expect(both.text).toBe(
      "s.writtenAt >= fromUnixTimestamp64Milli({a:Int64}, 'UTC') AND s.writtenAt <= fromUnixTimestamp64Milli({b:Int64}, 'UTC')",
    );
    expect(both.params).toEqual({ a: 1, b: 2 });
  });
});

describe('the source key', () => {
  it('is platform:sourceIdentityId, split at the first colon, and the same in SQL', () => {
    expect(sourceKey('X', 'a:b')).toBe('X:a:b');
    expect(parseSourceKey('X:a:b')).toEqual({ platform: 'X', sourceIdentityId: 'a:b' });
    expect(sourceKeySql('m').text).toBe("concat(m.platform, ':', m.sourceIdentityId)");
    expect(sourceKeySql().text).toBe("concat(platform, ':', sourceIdentityId)");
  });
});
