import type { PublicKeyCredentialCreationOptionsJSON } from '@simplewebauthn/server';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { ForbiddenError, ValidationError } from '../errors.js';
import { newId } from '../ids.js';
import { createChallenge, takeChallenge } from './challenges.js';
import {
  acceptInvitationWithoutPassword,
  EXISTING_ACCOUNT,
  findInvitation,
  type InvitationOffer,
  type RequestInfo,
} from './invitationAcceptance.js';
import { insertPasskey, passkeyName, passkeyTaken } from './passkeys.js';
import { ssoOrgForEmail, ssoSettingsOf } from './ssoConfigs.js';
import { CEREMONY_MS, registrationOptions, verifyRegistration, type RelyingParty } from './webauthn.js';

/**
 * Joining an organisation through an invitation with a passkey instead of a password (IDENTITY.md,
 * "Invitations": "or, where offered, SSO or a passkey"), for an email that has no account yet (an
 * existing account's owner signs in to join, as with a password).
 *
 * The new account's id is chosen when the ceremony starts: the credential keeps it as its user
 * handle, which a usernameless sign-in returns and finishAssertion compares with the passkey's
 * owner. It is kept with the challenge (purpose `passkey_join`, no user row yet), with the
 * invitation's id, so an answer joins the invitation it was started for and no other. The answer
 * is checked like any registration (origin, RP ID, challenge, user verification); then the
 * account, its membership and its passkey are made in the one transaction that uses the link up
 * (acceptInvitationWithoutPassword): all or nothing, once. The account has no usable password.
 */
interface JoinCeremony {
  challenge: string;
  userId: string;
  invitation: string;
}

/** The name a passkey made on the invitation page gets when the page sends none. */
export const JOIN_PASSKEY_NAME = 'Passkey';

const SSO_ONLY = 'Your organisation signs in with single sign-on: join with SSO, or choose a password.';

/**
 * Why the invitation page offers no passkey, or null when it does: an email with an account (its
 * owner signs in to join), or a plain member of an organisation that requires SSO (its members
 * sign in only through the provider, passkeys included: see passwordRefusedBySso).
 */
export async function passkeyJoinRefusal(db: Kysely<Database>, offer: InvitationOffer): Promise<string | null> {
  if (offer.hasAccount) return EXISTING_ACCOUNT;
  // Only where SSO can take them: the organisation has verified the invitee's domain (rule 9).
  if (
    offer.role !== 'admin' &&
    (await ssoOrgForEmail(db, offer.email)) === offer.orgId &&
    (await ssoSettingsOf(db, offer.orgId))?.required
  ) {
    return SSO_ONLY;
  }
  return null;
}

async function refuse(db: Kysely<Database>, offer: InvitationOffer): Promise<void> {
  const refusal = await passkeyJoinRefusal(db, offer);
  if (refusal) throw new ForbiddenError(refusal);
}

/** Registration options for the invited person, and the challenge's token; null when the link no longer works. */
export async function startPasskeyJoin(
  db: Kysely<Database>,
  rp: RelyingParty,
  inviteToken: string,
  now: Date,
): Promise<{ options: PublicKeyCredentialCreationOptionsJSON; token: string } | null> {
  const offer = await findInvitation(db, inviteToken, now);
  if (!offer) return null;
  await refuse(db, offer);
  const userId = newId('usr');
  const options = await registrationOptions(rp, { id: userId, email: offer.email }, []);
  const data: JoinCeremony = { challenge: options.challenge, userId, invitation: offer.id };
  const token = await createChallenge(db, 'passkey_join', null, data, CEREMONY_MS, now);
  return { options, token };
}

/**
 * Checks the browser's answer and joins: the account, the membership, the passkey, member.joined
 * (method `passkey`) and member.passkey_added. Null when the link no longer works (used, revoked
 * or expired meanwhile); ValidationError (field `response`) for an answer that does not verify or
 * a ceremony that is not this link's (taken either way: it is answered once).
 */
export async function finishPasskeyJoin(
  db: Kysely<Database>,
  rp: RelyingParty,
  inviteToken: string,
  input: { token: string | undefined; response: unknown; name: string },
  request: RequestInfo,
  now: Date,
): Promise<{ userId: string; orgId: string; orgName: string; email: string } | null> {
  const name = passkeyName(input.name.trim() === '' ? JOIN_PASSKEY_NAME : input.name);
  const ceremony = await takeChallenge<JoinCeremony>(db, 'passkey_join', input.token, now);
  const offer = await findInvitation(db, inviteToken, now);
  if (!offer) return null;
  await refuse(db, offer);
  if (!ceremony || ceremony.data.invitation !== offer.id) {
    throw ValidationError.field('response', 'the request to join with a passkey has expired: start again');
  }
  const credential = await verifyRegistration(rp, ceremony.data.challenge, input.response);
  const cause = { actor_type: 'user' as const, actor_id: ceremony.data.userId, request_id: request.requestId, origin: request.origin };
  try {
    return await acceptInvitationWithoutPassword(
      db,
      inviteToken,
      {
        userId: ceremony.data.userId,
        method: 'passkey',
        within: (trx, user) => insertPasskey(trx, { userId: user.id, email: user.email, name, ...credential }, cause, now),
      },
      request,
      now,
    );
  } catch (error) {
    throw passkeyTaken(error);
  }
}
