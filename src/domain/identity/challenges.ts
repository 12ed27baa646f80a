import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { nowIso } from '../ids.js';

/**
 * Short-lived state between two requests of one sign-in or ceremony (IDENTITY.md): a pending
 * sign-in waiting for its second factor (5 minutes, no session meanwhile), a WebAuthn challenge,
 * an SSO state + nonce + PKCE verifier. The browser holds a random 256-bit token (a cookie); the
 * database holds its SHA-256, so any instance can finish what another began, and a stolen
 * database finishes nothing. Taking a challenge deletes it (single use: two instances racing for
 * one get it once).
 */
export type ChallengePurpose =
  | 'two_factor'
  | 'passkey_register'
  | 'passkey_join'
  | 'passkey_sign_in'
  | 'passkey_second_factor'
  | 'passkey_reauth'
  | 'sso'
  | 'sso_link'
  | 'reauth_grant';

export interface Challenge<T> {
  userId: string | null;
  data: T;
  attempts: number;
  expiresAt: string;
}

const hash = (token: string) => createHash('sha256').update(token).digest('hex');
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

/**
 * Challenges anybody can make without an account (a passkey sign-in's, an invitation's passkey,
 * an SSO start: `user_id` null) are kept to this many per purpose (IDENTITY.md rule 15): a new one
 * beyond it evicts the oldest of its purpose, rather than refusing, so a flood (already limited
 * per network and in total, see dashboard/visitLimits.ts) never stops a new sign-in from
 * starting, and only a ceremony older than the last 1,000 of its kind is lost (it starts again).
 * Challenges of an account are bounded by what made them (a right password, a session).
 */
export const PENDING_WITHOUT_ACCOUNT_MAX = 1_000;

export async function createChallenge<T extends object>(
  db: Kysely<Database>,
  purpose: ChallengePurpose,
  userId: string | null,
  data: T,
  ttlMs: number,
  now: Date,
  options: { max?: number } = {},
): Promise<string> {
  const token = randomBytes(32).toString('base64url');
  await db
    .insertInto('auth_challenges')
    .values({
      id_hash: hash(token),
      purpose,
      user_id: userId,
      data: JSON.stringify(data),
      attempts: 0,
      created_at: nowIso(now),
      expires_at: nowIso(new Date(now.getTime() + ttlMs)),
    })
    .execute();
  if (userId === null) await evictBeyond(db, purpose, options.max ?? PENDING_WITHOUT_ACCOUNT_MAX);
  return token;
}

/** Deletes the challenges without an account of `purpose` beyond the newest `max` (index: purpose, created_at). */
async function evictBeyond(db: Kysely<Database>, purpose: ChallengePurpose, max: number): Promise<void> {
  await db
    .deleteFrom('auth_challenges')
    .where('id_hash', 'in', (eb) =>
      eb
        .selectFrom('auth_challenges')
        .select('id_hash')
        .where('purpose', '=', purpose)
        .where('user_id', 'is', null)
        .orderBy('created_at', 'desc')
        .orderBy('id_hash', 'desc')
        .limit(1_000_000_000)
        .offset(max),
    )
    .execute();
}

/** The challenge a token names, when it is of this purpose and not expired; it stays (see takeChallenge). */
export async function findChallenge<T>(
  db: Kysely<Database>,
  purpose: ChallengePurpose,
  token: string | undefined,
  now: Date,
): Promise<Challenge<T> | null> {
  if (!token || !TOKEN.test(token)) return null;
  const row = await db
    .selectFrom('auth_challenges')
    .select(['user_id', 'data', 'attempts', 'expires_at'])
    .where('id_hash', '=', hash(token))
    .where('purpose', '=', purpose)
    .executeTakeFirst();
  if (!row || row.expires_at <= nowIso(now)) return null;
  return { userId: row.user_id, data: JSON.parse(row.data) as T, attempts: Number(row.attempts), expiresAt: row.expires_at };
}

/** Ends the challenge and returns it, once: null when another request took it first, or it expired. */
export async function takeChallenge<T>(
  db: Kysely<Database>,
  purpose: ChallengePurpose,
  token: string | undefined,
  now: Date,
): Promise<Challenge<T> | null> {
  const found = await findChallenge<T>(db, purpose, token, now);
  if (!found || !token) return null;
  const deleted = await db
    .deleteFrom('auth_challenges')
    .where('id_hash', '=', hash(token))
    .where('purpose', '=', purpose)
    .executeTakeFirst();
  return Number(deleted.numDeletedRows) === 1 ? found : null;
}

/**
 * Replaces the data a challenge keeps, only if it still holds `expected` (compare and set: of two
 * requests racing to change it, one wins). False when it changed meanwhile, expired or is gone.
 */
export async function replaceChallengeData<T extends object>(
  db: Kysely<Database>,
  purpose: ChallengePurpose,
  token: string,
  expected: T,
  next: T,
  now: Date,
): Promise<boolean> {
  if (!TOKEN.test(token)) return false;
  const updated = await db
    .updateTable('auth_challenges')
    .set({ data: JSON.stringify(next) })
    .where('id_hash', '=', hash(token))
    .where('purpose', '=', purpose)
    .where('data', '=', JSON.stringify(expected))
    .where('expires_at', '>', nowIso(now))
    .executeTakeFirst();
  return Number(updated.numUpdatedRows) === 1;
}

/** Counts a wrong answer; the challenge ends (and null is returned) once `limit` are reached. */
export async function countChallengeFailure(db: Kysely<Database>, token: string, limit: number): Promise<number | null> {
  const id = hash(token);
  await db
    .updateTable('auth_challenges')
    .set((eb) => ({ attempts: eb('attempts', '+', 1) }))
    .where('id_hash', '=', id)
    .execute();
  const row = await db.selectFrom('auth_challenges').select('attempts').where('id_hash', '=', id).executeTakeFirst();
  if (!row) return null;
  if (Number(row.attempts) >= limit) {
    await db.deleteFrom('auth_challenges').where('id_hash', '=', id).execute();
    return null;
  }
  return Number(row.attempts);
}

export async function purgeExpiredChallenges(db: Kysely<Database>, now: Date): Promise<void> {
  await db.deleteFrom('auth_challenges').where('expires_at', '<=', nowIso(now)).execute();
}
