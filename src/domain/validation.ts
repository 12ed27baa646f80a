import type { FieldError } from './errors.js';

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
  if (charLength(value) > options.max) {
    errors.push({ field, message: `must be at most ${options.max} characters` });
    return;
  }
  if (NUL.test(value) || !isCleanText(value, options.multiline)) {
    errors.push({ field, message: 'must be text without control characters' });
  }
}

// RFC 5322 dot-atom local part (with RFC 6531 UTF-8 allowed), and a domain of LDH labels
// (internationalised letters allowed) with at least one dot. Quoted local parts and address
// literals are valid RFC 5322 but refused: no mail system a contact list feeds accepts them.
const ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~\\-\\u0080-\\uFFFF]";
const LOCAL = new RegExp(`^${ATEXT}+(\\.${ATEXT}+)*$`, 'u');
const LABEL = /^[\p{L}\p{N}](?:[\p{L}\p{N}-]{0,61}[\p{L}\p{N}])?$/u;

export function isEmail(value: string): boolean {
  if (charLength(value) > LIMITS.email || !isCleanText(value) || /\s/u.test(value)) return false;
  const at = value.lastIndexOf('@');
  if (at <= 0) return false;
  const local = value.slice(0, at);
  const domain = value.slice(at + 1);
  if (Buffer.byteLength(local) > 64 || !LOCAL.test(local)) return false;
  if (Buffer.byteLength(domain) > 255) return false;
  const labels = domain.split('.');
  if (labels.length < 2) return false;
  return labels.every((label) => LABEL.test(label)) && !/^\d+$/.test(labels[labels.length - 1] ?? '');
}

export function checkEmail(field: string, value: string, errors: FieldError[]): void {
  if (charLength(value) > LIMITS.email) {
    errors.push({ field, message: `must be at most ${LIMITS.email} characters` });
  } else if (!isEmail(value)) {
    errors.push({ field, message: 'must be a valid email address such as ada@example.com' });
  }
}
