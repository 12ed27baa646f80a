import { randomBytes } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** `length` characters of [0-9A-Za-z], uniformly drawn (rejection sampling avoids modulo bias). */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += ALPHABET[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export type IdPrefix = 'con' | 'lbl' | 'grp' | 'file' | 'key' | 'org' | 'usr';

/** Opaque identifiers with a type prefix, e.g. `con_8fK2...`. 20 base62 characters ≈ 119 bits. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBase62(20)}`;
}

/** Whether `value` looks like an id of this kind; lets a lookup skip the database for garbage. */
export function isId(prefix: IdPrefix, value: string): boolean {
  return value.length === prefix.length + 21 && value.startsWith(prefix + '_') && /^[0-9A-Za-z]+$/.test(value.slice(prefix.length + 1));
}

/** ISO 8601 UTC with milliseconds: the one timestamp format stored and returned. */
export function nowIso(now: Date = new Date()): string {
  return now.toISOString();
}
