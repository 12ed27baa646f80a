import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { verifyPassword } from '../orgs/passwords.js';
import { ssoMade } from './ssoTrust.js';
import { acceptSecondFactorCode, secondFactorsOf } from './totp.js';

/**
 * The account holder's consent to link a provider's `iss` + `sub` (IDENTITY.md rule 10): the
 * first SSO sign-in for an e-mail that has an account asks for that account's own sign-in before
 * it links. The pending link waits in an `sso_link` challenge bound to the browser (see
 * dashboard/pages/signIn/ssoLink.ts); this decides whether what was typed proves the account.
 */
export interface PendingSsoLink {
  orgId: string;
  issuer: string;
  subject: string;
  next: string;
}

/** What the consent form must ask for: the password, and a code when the account has TOTP. */
export async function consentFactors(
  db: Kysely<Database>,
  userId: string,
): Promise<{ code: boolean; passkeyOnly: boolean; noOwnSignIn: boolean }> {
  const factors = await secondFactorsOf(db, userId);
  return {
    code: factors.totp,
    // A password alone is one factor where the account has passkeys: the passkey is its proof.
    passkeyOnly: factors.passkeys > 0 && !factors.totp,
    // Made by SSO and never given a password by its holder (a reset link): nothing to prove it with.
    noOwnSignIn: (await ssoMade(db, userId)) && !factors.totp && factors.passkeys === 0,
  };
}

/**
 * Checks the account's own factors for a link: null when they prove it, else the reason for
 * Activity (link_wrong_password, link_wrong_code, link_needs_passkey, link_no_own_sign_in).
 */
export async function proveAccountForLink(
  db: Kysely<Database>,
  secretKey: string,
  userId: string,
  given: { password: string; code: string },
  now: Date,
): Promise<string | null> {
  const user = await db.selectFrom('users').select(['password_hash', 'deactivated_at']).where('id', '=', userId).executeTakeFirst();
  if (!user || user.deactivated_at !== null) return 'deactivated';
  const needs = await consentFactors(db, userId);
  if (needs.noOwnSignIn) return 'link_no_own_sign_in';
  if (needs.passkeyOnly) return 'link_needs_passkey';
  if (!(await verifyPassword(user.password_hash, given.password.slice(0, 1024)))) return 'link_wrong_password';
  if (needs.code && !(await acceptSecondFactorCode(db, secretKey, userId, given.code, now))) return 'link_wrong_code';
  return null;
}
