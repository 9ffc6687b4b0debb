import { describe, expect, it } from 'vitest';
import { readIngestFile } from '../../projectors/ingest.ts';
import { MAX_RECORD_BYTES, mayOverflow, scannedBeforeCheck, validateRecord } from '../../projectors/validate.ts';
import { TOPIC_NAMES } from '../../schemas/topics/index.ts';
import { event, eventText as text } from './records.ts';

const eventText = (over: Record<string, string> = {}) => text(7, over);
const refused = (topic: string, raw: string) => {
  const r = validateRecord(topic, raw);
  expect(r.ok, raw.slice(0, 200)).toBe(false);
  return (r as { reason: string }).reason;
};

describe('the record validator (projector and CLI alike)', () => {
  it('accepts a valid record and gives its parsed value and key', () => {
    const r = validateRecord('trade-events', eventText());
    expect(r).toEqual({ ok: true, value: event(7).value, key: '7' });
  });

  it('issue 5: a number beyond a double (1e400 parses to Infinity) is refused, naming its field', () => {
    expect(refused('trade-events', eventText({ price: '1e400' }))).toMatch(/non-finite number at \/price/);
    expect(refused('trade-events', eventText({ price: '-1E+400' }))).toMatch(/\/price/);
    expect(refused('trade-events', eventText({ price: '9'.repeat(400) }))).toMatch(/\/price/);
    expect(refused('channel-summaries', JSON.stringify({ x: [1, 2] }).replace('2', '1e999'))).toMatch(/non-finite number at \/x\/1/);
  });

  it('a number beyond a double by its many digits and a small exponent together is refused too (1 and 300 zeros e9)', () => {
    expect(refused('trade-events', eventText({ price: '1' + '0'.repeat(300) + 'e9' }))).toMatch(/non-finite number at \/price/);
    expect(refused('trade-events', eventText({ price: '2' + '0'.repeat(209) + 'e+099' }))).toMatch(/non-finite number at \/price/);
    expect(validateRecord('trade-events', eventText({ price: '1' + '0'.repeat(200) + 'e99' })).ok).toBe(true); // 1e299
    expect(validateRecord('trade-events', eventText({ price: '1.5e-400' })).ok).toBe(true); // underflows to 0: finite
  });

  it('every topic types its values (a record that passes the check holds no non-finite number), so none is scanned first', () => {
    for (const t of TOPIC_NAMES) expect(scannedBeforeCheck(t), t).toBe(false);
  });

  it('mayOverflow: 100+ digits in a row or an exponent of 100+ (what a non-finite parse needs), nothing less', () => {
    for (const s of ['1e100', '1E+100', '1e0100', '12.5e308', '9'.repeat(100), '[1,1e999]']) expect(mayOverflow(s), s).toBe(true);
    for (const s of ['1e99', '1e+099', '1e-400', '9'.repeat(99), '{"a":"e400","b":12}', 'e100', '']) expect(mayOverflow(s), s).toBe(false);
  });

  it('issue 5: impossible and out-of-range date-times and leap seconds are refused with the schema path', () => {
    for (const t of [
      '0000-01-01T00:00:00Z',
      '2016-12-31T23:59:60Z',
      '2026-02-30T00:00:00Z',
      '2300-01-01T00:00:00Z',
      '1969-12-31T23:59:59Z',
    ]) {
      expect(refused('trade-events', eventText({ timeOfEvent: JSON.stringify(t) })), t).toMatch(/^schema: \/timeOfEvent /);
    }
  });

  it('issue 5: an id above 2^53-1 is refused, not rounded (9007199254740993 parses to ...992)', () => {
    expect(refused('trade-events', eventText({ id: '9007199254740993' }))).toMatch(/^schema: \/id /);
    expect(validateRecord('trade-events', eventText({ id: '9007199254740991' })).ok).toBe(true);
  });

  it('issue 5: a version or count above 2^53-1 is refused, not rounded', () => {
    expect(refused('trade-events', eventText({ version: '9007199254740993' }))).toMatch(/^schema: \/version /);
    expect(
      refused(
        'source-identities',
        JSON.stringify({
          platform: 'X',
          sourceIdentityId: 's',
          displayName: null,
          handle: null,
          avatarUrl: null,
          profileUrl: null,
          audienceCount: 2 ** 53,
          version: 1,
        }),
      ),
    ).toMatch(/^schema: \/audienceCount /);
  });

  it('refuses invalid JSON, unknown topics, schema violations and records over the maximum size', () => {
    expect(refused('trade-events', '{"id":')).toMatch(/^invalid JSON/);
    expect(refused('no-such-topic', '{}')).toMatch(/^unknown topic "no-such-topic"/);
    expect(refused('trade-events', eventText({ type: '"sideways"' }))).toMatch(/^schema: \/type /);
    const big = eventText({ messageId: JSON.stringify('x'.repeat(MAX_RECORD_BYTES)) });
    expect(refused('trade-events', big)).toMatch(
      new RegExp(`^record too large: ${Buffer.byteLength(big)} bytes, over the maximum record size of ${MAX_RECORD_BYTES} bytes`),
    );
  });

  it('a deeply nested value is refused without overflowing the stack', () => {
    expect(refused('trade-events', '['.repeat(200_000) + '1e400' + ']'.repeat(200_000))).toMatch(/non-finite/);
  });
});

describe('reading an ingest file', () => {
  const file = (...lines: string[]) => Buffer.from(lines.join('\n'));

  it('issue 5: keeps the exact text of each value (numbers, key order, spacing), not a re-serialisation', () => {
    const value = eventText({ price: '1.50' }).replace('{', '{ ').replace('"price":1.50', '"price" :  1.50');
    const f = readIngestFile(file(`{"topic": "trade-events",   "value":${value} }`, '', `{"value": ${value}, "topic": "trade-events"}\r`));
    expect(f.refused).toEqual([]);
    expect(f.count).toBe(2);
    expect(f.byTopic.get('trade-events')).toEqual([
      { key: '7', raw: value },
      { key: '7', raw: value },
    ]);
  });

  it('issue 5: refuses each bad line with its number and reason', () => {
    const f = readIngestFile(
      file(
        `{"topic":"trade-events","value":${eventText()}}`,
        `{"topic":"trade-events","value":${eventText({ price: '1e400' })}}`,
        `{"topic":"trade-events","value":${eventText({ timeOfEvent: '"0000-01-01T00:00:00Z"' })}}`,
        `{"topic":"trade-events","value":${eventText({ timeOfEvent: '"2016-12-31T23:59:60Z"' })}}`,
        `{"topic":"trade-events","value":${eventText({ id: '9007199254740993' })}}`,
        '{not json',
        '{"topic":"nope","value":{}}',
        `{"topic":"trade-events","value":${eventText()},"key":"x"}`,
        `{"topic":"trade-events","value":${eventText()},"value":${eventText({ id: '8' })}}`,
        '[1]',
      ),
    );
    expect(f.refused.map((r) => r.line)).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10]);
    const reason = (line: number) => f.refused.find((r) => r.line === line)!.reason;
    expect(reason(2)).toMatch(/^trade-events: non-finite number at \/price/);
    expect(reason(3)).toMatch(/\/timeOfEvent/);
    expect(reason(4)).toMatch(/\/timeOfEvent/);
    expect(reason(5)).toMatch(/\/id/);
    expect(reason(6)).toMatch(/^not JSON/);
    expect(reason(7)).toMatch(/^unknown topic "nope"/);
    expect(reason(8)).toMatch(/unknown member "key"/);
    expect(reason(9)).toMatch(/twice/);
    expect(f.count).toBe(1);
  });

  it('refuses a line over the maximum record size without parsing it, and bytes that are not UTF-8', () => {
    const long = Buffer.concat([
      Buffer.from('{"topic":"messages","value":"'),
      Buffer.alloc(MAX_RECORD_BYTES + 5000, 0x61),
      Buffer.from('"}\n'),
    ]);
    const bad = Buffer.from([0x7b, 0xff, 0x7d, 0x0a]);
    const f = readIngestFile(Buffer.concat([long, bad]));
    expect(f.refused).toEqual([
      { line: 1, reason: expect.stringMatching(/^record too large: \d+ bytes, over the maximum record size of 16777216 bytes/) },
      { line: 2, reason: 'not valid UTF-8' },
    ]);
  });
});
