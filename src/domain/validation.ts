import { domainToASCII, domainToUnicode } from 'node:url';
import { ValidationError, type FieldError } from './errors.js';

export const LIMITS = {
  name: 200,
  email: 320,
  phone: 50,
  address: 1000,
  notes: 10_000,
  labelName: 100,
} as const;

/** Length as people count it (code points), the same way JSON Schema's maxLength does. */
export function charLength(value: string): number {
  let n = 0;
  for (const _ of value) n++;
  return n;
}

/**
 * Whether `value` has more than `max` code points: counted only when its UTF-16 length is over
 * `max` (a string has at most as many code points as code units), so a field within its limit,
 * nearly every one, is not walked character by character.
 */
export function longerThan(value: string, max: number): boolean {
  return value.length > max && charLength(value) > max;
}

// NUL cannot be stored by PostgreSQL and has no business in any field; other C0 controls are
// refused in one-line fields (tab, newline and carriage return stay allowed in multi-line ones).
// C1 controls are refused everywhere; bidirectional embedding, override and isolate controls in
// one-line fields (names, emails), where they can make a name display as something else.
const NUL = /\u0000/;
const ONE_LINE_CONTROL = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/;
const MULTI_LINE_CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/;
// A lone UTF-16 surrogate is not text: stored as U+FFFD it would make two different inputs equal.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Whether a string is well-formed Unicode text without control characters. */
export function isCleanText(value: string, multiline = false): boolean {
  return !(multiline ? MULTI_LINE_CONTROL : ONE_LINE_CONTROL).test(value) && !LONE_SURROGATE.test(value);
}

export function checkText(
  field: string,
  value: string,
  errors: FieldError[],
  options: { max: number; required?: boolean; multiline?: boolean },
): void {
  if (options.required && value.trim().length === 0) {
    errors.push({ field, message: 'must not be empty' });
    return;
  }
  if (longerThan(value, options.max)) {
    errors.push({ field, message: `must be at most ${options.max} characters` });
    return;
  }
  if (NUL.test(value) || !isCleanText(value, options.multiline)) {
    errors.push({ field, message: 'must be text without control characters' });
  }
}

// RFC 5322 dot-atom local part (with RFC 6531 UTF-8 allowed), and a valid IDN (IDNA, UTS #46)
// whose canonical form has LDH labels (internationalised letters allowed) and at least one dot. Quoted local parts and address
// literals are valid RFC 5322 but refused: no mail system a contact list feeds accepts them.
const ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-\\u0080-\\uFFFF]";
const LOCAL = new RegExp(`^${ATEXT}+(\\.${ATEXT}+)*$`, 'u');
const LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{N}-]{0,61}[\p{L}\p{N}])?$/u;

/**
 * What canonicalDomain and isEmail found for the last few thousand values: both are pure, and a
 * create checked and normalised its email's domain three times (the body's schema, the domain's
 * checks, the stored form), each through IDNA in both directions: about 13,000 instructions an
 * address, 27,000 a contact of a batch (issue 46). An organisation's contacts share few domains.
 */
const domains = new Map<string, string | null>();
const emails = new Map<string, boolean>();
const REMEMBERED = 4096;

function remember<T>(map: Map<string, T>, key: string, value: T): void {
  if (key.length > LIMITS.email) return; // refused anyway; not kept
  if (map.size >= REMEMBERED) map.clear();
  map.set(key, value);
}

/**
 * A domain in its one canonical form, or null when it is not a valid IDN: IDNA's UTS #46 mapping
 * (lower case, NFC, full-width dots, `xn--` labels decoded), so `exämple.com`, `EXÄMPLE.com` and
 * `xn--exmple-cua.com` are one domain, written `exämple.com`.
 */
function canonicalDomain(domain: string): string | null {
  const known = domains.get(domain);
  if (known !== undefined) return known;
  const canonical = domainOf(domain);
  remember(domains, domain, canonical);
  return canonical;
}

function domainOf(domain: string): string | null {
  const ascii = domainToASCII(domain);
  // Node does not check DNS lengths: 63 octets a label, 253 in all (as sent, in ASCII).
  if (ascii === '' || ascii.length > 253 || ascii.split('.').some((label) => label.length > 63)) return null;
  const unicode = domainToUnicode(ascii);
  // An `xn--` label that does not decode is no IDN: Node 20 refused it in domainToASCII, Node 24
  // (ada) passes it through, so a label still `xn--` after decoding is refused here.
  if (unicode.split('.').some((label) => label.toLowerCase().startsWith('xn--'))) return null;
  return unicode;
}

export function isEmail(value: string): boolean {
  const known = emails.get(value);
  if (known !== undefined) return known;
  const valid = emailIsValid(value);
  remember(emails, value, valid);
  return valid;
}

function emailIsValid(value: string): boolean {
  if (longerThan(value, LIMITS.email) || !isCleanText(value) || /\s/u.test(value)) return false;
  const at = value.lastIndexOf('@');
  if (at <= 0) return false;
  const local = value.slice(0, at);
  if (Buffer.byteLength(local) > 64 || !LOCAL.test(local)) return false;
  const domain = canonicalDomain(value.slice(at + 1));
  if (domain === null || (local.length + 1 + domain.length > LIMITS.email && charLength(local) + 1 + charLength(domain) > LIMITS.email))
    return false;
  const labels = domain.split('.');
  if (labels.length < 2) return false;
  for (let i = 0; i < labels.length; i++) if (!LABEL.test(labels[i]!)) return false;
  return !/^\d+$/.test(labels[labels.length - 1] ?? '');
}

/**
 * The form an email is stored, compared and returned in: the local part as given (mail systems
 * may treat its case as significant) in Unicode NFC, `@`, and the domain in canonical form. NFC
 * because `ü` may be typed as one code point or as `u` and a combining diaeresis: the same address
 * to a person and to mail systems (RFC 6532 asks for NFC), two strings to a unique index. A value
 * that is not an email comes back in NFC, otherwise unchanged, for the validation to refuse.
 */
export function normaliseEmail(given: string): string {
  const value = given.normalize('NFC');
  const at = value.lastIndexOf('@');
  if (at <= 0) return value;
  const domain = canonicalDomain(value.slice(at + 1));
  return domain === null ? value : `${value.slice(0, at)}@${domain}`;
}

export function checkEmail(field: string, value: string, errors: FieldError[]): void {
  if (longerThan(value, LIMITS.email)) {
    errors.push({ field, message: `must be at most ${LIMITS.email} characters` });
  } else if (!isEmail(value)) {
    errors.push({ field, message: 'must be a valid email address such as ada@example.com' });
  }
}

/**
 * An ISO 8601 date-time from a request as the stored form (UTC with milliseconds), so that
 * `…T12:00:00Z`, `…T12:00:00.000Z` and `…T13:00:00+01:00` compare as the same instant. Only years
 * 0000–9999 in UTC: outside them `toISOString()` writes `+010000-…` or `-000001-…`, which compare
 * as text before every stored timestamp and would turn a filter into "everything".
 */
export function parseInstant(field: string, value: string): string {
  const date = new Date(value);
  const year = date.getUTCFullYear();
  if (Number.isNaN(date.getTime()) || year < 0 || year > 9999) {
    throw ValidationError.field(field, 'must be an ISO 8601 date-time between 0000-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z');
  }
  return date.toISOString();
}
