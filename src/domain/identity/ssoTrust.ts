import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import { nowIso } from '../ids.js';

/**
 * What an organisation's SSO may and may not do to an account (IDENTITY.md rules 8 and 10). The
 * organisation's admin controls its provider, and so can make it vouch for any e-mail: its word
 * is good for that organisation only.
 *
 * - An account SSO made (resolveSsoUser) belongs to that organisation alone (`users.sso_org_id`)
 *   until its holder proves the mailbox with a password-reset link: meanwhile it joins no other
 *   organisation (invitations, the operator CLI).
 * - That proof removes every SSO link of the account and every credential added from an SSO
 *   session (`added_in_sso`), and lifts the mark.
 * - A session opened by SSO is no proof for a change to the account: see accountProofOf.
 */

export const MAILBOX_FIRST =
  "This account was made by another organisation's single sign-on. Before it can join another organisation, prove that this mailbox is yours with a password reset: use “Forgot your password?” on the sign-in page, open the link mailed to this address and choose a password, then come back.";

/** For the operator (`orgdata org create`, a set-up link): why an existing account cannot be a new organisation's admin. */
export const NEW_ORG_MAILBOX_FIRST =
  "This email's account was made by another organisation's single sign-on, and its holder has not yet proved the mailbox: making it the admin of a new organisation would hand that organisation to whoever controls the other organisation's identity provider. Have the holder use “Forgot your password?” on the sign-in page (the reset link proves the mailbox and removes the single sign-on links), then run this again; or use another email.";

/** Why the account cannot join `orgId` (null when it can): it is still another organisation's SSO account. */
export async function ssoOwnedElsewhere(db: Kysely<Database>, userId: string, orgId: string): Promise<string | null> {
  const row = await db.selectFrom('users').select('sso_org_id').where('id', '=', userId).executeTakeFirst();
  return row?.sso_org_id && row.sso_org_id !== orgId ? MAILBOX_FIRST : null;
}

/** Whether the account was made by SSO and its holder has not yet proved the mailbox. */
export async function ssoMade(db: Kysely<Database>, userId: string): Promise<boolean> {
  const row = await db.selectFrom('users').select('sso_org_id').where('id', '=', userId).executeTakeFirst();
  return Boolean(row?.sso_org_id);
}

/**
 * The holder proved the mailbox (a reset link used; inside its transaction): every SSO link of the
 * account goes, with every passkey, TOTP factor and recovery code added from an SSO session, and
 * the account belongs to no organisation's SSO any more. What was removed, for Activity.
 */
export async function mailboxProven(
  trx: Transaction<Database>,
  userId: string,
): Promise<{ sso_links: number; passkeys: number; totp: number; recovery_codes: number }> {
  const links = await trx.deleteFrom('sso_identities').where('user_id', '=', userId).executeTakeFirst();
  const passkeys = await trx.deleteFrom('passkeys').where('user_id', '=', userId).where('added_in_sso', '=', 1).executeTakeFirst();
  const totp = await trx.deleteFrom('totp_factors').where('user_id', '=', userId).where('added_in_sso', '=', 1).executeTakeFirst();
  // Recovery codes stand in for the TOTP factor: with it gone, all of them go.
  let codes = trx.deleteFrom('recovery_codes').where('user_id', '=', userId);
  if (Number(totp.numDeletedRows) === 0) codes = codes.where('added_in_sso', '=', 1);
  const recovery = await codes.executeTakeFirst();
  await trx.updateTable('users').set({ sso_org_id: null }).where('id', '=', userId).execute();
  return {
    sso_links: Number(links.numDeletedRows),
    passkeys: Number(passkeys.numDeletedRows),
    totp: Number(totp.numDeletedRows),
    recovery_codes: Number(recovery.numDeletedRows),
  };
}

/** Marks what a credential-making step just stored as added from an SSO session (when it was). */
export async function markAddedInSso(
  db: Kysely<Database>,
  what: 'passkeys' | 'totp_factors' | 'recovery_codes',
  userId: string,
  since: Date,
): Promise<void> {
  const query = db.updateTable(what).set({ added_in_sso: 1 }).where('user_id', '=', userId);
  await (what === 'totp_factors' ? query : query.where('created_at', '>=', nowIso(since))).execute();
}

/**
 * The link of a provider's `iss` + `sub` to an account, made once its holder consented (signed in
 * with the account's own factors at /sso/link). Refused when the account is linked at this issuer
 * to another subject already.
 */
export async function linkSsoIdentity(
  db: Kysely<Database>,
  link: { issuer: string; subject: string; userId: string },
  now: Date,
): Promise<boolean> {
  const other = await otherSubjectAt(db, link.issuer, link.subject, link.userId);
  if (other) return false;
  await db
    .insertInto('sso_identities')
    .values({ issuer: link.issuer, subject: link.subject, user_id: link.userId, created_at: nowIso(now) })
    .onConflict((conflict) => conflict.columns(['issuer', 'subject']).doNothing())
    .execute();
  const row = await db
    .selectFrom('sso_identities')
    .select('user_id')
    .where('issuer', '=', link.issuer)
    .where('subject', '=', link.subject)
    .executeTakeFirst();
  return row?.user_id === link.userId;
}

/** Whether the account is linked at `issuer` to a subject other than `subject`. */
export async function otherSubjectAt(db: Kysely<Database>, issuer: string, subject: string, userId: string): Promise<boolean> {
  const row = await db
    .selectFrom('sso_identities')
    .select('subject')
    .where('issuer', '=', issuer)
    .where('user_id', '=', userId)
    .where('subject', '!=', subject)
    .executeTakeFirst();
  return row !== undefined;
}
