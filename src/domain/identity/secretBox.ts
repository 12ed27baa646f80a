import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Secrets the server must read back (a TOTP secret, an SSO client secret) are stored sealed with
 * AES-256-GCM under a key derived from SECRET_KEY by HKDF-SHA256 (IDENTITY.md): a copy of the
 * database without SECRET_KEY holds none of them in clear, and a changed byte is detected. The
 * `purpose` is both the HKDF info and GCM's additional data, so a value sealed for one use cannot
 * be opened as another. Stored as `v1.` + base64url(iv ‖ tag ‖ ciphertext).
 */
const VERSION = 'v1.';

function keyFor(secretKey: string, purpose: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(secretKey, 'utf8'), Buffer.alloc(0), `orgdata identity secret: ${purpose}`, 32));
}

export function sealSecret(secretKey: string, purpose: string, plaintext: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', keyFor(secretKey, purpose), iv);
  cipher.setAAD(Buffer.from(purpose, 'utf8'));
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return VERSION + Buffer.concat([iv, cipher.getAuthTag(), body]).toString('base64url');
}

/** The secret, or an error when it was sealed under another SECRET_KEY or purpose, or altered. */
export function openSecret(secretKey: string, purpose: string, sealed: string): string {
  if (!sealed.startsWith(VERSION)) throw new Error('sealed secret: unknown format');
  const raw = Buffer.from(sealed.slice(VERSION.length), 'base64url');
  if (raw.length < 28) throw new Error('sealed secret: too short');
  const decipher = createDecipheriv('aes-256-gcm', keyFor(secretKey, purpose), raw.subarray(0, 12));
  decipher.setAAD(Buffer.from(purpose, 'utf8'));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}
