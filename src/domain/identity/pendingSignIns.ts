import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { openSecret } from './secretBox.js';
import { TOTP_PURPOSE, totpStep } from './totp.js';

/**
 * A pending sign-in (IDENTITY.md): the password was right and the account has a second factor,
 * so no session yet, only a 'two_factor' challenge (challenges.ts) that lasts 5 minutes and ends
 * after 5 wrong codes. What it carries to the second step:
 */
export interface PendingSignIn {
  orgId: string;
  /** Where to go once signed in (checked again by safeNext). */
  next: string;
  email: string;
  /** The invitation (its link's hash) an existing account accepted with its password: joined after the code. */
  invitation?: string;
}

export const PENDING_SIGN_IN_MS = 5 * 60_000;
export const PENDING_SIGN_IN_ATTEMPTS = 5;

/**
 * Why a code was refused, for Activity: a code that is right for this moment but was used already
 * is a replay (someone may have watched it being typed), anything else a wrong code.
 */
export async function refusalReason(
  db: Kysely<Database>,
  secretKey: string,
  userId: string,
  code: string,
  now: Date,
): Promise<'replayed_code' | 'wrong_code'> {
  const factor = await db
    .selectFrom('totp_factors')
    .select('secret_sealed')
    .where('user_id', '=', userId)
    .where('confirmed_at', 'is not', null)
    .executeTakeFirst();
  if (!factor) return 'wrong_code';
  const step = totpStep(openSecret(secretKey, TOTP_PURPOSE, factor.secret_sealed), code, now, null);
  return step === null ? 'wrong_code' : 'replayed_code';
}
