import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// Random bytes are drawn from the CSPRNG 4 KiB at a time and each used once, as Node's own
// randomUUID caches its entropy: one call per ~100 ids instead of one per id (the request id made
// for every request was 3 % of a get-by-id's CPU in `npm run bench:profile`).
const POOL_BYTES = 4096;
let pool = Buffer.alloc(0);
let used = 0;

function randomByte(): number {
  if (used === pool.length) {
    pool = randomBytes(POOL_BYTES);
    used = 0;
  }
  return pool[used++]!;
}

/** `length` digits 0–61, uniformly drawn (rejection sampling avoids modulo bias). */
function randomDigits(length: number): number[] {
  const digits = new Array<number>(length);
  for (let i = 0; i < length;) {
    const byte = randomByte();
    if (byte < 248) digits[i++] = byte % 62;
  }
  return digits;
}

/** The character codes of ALPHABET, by digit. */
const CODES = Array.from(ALPHABET, (c) => c.charCodeAt(0));

/**
 * The digits as text: strings made from their character codes, 4,096 at a time (a call's
 * arguments are bounded), not one string per character.
 */
function textOf(digits: readonly number[]): string {
  let text = '';
  for (let start = 0; start < digits.length; start += 4096) {
    const end = Math.min(digits.length, start + 4096);
    const codes = new Array<number>(end - start);
    for (let i = start; i < end; i++) codes[i - start] = CODES[digits[i]!]!;
    text += String.fromCharCode(...codes);
  }
  return text;
}

/** `length` characters of [0-9A-Za-z], uniformly drawn. */
export function randomBase62(length: number): string {
  return textOf(randomDigits(length));
}

export type IdPrefix =
  'con' | 'lbl' | 'grp' | 'file' | 'key' | 'org' | 'sbx' | 'usr' | 'evt' | 'we' | 'msg' | 'att' | 'req' | 'inv' | 'pwr' | 'rc' | 'pk';

const TIME_CHARS = 8; // 62^8 ms ≈ 6,900 years
const RANDOM_CHARS = 12; // ≈ 71 bits
const T4 = 62 ** 4; // the time in two halves of four digits, each below 2^31: integer arithmetic
let lastTime = -1;
/** The random part of the last id, as digits 0–61. */
const lastRandom = new Array<number>(RANDOM_CHARS).fill(0);
/** The last id's twenty character codes after its prefix: eight of the time, twelve random. */
const codes = new Array<number>(TIME_CHARS + RANDOM_CHARS).fill(0);

/**
 * The time's eight base-62 digits into `codes`, the most significant first (once a millisecond).
 * In two halves below 2^31 each, so every division and remainder is an integer one (a time in ms
 * is past 2^31: on it `% 62` is a floating-point remainder).
 */
function writeTime(ms: number): void {
  let high = Math.floor(ms / T4) | 0;
  let low = (ms - high * T4) | 0;
  for (let i = TIME_CHARS - 1; i >= 4; i--) {
    codes[i] = CODES[low % 62]!;
    low = (low / 62) | 0;
  }
  for (let i = 3; i >= 0; i--) {
    codes[i] = CODES[high % 62]!;
    high = (high / 62) | 0;
  }
}

/**
 * The id's text in one flat string made from its character codes (prefix, `_`, time, random):
 * not a string added to others, which V8 keeps as a tree to copy flat again when the id is bound
 * to a statement or hashed.
 */
function idText(prefix: IdPrefix): string {
  const c = codes;
  const p0 = prefix.charCodeAt(0);
  const p1 = prefix.charCodeAt(1);
  if (prefix.length === 2)
    // prettier-ignore
    return String.fromCharCode(
      p0, p1, 95, c[0]!, c[1]!, c[2]!, c[3]!, c[4]!, c[5]!, c[6]!, c[7]!, c[8]!, c[9]!, c[10]!,
      c[11]!, c[12]!, c[13]!, c[14]!, c[15]!, c[16]!, c[17]!, c[18]!, c[19]!,
    );
  if (prefix.length > 4) return `${prefix}_${String.fromCharCode(...c)}`; // none yet: IdPrefix's are 2 to 4 characters
  const p2 = prefix.charCodeAt(2);
  if (prefix.length === 3)
    // prettier-ignore
    return String.fromCharCode(
      p0, p1, p2, 95, c[0]!, c[1]!, c[2]!, c[3]!, c[4]!, c[5]!, c[6]!, c[7]!, c[8]!, c[9]!, c[10]!,
      c[11]!, c[12]!, c[13]!, c[14]!, c[15]!, c[16]!, c[17]!, c[18]!, c[19]!,
    );
  // prettier-ignore
  return String.fromCharCode(
    p0, p1, p2, prefix.charCodeAt(3), 95, c[0]!, c[1]!, c[2]!, c[3]!, c[4]!, c[5]!, c[6]!, c[7]!,
    c[8]!, c[9]!, c[10]!, c[11]!, c[12]!, c[13]!, c[14]!, c[15]!, c[16]!, c[17]!, c[18]!, c[19]!,
  );
}

/**
 * Opaque identifiers with a type prefix, e.g. `con_0Q8fK2mN…`: 8 characters of time then 12
 * random, like a ULID. Within one process ids only grow, so records made in the same millisecond
 * still list in the order they were made (lists order by created_at, then id). A keyed create
 * makes three ids (contact, event, request; issue 46): the id is written as one string from its
 * codes, its time in integer arithmetic.
 */
export function newId(prefix: IdPrefix): string {
  const now = Date.now();
  if (now > lastTime) {
    lastTime = now;
    writeTime(now);
    // The pool and its position in locals: a module variable is loaded and stored through its
    // context at every byte.
    let bytes = pool;
    let at = used;
    for (let i = 0; i < RANDOM_CHARS;) {
      if (at === bytes.length) {
        bytes = pool = randomBytes(POOL_BYTES);
        at = 0;
      }
      const byte = bytes[at++]!;
      if (byte < 248) {
        const digit = byte % 62;
        lastRandom[i] = digit;
        codes[TIME_CHARS + i++] = CODES[digit]!;
      }
    }
    used = at;
  } else {
    // Same millisecond (or the clock stepped back): count up from the previous id.
    for (let i = RANDOM_CHARS - 1; i >= 0; i--) {
      const digit = (lastRandom[i]! + 1) % 62;
      lastRandom[i] = digit;
      codes[TIME_CHARS + i] = CODES[digit]!;
      if (digit !== 0) break;
    }
  }
  return idText(prefix);
}

/** Whether `value` looks like an id of this kind; lets a lookup skip the database for garbage. */
export function isId(prefix: IdPrefix, value: string): boolean {
  return value.length === prefix.length + 21 && value.startsWith(prefix + '_') && /^[0-9A-Za-z]+$/.test(value.slice(prefix.length + 1));
}

// A few seconds' prefixes, each in its slot (second mod 7): a keyed create writes now, now + 60 s
// (its claim's lock) and now + 24 h (the key's expiry), which fall in different slots.
const ISO_SLOTS = 7;
/** The largest time a Date holds (±8.64e15 ms): past it toISOString throws. */
const MAX_TIME = 8.64e15;
const isoSeconds = new Array<number>(ISO_SLOTS).fill(NaN);
const isoPrefixes = new Array<string>(ISO_SLOTS).fill('');

/**
 * `new Date(ms).toISOString()`, the same text (a RangeError for a time that is not valid), with
 * the part up to the second kept: V8's toISOString formats through printf, about 7,000
 * instructions a call, and a keyed create made eight (3.5 % of it, issue 46). Within a kept
 * second only the milliseconds are written.
 */
export function isoAt(ms: number): string {
  ms = Math.trunc(ms); // as Date keeps a time value
  const second = Math.floor(ms / 1000);
  const slot = ((second % ISO_SLOTS) + ISO_SLOTS) % ISO_SLOTS;
  if (isoSeconds[slot] !== second || !(Math.abs(ms) <= MAX_TIME)) {
    const iso = new Date(ms).toISOString();
    isoSeconds[slot] = second;
    isoPrefixes[slot] = iso.slice(0, -4); // up to the dot: "YYYY-MM-DDTHH:MM:SS." (or a six-digit year's)
    return iso;
  }
  const milli = ms - second * 1000;
  return `${isoPrefixes[slot]}${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
}

/** ISO 8601 UTC with milliseconds: the one timestamp format stored and returned. */
export function nowIso(now: Date = new Date()): string {
  return isoAt(now.getTime());
}
