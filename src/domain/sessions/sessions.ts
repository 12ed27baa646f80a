import { createHash, randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database, Role, TwoFactorPolicy } from '../../db/schema.js';
import { ForbiddenError } from '../errors.js';
import { nowIso } from '../ids.js';
import { switchRefusedBySso } from '../identity/ssoSignIn.js';

export const SESSION_DAYS = 7;
/** SESSION_IDLE_MINUTES's default: a session not seen for 12 hours ends (IDENTITY.md rule 14). */
export const DEFAULT_SESSION_IDLE_MINUTES = 720;
const DAY_MS = 86_400_000;

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
  /** The SHA-256 of the cookie: how the session is named in lists and revoked. */
  sessionHash: string;
  /** How the session was opened (password, password+totp, passkey, sso, …). */
  method: string;
  /** When its person last proved who they are (sign-in or re-authentication). */
  authenticatedAt: string;
  /**
   * When the account's own factors were last proved in this session (IDENTITY.md rule 8): what a
   * change to the account (passkeys, TOTP, recovery codes, password) needs. A session opened by an
   * organisation's SSO has none (null) until its person re-authenticates with them; any other
   * session's every proof was the account's own, so it is authenticatedAt.
   */
  accountProofAt: string | null;
  /** The organisation's two-factor policy (nobody | admins | everyone). */
  requireTwoFactor: TwoFactorPolicy;
  /**
   * Test mode (SANDBOX.md): the session shows the organisation's sandbox on its data and Developer
   * pages. A flag of the session, switched by a form (setTestMode), never by a URL.
   */
  testMode: boolean;
  /** The sandbox of `orgId` while testMode is on and it exists (read with the session, never stored). */
  sandboxOrgId: string | null;
}

/** How a session was opened, for the person's list of sessions and for re-authentication. */
export interface SessionOpening {
  /** password, password+totp, password+recovery_code, passkey, sso, invitation, password_reset */
  method: string;
  /** Approximate origin: the /24 or /48 and the browser's product name. */
  origin: string | null;
  /**
   * When its person last proved who they are, when the new session only replaces one (a password
   * change rotates the session but is no re-authentication: it asks no second factor). Now by default.
   */
  authenticatedAt?: string;
  /**
   * Whether the account's own factors were proved when it opened (account_proof_at = the time of
   * the proof). Default: every way in but single sign-on (an organisation's provider vouches for
   * that organisation only, IDENTITY.md rule 8).
   */
  accountProof?: boolean;
  /** Test mode carried over when the session is only replaced (re-authentication); off by default. */
  testMode?: boolean;
}

// last_seen_at is written when a request finds it older than this, not on every request.
const SEEN_EVERY_MS = 60_000;

/**
 * When a session last seen at `lastSeen` is idle for good: SESSION_IDLE_MINUTES after it, plus
 * SEEN_EVERY_MS, as the last request may have come up to that long after last_seen_at was written
 * (a session ends up to a minute late, never early).
 */
function idleSince(now: Date, idleMinutes: number): string {
  return nowIso(new Date(now.getTime() - idleMinutes * 60_000 - SEEN_EVERY_MS));
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

/** The organisation a user works in first (their oldest membership), or null. */
export async function firstOrgOf(db: Kysely<Database>, userId: string): Promise<string | null> {
  return (await membershipsOf(db, userId))[0]?.id ?? null;
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
  opening: SessionOpening = { method: 'password', origin: null },
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
      method: opening.method,
      authenticated_at: opening.authenticatedAt ?? nowIso(now),
      account_proof_at: (opening.accountProof ?? opening.method !== 'sso') ? (opening.authenticatedAt ?? nowIso(now)) : null,
      last_seen_at: nowIso(now),
      origin: opening.origin,
      test_mode: opening.testMode ? 1 : 0,
    })
    .execute();
  return { token, expiresAt };
}

/**
 * A new token (and CSRF token) for the same session: the rotation of a privilege change that is no
 * sign-in (turning on two-factor). Everything else about the session is kept; the old cookie no
 * longer opens it. Null when the session is gone.
 */
export async function rotateSession(
  db: Kysely<Database>,
  token: string,
): Promise<{ token: string; expiresAt: Date; idHash: string; csrfToken: string } | null> {
  const row = await db.selectFrom('sessions').select('expires_at').where('id_hash', '=', hashToken(token)).executeTakeFirst();
  if (!row) return null;
  const fresh = randomBytes(32).toString('base64url');
  const csrfToken = randomBytes(24).toString('base64url');
  const moved = await db
    .updateTable('sessions')
    .set({ id_hash: hashToken(fresh), csrf_token: csrfToken })
    .where('id_hash', '=', hashToken(token))
    .executeTakeFirst();
  if (Number(moved.numUpdatedRows) !== 1) return null;
  return { token: fresh, expiresAt: new Date(row.expires_at), idHash: hashToken(fresh), csrfToken };
}

/**
 * The session behind a cookie, with the user's role read fresh on every request: a member who is
 * demoted or removed loses access at once. Null when the session is unknown, expired, idle for
 * longer than `idleMinutes` (SESSION_IDLE_MINUTES: it is then ended), or the user no longer
 * belongs to the session's organisation.
 */
export async function findSession(
  db: Kysely<Database>,
  token: string,
  now: Date,
  seenFrom?: string,
  idleMinutes = DEFAULT_SESSION_IDLE_MINUTES,
): Promise<SessionView | null> {
  if (token.length < 20 || token.length > 100) return null;
  const idHash = hashToken(token);
  const row = await db
    .selectFrom('sessions')
    .innerJoin('users', 'users.id', 'sessions.user_id')
    .innerJoin('orgs', 'orgs.id', 'sessions.org_id')
    .leftJoin('memberships', (join) =>
      join.onRef('memberships.org_id', '=', 'sessions.org_id').onRef('memberships.user_id', '=', 'sessions.user_id'),
    )
    // The sandbox of the session's organisation, in test mode only: read here, never stored.
    .leftJoin('orgs as sandbox', (join) => join.onRef('sandbox.live_org_id', '=', 'sessions.org_id').on('sessions.test_mode', '=', 1))
    .select([
      'sessions.test_mode',
      'sandbox.id as sandbox_id',
      'sessions.user_id',
      'sessions.org_id',
      'sessions.csrf_token',
      'sessions.expires_at',
      'sessions.created_at',
      'sessions.method',
      'sessions.authenticated_at',
      'sessions.account_proof_at',
      'sessions.last_seen_at',
      'orgs.require_two_factor',
      'users.email',
      'users.deactivated_at',
      'orgs.name as org_name',
      'memberships.role',
    ])
    .where('sessions.id_hash', '=', idHash)
    .executeTakeFirst();
  if (!row || row.expires_at <= nowIso(now) || row.deactivated_at !== null || !row.role) return null;
  // A session from before last_seen_at existed (migration 021) has none until this request writes it.
  if (row.last_seen_at !== null && row.last_seen_at < idleSince(now, idleMinutes)) {
    await db.deleteFrom('sessions').where('id_hash', '=', idHash).execute();
    return null;
  }
  if (seenFrom !== undefined && (row.last_seen_at === null || Date.parse(row.last_seen_at) < now.getTime() - SEEN_EVERY_MS)) {
    await db
      .updateTable('sessions')
      .set({ last_seen_at: nowIso(now), origin: seenFrom })
      .where('id_hash', '=', idHash)
      .execute();
  }
  return {
    sessionHash: idHash,
    method: row.method,
    authenticatedAt: row.authenticated_at ?? row.created_at,
    accountProofAt: row.method === 'sso' ? row.account_proof_at : (row.authenticated_at ?? row.created_at),
    requireTwoFactor: row.require_two_factor,
    userId: row.user_id,
    email: row.email,
    orgId: row.org_id,
    orgName: row.org_name,
    role: row.role,
    csrfToken: row.csrf_token,
    orgs: await membershipsOf(db, row.user_id),
    testMode: row.test_mode === 1,
    sandboxOrgId: row.test_mode === 1 ? row.sandbox_id : null,
  };
}

export async function signOut(db: Kysely<Database>, token: string): Promise<void> {
  await db.deleteFrom('sessions').where('id_hash', '=', hashToken(token)).execute();
}

/** Moves the session to another organisation the user belongs to. */
export async function switchOrg(db: Kysely<Database>, token: string, session: SessionView, orgId: string): Promise<void> {
  if (!session.orgs.some((org) => org.id === orgId)) throw new ForbiddenError('You are not a member of that organisation.');
  const refused = await switchRefusedBySso(db, session, orgId);
  if (refused) throw new ForbiddenError(refused);
  // Test mode ends with the switch: the next organisation opens live (its own sandbox, if the
  // person turns test mode on again, is read from it then).
  await db.updateTable('sessions').set({ org_id: orgId, test_mode: 0 }).where('id_hash', '=', hashToken(token)).execute();
}

/**
 * Turns test mode on or off for this session only (SANDBOX.md, "Dashboard"). The caller has
 * checked the form's CSRF token and, to turn it on, made the organisation's sandbox.
 */
export async function setTestMode(db: Kysely<Database>, token: string, on: boolean): Promise<void> {
  await db
    .updateTable('sessions')
    .set({ test_mode: on ? 1 : 0 })
    .where('id_hash', '=', hashToken(token))
    .execute();
}

/** Deletes the sessions past SESSION_DAYS or idle past `idleMinutes` (housekeeping: findSession refuses them anyway). */
export async function purgeExpiredSessions(db: Kysely<Database>, now: Date, idleMinutes = DEFAULT_SESSION_IDLE_MINUTES): Promise<void> {
  const idle = idleSince(now, idleMinutes);
  await db
    .deleteFrom('sessions')
    .where((eb) => eb.or([eb('expires_at', '<=', nowIso(now)), eb('last_seen_at', '<', idle)]))
    .execute();
}
