/** The fuzz test's seeded randomness, its hostile values, and the encodings that deliver them. */

/** mulberry32: a small seeded PRNG, so that a run can be repeated from its seed. */
export class Random {
  private state: number;
  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** A float in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error('pick from an empty list');
    return items[this.int(items.length)]!;
  }

  chance(p: number): boolean {
    return this.next() < p;
  }
}

/** UTF-8 of one code point, lone surrogates included (as WTF-8 would: `ed a0 80`, not valid UTF-8). */
function wtf8(cp: number): number[] {
  if (cp < 0x80) return [cp];
  if (cp < 0x800) return [0xc0 | (cp >> 6), 0x80 | (cp & 0x3f)];
  if (cp < 0x10000) return [0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)];
  return [0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 0x3f), 0x80 | ((cp >> 6) & 0x3f), 0x80 | (cp & 0x3f)];
}

/**
 * Percent-encodes every character but the unreserved ones. Unlike encodeURIComponent it does not
 * throw on a lone surrogate: it sends its (invalid) bytes, which is the point.
 */
export function percentEncode(text: string): string {
  let out = '';
  for (const ch of text) {
    if (/^[A-Za-z0-9_.~-]$/.test(ch)) out += ch;
    else
      out += wtf8(ch.codePointAt(0)!)
        .map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`)
        .join('');
  }
  return out;
}

/** A value to put in a URL: text to percent-encode, or `raw` text inserted exactly as given. */
export type UrlValue = { text: string } | { raw: string };

export const urlText = (value: UrlValue): string => ('raw' in value ? value.raw : percentEncode(value.text));

/** Hostile text for strings anywhere: empty, long, control characters and Unicode edge cases. */
export const HOSTILE_STRINGS: readonly string[] = [
  '',
  ' ',
  '  padded  ',
  'a'.repeat(256),
  'a'.repeat(5000),
  'b'.repeat(70_000),
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff',
  'a\ud800b',
  '\udc00\ud800',
  '\u202eevil',
  'x\u202ey',
  '\u200f\u200e',
  '\u2066isolate\u2069',
  '\u0085',
  '\u2028\u2029',
  '\u0007\u001b[31m',
  '\r\n',
  '\t',
  '\ufeff',
  '\uffff\ufffe',
  '\ufffd',
  '😀',
  '👩‍👩‍👧‍👦',
  '🏳️‍🌈',
  'e\u0301',
  'a' + '\u0301'.repeat(300),
  'Z\u0351\u0364\u036b\u0313\u0300',
  'مرحبا بالعالم',
  'שלום',
  '用户',
  'İı',
  'ß',
  '%00',
  '%',
  '../../etc/passwd',
  "'; DROP TABLE contacts; --",
  '" OR 1=1 --',
  '<script>alert(1)</script>',
  '{{7*7}}',
  '${7*7}',
  '__proto__',
  'constructor',
  'prototype',
  'null',
  'undefined',
  'true',
  '0',
  '-1',
  'NaN',
  'Infinity',
  'con_',
  'lbl_nope',
  'grp_0000000000000000000',
  'file_ZZZZZZZZZZZZZZZZZZZZ',
  'a@b',
  'x@example.com',
  'user@xn--80ak6aa92e.com',
  '@',
  'a@',
];

/** Query texts for a number: none of these but `5` and `007` is a plain integer in 1..100. */
export const HOSTILE_NUMBERS: readonly string[] = [
  'Infinity',
  '-Infinity',
  'NaN',
  '1e309',
  '-1e309',
  '-0',
  '0',
  '0x10',
  '0b1',
  '0o7',
  '1.5',
  '5.0',
  '1e2',
  '-1',
  '101',
  '100',
  '1',
  '9007199254740993',
  '99999999999999999999',
  '+5',
  ' 5',
  '5 ',
  '5',
  '007',
  '١٢',
  '５',
  '',
  'true',
  'null',
  '[]',
];

/** Raw percent sequences (bad or surprising encodings) for paths and queries. */
export const RAW_URL_VALUES: readonly string[] = [
  '%',
  '%zz',
  '%2',
  '%FF',
  '%C0%AF',
  '%ED%A0%80',
  '%E2%82',
  '%E9',
  '%00',
  '%2F',
  '%2e%2e',
  '%5C',
  '%20',
  '+',
  '%2B',
  '%25',
  '%0D%0ASet-Cookie:%20x=1',
  '..',
  '.',
  'a'.repeat(2000),
  'a'.repeat(9000),
];

/**
 * JSON fragments (raw text) to put where a body field's value goes: wrong types, edge numbers,
 * arrays and objects where scalars are expected, and tokens that are not JSON at all.
 */
export const HOSTILE_JSON: readonly string[] = [
  'null',
  'true',
  'false',
  '0',
  '-0',
  '1.5',
  '-1',
  '101',
  '1e309',
  '-1e309',
  '9007199254740993',
  '1e2',
  '1E400',
  '0.0000000000000000000000001',
  '[]',
  '[1]',
  '[""]',
  '["a","a"]',
  '[[]]',
  '[null]',
  `[${Array.from({ length: 101 }, (_, i) => `"con_${i}"`).join(',')}]`,
  '{}',
  '{"a":1}',
  '{"$ne":null}',
  '{"__proto__":{"polluted":1}}',
  '{"constructor":{"prototype":{"polluted":1}}}',
  '""',
  '"\\u0000"',
  '"\\ud800"',
  '"\\udfff\\ud800"',
  '"\\u202e"',
  '"\\\\"',
  '"a\\nb"',
  `"${'x'.repeat(1001)}"`,
  // Not JSON: the body must be refused as unreadable.
  'NaN',
  'Infinity',
  '-Infinity',
  '0x10',
  '01',
  '.5',
  '+1',
  'undefined',
  "'single'",
  '"unterminated',
];

/** Bytes that are not UTF-8: a stray 0xff, an overlong `/`, an encoded surrogate, a truncated sequence, Latin-1. */
export const INVALID_UTF8: readonly [string, Buffer][] = [
  ['ff', Buffer.from([0xff])],
  ['overlong c0 af', Buffer.from([0xc0, 0xaf])],
  ['surrogate ed a0 80', Buffer.from([0xed, 0xa0, 0x80])],
  ['truncated e2 82', Buffer.from([0xe2, 0x82])],
  ['latin-1 e9', Buffer.from([0xe9])],
  ['fe ff', Buffer.from([0xfe, 0xff])],
  ['f8 88 80 80 80', Buffer.from([0xf8, 0x88, 0x80, 0x80, 0x80])],
];

/** Content types a JSON body could be sent with; the first ones are clearly not JSON (415). */
export const NOT_JSON_TYPES: readonly string[] = [
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/xml',
  'application/octet-stream',
  'text/json',
  'application/jsonx',
  'json',
  '*/*',
];
export const ODD_JSON_TYPES: readonly string[] = [
  'APPLICATION/JSON',
  'application/json; charset=utf-8',
  'application/json; charset=latin1',
  'application/json; charset=utf-16',
  'application/json;;',
  'application/json, text/plain',
  'application/vnd.api+json',
  'application/problem+json',
];

/** Idempotency-Key values that are empty, too long or not printable: each must be refused (400). */
export const BAD_IDEMPOTENCY_KEYS: readonly string[] = ['', 'k'.repeat(256), 'a\u0007b', 'tab\there', 'nul\u0000', 'del\u007f'];
/** Odd but not clearly invalid Idempotency-Key values. */
export const ODD_IDEMPOTENCY_KEYS: readonly string[] = [' ', '"quoted"', '""', 'a,b', 'k'.repeat(255), 'ключ', '😀', ' spaced '];

/** A Buffer as text when it is printable UTF-8, else as hex. */
export function showBytes(bytes: Buffer): string {
  const text = bytes.toString('utf8');
  const printable = Buffer.from(text, 'utf8').equals(bytes) && !/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/.test(text);
  if (printable) return text.length > 400 ? `${JSON.stringify(text.slice(0, 400))}… (${bytes.length} bytes)` : JSON.stringify(text);
  const hex = bytes.toString('hex');
  return `hex:${hex.length > 800 ? `${hex.slice(0, 800)}… (${bytes.length} bytes)` : hex}`;
}
