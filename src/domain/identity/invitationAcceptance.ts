import type { Kysely } from 'kysely';
import type { Database, Role } from '../../db/schema.js';
import { ForbiddenError, UnauthorizedError } from '../errors.js';
import { recordMemberEvent } from '../events/memberEvents.js';
import { newId, nowIso } from '../ids.js';
import { hashPassword, unusablePasswordHash, verifyPassword } from '../orgs/passwords.js';
import { checkNewPassword } from './newPassword.js';
import { lookupHash, sameHash } from './secretLinks.js';
import { hasSecondFactor } from './totp.js';
import { MAILBOX_FIRST, ssoOwnedElsewhere } from './ssoTrust.js';

/**
 * The invited person's side: `GET /invite/TOKEN` shows what the link offers, and accepting it
 * makes the account (with the password they choose) or, when the email has one already, asks for
 * that account's password: the membership is added once they have signed in. Either way the link
 * is used up in the same transaction that adds the membership, so it works once. An existing
 * account with a second factor is not signed in on its password alone: acceptance stops at the
 * password (`secondFactor`), and the membership is added by joinAfterSecondFactor once the
 * person's second factor has been accepted (the same pending sign-in as /login's).
 */

export interface InvitationOffer {
  id: string;
  orgId: string;
  orgName: string;
  email: string;
  role: Role;
  expires_at: string;
  /** The email has an orgdata account: the person signs in with its password instead of choosing one. */
  hasAccount: boolean;
  /**
   * That account was made by another organisation's SSO and its holder has not proved the mailbox
   * yet (IDENTITY.md rule 10): a password reset first, then the invitation.
   */
  mailboxFirst: boolean;
}

/** What a link offers; null when it is unknown, used, revoked or expired (all answered alike: 410). */
export async function findInvitation(db: Kysely<Database>, token: string, now: Date): Promise<InvitationOffer | null> {
  const hash = lookupHash(token);
  return hash ? offerOf(db, hash, now) : null;
}

async function offerOf(db: Kysely<Database>, hash: string, now: Date): Promise<InvitationOffer | null> {
  const row = await db
    .selectFrom('invitations')
    .innerJoin('orgs', 'orgs.id', 'invitations.org_id')
    .select([
      'invitations.id',
      'invitations.org_id',
      'orgs.name as org_name',
      'invitations.email',
      'invitations.role',
      'invitations.token_hash',
      'invitations.expires_at',
    ])
    .where('invitations.token_hash', '=', hash)
    .where('invitations.accepted_at', 'is', null)
    .where('invitations.revoked_at', 'is', null)
    .executeTakeFirst();
  if (!row || !sameHash(row.token_hash, hash) || row.expires_at <= nowIso(now)) return null;
  const user = await db
    .selectFrom('users')
    .select(['id', 'sso_org_id'])
    .where('email_lower', '=', row.email.toLowerCase())
    .executeTakeFirst();
  return {
    id: row.id,
    orgId: row.org_id,
    orgName: row.org_name,
    email: row.email,
    role: row.role,
    expires_at: row.expires_at,
    hasAccount: user !== undefined,
    mailboxFirst: Boolean(user?.sso_org_id && user.sso_org_id !== row.org_id),
  };
}

export interface RequestInfo {
  requestId: string;
  origin: string | null;
}

export type Acceptance =
  | { userId: string; orgId: string; created: boolean; secondFactor?: undefined }
  /** The existing account's password is right, and it has a second factor to ask for first; the link still works. */
  | { userId: string; orgId: string; created: false; secondFactor: { invitationHash: string } };

/**
 * Accepts an invitation with `password`: the new account's, or the existing account's (checked
 * like a sign-in). Returns the person and organisation to open a session for, or null when the
 * link no longer works (used, revoked or expired meanwhile).
 */
export async function acceptInvitation(
  db: Kysely<Database>,
  token: string,
  password: string,
  request: RequestInfo,
  now: Date,
): Promise<Acceptance | null> {
  const offer = await findInvitation(db, token, now);
  if (!offer) return null;
  const hash = lookupHash(token)!;
  const existing = await db
    .selectFrom('users')
    .select(['id', 'password_hash', 'deactivated_at'])
    .where('email_lower', '=', offer.email.toLowerCase())
    .executeTakeFirst();
  let passwordHash: string | null = null;
  if (offer.mailboxFirst) throw new ForbiddenError(MAILBOX_FIRST);
  if (existing) {
    if (!(await verifyPassword(existing.password_hash, password.slice(0, 1024)))) {
      throw new UnauthorizedError(`That is not the password of the orgdata account of ${offer.email}.`);
    }
    if (existing.deactivated_at !== null) throw new ForbiddenError('This account is deactivated: ask the operator.');
    if (await hasSecondFactor(db, existing.id))
      return { userId: existing.id, orgId: offer.orgId, created: false, secondFactor: { invitationHash: hash } };
  } else {
    checkNewPassword(password, offer.email);
    // Hashed before the transaction: the write lock must not wait on tens of milliseconds of hashing.
    passwordHash = await hashPassword(password);
  }
  return useInvitation(db, offer, hash, existing?.id ?? null, passwordHash, request, now);
}

/**
 * After the second factor of an account that accepted an invitation with its password: the
 * membership, if the link still works (null otherwise) and still names this person's email.
 */
export async function joinAfterSecondFactor(
  db: Kysely<Database>,
  invitationHash: string,
  userId: string,
  request: RequestInfo,
  now: Date,
): Promise<{ userId: string; orgId: string } | null> {
  const offer = await offerOf(db, invitationHash, now);
  if (!offer) return null;
  const user = await db.selectFrom('users').select(['id', 'email_lower']).where('id', '=', userId).executeTakeFirst();
  if (!user || user.email_lower !== offer.email.toLowerCase()) return null;
  return useInvitation(db, offer, invitationHash, userId, null, request, now);
}

/** A new account joining without a password of its own (with a passkey: see passkeyJoin.ts). */
export interface PasswordlessJoin {
  /** The new account's id, chosen beforehand (a passkey keeps it as its user handle). */
  userId: string;
  /** How the person joined: member.joined's `method`. */
  method: string;
  /** The rest of the joining (storing the passkey), in the transaction that uses the link up. */
  within: (trx: Kysely<Database>, user: { id: string; email: string }) => Promise<unknown>;
}

/**
 * Accepts an invitation for an email with no account, making one without a usable password (the
 * person signs in with what `join.within` stores; a password reset sets a password). The link is
 * used up as acceptInvitation uses it: once, with the membership and member.joined. Null when the
 * link no longer works; ForbiddenError when the email has an account (its owner signs in to join).
 */
export async function acceptInvitationWithoutPassword(
  db: Kysely<Database>,
  token: string,
  join: PasswordlessJoin,
  request: RequestInfo,
  now: Date,
): Promise<{ userId: string; orgId: string; orgName: string; email: string } | null> {
  const offer = await findInvitation(db, token, now);
  if (!offer) return null;
  if (offer.hasAccount) throw new ForbiddenError(EXISTING_ACCOUNT);
  const accepted = await useInvitation(db, offer, lookupHash(token)!, null, await unusablePasswordHash(), request, now, join);
  return accepted && { userId: accepted.userId, orgId: accepted.orgId, orgName: offer.orgName, email: offer.email };
}

export const EXISTING_ACCOUNT =
  'You already have an orgdata account with this email: sign in with its password on the invitation page to join.';

/** Uses the link up and adds the membership (and the account, for a new person), in one transaction. */
function useInvitation(
  db: Kysely<Database>,
  offer: InvitationOffer,
  hash: string,
  existingId: string | null,
  passwordHash: string | null,
  request: RequestInfo,
  now: Date,
  passwordless?: PasswordlessJoin,
): Promise<{ userId: string; orgId: string; created: boolean } | null> {
  const existing = existingId === null ? null : { id: existingId };
  return db.transaction().execute(async (trx) => {
    const at = nowIso(now);
    const used = await trx
      .updateTable('invitations')
      .set({ accepted_at: at })
      .where('id', '=', offer.id)
      .where('token_hash', '=', hash)
      .where('accepted_at', 'is', null)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', at)
      .executeTakeFirst();
    if (Number(used.numUpdatedRows) !== 1) return null;
    const holder = await trx.selectFrom('users').select('id').where('email_lower', '=', offer.email.toLowerCase()).executeTakeFirst();
    // An account made for this email since the password was checked: its password was not.
    if (holder && !existing) throw new UnauthorizedError(`An orgdata account for ${offer.email} exists now: sign in with its password.`);
    // Another organisation's SSO account joins nothing until its holder proves the mailbox (rule 10).
    if (holder && (await ssoOwnedElsewhere(trx, holder.id, offer.orgId))) throw new ForbiddenError(MAILBOX_FIRST);
    let userId = existing?.id;
    if (!userId) {
      userId = passwordless?.userId ?? newId('usr');
      await trx
        .insertInto('users')
        .values({
          id: userId,
          email: offer.email,
          email_lower: offer.email.toLowerCase(),
          name: offer.email.split('@')[0] ?? offer.email,
          password_hash: passwordHash!,
          created_at: at,
          deactivated_at: null,
        })
        .execute();
    }
    await trx.updateTable('invitations').set({ accepted_by: userId }).where('id', '=', offer.id).execute();
    const member = await trx
      .selectFrom('memberships')
      .select('role')
      .where('org_id', '=', offer.orgId)
      .where('user_id', '=', userId)
      .executeTakeFirst();
    // Added meanwhile by other means (the operator's CLI): the membership stands as it is.
    if (!member) {
      await trx.insertInto('memberships').values({ org_id: offer.orgId, user_id: userId, role: offer.role, created_at: at }).execute();
    }
    const cause = { actor_type: 'user' as const, actor_id: userId, request_id: request.requestId, origin: request.origin };
    await recordMemberEvent(
      trx,
      [offer.orgId],
      'member.joined',
      { object: 'member', id: userId, email: offer.email, role: offer.role },
      cause,
      now,
      passwordless ? { method: passwordless.method } : undefined,
    );
    await passwordless?.within(trx, { id: userId, email: offer.email });
    return { userId, orgId: offer.orgId, created: !existing };
  });
}
