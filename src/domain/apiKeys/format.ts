import { createHmac, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from '../ids.js';

/**
 * Key format: `od_live_` (live data) or `od_test_` (the organisation's sandbox, SANDBOX.md) + 43
 * characters of [A-Za-z0-9]: 37 random (≈220 bits) and a 6-character checksum of those 37, so a
 * mistyped or made-up key is refused without a database read. The checksum is keyed with
 * SECRET_KEY: nobody without it can make a key that passes, so a flood of forged keys costs the
 * server an HMAC each, never a database read. Both prefixes share the length (8), alphabet and
 * check; the prefix is part of what is hashed, so a live key's body under `od_test_` is no key.
 */
export const KEY_PREFIX = 'od_live_';
export const TEST_KEY_PREFIX = 'od_test_';
export type KeyMode = 'live' | 'test';
const PREFIX_LENGTH = KEY_PREFIX.length;
const BODY_LENGTH = 37;
const CHECKSUM_LENGTH = 6;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_PATTERN = /^od_(?:live|test)_[A-Za-z0-9]{43}$/;

function checksum(secret: string, body: string): string {
  // 48 bits of an HMAC, written in base62 (62^6 ≈ 5.7·10^10: a random guess passes about 1 time in 5·10^10).
  let n = createHmac('sha256', secret).update(`key-checksum\n${body}`).digest().readUIntBE(0, 6);
  let out = '';
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = ALPHABET[n % 62] + out;
    n = Math.floor(n / 62);
  }
  return out;
}

export function generateKey(secret: string, mode: KeyMode = 'live'): string {
  const body = randomBase62(BODY_LENGTH);
  return (mode === 'test' ? TEST_KEY_PREFIX : KEY_PREFIX) + body + checksum(secret, body);
}

export function isWellFormedKey(secret: string, key: string): boolean {
  if (!KEY_PATTERN.test(key)) return false;
  const body = key.slice(PREFIX_LENGTH, PREFIX_LENGTH + BODY_LENGTH);
  const given = Buffer.from(key.slice(PREFIX_LENGTH + BODY_LENGTH));
  return timingSafeEqual(given, Buffer.from(checksum(secret, body)));
}

/** The mode a (well-formed) key says it is for. */
export function keyMode(key: string): KeyMode {
  return key.startsWith(TEST_KEY_PREFIX) ? 'test' : 'live';
}

/**
 * Keys are stored as HMAC-SHA256 under SECRET_KEY. A key carries 220 random bits, so a fast keyed
 * hash is as safe as a password hash here and costs microseconds per request instead of tens of
 * milliseconds; the secret means a stolen database alone does not let anyone test guesses.
 */
export function hashKey(secret: string, key: string): string {
  return createHmac('sha256', secret).update(key).digest('hex');
}

/** Anything in a URL that looks like one of our keys, of either mode (to refuse and redact it). */
export const KEY_IN_TEXT = /od_(?:live|test)_[A-Za-z0-9]*/g;

/** Whether a text holds the prefix of a key of either mode. */
export function mentionsKey(text: string): boolean {
  return text.includes(KEY_PREFIX) || text.includes(TEST_KEY_PREFIX);
}
