import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { NotFoundError } from '../errors.js';
import { orgsOfUser, recordMemberEvent, type IdentityCause } from '../events/memberEvents.js';
import { nowIso } from '../ids.js';

/**
 * A person's open sessions (IDENTITY.md, Sessions and re-authentication): listed, revoked one by
 * one, or all but the current one; and, for an admin, all of a member's. A session is named by
 * the first 16 hex digits of its id_hash (itself the SHA-256 of the cookie): stable, short, and
 * of no use to sign in with. Every query is filtered by the user, so another person's session id
 * is simply not found.
 */
const SHORT_ID = /^[0-9a-f]{16}$/;

export const shortSessionId = (idHash: string) => idHash.slice(0, 16);

export interface SessionListItem {
  id: string;
  /** password, password+totp, passkey, sso, invitation, password_reset… */
  method: string;
  created_at: string;
  last_seen_at: string | null;
  /** Approximate origin and browser: `203.0.113.0/24 · Firefox 131 on Windows` (older rows: the product name, `· Mozilla`). */
  origin: string | null;
  expires_at: string;
  current: boolean;
}

export async function listSessions(db: Kysely<Database>, userId: string, currentHash: string, now: Date): Promise<SessionListItem[]> {
  const rows = await db
    .selectFrom('sessions')
    .select(['id_hash', 'method', 'created_at', 'last_seen_at', 'origin', 'expires_at'])
    .where('user_id', '=', userId)
    .where('expires_at', '>', nowIso(now))
    .orderBy('created_at', 'desc')
    .orderBy('id_hash')
    .execute();
  const items = rows.map((row) => ({
    id: shortSessionId(row.id_hash),
    method: row.method,
    created_at: row.created_at,
    last_seen_at: row.last_seen_at,
    origin: row.origin,
    expires_at: row.expires_at,
    current: row.id_hash === currentHash,
  }));
  // This session first, then the newest.
  return [...items.filter((s) => s.current), ...items.filter((s) => !s.current)];
}

async function record(
  db: Kysely<Database>,
  userId: string,
  type: 'member.session_revoked' | 'member.signed_out_everywhere',
  cause: IdentityCause,
  now: Date,
  details: Record<string, string>,
) {
  const user = await db.selectFrom('users').select('email').where('id', '=', userId).executeTakeFirstOrThrow();
  await recordMemberEvent(db, await orgsOfUser(db, userId), type, { object: 'member', id: userId, email: user.email }, cause, now, details);
}

/** Ends one of the user's own sessions by its short id; NotFoundError when it is not theirs (nothing ends). */
export async function revokeSession(
  db: Kysely<Database>,
  userId: string,
  shortId: string,
  cause: IdentityCause,
  now: Date,
): Promise<{ id: string; method: string; origin: string | null }> {
  if (!SHORT_ID.test(shortId)) throw new NotFoundError('There is no such session of yours.');
  return db.transaction().execute(async (trx) => {
    const rows = await trx.selectFrom('sessions').select(['id_hash', 'method', 'origin']).where('user_id', '=', userId).execute();
    const target = rows.find((row) => shortSessionId(row.id_hash) === shortId);
    if (!target) throw new NotFoundError('There is no such session of yours.');
    await trx.deleteFrom('sessions').where('id_hash', '=', target.id_hash).where('user_id', '=', userId).execute();
    await record(trx, userId, 'member.session_revoked', cause, now, { session: shortId, method: target.method });
    return { id: shortId, method: target.method, origin: target.origin };
  });
}

/**
 * Ends every session of the user except `keepHash` (null: all of them, an admin's "Sign out
 * everywhere"). Recorded as member.signed_out_everywhere with the number ended.
 */
export async function endSessionsOf(
  db: Kysely<Database>,
  userId: string,
  keepHash: string | null,
  cause: IdentityCause,
  now: Date,
  /** Only the sessions working in this organisation (an admin of one of the person's organisations, not all). */
  onlyInOrg: string | null = null,
): Promise<number> {
  return db.transaction().execute(async (trx) => {
    let query = trx.deleteFrom('sessions').where('user_id', '=', userId);
    if (keepHash !== null) query = query.where('id_hash', '!=', keepHash);
    if (onlyInOrg !== null) query = query.where('org_id', '=', onlyInOrg);
    const ended = Number((await query.executeTakeFirst()).numDeletedRows);
    await record(trx, userId, 'member.signed_out_everywhere', cause, now, {
      ended: String(ended),
      kept: keepHash === null ? 'none' : 'current',
    });
    return ended;
  });
}
