import { createHash, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import type { Kysely } from 'kysely';
import { generateSecret, generateURI, verifySync } from 'otplib';
import type { Database } from '../../db/schema.js';
import { newId, nowIso } from '../ids.js';
import { openSecret, sealSecret } from './secretBox.js';
import { hashPassword, verifyPassword } from '../orgs/passwords.js';

/**
 * TOTP (RFC 6238: SHA-1, 6 digits, 30-second steps, one step either side) and recovery codes:
 * the core every second-factor check goes through (sign-in, re-authentication, turning 2FA off).
 * otplib computes and checks codes; what it cannot know is kept here: the secret sealed at rest,
 * the last accepted step (a code of that step or an earlier one is a replay, refused even within
 * its window), and single-use recovery codes. Both "use once" rules are one conditional UPDATE,
 * so two instances given the same code at the same moment accept it once.
 */
export const TOTP_PURPOSE = 'totp';
export const TOTP_ISSUER = 'orgdata';
const PERIOD = 30;
export const RECOVERY_CODE_COUNT = 10;
const SIX_DIGITS = /^\d{6}$/;

export function newTotpSecret(): string {
  return generateSecret({ length: 20 });
}

export function sealTotpSecret(secretKey: string, secret: string): string {
  return sealSecret(secretKey, TOTP_PURPOSE, secret);
}

/** `otpauth://totp/orgdata:EMAIL?secret=…&issuer=orgdata…` for an authenticator app. */
export function totpUri(secret: string, email: string): string {
  return generateURI({ issuer: TOTP_ISSUER, label: email, secret, algorithm: 'sha1', digits: 6, period: PERIOD });
}

/** The 30-second step a code belongs to, or null when it is not a code of `secret` within ±1 step of `now`. */
export function totpStep(secret: string, code: string, now: Date, afterStep: number | null): number | null {
  const token = code.replace(/\s+/g, '');
  if (!SIX_DIGITS.test(token)) return null;
  const result = verifySync({
    secret,
    token,
    epoch: Math.floor(now.getTime() / 1000),
    epochTolerance: PERIOD,
    period: PERIOD,
    ...(afterStep === null ? {} : { afterTimeStep: afterStep }),
  });
  // The functional API's result type is TOTP's and HOTP's together; a TOTP check carries timeStep.
  const step = (result as { valid: boolean; timeStep?: number }).timeStep;
  return result.valid && typeof step === 'number' ? step : null;
}

/**
 * Accepts a code of the user's TOTP secret once: `confirmed` false checks the secret being set up
 * (not yet a factor). Returns false for a wrong code, a replay, or no such factor.
 */
export async function acceptTotpCode(
  db: Kysely<Database>,
  secretKey: string,
  userId: string,
  code: string,
  now: Date,
  options: { confirmed: boolean } = { confirmed: true },
): Promise<boolean> {
  const factor = await db
    .selectFrom('totp_factors')
    .select(['secret_sealed', 'confirmed_at', 'last_step'])
    .where('user_id', '=', userId)
    .executeTakeFirst();
  if (!factor || (factor.confirmed_at !== null) !== options.confirmed) return false;
  const secret = openSecret(secretKey, TOTP_PURPOSE, factor.secret_sealed);
  const lastStep = factor.last_step === null ? null : Number(factor.last_step);
  const step = totpStep(secret, code, now, lastStep);
  if (step === null) return false;
  const taken = await db
    .updateTable('totp_factors')
    .set({ last_step: step })
    .where('user_id', '=', userId)
    .where((eb) => eb.or([eb('last_step', 'is', null), eb('last_step', '<', step)]))
    .executeTakeFirst();
  return Number(taken.numUpdatedRows) === 1;
}

const normaliseRecoveryCode = (code: string) => code.toLowerCase().replace(/[\s-]+/g, '');

/**
 * Recovery codes are look-up secrets hashed like passwords (IDENTITY.md rule 16): argon2id with a
 * random salt of each code's own (in the PHC string), so a stolen database gives no code away by
 * one pass over the code space (50 bits each: every guess costs an argon2id, per code). No
 * look-up prefix is stored (it would tell part of the code, or need codes of >= 112 bits to stay
 * safe): a code given is checked against that user's unused codes only, at most 10, each check on
 * libuv's thread pool; these checks run only after the password (a pending sign-in that five wrong
 * codes end) or inside a session, under the sign-in throttle, so their cost stays bounded.
 *
 * Codes stored before 025 (unsalted SHA-256) were wrapped by that migration in scrypt, the slow
 * salted hash built into Node (a migration uses no other package): `sha256$scrypt$ln=15,r=8,p=1$
 * SALT$HASH`, scrypt of the code's hex SHA-256. Still single-use, no longer readable in bulk.
 */
const LEGACY = /^sha256\$scrypt\$ln=(\d{1,2}),r=(\d{1,2}),p=(\d{1,2})\$([A-Za-z0-9+/]{22})\$([A-Za-z0-9+/]{43})$/;

function matchesLegacy(stored: RegExpExecArray, normalised: string): Promise<boolean> {
  const [, ln, r, p, salt, expected] = stored;
  const digest = createHash('sha256').update(normalised).digest('hex');
  return new Promise((resolve) =>
    scrypt(
      digest,
      Buffer.from(salt!, 'base64'),
      32,
      { N: 2 ** Number(ln), r: Number(r), p: Number(p), maxmem: 256 * 1024 * 1024 },
      (error, key) => resolve(!error && timingSafeEqual(key, Buffer.from(expected!, 'base64'))),
    ),
  );
}

export function hashRecoveryCode(code: string): Promise<string> {
  return hashPassword(normaliseRecoveryCode(code));
}

function matchesRecoveryCode(stored: string, normalised: string): Promise<boolean> {
  const legacy = LEGACY.exec(stored);
  if (legacy) return matchesLegacy(legacy, normalised);
  return verifyPassword(stored, normalised);
}

export interface NewRecoveryCodes {
  codes: string[];
  hashes: string[];
}

/**
 * Ten new recovery codes (`xxxxx-xxxxx`, 50 random bits each) and their hashes: made before the
 * transaction that stores them (replaceRecoveryCodes), so no argon2id holds a write lock.
 */
export async function newRecoveryCodes(): Promise<NewRecoveryCodes> {
  const alphabet = 'abcdefghjkmnpqrstuvwxyz23456789';
  const codes = Array.from({ length: RECOVERY_CODE_COUNT }, () => {
    const chars = Array.from(randomBytes(10), (byte) => alphabet[byte % alphabet.length]).join('');
    return `${chars.slice(0, 5)}-${chars.slice(5)}`;
  });
  return { codes, hashes: await Promise.all(codes.map(hashRecoveryCode)) };
}

/** The new recovery codes in place of the old ones; returns the codes, to be shown once. */
export async function replaceRecoveryCodes(trx: Kysely<Database>, userId: string, now: Date, fresh?: NewRecoveryCodes): Promise<string[]> {
  const { codes, hashes } = fresh ?? (await newRecoveryCodes());
  await trx.deleteFrom('recovery_codes').where('user_id', '=', userId).execute();
  await trx
    .insertInto('recovery_codes')
    .values(
      codes.map((_code, i) => ({
        id: newId('rc'),
        user_id: userId,
        code_hash: hashes[i]!,
        created_at: nowIso(now),
        used_at: null,
      })),
    )
    .execute();
  return codes;
}

/** Uses one of the user's recovery codes (once: two requests racing with one code, one wins). */
export async function useRecoveryCode(db: Kysely<Database>, userId: string, code: string, now: Date): Promise<boolean> {
  const normalised = normaliseRecoveryCode(code);
  if (!/^[a-z0-9]{10}$/.test(normalised)) return false;
  const unused = await db
    .selectFrom('recovery_codes')
    .select(['id', 'code_hash'])
    .where('user_id', '=', userId)
    .where('used_at', 'is', null)
    .limit(RECOVERY_CODE_COUNT)
    .execute();
  const matches = await Promise.all(unused.map((row) => matchesRecoveryCode(row.code_hash, normalised)));
  const found = unused.find((_row, i) => matches[i]);
  if (!found) return false;
  const used = await db
    .updateTable('recovery_codes')
    .set({ used_at: nowIso(now) })
    .where('id', '=', found.id)
    .where('used_at', 'is', null)
    .executeTakeFirst();
  return Number(used.numUpdatedRows) === 1;
}

/**
 * A second-factor code as the sign-in and re-authentication forms take it: six digits are a TOTP
 * code, anything else is tried as a recovery code. Returns what it was, or null when refused.
 */
export async function acceptSecondFactorCode(
  db: Kysely<Database>,
  secretKey: string,
  userId: string,
  code: string,
  now: Date,
): Promise<'totp' | 'recovery_code' | null> {
  const trimmed = code.trim();
  if (SIX_DIGITS.test(trimmed.replace(/\s+/g, ''))) return (await acceptTotpCode(db, secretKey, userId, trimmed, now)) ? 'totp' : null;
  if (trimmed.length > 64) return null;
  return (await useRecoveryCode(db, userId, trimmed, now)) ? 'recovery_code' : null;
}

export interface SecondFactors {
  /** A confirmed TOTP factor. */
  totp: boolean;
  passkeys: number;
  recoveryCodesLeft: number;
}

export async function secondFactorsOf(db: Kysely<Database>, userId: string): Promise<SecondFactors> {
  const [totp, passkeys, codes] = await Promise.all([
    db.selectFrom('totp_factors').select('user_id').where('user_id', '=', userId).where('confirmed_at', 'is not', null).executeTakeFirst(),
    db
      .selectFrom('passkeys')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('user_id', '=', userId)
      .executeTakeFirstOrThrow(),
    db
      .selectFrom('recovery_codes')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('user_id', '=', userId)
      .where('used_at', 'is', null)
      .executeTakeFirstOrThrow(),
  ]);
  return { totp: totp !== undefined, passkeys: Number(passkeys.n), recoveryCodesLeft: Number(codes.n) };
}

/** Whether the user has a second factor: a confirmed TOTP or a passkey (a passkey counts as two factors). */
export async function hasSecondFactor(db: Kysely<Database>, userId: string): Promise<boolean> {
  const factors = await secondFactorsOf(db, userId);
  return factors.totp || factors.passkeys > 0;
}
