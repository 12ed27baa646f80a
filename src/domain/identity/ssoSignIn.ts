import type { ExpressionBuilder, Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { recordMemberEvent, type IdentityCause } from '../events/memberEvents.js';
import { newId, nowIso } from '../ids.js';
import { unusablePasswordHash } from '../orgs/passwords.js';
import { emailDomain, type SsoProvider } from './ssoConfigs.js';
import { otherSubjectAt } from './ssoTrust.js';
import { hasSecondFactor } from './totp.js';

/**
 * Signing in through an organisation's OpenID provider. The protocol (discovery, PKCE, the code
 * exchange, the ID token's checks) is the port below, implemented in infra/oidc; what is decided
 * here is who the verified claims make the person: by `iss` + `sub` once linked, by the email
 * the first time, and never an account outside the organisation (see resolveSsoUser).
 */
export interface SsoAuthorization {
  /** The provider's authorization endpoint with client_id, redirect_uri, state, nonce, S256 challenge. */
  url: string;
  state: string;
  nonce: string;
  verifier: string;
}

/** What the provider vouched for, after the ID token passed every check. */
export interface SsoClaims {
  issuer: string;
  subject: string;
  email: string | null;
  emailVerified: boolean;
}

export interface OpenIdClient {
  begin(provider: SsoProvider, redirectUri: string): Promise<SsoAuthorization>;
  /** Exchanges the callback's code; throws SsoRefused (bad_response, provider_error, provider_unreachable). */
  finish(provider: SsoProvider, callbackUrl: URL, expected: { state: string; nonce: string; verifier: string }): Promise<SsoClaims>;
}

/** A refused SSO sign-in: `reason` goes to Activity and the metric, `message` to the person. */
export class SsoRefused extends Error {
  constructor(
    readonly reason: string,
    message: string,
    readonly status: 400 | 403 | 502 = 400,
    readonly user: { id: string; email: string } | null = null,
  ) {
    super(message);
  }
}

const NO_MEMBERSHIP = 'You are not a member of this organisation in orgdata: ask an admin for an invitation.';

async function userByEmail(db: Kysely<Database>, email: string) {
  return db
    .selectFrom('users')
    .select(['id', 'email', 'deactivated_at'])
    .where('email_lower', '=', email.trim().toLowerCase())
    .executeTakeFirst();
}

async function isMember(db: Kysely<Database>, orgId: string, userId: string): Promise<boolean> {
  const row = await db
    .selectFrom('memberships')
    .select('role')
    .where('org_id', '=', orgId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return row !== undefined;
}

/**
 * Who the verified claims name in the provider's organisation:
 * - linked before (`iss` + `sub`): that account, whatever the email says now (`signed_in`);
 * - else the account with that email, when it is a member of the organisation: not linked yet,
 *   and no session — its holder must first sign in with the account's own factors (`consent`,
 *   IDENTITY.md rule 10; dashboard/pages/signIn/ssoLink.ts). An account linked at this issuer to
 *   another subject is refused (`subject_mismatch`);
 * - else, with auto-join on or an open invitation of the email, a new account (no usable
 *   password) made a `member` (or the invitation's role), marked as this organisation's alone
 *   (`users.sso_org_id`) until its holder proves the mailbox (ssoTrust.ts).
 * An existing account that is not a member is refused even with auto-join: the provider is the
 * organisation's, and it must not be a way into an account that belongs to other organisations.
 */
export type SsoPerson = { kind: 'signed_in'; userId: string; email: string } | { kind: 'consent'; userId: string; email: string };

export async function resolveSsoUser(
  db: Kysely<Database>,
  provider: SsoProvider,
  claims: SsoClaims,
  cause: (userId: string) => IdentityCause,
  now: Date,
): Promise<SsoPerson> {
  const linked = await db
    .selectFrom('sso_identities')
    .innerJoin('users', 'users.id', 'sso_identities.user_id')
    .select(['users.id', 'users.email', 'users.deactivated_at'])
    .where('sso_identities.issuer', '=', claims.issuer)
    .where('sso_identities.subject', '=', claims.subject)
    .executeTakeFirst();
  const email = claims.email?.trim() ?? '';
  const byEmail = !linked && email ? await userByEmail(db, email) : undefined;
  const known = linked ?? byEmail ?? null;
  const person = known ? { id: known.id, email: known.email } : null;
  if (!email.includes('@')) throw new SsoRefused('no_email', 'The sign-in provider did not give an email address.', 403, person);
  if (!claims.emailVerified) {
    throw new SsoRefused(
      'unverified_email',
      'The sign-in provider has not verified this email address, so it cannot sign you in.',
      403,
      person,
    );
  }
  if (!provider.domains.includes(emailDomain(email))) {
    throw new SsoRefused('other_domain', "This email address is not in one of the organisation's single sign-on domains.", 403, person);
  }
  if (known?.deactivated_at) throw new SsoRefused('deactivated', 'This account is deactivated: ask the operator.', 403, person);
  if (known) {
    if (!(await isMember(db, provider.orgId, known.id))) throw new SsoRefused('not_a_member', NO_MEMBERSHIP, 403, person);
    if (linked) return { kind: 'signed_in', userId: known.id, email: known.email };
    if (await otherSubjectAt(db, claims.issuer, claims.subject, known.id)) {
      throw new SsoRefused(
        'subject_mismatch',
        'This email address is already linked to another account at this sign-in provider, so it cannot sign you in.',
        403,
        person,
      );
    }
    return { kind: 'consent', userId: known.id, email: known.email };
  }
  // An open invitation of this email ("Join with SSO" on the invitation page) lets them in with
  // its role even when auto-join is off, and is used up.
  const invitation = (
    await db
      .selectFrom('invitations')
      .select(['id', 'email', 'role'])
      .where('org_id', '=', provider.orgId)
      .where('accepted_at', 'is', null)
      .where('revoked_at', 'is', null)
      .where('expires_at', '>', nowIso(now))
      .execute()
  ).find((i) => i.email.toLowerCase() === email.toLowerCase());
  if (provider.autoJoin !== 'member' && !invitation) throw new SsoRefused('not_a_member', NO_MEMBERSHIP, 403, null);
  const role = invitation?.role ?? 'member';
  // No password to sign in with (a reset sets one).
  const passwordHash = await unusablePasswordHash();
  const userId = newId('usr');
  await db.transaction().execute(async (trx) => {
    const at = nowIso(now);
    await trx
      .insertInto('users')
      .values({
        id: userId,
        email,
        email_lower: email.toLowerCase(),
        name: email.split('@')[0] ?? email,
        password_hash: passwordHash,
        created_at: at,
        deactivated_at: null,
        // This organisation's alone until its holder proves the mailbox (ssoTrust.ts).
        sso_org_id: provider.orgId,
      })
      .execute();
    await trx.insertInto('memberships').values({ org_id: provider.orgId, user_id: userId, role, created_at: at }).execute();
    if (invitation) {
      await trx.updateTable('invitations').set({ accepted_at: at, accepted_by: userId }).where('id', '=', invitation.id).execute();
    }
    await trx
      .insertInto('sso_identities')
      .values({ issuer: claims.issuer, subject: claims.subject, user_id: userId, created_at: at })
      .execute();
    await recordMemberEvent(trx, [provider.orgId], 'member.joined', { object: 'member', id: userId, email, role }, cause(userId), now, {
      method: 'sso',
    });
  });
  return { kind: 'signed_in', userId, email };
}

/**
 * Why a correct password may not open a session (`--require`): a person who is a plain member of
 * an organisation that requires SSO signs in through it. Admins keep the password with a second
 * factor (the way in when the provider is down); an admin without any second factor is refused
 * too, and told to enrol one after signing in with SSO — a password alone would make the policy
 * pointless, and SSO still lets them in, so nobody is locked out while the provider works (and
 * the operator can lift the policy with `orgdata sso set` without `--require`).
 */
/**
 * Why a session may not move into `orgId` (null when it may): a session opened by single sign-on
 * stays in the organisation whose provider vouched for the person (another organisation's
 * provider must not open the door to this one), and an organisation that requires SSO takes its
 * members only through it, and admins only with a second factor (as at password sign-in).
 */
export async function switchRefusedBySso(
  db: Kysely<Database>,
  session: { userId: string; method: string },
  orgId: string,
): Promise<string | null> {
  if (session.method === 'sso') {
    return "You signed in with single sign-on, which opens only its own organisation: sign out and sign in with your password (or that organisation's SSO) to work in another.";
  }
  const row = await db
    .selectFrom('memberships')
    .innerJoin('sso_configs', 'sso_configs.org_id', 'memberships.org_id')
    .select('memberships.role')
    .where('memberships.user_id', '=', session.userId)
    .where('memberships.org_id', '=', orgId)
    .where('sso_configs.required', '=', 'yes')
    .where(requiredForTheirDomain(await emailDomainOf(db, session.userId)))
    .executeTakeFirst();
  if (!row) return null;
  if (row.role === 'admin' && (await hasSecondFactor(db, session.userId))) return null;
  return 'That organisation signs in with single sign-on: sign out, then use "Sign in with SSO" with your work email.';
}

/**
 * "Require SSO" holds for a person only where it can work for them: the organisation has verified
 * the domain of their e-mail (IDENTITY.md rule 9: an unverified domain claims nothing and blocks
 * nobody). Without that, SSO cannot sign them in, so refusing their password would lock them out:
 * every member after migration 023 until a domain is verified, or — the attack — someone who is
 * also a plain member of an organisation whose admin requires SSO for a domain of their own
 * (rule 17: locking out is not a weapon).
 */
function requiredForTheirDomain(domain: string) {
  return (eb: ExpressionBuilder<Database, 'memberships' | 'sso_configs'>) =>
    eb.exists(
      eb
        .selectFrom('sso_domains')
        .select('sso_domains.domain')
        .whereRef('sso_domains.org_id', '=', 'memberships.org_id')
        .where('sso_domains.domain', '=', domain)
        .where('sso_domains.verified_at', 'is not', null),
    );
}

async function emailDomainOf(db: Kysely<Database>, userId: string): Promise<string> {
  const user = await db.selectFrom('users').select('email').where('id', '=', userId).executeTakeFirst();
  return user ? emailDomain(user.email) : '';
}

export async function passwordRefusedBySso(db: Kysely<Database>, userId: string): Promise<string | null> {
  const roles = await db
    .selectFrom('memberships')
    .innerJoin('sso_configs', 'sso_configs.org_id', 'memberships.org_id')
    .select('memberships.role')
    .where('memberships.user_id', '=', userId)
    .where('sso_configs.required', '=', 'yes')
    .where(requiredForTheirDomain(await emailDomainOf(db, userId)))
    .execute();
  if (roles.length === 0) return null;
  if (roles.some((r) => r.role !== 'admin')) {
    return 'Your organisation signs in with single sign-on: use "Sign in with SSO" below with your work email.';
  }
  if (await hasSecondFactor(db, userId)) return null;
  return 'Your organisation signs in with single sign-on: use "Sign in with SSO". As an admin you may also sign in with your password and a second factor, once you have turned on two-factor in your account.';
}
