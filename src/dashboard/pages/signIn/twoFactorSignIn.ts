import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { UnavailableError } from '../../../domain/errors.js';
import {
  countChallengeFailure,
  createChallenge,
  findChallenge,
  takeChallenge,
  type Challenge,
} from '../../../domain/identity/challenges.js';
import { joinAfterSecondFactor } from '../../../domain/identity/invitationAcceptance.js';
import {
  PENDING_SIGN_IN_ATTEMPTS,
  PENDING_SIGN_IN_MS,
  refusalReason,
  type PendingSignIn,
} from '../../../domain/identity/pendingSignIns.js';
import { acceptSecondFactorCode, secondFactorsOf } from '../../../domain/identity/totp.js';
import { flash, originOf, text } from '../../context.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { checkFormToken, formToken } from '../../formGuard.js';
import { field, html, type FieldErrors } from '../../html.js';
import { page } from '../../layout.js';
import { finishSignIn, signInFailed } from '../../signIns.js';
import { formField } from './linkGone.js';
import { safeNext } from './safeNext.js';
import { beginSignIn } from '../../devices.js';

/** The browser's handle on its pending sign-in (the challenge's token; the database has its hash). */
export const PENDING_COOKIE = 'od_pending';
const PATH = '/login/two-factor';

/**
 * The password was right and the account has a second factor: no session yet, a pending sign-in
 * for 5 minutes, and the browser is sent to ask for the code (or a passkey).
 */
export async function beginPendingSignIn(reply: FastifyReply, deps: DashboardDeps, userId: string, pending: PendingSignIn) {
  const token = await createChallenge(deps.db, 'two_factor', userId, pending, PENDING_SIGN_IN_MS, new Date());
  reply.setCookie(PENDING_COOKIE, token, {
    path: '/',
    httpOnly: true,
    sameSite: 'lax',
    secure: deps.secureCookies,
    maxAge: PENDING_SIGN_IN_MS / 1000,
  });
  return reply.redirect(PATH, 303);
}

/**
 * Ends this browser's pending sign-in once its second factor is accepted (a TOTP or recovery code
 * here; a passkey in the passkeys part, with method 'password+passkey'): takes the challenge
 * (single use: two requests racing with two right answers open one session), adds an invitation's
 * membership when the pending sign-in came from one, opens the session. Returns where to send the
 * browser, or null when the pending sign-in is gone (expired, ended, taken by another request).
 */
export async function finishPendingSignIn(request: FastifyRequest, reply: FastifyReply, deps: DashboardDeps, method: string) {
  const now = new Date();
  const taken = await takeChallenge<PendingSignIn>(deps.db, 'two_factor', request.cookies[PENDING_COOKIE], now);
  if (!taken?.userId) return null;
  reply.clearCookie(PENDING_COOKIE, { path: '/' });
  const { data, userId } = taken;
  let orgId: string | undefined = data.orgId;
  let next = safeNext(data.next);
  if (data.invitation) {
    const joined = await joinAfterSecondFactor(deps.db, data.invitation, userId, { requestId: request.id, origin: originOf(request) }, now);
    // The link died meanwhile (revoked, expired): signed in all the same, in their first organisation.
    orgId = joined?.orgId;
    next = '/contacts';
    flash(reply, joined ? 'Welcome: you joined the organisation.' : 'That invitation no longer works; you are signed in.');
  }
  await finishSignIn(request, reply, deps, { userId, email: data.email, ...(orgId ? { orgId } : {}), method });
  return next;
}

function codePage(
  factors: { totp: boolean; passkeys: number },
  csrfToken: string,
  options: { errors?: FieldErrors; alert?: string } = {},
): string {
  return page({
    title: 'Two-factor authentication',
    session: null,
    body: html`<div class="login card">
      <h1>Two-factor authentication</h1>
      ${options.alert ? html`<div class="alert" role="alert">${options.alert}</div>` : ''}
      ${
        factors.totp
          ? html`<form method="post" action="${PATH}" novalidate>
              ${formField(csrfToken)}
              ${field({
                name: 'code',
                label: 'Code',
                errors: options.errors,
                required: true,
                autocomplete: 'one-time-code',
                hint: 'The 6-digit code from your authenticator app, or one of your recovery codes.',
              })}
              <button type="submit">Verify</button>
            </form>`
          : ''
      }
      ${
        factors.passkeys > 0
          ? html`<p><button type="button" data-passkey-second-factor>Use a passkey</button></p>
              <script src="/assets/passkeys.js" defer></script>`
          : ''
      }
      <p><a href="/login">Start again</a></p>
    </div>`,
  });
}

/**
 * `GET/POST /login/two-factor`: the second step of a password sign-in. A right code (TOTP, used
 * once: a replay is refused; or a recovery code, once) ends the pending sign-in and opens the
 * session; a wrong one is counted by the sign-in throttle and by the pending sign-in itself,
 * which ends at the fifth. The form is session-less, so CSRF is the form guard's.
 */
export const twoFactorSignInPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret, secureCookies } = deps;
  const send = (reply: FastifyReply, status: number, body: string) => reply.code(status).type('text/html; charset=utf-8').send(body);
  const clearPending = (reply: FastifyReply) => reply.clearCookie(PENDING_COOKIE, { path: '/' });
  const backToLogin = (reply: FastifyReply, message: string) => {
    clearPending(reply);
    flash(reply, message);
    return reply.redirect('/login', 303);
  };
  const EXPIRED = 'Your sign-in expired or was not started. Sign in again.';
  const pendingOf = (request: FastifyRequest) =>
    findChallenge<PendingSignIn>(db, 'two_factor', request.cookies[PENDING_COOKIE], new Date()) as Promise<Challenge<PendingSignIn> | null>;

  app.get(PATH, async (request, reply) => {
    const pending = await pendingOf(request);
    if (!pending?.userId) return backToLogin(reply, EXPIRED);
    const factors = await secondFactorsOf(db, pending.userId);
    if (!factors.totp && factors.passkeys === 0) return backToLogin(reply, EXPIRED);
    return send(reply, 200, codePage(factors, formToken(request, reply, secret, secureCookies)));
  });

  app.post(PATH, async (request, reply) => {
    checkFormToken(request, secret, text(request.body, '_csrf'));
    const token = request.cookies[PENDING_COOKIE];
    const pending = await pendingOf(request);
    if (!token || !pending?.userId) return backToLogin(reply, EXPIRED);
    const userId = pending.userId;
    const factors = await secondFactorsOf(db, userId);
    const again = (status: number, options: { errors?: FieldErrors; alert?: string }) =>
      send(reply, status, codePage(factors, formToken(request, reply, secret, secureCookies), options));
    const code = text(request.body, 'code').trim();
    if (!code) return again(400, { errors: { code: 'Enter the code from your authenticator app, or a recovery code.' } });

    let attempt;
    try {
      attempt = await beginSignIn(deps, request, pending.data.email);
    } catch (error) {
      if (!(error instanceof UnavailableError)) throw error;
      reply.header('retry-after', '5');
      return again(503, { alert: 'Signing in is unavailable for a moment. Try again in a few seconds.' });
    }
    if (attempt.waitSeconds > 0) {
      const minutes = Math.ceil(attempt.waitSeconds / 60);
      reply.header('retry-after', String(attempt.waitSeconds));
      return again(429, { alert: `Too many failed attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.` });
    }

    const now = new Date();
    const used = await acceptSecondFactorCode(db, secret, userId, code, now);
    const user = { id: userId, email: pending.data.email };
    if (!used) {
      const reason = /^\d{6}$/.test(code.replace(/\s+/g, '')) ? await refusalReason(db, secret, userId, code, now) : 'wrong_code';
      await signInFailed(request, deps, { user, method: 'password+totp', reason });
      const left = await countChallengeFailure(db, token, PENDING_SIGN_IN_ATTEMPTS);
      if (left === null) return backToLogin(reply, 'Too many wrong codes. Sign in again.');
      const alert =
        reason === 'replayed_code'
          ? 'That code was used already. Wait for the next one in your app.'
          : 'That code is not right. Check your app (and its clock), or use a recovery code.';
      return again(401, { errors: { code: alert } });
    }
    await attempt.succeeded().catch((error: unknown) => request.log.warn({ err: error }, 'sign-in throttle: attempt not forgiven'));
    const next = await finishPendingSignIn(request, reply, deps, `password+${used}`);
    if (next === null) return backToLogin(reply, EXPIRED);
    if (used === 'recovery_code') {
      flash(reply, 'You signed in with a recovery code: it is used up now. Check how many you have left in your account.');
    }
    return reply.redirect(next, 303);
  });
};
