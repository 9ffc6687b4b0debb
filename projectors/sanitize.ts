import { Parser } from 'htmlparser2';

/**
 * Sanitized source text and URLs (DESIGN 6). Applied by the projections; the log keeps the
 * record as received.
 */

/** Elements whose content is code, not text: dropped with their tags. */
const DROPPED = new Set(['script', 'style']);
// C0 and C1 controls except tab (U+0009) and newline (U+000A); then bidi embeddings, overrides and isolates.
const CONTROLS = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/g;
const BIDI = /[\u202A-\u202E\u2066-\u2069]/g;
/** What a pass could change besides normalisation: markup, entities, controls, bidi characters. */
const SUSPECT = /[<&\u0000-\u0008\u000B-\u001F\u007F-\u009F\u202A-\u202E\u2066-\u2069]/;
/** Printable ASCII, tab and newline, without `<` and `&`: no markup, entity, control or bidi character, and already NFC. */
const PLAIN = /^[\t\n\x20-\x25\x27-\x3b\x3d-\x7e]*$/;
/** Each pass removes a layer (markup, an entity level); real text is stable after one or two. */
const MAX_PASSES = 16;

/** Text content of HTML, entities decoded, `script`/`style` content dropped (htmlparser2, not regexes). */
function htmlText(s: string): string {
  let out = '';
  let dropped = 0;
  const parser = new Parser(
    {
      onopentag(name) {
        if (DROPPED.has(name)) dropped++;
      },
      onclosetag(name) {
        if (DROPPED.has(name) && dropped > 0) dropped--;
      },
      ontext(text) {
        if (!dropped) out += text;
      },
    },
    { decodeEntities: true, lowerCaseTags: true },
  );
  parser.write(s);
  parser.end();
  return out;
}

function pass(s: string): string {
  return htmlText(s).normalize('NFC').replace(CONTROLS, '').replace(BIDI, '');
}

/**
 * Plain text: HTML markup removed (text kept, script/style content dropped), Unicode NFC,
 * control characters other than newline and tab removed, bidi override and isolate characters
 * removed. Repeated until stable, so that decoded entities (`&lt;script&gt;`) or removed
 * characters (`<\u0000script>`) cannot bring markup back.
 */
export function plainText(s: string): string {
  if (PLAIN.test(s)) return s; // printable ASCII without markup: nothing to do
  if (!SUSPECT.test(s) && s.normalize('NFC') === s) return s; // most other text: nothing to do, no parser run
  let cur = s;
  for (let i = 0; i < MAX_PASSES; i++) {
    const next = pass(cur);
    if (next === cur) return cur;
    cur = next;
  }
  // Not stable after MAX_PASSES (deliberately nested entities): keep no `<` that could still start markup.
  return cur.replaceAll('<', '');
}

export const plainTextOrNull = (s: string | null | undefined): string | null => (s == null ? null : plainText(s));

/**
 * A URL that the WHATWG parser would give back unchanged: lower-case http(s) scheme, a lower-case
 * ASCII domain whose last label is letters (no IPv4 form, no `xn--` label, no port, no user),
 * and a path (at least `/`) of unreserved characters whose segments do not start with a dot (no
 * `.` or `..` segment to resolve), nothing to percent-encode, no query or fragment.
 */
const CANONICAL_URL =
  /^https?:\/\/[a-z0-9]+(?:[.-][a-z0-9]+)*\.[a-z]{2,63}\/(?:[A-Za-z0-9_~-][A-Za-z0-9_.~-]*(?:\/[A-Za-z0-9_~-][A-Za-z0-9_.~-]*)*\/?)?$/;

/** An absolute http(s) URL in its canonical form (WHATWG URL `href`), or null for anything else (relative, javascript:, data:, ...). */
export function httpUrl(s: string | null | undefined): string | null {
  if (typeof s !== 'string') return null;
  return CANONICAL_URL.test(s) ? s : parsedHttpUrl(s);
}

/** httpUrl through the WHATWG URL parser, for every input. */
export function parsedHttpUrl(s: string): string | null {
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    return null;
  }
  return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
}
