import type { FastifyReply, FastifyRequest } from 'fastify';
import { createChallenge, takeChallenge } from '../domain/identity/challenges.js';
import type { DashboardDeps } from './dashboardDeps.js';
import { safeNext } from './pages/signIn/auth.js';
import { needsReauthentication, reauthenticated } from './signIns.js';

export const REAUTH = '/reauth';
const GRANT_COOKIE = 'od_reauth';
/**
 * With REAUTH_MINUTES=0 ("always"), a re-authentication lets exactly one sensitive action through,
 * within this long: without it the action would send the person straight back to /reauth (a loop).
 */
export const REAUTH_GRACE_MS = 60_000;

/**
 * Where to come back to after re-authenticating: the page the form was on (the Referer, when it
 * is this site's), else `fallback`, the page that holds the route's form.
 */
export function reauthTarget(request: FastifyRequest, deps: DashboardDeps, fallback: string): string {
  const referer = request.headers.referer;
  if (referer) {
    try {
      const url = new URL(referer);
      const ours = url.host === request.headers.host || url.origin === new URL(deps.identity.publicUrl).origin;
      if (ours && url.pathname !== REAUTH) return safeNext(url.pathname + url.search);
    } catch {
      // Not a URL: use the fallback.
    }
  }
  return safeNext(fallback);
}

/** The single-use pass REAUTH_MINUTES=0 needs (see REAUTH_GRACE_MS): taken, it is gone. */
async function takeGrant(request: FastifyRequest, reply: FastifyReply, deps: DashboardDeps, now: Date): Promise<boolean> {
  const token = request.cookies[GRANT_COOKIE];
  if (!token) return false;
  reply.clearCookie(GRANT_COOKIE, { path: '/' });
  const grant = await takeChallenge(deps.db, 'reauth_grant', token, now);
  return grant !== null && grant.userId === request.session?.userId;
}

/**
 * A preHandler for sensitive actions (IDENTITY.md, Sessions and re-authentication): when the
 * session's last proof of identity is older than REAUTH_MINUTES, nothing is done and the person is
 * sent to /reauth, which brings them back to the form to submit again. With the default, the
 * sign-in itself is a fresh proof; with 0, only a re-authentication made for it (once, within
 * REAUTH_GRACE_MS) is.
 */
export function requireRecentAuthentication(
  deps: DashboardDeps,
  options: {
    /** The page holding the form, when the Referer does not say (a string, or computed from the request's parameters). */
    fallback?: string | ((request: FastifyRequest) => string);
    /** Only when this holds (e.g. an invitation whose role is admin); always by default. */
    when?: (request: FastifyRequest) => boolean | Promise<boolean>;
    /** A change to the account itself: only the account's own factors count (IDENTITY.md rule 8). */
    account?: boolean;
  } = {},
) {
  return async function preHandler(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    if (options.when && !(await options.when(request))) return undefined;
    const fallback = typeof options.fallback === 'function' ? options.fallback(request) : options.fallback;
    const to = await reauthenticationNeeded(request, reply, deps, fallback ?? request.url.split('?')[0] ?? '/contacts', {
      account: options.account,
    });
    return to === null ? undefined : reply.redirect(to, 303);
  };
}

/**
 * A preHandler for a change to the *account* (IDENTITY.md rule 8: a passkey, TOTP, recovery codes,
 * the password): as requireRecentAuthentication, but what counts is the last proof by the
 * account's own factors, which a session opened by an organisation's SSO does not have until its
 * person re-authenticates. `ssoOnly`: for routes that ask for a factor themselves (the current
 * password, a current code) and so need nothing more outside an SSO session.
 */
export function requireAccountProof(deps: DashboardDeps, options: { fallback?: string; ssoOnly?: boolean } = {}) {
  const check = requireRecentAuthentication(deps, { fallback: options.fallback, account: true });
  return async function preHandler(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    if (options.ssoOnly && request.session?.method !== 'sso') return undefined;
    return check(request, reply);
  };
}

/**
 * The /reauth address to send the person to before a sensitive action, or null when the session's
 * proof of identity is recent enough (with REAUTH_MINUTES=0, the single-use pass is used up here).
 * For the JSON endpoints of page scripts, which answer the address rather than redirect.
 */
export async function reauthenticationNeeded(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: DashboardDeps,
  fallback: string,
  options: { account?: boolean } = {},
): Promise<string | null> {
  const session = request.session;
  if (!session) return null;
  const now = new Date();
  // For a change to the account, only a proof by the account's own factors counts (rule 8).
  const proof = options.account ? session.accountProofAt : session.authenticatedAt;
  if (deps.reauthMinutes > 0 && proof !== null && !needsReauthentication({ authenticatedAt: proof }, deps.reauthMinutes, now)) return null;
  if (deps.reauthMinutes === 0 && (await takeGrant(request, reply, deps, now))) return null;
  return `${REAUTH}?next=${encodeURIComponent(reauthTarget(request, deps, fallback))}`;
}

/**
 * Every successful re-authentication ends here (password, password + code, passkey): the session
 * is rotated and the proof recorded (signIns.reauthenticated), and with REAUTH_MINUTES=0 the
 * browser gets the single-use pass for its next sensitive action. The caller redirects.
 */
export async function completeReauthentication(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: DashboardDeps,
  how: string,
): Promise<void> {
  const userId = request.session!.userId;
  await reauthenticated(request, reply, deps, how);
  if (deps.reauthMinutes === 0) {
    const token = await createChallenge(deps.db, 'reauth_grant', userId, {}, REAUTH_GRACE_MS, new Date());
    reply.setCookie(GRANT_COOKIE, token, {
      path: '/',
      httpOnly: true,
      sameSite: 'lax',
      secure: deps.secureCookies,
      maxAge: REAUTH_GRACE_MS / 1000,
    });
  }
}
