import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * The secret of an invitation or password-reset link: 32 random bytes (256 bits), in the URL as
 * 43 base64url characters, stored only as its SHA-256. A stolen database holds no usable link,
 * and a salted slow hash buys nothing against 256 random bits. A link is found by its hash (an
 * index lookup on a value the holder of a guess cannot steer), and the hash found is compared
 * again in constant time.
 */
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

export function newLinkToken(): { token: string; hash: string } {
  const token = randomBytes(32).toString('base64url');
  return { token, hash: hashLinkToken(token) };
}

export function hashLinkToken(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/** The hash to look a link up by, or null for what no link of ours looks like. */
export function lookupHash(token: string): string | null {
  return TOKEN.test(token) ? hashLinkToken(token) : null;
}

/** Whether a stored hash is the one asked for, in constant time. */
export function sameHash(stored: string, asked: string): boolean {
  const a = Buffer.from(stored, 'hex');
  const b = Buffer.from(asked, 'hex');
  return a.length === b.length && a.length > 0 && timingSafeEqual(a, b);
}

/** An instant `amount` units after `now`, as stored (ISO 8601, UTC). */
export function later(now: Date, ms: number): string {
  return new Date(now.getTime() + ms).toISOString();
}
