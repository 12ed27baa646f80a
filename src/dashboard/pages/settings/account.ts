import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { UnavailableError, ValidationError } from '../../../domain/errors.js';
import { changePassword } from '../../../domain/identity/passwordChanges.js';
import { listPasskeys } from '../../../domain/identity/passkeys.js';
import { secondFactorsOf } from '../../../domain/identity/totp.js';
import { openSession } from '../../../domain/sessions/sessions.js';
import { flash, originOf, startSession, takeFlash, text } from '../../context.js';
import { field, fieldErrors, html, type FieldErrors } from '../../html.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { passkeySection } from './passkeyViews.js';
import { sessionsSection } from './accountSessions.js';
import { requireAccountProof } from '../../reauth.js';
import { ssoMade } from '../../../domain/identity/ssoTrust.js';
import { beginSignIn } from '../../devices.js';

const ACCOUNT = '/settings/account';

/**
 * `/settings/account`: the signed-in person's own account. Changing the password needs the
 * current one (counted like sign-in attempts: it would otherwise be a way to guess it), ends every
 * other session of theirs, and gives this browser a new session.
 */
export const accountPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secureCookies } = deps;
  async function accountPage(
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    options: { errors?: FieldErrors; alert?: string; twoFactor?: boolean } = {},
  ) {
    const session = request.session!;
    const passkeys = await listPasskeys(db, session.userId);
    const sessions = await sessionsSection(db, session);
    // An account SSO made has no password of its own: changes to it need one first (IDENTITY.md rule 10).
    const noPassword = passkeys.length === 0 && (await ssoMade(db, session.userId)) && !(await secondFactorsOf(db, session.userId)).totp;
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(
        page({
          title: 'Your account',
          session,
          notice: takeFlash(request, reply),
          body: html`<h1>Your account</h1>
            <p>You sign in as <strong>${session.email}</strong>.</p>
            <h2>Two-factor authentication</h2>
            <p>
              ${options.twoFactor === undefined ? '' : options.twoFactor ? 'On.' : 'Off.'}
              <a href="/settings/account/two-factor">Two-factor authentication settings</a>
            </p>
            <h2>Change your password</h2>
            ${
              noPassword
                ? html`<p class="notice" role="status">
                    Your account was made by your organisation's single sign-on and has no password of its own. To add a passkey, turn on
                    two-factor or choose a password, first set a password through a reset link: sign out, use “Forgot your password?” on the
                    sign-in page and open the link mailed to you.
                  </p>`
                : ''
            }
            ${options.alert ? html`<div class="alert" role="alert">${options.alert}</div>` : ''}
            <form method="post" action="${ACCOUNT}/password" novalidate>
              ${csrf(session)}
              <input type="hidden" name="email" value="${session.email}" autocomplete="username" />
              ${field({ name: 'current_password', label: 'Current password', type: 'password', errors: options.errors, required: true, autocomplete: 'current-password' })}
              ${field({
                name: 'password',
                label: 'New password',
                type: 'password',
                errors: options.errors,
                required: true,
                autocomplete: 'new-password',
                hint: 'At least 8 characters, not your email address. Your other sessions are signed out.',
              })}
              <button type="submit">Change password</button>
            </form>
            ${passkeySection(session, passkeys)} ${sessions}`,
        }),
      );
  }

  app.get(ACCOUNT, async (request, reply) => {
    const factors = await secondFactorsOf(db, request.session!.userId);
    return accountPage(request, reply, 200, { twoFactor: factors.totp });
  });

  // In a session SSO opened, the current password alone is not enough: the account's own proof first (rule 8).
  app.post(
    `${ACCOUNT}/password`,
    { preHandler: requireAccountProof(deps, { fallback: ACCOUNT, ssoOnly: true }) },
    async (request, reply) => {
      const session = request.session!;
      let attempt;
      try {
        attempt = await beginSignIn(deps, request, session.email);
      } catch (error) {
        if (!(error instanceof UnavailableError)) throw error;
        reply.header('retry-after', '5');
        return accountPage(request, reply, 503, {
          alert: 'Changing your password is unavailable for a moment. Try again in a few seconds.',
        });
      }
      if (attempt.waitSeconds > 0) {
        const minutes = Math.ceil(attempt.waitSeconds / 60);
        reply.header('retry-after', String(attempt.waitSeconds));
        return accountPage(request, reply, 429, {
          alert: `Too many failed attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
        });
      }
      let changed;
      try {
        changed = await changePassword(
          db,
          { userId: session.userId, currentPassword: text(request.body, 'current_password'), password: text(request.body, 'password') },
          { requestId: request.id, origin: originOf(request) },
          new Date(),
        );
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        // Only a wrong current password counts against the limits; a too-short new one is forgiven.
        if (!error.errors.some((e) => e.field === 'current_password')) await attempt.succeeded().catch(() => undefined);
        return accountPage(request, reply, 400, { errors: fieldErrors(error.errors) });
      }
      await attempt.succeeded().catch((error: unknown) => request.log.warn({ err: error }, 'sign-in throttle: attempt not forgiven'));
      // Rotated, but no re-authentication: the proof of identity keeps its age (no second factor was asked);
      // the session stays in the mode it shows (test mode), as a re-authentication's does.
      const opening = {
        method: session.method,
        origin: originOf(request),
        authenticatedAt: session.authenticatedAt,
        testMode: session.testMode,
      };
      await startSession(request, reply, db, await openSession(db, session.userId, session.orgId, new Date(), opening), secureCookies);
      const others = changed.ended_sessions - 1;
      flash(
        reply,
        `Your password is changed.${others > 0 ? ` ${others} other session${others === 1 ? ' was' : 's were'} signed out.` : ''}`,
      );
      return reply.redirect(ACCOUNT, 303);
    },
  );
};
