import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { PROJECTIONS } from '../../projectors/index.ts';
import type { ValidRecord } from '../../projectors/projection.ts';
import { httpUrl, parsedHttpUrl, plainText } from '../../projectors/sanitize.ts';
import { message } from './records.ts';

/** Sanitized text and URLs (DESIGN 6), as units and through the projections' rows. */
describe('plainText', () => {
  const cases: [string, string, string][] = [
    ['issue 5: script content is dropped', '<script>alert(1)</script>hi', 'hi'],
    ['issue 5: markup is removed, its text kept', '<b>bold</b> and <a href="https://x.test">link</a>', 'bold and link'],
    ['style content is dropped, upper-case tags too', '<STYLE>p{}</STYLE>text<!-- comment -->', 'text'],
    ['issue 5: escaped markup cannot come back once decoded', '&lt;script&gt;alert(1)&lt;/script&gt;ok', 'ok'],
    ['doubly escaped markup neither', '&amp;lt;b&amp;gt;bold&amp;lt;/b&amp;gt;', 'bold'],
    ['issue 5: control characters other than newline and tab are removed', 'a\u0000b\u0007c\r\n\td\u001b[31m\u0085\u009f', 'abc\n\td[31m'],
    ['a removed control character cannot assemble a tag', '<\u0000script>alert(1)</script>z', ''],
    ['issue 5: bidi overrides and isolates are removed', 'a\u202Eb\u202Ac\u2066d\u2067e\u2068f\u2069g\u202Bh\u202C\u202D', 'abcdefgh'],
    ['issue 5: text is NFC', 'e\u0301 A\u030A', '\u00E9 \u00C5'],
    ['entities decode to plain text', 'AT&amp;T &lt;3 5 &gt; 4 &nbsp;', 'AT&T <3 5 > 4 \u00A0'],
    ['plain text is unchanged', 'BTC < 50k, long 2x; "quoted" & more\nline 2', 'BTC < 50k, long 2x; "quoted" & more\nline 2'],
  ];
  for (const [name, input, expected] of cases) it(name, () => expect(plainText(input)).toBe(expected));

  it('is stable: sanitizing sanitized text changes nothing', () => {
    for (const [, input] of cases) expect(plainText(plainText(input))).toBe(plainText(input));
  });
});

describe('httpUrl', () => {
  it('issue 5: keeps absolute http(s) URLs in canonical form, anything else is null', () => {
    expect(httpUrl('https://t.me/channel/1')).toBe('https://t.me/channel/1');
    expect(httpUrl('HTTP://Example.COM/a b')).toBe('http://example.com/a%20b');
    for (const bad of [
      'javascript:alert(1)',
      'JaVaScRiPt:alert(1)',
      ' javascript:alert(1)',
      'data:text/html,<script>',
      'vbscript:x',
      'ftp://x.test/f',
      '/relative/path',
      'relative',
      '//x.test/protocol-relative',
      '',
      null,
      undefined,
    ])
      expect(httpUrl(bad), String(bad)).toBeNull();
  });
});

describe('the fast paths agree with the full sanitizer', () => {
  // Strings built from the pieces the fast paths look at (and their near misses).
  const urlPieces = [
    'http',
    'https',
    'HTTPS',
    'ftp',
    ':',
    '//',
    '/',
    '/./',
    '/../',
    '.',
    '..',
    '-',
    '--',
    'xn--',
    'a',
    'Z',
    '0',
    '1',
    '127',
    '0x7f',
    'com',
    'me',
    'c',
    '_',
    '~',
    '%2e',
    '%',
    '?',
    '#',
    '@',
    ':80',
    ' ',
    '\t',
    '\\',
    'é',
    '[::1]',
  ];
  const urls = fc.oneof(
    fc.array(fc.constantFrom(...urlPieces), { maxLength: 14 }).map((p) => p.join('')),
    fc
      .tuple(fc.constantFrom('http://', 'https://', 'HTTP://'), fc.array(fc.constantFrom(...urlPieces), { maxLength: 12 }))
      .map(([a, p]) => a + p.join('')),
    fc.string({ maxLength: 40 }).map((x) => `https://${x}`),
  );
  // Mostly URLs the fast path takes as they are: domains (numeric, `xn`, hyphenated labels), paths with dots.
  const alnum = fc.stringMatching(/^[a-z0-9]{1,5}$/);
  const label = fc.oneof(
    alnum,
    fc.tuple(alnum, alnum).map(([a, b]) => `${a}-${b}`),
    fc.constantFrom('xn', '0', '0x7f', '255', '1e3'),
  );
  const host = fc
    .tuple(fc.array(label, { maxLength: 4 }), fc.oneof(fc.stringMatching(/^[a-z]{2,5}$/), fc.constantFrom('xn', 'localhost')))
    .map(([l, t]) => [...l, t].join('.'));
  const path = fc.array(fc.stringMatching(/^[A-Za-z0-9_.~-]{0,6}$/), { minLength: 1, maxLength: 5 }).map((s) => '/' + s.join('/'));
  const simple = fc.tuple(fc.constantFrom('http://', 'https://'), host, path).map(([a, h, p]) => a + h + p);
  it('httpUrl: a URL taken as it is equals what the WHATWG parser makes of it', () => {
    fc.assert(
      fc.property(fc.oneof(urls, simple), (u) => {
        expect(httpUrl(u)).toBe(parsedHttpUrl(u));
      }),
      { numRuns: 40_000, seed: 6 },
    );
    for (const u of [
      'https://t.me/a/1',
      'https://cdn.example.com/a/t12-1.png',
      'https://x.com/h/status/18000001',
      'http://a.b/',
      'https://a-b.c.de/x.y/_~z-',
    ])
      expect(httpUrl(u)).toBe(u);
  });

  it('plainText: text taken as it is would come out of the full passes unchanged', () => {
    const chars = fc.constantFrom(
      'a',
      'Z',
      ' ',
      '\n',
      '\t',
      '\r',
      '<',
      '>',
      '&',
      ';',
      '~',
      '\u007f',
      '\u0085',
      '\u00e9',
      'e\u0301',
      '\u202e',
      '🚀',
      '"',
      '#',
    );
    fc.assert(
      fc.property(
        fc.array(chars, { maxLength: 30 }).map((c) => c.join('')),
        (t) => {
          const out = plainText(t);
          if (out === t) expect(plainText(out)).toBe(out);
          if (/^[\x20-\x7e\t\n]*$/.test(t) && !/[<&]/.test(t)) expect(out).toBe(t);
        },
      ),
      { numRuns: 20_000, seed: 7 },
    );
  });
});

describe('projections apply the sanitizer', () => {
  const rowsOf = (topic: string, value: object) => {
    const rec: ValidRecord = { topic, key: 'k', offset: '1', value, raw: JSON.stringify(value) };
    return PROJECTIONS.filter((p) => p.canHandle.includes(topic) && p.handle).map((p) => p.handle!([rec])[0] as Record<string, unknown>);
  };

  it('issue 5: message text and url are sanitized; a javascript: attachment is dropped, valid ones kept', () => {
    const [row] = rowsOf(
      'messages',
      message('m', {
        text: '<script>alert(1)</script>hi \u202Eevil\u0007',
        url: 'javascript:alert(1)',
        attachments: [
          { type: 'image', url: 'javascript:alert(1)' },
          { type: 'link', url: '/relative' },
          { type: 'image', url: 'https://cdn.test/a.png' },
        ],
      }).value,
    );
    expect(row).toMatchObject({ text: 'hi evil', url: null, attachmentTypes: ['image'], attachmentUrls: ['https://cdn.test/a.png'] });
  });

  it('issue 5: source, trader and asset URLs become absolute http(s) or null', () => {
    const [source] = rowsOf('source-identities', {
      platform: 'X',
      sourceIdentityId: 's',
      displayName: null,
      handle: null,
      avatarUrl: 'javascript:alert(1)',
      profileUrl: 'https://x.com/s',
      audienceCount: null,
      version: 1,
    });
    expect(source).toMatchObject({ avatarUrl: null, profileUrl: 'https://x.com/s' });
    const [trader] = rowsOf('traders', { id: 1, name: 'T', slug: null, avatarUrl: '/img.png', source: null, version: 1 });
    expect(trader).toMatchObject({ avatarUrl: null });
    const [asset] = rowsOf('assets', {
      id: 1,
      name: 'A',
      symbol: 'A',
      logoUrl: 'https://logo.test/a.svg',
      assetClass: null,
      category: null,
      markets: [],
      version: 1,
    });
    expect(asset).toMatchObject({ logoUrl: 'https://logo.test/a.svg' });
  });
});
