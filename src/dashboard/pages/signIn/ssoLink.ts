import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { UnavailableError } from '../../../domain/errors.js';
import { countChallengeFailure, findChallenge, takeChallenge } from '../../../domain/identity/challenges.js';
import { consentFactors, proveAccountForLink, type PendingSsoLink } from '../../../domain/identity/ssoLinks.js';
import { ssoProviderOf } from '../../../domain/identity/ssoConfigs.js';
import { linkSsoIdentity } from '../../../domain/identity/ssoTrust.js';
import { text } from '../../context.js';
import { checkFormToken, formToken } from '../../formGuard.js';
import { field, html, type FieldErrors } from '../../html.js';
import { page } from '../../layout.js';
import { finishSignIn, signInFailed } from '../../signIns.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { formField } from './linkGone.js';

/** The browser's half of a pending link: the `sso_link` challenge's token. */
export const SSO_LINK_COOKIE = 'od_sso_link';
export const SSO_LINK_PATH = '/sso/link';
export const SSO_LINK_TTL_MS = 10 * 60_000;
/** Wrong answers before the pending link ends (the sign-in throttle counts them too). */
const LINK_ATTEMPTS = 5;

/**
 * A wrong answer to a pending link (password, code or passkey): in Activity, and counted; false
 * when it was the fifth, which ends the pending link (its cookie is cleared).
 */
export async function linkRefused(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: DashboardDeps,
  token: string,
  user: { id: string; email: string },
  reason: string,
): Promise<boolean> {
  await signInFailed(request, deps, { user, method: 'sso', reason });
  if ((await countChallengeFailure(deps.db, token, LINK_ATTEMPTS)) !== null) return true;
  reply.clearCookie(SSO_LINK_COOKIE, { path: '/sso' });
  return false;
}

/**
 * The holder proved the account: the pending link is taken (once: a second answer finds nothing),
 * the provider's `iss` + `sub` linked and an SSO session opened. Where to go next, or null with
 * the status to answer when the link could not be made.
 */
export async function completeLink(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: DashboardDeps,
  token: string,
  user: { id: string; email: string },
  now: Date,
): Promise<{ next: string; status?: never } | { next: null; status: number }> {
  const { db, secret } = deps;
  const taken = await takeChallenge<PendingSsoLink>(db, 'sso_link', token, now);
  reply.clearCookie(SSO_LINK_COOKIE, { path: '/sso' });
  if (!taken || taken.userId !== user.id) return { next: null, status: 400 };
  const provider = await ssoProviderOf(db, secret, taken.data.orgId);
  if (!provider || provider.issuer !== taken.data.issuer) return { next: null, status: 400 };
  const linked = await linkSsoIdentity(db, { issuer: taken.data.issuer, subject: taken.data.subject, userId: user.id }, now);
  if (!linked) {
    await signInFailed(request, deps, { user, method: 'sso', reason: 'subject_mismatch' });
    return { next: null, status: 403 };
  }
  await finishSignIn(request, reply, deps, { userId: user.id, email: user.email, orgId: taken.data.orgId, method: 'sso' });
  return { next: taken.data.next };
}

/**
 * `GET/POST /sso/link` (IDENTITY.md rule 10): the first SSO sign-in for an e-mail that already has
 * an account does not link the provider's `iss` + `sub` to it, nor open a session, until that
 * account's holder signs in with the account's own factors here (password, and a code when it has
 * an authenticator app). The pending link (organisation, issuer, subject, where to go) waits in an
 * `sso_link` challenge for 10 minutes, named by the `od_sso_link` cookie, so only the browser that
 * made the SSO sign-in can finish it. Wrong answers are in Activity (member.sign_in_failed, method
 * sso, reason link_…) and count against the sign-in throttle; five end the pending link.
 */
export const ssoLinkPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret, signInThrottle } = deps;

  async function linkPage(
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    userId: string,
    email: string,
    options: { errors?: FieldErrors; alert?: string } = {},
  ) {
    const needs = await consentFactors(db, userId);
    const cannot = needs.noOwnSignIn
      ? 'This account has no password of its own yet. Use “Forgot your password?” on the sign-in page to have a link mailed to this address, choose a password, then sign in with single sign-on again.'
      : null;
    // A password alone is one factor where the account has passkeys: then a passkey is the way.
    const passwordForm = !cannot && !needs.passkeyOnly;
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .header('cache-control', 'no-store')
      .send(
        page({
          title: 'Link your account',
          session: null,
          body: html`<div class="login card">
            <h1>Link your account</h1>
            <p>
              An account with this email exists: <strong>${email}</strong>. Your organisation's single sign-on may sign you in to it only
              once you have signed in with the account's own
              ${needs.passkeyOnly ? 'passkey' : needs.passkey ? 'password or passkey' : 'password'} to link it.
            </p>
            ${options.alert ? html`<div class="alert" role="alert">${options.alert}</div>` : ''}
            ${cannot ? html`<div class="alert" role="alert">${cannot}</div>` : ''}
            ${
              !passwordForm
                ? ''
                : html`<form method="post" action="${SSO_LINK_PATH}" novalidate>
                    ${formField(formToken(request, reply, secret, deps.secureCookies))}
                    <input type="hidden" name="email" value="${email}" autocomplete="username" />
                    ${field({ name: 'password', label: 'Password', type: 'password', errors: options.errors, required: true, autocomplete: 'current-password' })}
                    ${
                      needs.code
                        ? field({
                            name: 'code',
                            label: 'Authentication code',
                            errors: options.errors,
                            required: true,
                            autocomplete: 'one-time-code',
                            hint: 'The 6-digit code from your authenticator app, or one of your recovery codes.',
                          })
                        : ''
                    }
                    <button type="submit">Sign in and link</button>
                  </form>`
            }
            ${
              !cannot && needs.passkey
                ? html`<p>${passwordForm ? 'Or link with one of your passkeys instead:' : 'Link with one of your passkeys:'}</p>
                    <button type="button" data-passkey-link>Link with a passkey</button>
                    <p data-passkey-status role="status" class="hint"></p>
                    <script src="/assets/passkeys.js" defer></script>`
                : ''
            }
            <p>If you did not just sign in with single sign-on, do not link: <a href="/login">go back to sign in</a>.</p>
          </div>`,
        }),
      );
  }

  function gone(reply: FastifyReply, status = 400) {
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(
        page({
          title: 'Link your account',
          session: null,
          body: html`<div class="login card">
            <h1>Link your account</h1>
            <div class="alert" role="alert">
              This request to link has expired or was not started in this browser. Start again with “Sign in with SSO” on the sign-in page.
            </div>
            <p><a href="/login">Back to sign in</a></p>
          </div>`,
        }),
      );
  }

  const emailOf = async (userId: string) =>
    (await db.selectFrom('users').select('email').where('id', '=', userId).executeTakeFirst())?.email ?? null;

  app.get(SSO_LINK_PATH, async (request, reply) => {
    const pending = await findChallenge<PendingSsoLink>(db, 'sso_link', request.cookies[SSO_LINK_COOKIE], new Date());
    const email = pending?.userId ? await emailOf(pending.userId) : null;
    if (!pending?.userId || !email) return gone(reply);
    return linkPage(request, reply, 200, pending.userId, email);
  });

  app.post(SSO_LINK_PATH, async (request, reply) => {
    checkFormToken(request, secret, text(request.body, '_csrf'));
    const token = request.cookies[SSO_LINK_COOKIE];
    const now = new Date();
    const pending = await findChallenge<PendingSsoLink>(db, 'sso_link', token, now);
    const email = pending?.userId ? await emailOf(pending.userId) : null;
    if (!token || !pending?.userId || !email) return gone(reply);
    const userId = pending.userId;
    const user = { id: userId, email };
    let attempt;
    try {
      attempt = await signInThrottle.begin(email, request.ip);
    } catch (error) {
      if (!(error instanceof UnavailableError)) throw error;
      reply.header('retry-after', '5');
      return linkPage(request, reply, 503, userId, email, { alert: 'This is unavailable for a moment. Try again in a few seconds.' });
    }
    if (attempt.waitSeconds > 0) {
      const minutes = Math.ceil(attempt.waitSeconds / 60);
      reply.header('retry-after', String(attempt.waitSeconds));
      return linkPage(request, reply, 429, userId, email, {
        alert: `Too many failed attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
      });
    }
    const given = { password: text(request.body, 'password'), code: text(request.body, 'code') };
    const refused = await proveAccountForLink(db, secret, userId, given, now);
    if (refused) {
      if (!(await linkRefused(request, reply, deps, token, user, refused))) return gone(reply, 401);
      const errors: FieldErrors =
        refused === 'link_wrong_code'
          ? { code: 'That code is not right, or was already used.' }
          : { password: 'That is not your password.' };
      return linkPage(request, reply, 401, userId, email, { errors });
    }
    await attempt.succeeded().catch((error: unknown) => request.log.warn({ err: error }, 'sign-in throttle: attempt not forgiven'));
    const linked = await completeLink(request, reply, deps, token, user, now);
    return linked.next === null ? gone(reply, linked.status) : reply.redirect(linked.next, 303);
  });
};
