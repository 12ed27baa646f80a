import type { PublicKeyCredentialRequestOptionsJSON } from '@simplewebauthn/server';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { verifyPassword } from '../orgs/passwords.js';
import { findChallenge, replaceChallengeData, type Challenge } from './challenges.js';
import { ssoMade } from './ssoTrust.js';
import { acceptSecondFactorCode, secondFactorsOf } from './totp.js';
import { assertionOptions, PasskeyRefused, verifyAssertion, type RelyingParty } from './webauthn.js';

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
  /** The WebAuthn challenge of the holder's passkey consent, while one is being asked (one at a time). */
  passkeyChallenge?: string;
}

/**
 * What the consent form may ask for: the password, and a code when the account has TOTP; or one of
 * its passkeys (`passkey`), which alone is two factors.
 */
export async function consentFactors(
  db: Kysely<Database>,
  userId: string,
): Promise<{ code: boolean; passkey: boolean; passkeyOnly: boolean; noOwnSignIn: boolean }> {
  const factors = await secondFactorsOf(db, userId);
  return {
    code: factors.totp,
    passkey: factors.passkeys > 0,
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

/**
 * Options for the holder's passkey as the consent to a pending link (the challenge `token` names):
 * only the account's own credentials are offered, and the WebAuthn challenge is kept in the
 * pending link itself, so it is answered for this link only, from the browser holding it, within
 * its 10 minutes. A new request replaces the challenge of the last. Null when the link is gone.
 */
export async function startPasskeyConsent(
  db: Kysely<Database>,
  rp: RelyingParty,
  token: string | undefined,
  now: Date,
): Promise<PublicKeyCredentialRequestOptionsJSON | null> {
  const pending = await findChallenge<PendingSsoLink>(db, 'sso_link', token, now);
  if (!token || !pending?.userId) return null;
  const options = await assertionOptions(db, rp, pending.userId);
  const kept = await replaceChallengeData(
    db,
    'sso_link',
    token,
    pending.data,
    { ...pending.data, passkeyChallenge: options.challenge },
    now,
  );
  return kept ? options : null;
}

/**
 * Checks the holder's passkey against the pending link's own challenge: null when it proves the
 * account, else the reason for Activity (`link_` + the passkey's: link_not_this_account,
 * link_no_challenge, link_invalid_passkey, …). The challenge leaves the pending link before the
 * answer is checked, so it is answered once, rightly or wrongly.
 */
export async function provePasskeyConsent(
  db: Kysely<Database>,
  rp: RelyingParty,
  token: string,
  pending: Challenge<PendingSsoLink>,
  response: unknown,
  now: Date,
): Promise<string | null> {
  const { passkeyChallenge, ...rest } = pending.data;
  const taken = passkeyChallenge !== undefined && (await replaceChallengeData(db, 'sso_link', token, pending.data, rest, now));
  try {
    await verifyAssertion(db, rp, { challenge: taken ? passkeyChallenge : null, response, userId: pending.userId }, now);
  } catch (error) {
    if (!(error instanceof PasskeyRefused)) throw error;
    return `link_${error.reason}`;
  }
  return null;
}
