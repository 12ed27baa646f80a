import type { FastifyReply, FastifyRequest } from 'fastify';
import { orgsOfUser, recordMemberEvent, type IdentityCause } from '../domain/events/memberEvents.js';
import { firstOrgOf, openSession } from '../domain/sessions/sessions.js';
import { ForbiddenError } from '../domain/errors.js';
import { originOf, startSession } from './context.js';
import type { DashboardDeps } from './dashboardDeps.js';
import { rememberDevice } from './devices.js';

/**
 * Where every way of signing in ends (password, password + second factor, passkey, SSO, an
 * accepted invitation, a password reset): a new session (a new token: rotation), the sign-in in
 * Activity in each of the person's organisations with its method and approximate origin, and the
 * sign-in counter of /metrics. Failures go through signInFailed: in Activity with their reason in
 * the organisations of the account the attempt named (none for an unknown email), and counted.
 */
export interface SignedIn {
  userId: string;
  email: string;
  /** The organisation to work in; the person's first when absent. */
  orgId?: string;
  /** password | password+totp | password+recovery_code | passkey | sso | invitation | password_reset */
  method: string;
}

/** The sign-in counter's method label: the last step that proved who the person is. */
export function counterMethod(method: string): string {
  return method.includes('+') ? method.slice(method.lastIndexOf('+') + 1) : method;
}

export function causeOf(request: FastifyRequest, userId: string | null): IdentityCause {
  return { actor_type: userId ? 'user' : 'system', actor_id: userId, request_id: request.id, origin: originOf(request) };
}

/** Opens the session and hands its cookie to the browser; the caller redirects. */
export async function finishSignIn(request: FastifyRequest, reply: FastifyReply, deps: DashboardDeps, who: SignedIn): Promise<void> {
  const now = new Date();
  const orgId = who.orgId ?? (await firstOrgOf(deps.db, who.userId));
  if (!orgId) throw new ForbiddenError('This account does not belong to any organisation yet.');
  const session = await openSession(deps.db, who.userId, orgId, now, { method: who.method, origin: originOf(request) });
  await startSession(request, reply, deps.db, session, deps.secureCookies);
  // This browser has now signed in to the account by its own factors (not SSO: see devices.ts).
  if (counterMethod(who.method) !== 'sso') rememberDevice(request, reply, deps.secret, deps.secureCookies, who.email);
  const orgs = await orgsOfUser(deps.db, who.userId);
  await recordMemberEvent(
    deps.db,
    orgs,
    'member.signed_in',
    { object: 'member', id: who.userId, email: who.email },
    causeOf(request, who.userId),
    now,
    {
      method: who.method,
    },
  );
  deps.countSignIn(counterMethod(who.method), 'succeeded');
}

/** A refused sign-in step, with its reason (wrong_password, wrong_code, replayed_code, unverified_email, …). */
export async function signInFailed(
  request: FastifyRequest,
  deps: DashboardDeps,
  failure: { user: { id: string; email: string } | null; method: string; reason: string },
): Promise<void> {
  deps.countSignIn(counterMethod(failure.method), 'failed');
  if (!failure.user) return;
  const orgs = await orgsOfUser(deps.db, failure.user.id);
  await recordMemberEvent(
    deps.db,
    orgs,
    'member.sign_in_failed',
    { object: 'member', id: failure.user.id, email: failure.user.email },
    // The person did not act (the attempt may be someone else's): the system records it.
    causeOf(request, null),
    new Date(),
    { method: failure.method, reason: failure.reason },
  );
}

/**
 * The person proved who they are again (re-authentication before a sensitive action): a new
 * session (rotation) in the same organisation, opened the same way, with authenticated_at now.
 */
export async function reauthenticated(request: FastifyRequest, reply: FastifyReply, deps: DashboardDeps, how: string): Promise<void> {
  const session = request.session!;
  const now = new Date();
  // Every re-authentication is by the account's own factors (password and code, or a passkey:
  // /reauth never offers SSO), so it is an account proof too, even in a session SSO opened.
  const opened = await openSession(deps.db, session.userId, session.orgId, now, {
    method: session.method,
    origin: originOf(request),
    accountProof: true,
    testMode: session.testMode,
  });
  await startSession(request, reply, deps.db, opened, deps.secureCookies);
  const orgs = await orgsOfUser(deps.db, session.userId);
  await recordMemberEvent(
    deps.db,
    orgs,
    'member.reauthenticated',
    { object: 'member', id: session.userId, email: session.email },
    causeOf(request, session.userId),
    now,
    {
      method: how,
    },
  );
}

/** Whether a sensitive action must first ask for the password (and second factor) again. */
export function needsReauthentication(session: { authenticatedAt: string }, reauthMinutes: number, now: Date): boolean {
  if (reauthMinutes === 0) return true;
  return Date.parse(session.authenticatedAt) < now.getTime() - reauthMinutes * 60_000;
}
