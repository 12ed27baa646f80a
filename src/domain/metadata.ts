import type { FieldError } from './errors.js';
import { charLength, isCleanText, longerThan } from './validation.js';
import { parseJson } from './json.js';

/**
 * `metadata` on contacts and groups: an integrator's own string pairs, with Stripe's rules. At
 * most 50 keys; a key is 1–40 characters of one-line text without `[` or `]` (it is written
 * inside them to filter, `metadata[key]=value`); a value is at most 500 characters. On an update
 * the keys sent merge into the stored ones, a key sent as `null` or `""` is removed, and
 * `metadata: null` removes them all.
 */
export const METADATA_LIMITS = { keys: 50, key: 40, value: 500 } as const;

export type Metadata = Record<string, string>;
/** What a client sends: `null` values (and `""`) remove a key; `null` for the whole clears it. */
export type MetadataInput = Record<string, string | null> | null;

export const METADATA_KEY_PATTERN = '^[^\\[\\]\\u0000-\\u001f\\u007f-\\u009f]+$';
const KEY = new RegExp(METADATA_KEY_PATTERN, 'u');

/**
 * `__proto__` is refused as a key: stored, it would come back in every read, event and webhook,
 * and many JSON parsers (Fastify's by default) refuse a document holding it, so an integrator's
 * receiver could not read them. `constructor` and `prototype` are ordinary keys.
 */
export const RESERVED_METADATA_KEY = '__proto__';

/**
 * What a client is told for each rule, the same from the domain and from the API's schema
 * validation (see http/schemas/common.ts), so a rule is named the same way whichever finds it.
 */
export const METADATA_MESSAGES = {
  keys: `must have at most ${METADATA_LIMITS.keys} keys`,
  key: `keys are 1 to ${METADATA_LIMITS.key} characters without [, ] or control characters`,
  value: `must be a string of at most ${METADATA_LIMITS.value} characters, or null (or "") to remove the key; numbers, booleans, objects and arrays are not values`,
  reserved: 'is reserved and cannot be a key',
} as const;

export function isMetadataKey(key: string): boolean {
  const length = charLength(key);
  return length >= 1 && length <= METADATA_LIMITS.key && KEY.test(key) && isCleanText(key) && key !== RESERVED_METADATA_KEY;
}

export function metadataValueError(value: string): string | null {
  if (longerThan(value, METADATA_LIMITS.value)) return `must be at most ${METADATA_LIMITS.value} characters`;
  if (!isCleanText(value, true) || value.includes('\u0000')) return 'must be text without control characters';
  return null;
}

/** The field errors of `metadata` as sent (keys, values and count of keys sent). */
export function metadataFieldErrors(field: string, given: MetadataInput | undefined, errors: FieldError[]): void {
  if (given === undefined || given === null) return;
  const entries = Object.entries(given);
  if (entries.length > METADATA_LIMITS.keys) {
    errors.push({ field, message: METADATA_MESSAGES.keys });
    return;
  }
  for (const [key, value] of entries) {
    if (key === RESERVED_METADATA_KEY) {
      errors.push({ field: `${field}.${key}`, message: METADATA_MESSAGES.reserved });
      return;
    }
    if (!isMetadataKey(key)) {
      errors.push({ field, message: METADATA_MESSAGES.key });
      return;
    }
    const problem = value === null ? null : metadataValueError(value);
    if (problem) errors.push({ field: `${field}.${key}`, message: problem });
  }
}

/**
 * `current` with `given` applied: keys kept in their order, new ones after them; a `null` or `""`
 * value removes its key, `given === null` removes every key, `undefined` changes nothing. Built
 * in a Map: a key such as `__proto__` is a key like any other.
 */
export function mergeMetadata(current: Metadata, given: MetadataInput | undefined): Metadata {
  if (given === undefined) return current;
  if (given === null) return {};
  const merged = new Map(Object.entries(current));
  for (const [key, value] of Object.entries(given)) {
    if (value === null || value === '') merged.delete(key);
    else merged.set(key, value);
  }
  return Object.fromEntries(merged);
}

/** Whether a merged metadata object is within the key limit (the sent one is checked before). */
export function metadataCountError(field: string, metadata: Metadata): FieldError | null {
  const count = Object.keys(metadata).length;
  return count > METADATA_LIMITS.keys
    ? { field, message: `would have ${count} keys; at most ${METADATA_LIMITS.keys} (remove some with null)` }
    : null;
}

export function parseMetadata(text: string | null | undefined): Metadata {
  // Most contacts have none: '{}' is read without a call of JSON.parse.
  if (!text || text === '{}') return {};
  return parseJson(text) as Metadata;
}
