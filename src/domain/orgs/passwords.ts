import { randomBytes } from 'node:crypto';
import { hash, verify } from '@node-rs/argon2';

// @node-rs/argon2 defaults to argon2id (19 MiB, 2 passes: OWASP's minimum recommendation); its
// Algorithm enum is a const enum that isolated modules cannot import, and a test checks the prefix.
export function hashPassword(password: string): Promise<string> {
  return hash(password);
}

export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  try {
    return await verify(passwordHash, password);
  } catch {
    return false;
  }
}

/**
 * For an account made without a password (SSO, a passkey): the hash of random bytes nobody ever
 * sees, so no password signs in to it until its owner sets one (a password reset).
 */
export function unusablePasswordHash(): Promise<string> {
  return hashPassword(randomBytes(32).toString('base64url'));
}
