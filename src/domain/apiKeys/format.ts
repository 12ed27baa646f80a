import { createHmac, timingSafeEqual } from 'node:crypto';
import { randomBase62 } from '../ids.js';

/**
 * Key format: `od_live_` + 43 characters of [A-Za-z0-9]: 37 random (≈220 bits) and a 6-character
 * checksum of those 37, so a mistyped or made-up key is refused without a database read. The
 * checksum is keyed with SECRET_KEY: nobody without it can make a key that passes, so a flood of
 * forged keys costs the server an HMAC each, never a database read.
 */
export const KEY_PREFIX = 'od_live_';
const BODY_LENGTH = 37;
const CHECKSUM_LENGTH = 6;
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const KEY_PATTERN = /^od_live_[A-Za-z0-9]{43}$/;

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

export function generateKey(secret: string): string {
  const body = randomBase62(BODY_LENGTH);
  return KEY_PREFIX + body + checksum(secret, body);
}

export function isWellFormedKey(secret: string, key: string): boolean {
  if (!KEY_PATTERN.test(key)) return false;
  const body = key.slice(KEY_PREFIX.length, KEY_PREFIX.length + BODY_LENGTH);
  const given = Buffer.from(key.slice(KEY_PREFIX.length + BODY_LENGTH));
  return timingSafeEqual(given, Buffer.from(checksum(secret, body)));
}

/**
 * Keys are stored as HMAC-SHA256 under SECRET_KEY. A key carries 220 random bits, so a fast keyed
 * hash is as safe as a password hash here and costs microseconds per request instead of tens of
 * milliseconds; the secret means a stolen database alone does not let anyone test guesses.
 */
export function hashKey(secret: string, key: string): string {
  return createHmac('sha256', secret).update(key).digest('hex');
}

/** Anything in a URL that looks like one of our keys (to refuse and redact it). */
export const KEY_IN_TEXT = /od_live_[A-Za-z0-9]*/g;
