import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { ForbiddenError, UnauthorizedError } from '../errors.js';
import { verifyPassword } from '../orgs/passwords.js';
import { firstOrgOf, openSession } from './sessions.js';

// Signing in with an email and a password (the dashboard's form, scripts and tests); the session
// it opens is sessions.ts's.

// A real argon2id hash of a random password: verifying against it when the email is unknown takes
// as long as a real check, so response times do not tell which emails have accounts.
const DUMMY_HASH = '$argon2id$v=19$m=19456,t=2,p=1$K5BWKk/bPAlrl4v/ZWs2wA$yhcaNsxp6MjBS7FKwUzeZG63UYYeO8gNHV8hu6CLuf8';

/** Who an email and password belong to, when they are right. */
export interface PasswordHolder {
  userId: string;
  email: string;
  /** The user's first organisation: where a session opens. */
  orgId: string;
}

/** Why a password sign-in failed, for Activity (the person is only told "not right"). */
export class SignInRefused extends UnauthorizedError {
  constructor(
    /** unknown_email | wrong_password | deactivated */
    readonly reason: string,
    /** The account the email names, when there is one (its organisations record the failure). */
    readonly user: { id: string; email: string } | null,
  ) {
    super('The email or password is not right.');
  }
}

/**
 * Checks email and password (as long for an unknown email as for a known one). Throws
 * SignInRefused, or ForbiddenError for an account in no organisation.
 */
export async function checkPassword(db: Kysely<Database>, email: string, password: string): Promise<PasswordHolder> {
  const user = await db
    .selectFrom('users')
    .select(['id', 'email', 'password_hash', 'deactivated_at'])
    .where('email_lower', '=', email.trim().toLowerCase())
    .executeTakeFirst();
  const valid = await verifyPassword(user?.password_hash ?? DUMMY_HASH, password.slice(0, 1024));
  if (!user) throw new SignInRefused('unknown_email', null);
  if (!valid) throw new SignInRefused('wrong_password', { id: user.id, email: user.email });
  if (user.deactivated_at !== null) throw new SignInRefused('deactivated', { id: user.id, email: user.email });
  const orgId = await firstOrgOf(db, user.id);
  if (!orgId) throw new ForbiddenError('This account does not belong to any organisation yet.');
  return { userId: user.id, email: user.email, orgId };
}

/** Checks email and password and opens a session in the user's first organisation (no second factor asked: scripts and tests). */
export async function signIn(
  db: Kysely<Database>,
  email: string,
  password: string,
  now: Date,
): Promise<{ token: string; expiresAt: Date }> {
  const holder = await checkPassword(db, email, password);
  return openSession(db, holder.userId, holder.orgId, now);
}
