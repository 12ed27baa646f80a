import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { recordMemberEvent, orgsOfUser, OPERATOR, type IdentityCause } from '../events/memberEvents.js';
import { newId, nowIso } from '../ids.js';
import { findMember } from '../orgs/orgs.js';
import { hashPassword } from '../orgs/passwords.js';
import { deliver, type IdentityDeps, type MailOutcome } from './mailer.js';
import { passwordResetMail } from './messages.js';
import { checkNewPassword } from './newPassword.js';
import { later, lookupHash, newLinkToken, sameHash } from './secretLinks.js';
import { mailboxProven } from './ssoTrust.js';

/**
 * Forgotten passwords: a link mailed to the account's address (`/forgot-password`) or made by the
 * operator (`orgdata users reset-link`), valid RESET_TTL_MINUTES, single-use. Setting the new
 * password ends every session of that person and every other reset link of theirs.
 */

const linkOf = (deps: IdentityDeps, token: string) => `${deps.publicUrl}/reset-password/${token}`;

/** A new reset link for `userId`, stored (as a hash) with its event in each of their organisations. */
async function makeLink(
  db: Kysely<Database>,
  deps: IdentityDeps,
  user: { id: string; email: string },
  cause: IdentityCause,
  now: Date,
): Promise<{ url: string; expires_at: string; orgIds: string[] }> {
  const { token, hash } = newLinkToken();
  const expiresAt = later(now, deps.resetTtlMinutes * 60_000);
  const orgIds = await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('password_resets')
      .values({ id: newId('pwr'), user_id: user.id, token_hash: hash, created_at: nowIso(now), expires_at: expiresAt, used_at: null })
      .execute();
    const orgs = await orgsOfUser(trx, user.id);
    await recordMemberEvent(trx, orgs, 'member.password_reset_requested', { object: 'member', id: user.id, email: user.email }, cause, now);
    return orgs;
  });
  return { url: linkOf(deps, token), expires_at: expiresAt, orgIds };
}

/**
 * `/forgot-password`: for an email with an account (in at least one organisation), a link is made
 * and mailed. Whatever the email, the caller answers the same; the mail is what differs, so it is
 * returned as work still under way (`delivery`), for the caller not to wait on: an existing
 * account's answer then takes no longer than an unknown one's by the time a mail takes.
 */
export async function requestPasswordReset(
  db: Kysely<Database>,
  deps: IdentityDeps,
  email: string,
  request: { requestId: string; origin: string | null },
  now: Date,
): Promise<{ delivery: Promise<MailOutcome | null> }> {
  const user = await db
    .selectFrom('users')
    .select(['id', 'email', 'deactivated_at'])
    .where('email_lower', '=', email.trim().toLowerCase())
    .executeTakeFirst();
  if (!user || user.deactivated_at !== null || !deps.mailer) return { delivery: Promise.resolve(null) };
  const cause: IdentityCause = { actor_type: 'user', actor_id: user.id, request_id: request.requestId, origin: request.origin };
  const link = await makeLink(db, deps, user, cause, now);
  // A person in no organisation cannot sign in anyway: the link is not worth a mail.
  if (link.orgIds.length === 0) return { delivery: Promise.resolve(null) };
  const delivery = (async () => {
    const orgs = await db.selectFrom('orgs').select('name').where('id', 'in', link.orgIds).orderBy('created_at').execute();
    return deliver(
      deps.mailer,
      passwordResetMail({ to: user.email, orgNames: orgs.map((o) => o.name), url: link.url, ttlMinutes: deps.resetTtlMinutes }),
    );
  })();
  return { delivery };
}

/** `orgdata users reset-link`: a link for a member of the organisation, printed for the operator to pass on. */
export async function resetLinkFor(
  db: Kysely<Database>,
  deps: IdentityDeps,
  input: { orgId: string; email: string },
  now: Date,
): Promise<{ reset_url: string; expires_at: string }> {
  const member = await findMember(db, input.orgId, input.email);
  const link = await makeLink(db, deps, member, OPERATOR, now);
  return { reset_url: link.url, expires_at: link.expires_at };
}

/** Whose link this is; null when it is unknown, used or expired (all answered alike: 410). */
export async function findPasswordReset(
  db: Kysely<Database>,
  token: string,
  now: Date,
): Promise<{ id: string; userId: string; email: string } | null> {
  const hash = lookupHash(token);
  if (!hash) return null;
  const row = await db
    .selectFrom('password_resets')
    .innerJoin('users', 'users.id', 'password_resets.user_id')
    .select(['password_resets.id', 'password_resets.user_id', 'password_resets.token_hash', 'password_resets.expires_at', 'users.email'])
    .where('password_resets.token_hash', '=', hash)
    .where('password_resets.used_at', 'is', null)
    .where('users.deactivated_at', 'is', null)
    .executeTakeFirst();
  if (!row || !sameHash(row.token_hash, hash) || row.expires_at <= nowIso(now)) return null;
  return { id: row.id, userId: row.user_id, email: row.email };
}

/**
 * Sets the password a reset link is for, ends every session of that person and uses up every
 * reset link of theirs. Null when the link no longer works.
 */
export async function resetPassword(
  db: Kysely<Database>,
  token: string,
  password: string,
  request: { requestId: string; origin: string | null },
  now: Date,
): Promise<{ userId: string; email: string; ended_sessions: number } | null> {
  const reset = await findPasswordReset(db, token, now);
  if (!reset) return null;
  checkNewPassword(password, reset.email);
  const passwordHash = await hashPassword(password);
  return db.transaction().execute(async (trx) => {
    const at = nowIso(now);
    const used = await trx
      .updateTable('password_resets')
      .set({ used_at: at })
      .where('id', '=', reset.id)
      .where('used_at', 'is', null)
      .where('expires_at', '>', at)
      .executeTakeFirst();
    if (Number(used.numUpdatedRows) !== 1) return null;
    await trx
      .updateTable('password_resets')
      .set({ used_at: at })
      .where('user_id', '=', reset.userId)
      .where('used_at', 'is', null)
      .execute();
    await trx.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', reset.userId).execute();
    // The holder proved the mailbox: no organisation's SSO keeps a hold on the account (rule 10).
    const removed = await mailboxProven(trx, reset.userId);
    const ended = await trx.deleteFrom('sessions').where('user_id', '=', reset.userId).executeTakeFirst();
    const cause: IdentityCause = { actor_type: 'user', actor_id: reset.userId, request_id: request.requestId, origin: request.origin };
    await recordMemberEvent(
      trx,
      await orgsOfUser(trx, reset.userId),
      'member.password_reset',
      { object: 'member', id: reset.userId, email: reset.email },
      cause,
      now,
      removed.sso_links + removed.passkeys + removed.totp + removed.recovery_codes > 0
        ? {
            removed_sso_links: String(removed.sso_links),
            removed_sso_passkeys: String(removed.passkeys),
            removed_sso_totp: String(removed.totp),
          }
        : undefined,
    );
    return { userId: reset.userId, email: reset.email, ended_sessions: Number(ended.numDeletedRows) };
  });
}
