import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { UnavailableError } from '../../../domain/errors.js';
import { acceptSecondFactorCode, secondFactorsOf } from '../../../domain/identity/totp.js';
import { checkPassword, SignInRefused } from '../../../domain/sessions/passwordSignIn.js';
import { text } from '../../context.js';
import { field, html, type FieldErrors } from '../../html.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { completeReauthentication, REAUTH } from '../../reauth.js';
import { signInFailed } from '../../signIns.js';
import { safeNext } from './auth.js';
import { ssoMade } from '../../../domain/identity/ssoTrust.js';
import { beginSignIn } from '../../devices.js';

/**
 * `/reauth?next=PATH`: the password again (and a code when the person has an authenticator app;
 * a passkey instead when they have one: passkeys.js drives POST /reauth/passkey*) before a
 * sensitive action. Wrong passwords and codes count against the sign-in throttle like sign-in
 * attempts, and are in Activity. Success rotates the session and goes back to `next`.
 */
/** Where to go afterwards: a page of this site, never /reauth itself (that would only ask again). */
function nextOf(value: string): string {
  const next = safeNext(value);
  return next.startsWith(REAUTH) ? '/' : next;
}

export const reauthPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;

  async function reauthPage(
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    next: string,
    options: { errors?: FieldErrors; alert?: string } = {},
  ) {
    const session = request.session!;
    const factors = await secondFactorsOf(db, session.userId);
    // With passkeys and no authenticator app, the password alone is one factor: the passkey is the proof.
    const passkeyOnly = factors.passkeys > 0 && !factors.totp;
    // An account SSO made has no password of its own until its holder proves the mailbox (rule 10).
    const noOwnSignIn = !factors.totp && factors.passkeys === 0 && (await ssoMade(db, session.userId));
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(
        page({
          title: 'Confirm it is you',
          session,
          body: html`<div class="login card">
            <h1>Confirm it is you</h1>
            <p>
              This action needs you to prove who you are again. Afterwards you are taken back to the page you were on: submit the form there
              once more.
            </p>
            ${options.alert ? html`<div class="alert" role="alert">${options.alert}</div>` : ''}
            ${
              noOwnSignIn
                ? html`<div class="alert" role="alert">
                    Your account was made by your organisation's single sign-on and has no password of its own, which changes to the account
                    need. Set one through a reset link first: sign out, use “Forgot your password?” on the sign-in page and open the link
                    mailed to you.
                  </div>`
                : ''
            }
            ${
              passkeyOnly
                ? ''
                : html`<form method="post" action="${REAUTH}" novalidate>
                    ${csrf(session)}
                    <input type="hidden" name="next" value="${next}" />
                    <input type="hidden" name="email" value="${session.email}" autocomplete="username" />
                    ${field({ name: 'password', label: 'Password', type: 'password', errors: options.errors, required: true, autocomplete: 'current-password' })}
                    ${
                      factors.totp
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
                    <button type="submit">Confirm</button>
                  </form>`
            }
            ${
              factors.passkeys > 0
                ? html`<p>
                      ${passkeyOnly ? 'Confirm with one of your passkeys.' : 'Or confirm with one of your passkeys instead of the password.'}
                    </p>
                    <button type="button" data-passkey-reauth>Use a passkey</button>
                    <script src="/assets/passkeys.js" defer></script>`
                : ''
            }
            <p><a href="${next}">Cancel</a></p>
          </div>`,
        }),
      );
  }

  app.get(REAUTH, async (request, reply) => reauthPage(request, reply, 200, nextOf(text(request.query, 'next'))));

  app.post(REAUTH, async (request, reply) => {
    const session = request.session!;
    const next = nextOf(text(request.body, 'next') || text(request.query, 'next'));
    const password = text(request.body, 'password');
    const code = text(request.body, 'code');
    const factors = await secondFactorsOf(db, session.userId);
    if (factors.passkeys > 0 && !factors.totp) {
      return reauthPage(request, reply, 400, next, {
        alert: 'Your account is protected by a passkey: confirm with it, not with the password alone.',
      });
    }
    const errors: FieldErrors = {};
    if (!password) errors.password = 'Enter your password.';
    if (factors.totp && !code.trim()) errors.code = 'Enter the code from your authenticator app.';
    if (Object.keys(errors).length) return reauthPage(request, reply, 400, next, { errors });
    let attempt;
    try {
      attempt = await beginSignIn(deps, request, session.email);
    } catch (error) {
      if (!(error instanceof UnavailableError)) throw error;
      reply.header('retry-after', '5');
      return reauthPage(request, reply, 503, next, { alert: 'Confirming is unavailable for a moment. Try again in a few seconds.' });
    }
    if (attempt.waitSeconds > 0) {
      const minutes = Math.ceil(attempt.waitSeconds / 60);
      reply.header('retry-after', String(attempt.waitSeconds));
      return reauthPage(request, reply, 429, next, {
        alert: `Too many failed attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
      });
    }
    const user = { id: session.userId, email: session.email };
    try {
      await checkPassword(db, session.email, password);
    } catch (error) {
      if (!(error instanceof SignInRefused)) throw error;
      await signInFailed(request, deps, { user, method: 'password', reason: `reauthentication_${error.reason}` });
      return reauthPage(request, reply, 401, next, { errors: { password: 'That is not your password.' } });
    }
    let how = 'password';
    if (factors.totp) {
      const used = await acceptSecondFactorCode(db, deps.secret, session.userId, code, new Date());
      if (!used) {
        await signInFailed(request, deps, { user, method: 'password+totp', reason: 'reauthentication_wrong_code' });
        return reauthPage(request, reply, 401, next, { errors: { code: 'That code is not right, or was already used.' } });
      }
      how = `password+${used}`;
    }
    await attempt.succeeded().catch((error: unknown) => request.log.warn({ err: error }, 'sign-in throttle: attempt not forgiven'));
    await completeReauthentication(request, reply, deps, how);
    return reply.redirect(next, 303);
  });
};
