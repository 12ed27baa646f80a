import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database, Role } from '../../db/schema.js';
import { ForbiddenError, UnauthorizedError } from '../errors.js';
import { nowIso } from '../ids.js';
import { verifyPassword } from '../orgs/passwords.js';

export const SESSION_DAYS = 7;
const DAY_MS = 86_400_000;
// A real argon2id hash of a random password: verifying against it when the email is unknown takes
// as long as a real check, so response times do not tell which emails have accounts.
const DUMMY_HASH = '$argon2id$v=19$m=19456,t=2,p=1$K5BWKk/bPAlrl4v/ZWs2wA$yhcaNsxp6MjBS7FKwUzeZG63UYYeO8gNHV8hu6CLuf8';

const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

export interface SessionView {
  userId: string;
  email: string;
  orgId: string;
  orgName: string;
  role: Role;
  csrfToken: string;
  /** Every organisation the user belongs to, for the switcher. */
  orgs: { id: string; name: string; role: Role }[];
}

async function membershipsOf(db: Kysely<Database>, userId: string) {
  return db
    .selectFrom('memberships')
    .innerJoin('orgs', 'orgs.id', 'memberships.org_id')
    .select(['orgs.id', 'orgs.name', 'memberships.role'])
    .where('memberships.user_id', '=', userId)
    .orderBy('orgs.created_at')
    .orderBy('orgs.id')
    .execute();
}

/** Checks email and password; opens a session in the user's first organisation. */
export async function signIn(
  db: Kysely<Database>,
  email: string,
  password: string,
  now: Date,
): Promise<{ token: string; expiresAt: Date }> {
  const user = await db
    .selectFrom('users')
    .select(['id', 'password_hash', 'deactivated_at'])
    .where('email_lower', '=', email.trim().toLowerCase())
    .executeTakeFirst();
  const valid = await verifyPassword(user?.password_hash ?? DUMMY_HASH, password.slice(0, 1024));
  if (!user || !valid || user.deactivated_at !== null) throw new UnauthorizedError('The email or password is not right.');
  const orgs = await membershipsOf(db, user.id);
  const first = orgs[0];
  if (!first) throw new ForbiddenError('This account does not belong to any organisation yet.');
  return openSession(db, user.id, first.id, now);
}

/**
 * A new session (a new token, a new CSRF token) for a user in one of their organisations: what a
 * sign-in, an accepted invitation and a password change end with. Callers end the session the
 * request came with, if any: every change of who is signed in or how gets a fresh token.
 */
export async function openSession(
  db: Kysely<Database>,
  userId: string,
  orgId: string,
  now: Date,
): Promise<{ token: string; expiresAt: Date }> {
  const token = randomBytes(32).toString('base64url');
  const expiresAt = new Date(now.getTime() + SESSION_DAYS * DAY_MS);
  await db
    .insertInto('sessions')
    .values({
      id_hash: hashToken(token),
      user_id: userId,
      org_id: orgId,
      csrf_token: randomBytes(24).toString('base64url'),
      created_at: nowIso(now),
      expires_at: nowIso(expiresAt),
    })
    .execute();
  return { token, expiresAt };
}

/**
 * The session behind a cookie, with the user's role read fresh on every request: a member who is
 * demoted or removed loses access at once. Null when the session is unknown, expired, or the
 * user no longer belongs to the session's organisation.
 */
export async function findSession(db: Kysely<Database>, token: string, now: Date): Promise<SessionView | null> {
  if (token.length < 20 || token.length > 100) return null;
  const row = await db
    .selectFrom('sessions')
    .innerJoin('users', 'users.id', 'sessions.user_id')
    .innerJoin('orgs', 'orgs.id', 'sessions.org_id')
    .leftJoin('memberships', (join) =>
      join.onRef('memberships.org_id', '=', 'sessions.org_id').onRef('memberships.user_id', '=', 'sessions.user_id'),
    )
    .select([
      'sessions.user_id',
      'sessions.org_id',
      'sessions.csrf_token',
      'sessions.expires_at',
      'users.email',
      'users.deactivated_at',
      'orgs.name as org_name',
      'memberships.role',
    ])
    .where('sessions.id_hash', '=', hashToken(token))
    .executeTakeFirst();
  if (!row || row.expires_at <= nowIso(now) || row.deactivated_at !== null || !row.role) return null;
  return {
    userId: row.user_id,
    email: row.email,
    orgId: row.org_id,
    orgName: row.org_name,
    role: row.role,
    csrfToken: row.csrf_token,
    orgs: await membershipsOf(db, row.user_id),
  };
}

export async function signOut(db: Kysely<Database>, token: string): Promise<void> {
  await db.deleteFrom('sessions').where('id_hash', '=', hashToken(token)).execute();
}

/** Moves the session to another organisation the user belongs to. */
export async function switchOrg(db: Kysely<Database>, token: string, session: SessionView, orgId: string): Promise<void> {
  if (!session.orgs.some((org) => org.id === orgId)) throw new ForbiddenError('You are not a member of that organisation.');
  await db.updateTable('sessions').set({ org_id: orgId }).where('id_hash', '=', hashToken(token)).execute();
}

export async function purgeExpiredSessions(db: Kysely<Database>, now: Date): Promise<void> {
  await db.deleteFrom('sessions').where('expires_at', '<=', nowIso(now)).execute();
}
