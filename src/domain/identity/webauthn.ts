import {
  generateAuthenticationOptions,
  generateRegistrationOptions,
  verifyAuthenticationResponse,
  verifyRegistrationResponse,
  type AuthenticationResponseJSON,
  type PublicKeyCredentialCreationOptionsJSON,
  type PublicKeyCredentialRequestOptionsJSON,
  type RegistrationResponseJSON,
} from '@simplewebauthn/server';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { UnauthorizedError, ValidationError } from '../errors.js';
import type { IdentityCause } from '../events/memberEvents.js';
import { createChallenge, takeChallenge, type ChallengePurpose } from './challenges.js';
import {
  addPasskey,
  credentialsOf,
  findCredential,
  passkeyName,
  recordPasskeyUse,
  type NewPasskey,
  type PasskeyView,
  type StoredPasskey,
} from './passkeys.js';

/**
 * The two WebAuthn ceremonies (with @simplewebauthn/server): making a passkey (registration) and
 * proving one (an assertion: a usernameless sign-in, the second step of a password sign-in, a
 * re-authentication). The relying party is PUBLIC_URL: its host name is the RP ID and its origin
 * the only origin accepted, which is what makes a passkey phishing-resistant (a look-alike site
 * gets signatures for its own name, useless here). User verification (the device's PIN or
 * biometrics) is required every time: a passkey alone is two factors (IDENTITY.md).
 *
 * The challenge lives in auth_challenges (any instance can finish what another began) under a
 * token the caller hands to the browser as a cookie; it is taken (deleted) before the answer is
 * checked, so a challenge is answered at most once, rightly or wrongly.
 */
export interface RelyingParty {
  id: string;
  origin: string;
  name: string;
}

export function relyingParty(publicUrl: string): RelyingParty {
  const url = new URL(publicUrl);
  return { id: url.hostname, origin: url.origin, name: 'orgdata' };
}

/** How long the person has to answer the browser's prompt (the challenge lives as long). */
export const CEREMONY_MS = 5 * 60_000;
const TIMEOUT_MS = 120_000;

const userHandle = (userId: string) => new Uint8Array(Buffer.from(userId, 'utf8'));

/** Why an assertion was refused, for Activity (the person is told only that it did not work). */
export class PasskeyRefused extends UnauthorizedError {
  constructor(
    /** no_challenge | unknown_passkey | not_this_account | invalid_passkey | counter_went_back | deactivated */
    readonly reason: string,
    /** The account the passkey belongs to, when it is known. */
    readonly user: { id: string; email: string } | null,
    message = 'That passkey could not sign you in. Try again, or use your password.',
  ) {
    super(message);
  }
}

interface CeremonyData {
  challenge: string;
  [key: string]: unknown;
}

/**
 * Registration options for `user` (a discoverable credential, user verification required); the
 * user handle the credential keeps and returns at sign-in is the user's id.
 */
export function registrationOptions(
  rp: RelyingParty,
  user: { id: string; email: string },
  existing: StoredPasskey[],
): Promise<PublicKeyCredentialCreationOptionsJSON> {
  return generateRegistrationOptions({
    rpName: rp.name,
    rpID: rp.id,
    userName: user.email,
    userDisplayName: user.email,
    userID: userHandle(user.id),
    timeout: TIMEOUT_MS,
    attestationType: 'none',
    excludeCredentials: existing.map((p) => ({ id: p.credentialId, transports: p.transports })),
    authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: 'required' },
  });
}

/** Registration options for one of the person's devices, and the challenge's token. */
export async function startRegistration(
  db: Kysely<Database>,
  rp: RelyingParty,
  user: { id: string; email: string },
  now: Date,
): Promise<{ options: PublicKeyCredentialCreationOptionsJSON; token: string }> {
  const options = await registrationOptions(rp, user, await credentialsOf(db, user.id));
  const token = await createChallenge<CeremonyData>(db, 'passkey_register', user.id, { challenge: options.challenge }, CEREMONY_MS, now);
  return { options, token };
}

/** A browser's answer is an object shaped like a PublicKeyCredential's JSON; anything else is refused before the library sees it. */
function credentialJson(value: unknown): { id: string; rawId: string; response: Record<string, unknown>; type: string } | null {
  if (typeof value !== 'object' || value === null) return null;
  const v = value as Record<string, unknown>;
  if (typeof v.id !== 'string' || typeof v.rawId !== 'string' || v.id !== v.rawId || v.type !== 'public-key') return null;
  if (typeof v.response !== 'object' || v.response === null) return null;
  return v as { id: string; rawId: string; response: Record<string, unknown>; type: string };
}

/** A verified new credential, as passkeys.ts stores it. */
export type VerifiedCredential = Pick<NewPasskey, 'credentialId' | 'publicKey' | 'signCount' | 'transports'>;

/** Checks a browser's answer to registration options with `challenge`; throws ValidationError (field `response`). */
export async function verifyRegistration(rp: RelyingParty, challenge: string, answer: unknown): Promise<VerifiedCredential> {
  const response = credentialJson(answer);
  if (!response) throw ValidationError.field('response', 'is not a passkey');
  let verified;
  try {
    verified = await verifyRegistrationResponse({
      response: response as unknown as RegistrationResponseJSON,
      expectedChallenge: challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.id,
      requireUserVerification: true,
    });
  } catch {
    // A wrong origin, challenge or RP ID, a malformed attestation: the library says which in its
    // message, which is for us, not for whoever sent it.
    throw ValidationError.field('response', 'could not be verified: the passkey was not added');
  }
  if (!verified.verified) throw ValidationError.field('response', 'could not be verified: the passkey was not added');
  const { credential } = verified.registrationInfo;
  return {
    credentialId: credential.id,
    publicKey: Buffer.from(credential.publicKey).toString('base64url'),
    signCount: credential.counter,
    transports: credential.transports ?? [],
  };
}

/** Checks the browser's answer to startRegistration's options and stores the new passkey. */
export async function finishRegistration(
  db: Kysely<Database>,
  rp: RelyingParty,
  user: { id: string; email: string },
  input: { token: string | undefined; response: unknown; name: string },
  cause: IdentityCause,
  now: Date,
): Promise<PasskeyView> {
  const name = passkeyName(input.name);
  const challenge = await takeChallenge<CeremonyData>(db, 'passkey_register', input.token, now);
  if (!challenge || challenge.userId !== user.id) {
    throw ValidationError.field('response', 'the request to add a passkey has expired: start again');
  }
  const credential = await verifyRegistration(rp, challenge.data.challenge, input.response);
  return addPasskey(db, { userId: user.id, email: user.email, name, ...credential }, cause, now);
}

/** Authentication options for any discoverable credential (`userId` null) or one of this user's. */
export async function assertionOptions(
  db: Kysely<Database>,
  rp: RelyingParty,
  userId: string | null,
): Promise<PublicKeyCredentialRequestOptionsJSON> {
  let allowCredentials: { id: string; transports?: string[] }[] | undefined;
  if (userId) {
    const credentials = await credentialsOf(db, userId);
    if (credentials.length === 0) throw ValidationError.field('passkey', 'this account has no passkey');
    allowCredentials = credentials.map((p) => ({ id: p.credentialId, transports: p.transports }));
  }
  return generateAuthenticationOptions({ rpID: rp.id, allowCredentials, userVerification: 'required', timeout: TIMEOUT_MS });
}

/**
 * Options to prove a passkey: any discoverable credential of this site (`userId` null: the
 * usernameless sign-in), or one of this user's. `data` is kept with the challenge.
 */
export async function startAssertion(
  db: Kysely<Database>,
  rp: RelyingParty,
  purpose: ChallengePurpose,
  userId: string | null,
  data: Record<string, string>,
  now: Date,
): Promise<{ options: PublicKeyCredentialRequestOptionsJSON; token: string }> {
  const options = await assertionOptions(db, rp, userId);
  const token = await createChallenge<CeremonyData>(db, purpose, userId, { ...data, challenge: options.challenge }, CEREMONY_MS, now);
  return { options, token };
}

export interface Asserted {
  userId: string;
  email: string;
  passkeyId: string;
  /** What the ceremony's start kept with the challenge. */
  data: Record<string, unknown>;
}

/**
 * Checks an assertion against the challenge the token names and the stored credential its id
 * names; `userId` (second step, re-authentication) requires the passkey to be that person's.
 * Throws PasskeyRefused with the reason.
 */
export async function finishAssertion(
  db: Kysely<Database>,
  rp: RelyingParty,
  purpose: ChallengePurpose,
  input: { token: string | undefined; response: unknown; userId: string | null },
  now: Date,
): Promise<Asserted> {
  // Taken first: whatever happens next, this challenge is never answered again.
  const taken = await takeChallenge<CeremonyData>(db, purpose, input.token, now);
  const challenge = taken && taken.userId === input.userId ? taken : null;
  const asserted = await verifyAssertion(
    db,
    rp,
    { challenge: challenge?.data.challenge ?? null, response: input.response, userId: input.userId },
    now,
  );
  return { ...asserted, data: challenge?.data ?? {} };
}

/**
 * Checks an assertion against `challenge` (null: there is none to answer, refused as
 * `no_challenge` once the passkey is known) and the stored credential its id names; `userId`
 * requires the passkey to be that person's. The caller has already made sure the challenge can
 * be answered only once. Throws PasskeyRefused with the reason.
 */
export async function verifyAssertion(
  db: Kysely<Database>,
  rp: RelyingParty,
  input: { challenge: string | null; response: unknown; userId: string | null },
  now: Date,
): Promise<Omit<Asserted, 'data'>> {
  const response = credentialJson(input.response);
  const passkey = response ? await findCredential(db, response.id) : null;
  const owner = passkey
    ? await db.selectFrom('users').select(['id', 'email', 'deactivated_at']).where('id', '=', passkey.userId).executeTakeFirst()
    : undefined;
  const user = owner ? { id: owner.id, email: owner.email } : null;
  if (!response || !passkey || !owner) throw new PasskeyRefused('unknown_passkey', null);
  if (input.challenge === null) throw new PasskeyRefused('no_challenge', user);
  if (input.userId !== null && passkey.userId !== input.userId) {
    // Another account's passkey: recorded for the account whose step this was, not the other one's.
    const expected = await db.selectFrom('users').select(['id', 'email']).where('id', '=', input.userId).executeTakeFirst();
    throw new PasskeyRefused('not_this_account', expected ?? null);
  }
  // A discoverable credential returns the user handle it was made with: it must be its owner's.
  const handle = response.response.userHandle;
  if (typeof handle === 'string' && handle !== '' && handle !== Buffer.from(passkey.userId, 'utf8').toString('base64url')) {
    throw new PasskeyRefused('invalid_passkey', user);
  }
  let verified;
  try {
    verified = await verifyAuthenticationResponse({
      response: response as unknown as AuthenticationResponseJSON,
      expectedChallenge: input.challenge,
      expectedOrigin: rp.origin,
      expectedRPID: rp.id,
      credential: {
        id: passkey.credentialId,
        publicKey: new Uint8Array(Buffer.from(passkey.publicKey, 'base64url')),
        counter: passkey.signCount,
        transports: passkey.transports,
      },
      requireUserVerification: true,
    });
  } catch (error) {
    // The library refuses a counter that did not go up (when either is non-zero): a cloned authenticator.
    const counter = error instanceof Error && /counter/i.test(error.message);
    throw new PasskeyRefused(counter ? 'counter_went_back' : 'invalid_passkey', user);
  }
  if (!verified.verified) throw new PasskeyRefused('invalid_passkey', user);
  if (owner.deactivated_at !== null) throw new PasskeyRefused('deactivated', user);
  if (!(await recordPasskeyUse(db, passkey, verified.authenticationInfo.newCounter, now))) {
    throw new PasskeyRefused('counter_went_back', user);
  }
  return { userId: owner.id, email: owner.email, passkeyId: passkey.id };
}
