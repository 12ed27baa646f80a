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
let lastTime = -1;
let lastTimeText = '';
/** The random part of the last id, as digits 0–61. */
const lastRandom = new Array<number>(RANDOM_CHARS).fill(0);

/** The time part's character codes, the most significant first. */
const timeCodes = new Array<number>(TIME_CHARS).fill(0);

/**
 * A time in ms as TIME_CHARS base-62 characters, the most significant first (once a millisecond):
 * one string made from their codes, not eight strings added one to the next (2,800 instructions
 * an id less, counted under callgrind with a clock that moves at every id, as a server's does).
 */
function timeText(ms: number): string {
  const t = timeCodes;
  for (let i = TIME_CHARS - 1; i >= 0; i--) {
    t[i] = CODES[ms % 62]!;
    ms = Math.floor(ms / 62);
  }
  return String.fromCharCode(t[0]!, t[1]!, t[2]!, t[3]!, t[4]!, t[5]!, t[6]!, t[7]!);
}

/** The random part's text: one string made from its twelve character codes. */
function randomText(d: readonly number[]): string {
  return String.fromCharCode(
    CODES[d[0]!]!,
    CODES[d[1]!]!,
    CODES[d[2]!]!,
    CODES[d[3]!]!,
    CODES[d[4]!]!,
    CODES[d[5]!]!,
    CODES[d[6]!]!,
    CODES[d[7]!]!,
    CODES[d[8]!]!,
    CODES[d[9]!]!,
    CODES[d[10]!]!,
    CODES[d[11]!]!,
  );
}

/**
 * Opaque identifiers with a type prefix, e.g. `con_0Q8fK2mN…`: 8 characters of time then 12
 * random, like a ULID. Within one process ids only grow, so records made in the same millisecond
 * still list in the order they were made (lists order by created_at, then id). The random part is
 * written with one fixed-argument `String.fromCharCode`, not an array spread into it (a keyed
 * create makes three ids: contact, event, request; issue 46).
 */
export function newId(prefix: IdPrefix): string {
  const now = Date.now();
  if (now > lastTime) {
    lastTime = now;
    lastTimeText = timeText(now);
    for (let i = 0; i < RANDOM_CHARS;) {
      const byte = randomByte();
      if (byte < 248) lastRandom[i++] = byte % 62;
    }
  } else {
    // Same millisecond (or the clock stepped back): count up from the previous id.
    for (let i = RANDOM_CHARS - 1; i >= 0; i--) {
      lastRandom[i] = (lastRandom[i]! + 1) % 62;
      if (lastRandom[i] !== 0) break;
    }
  }
  return `${prefix}_${lastTimeText}${randomText(lastRandom)}`;
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
