import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { UnauthorizedError, UnavailableError, ValidationError } from '../../../domain/errors.js';
import { acceptInvitation, findInvitation, type InvitationOffer } from '../../../domain/identity/invitationAcceptance.js';
import { passkeyJoinRefusal } from '../../../domain/identity/passkeyJoin.js';
import { ssoOrgForEmail, ssoSettingsOf } from '../../../domain/identity/ssoConfigs.js';
import { passwordRefusedBySso } from '../../../domain/identity/ssoSignIn.js';
import { flash, originOf, text } from '../../context.js';
import { finishSignIn } from '../../signIns.js';
import { checkFormToken, formToken } from '../../formGuard.js';
import { field, fieldErrors, html, type FieldErrors } from '../../html.js';
import { page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { formField, linkGone } from './linkGone.js';
import { beginPendingSignIn } from './twoFactorSignIn.js';
import { MAILBOX_FIRST } from '../../../domain/identity/ssoTrust.js';
import { beginSignIn } from '../../devices.js';

function invitePage(
  offer: InvitationOffer,
  token: string,
  csrfToken: string,
  options: { errors?: FieldErrors; alert?: string; sso?: boolean; passkey?: boolean; passwordRefused?: string | null } = {},
) {
  const role = offer.role === 'admin' ? 'an admin' : 'a member';
  return page({
    title: `Join ${offer.orgName}`,
    session: null,
    body: html`<div class="login card">
      <h1>Join ${offer.orgName} on orgdata</h1>
      <p><strong>${offer.email}</strong> is invited to join <strong>${offer.orgName}</strong> as ${role}.</p>
      ${options.alert ? html`<div class="alert" role="alert">${options.alert}</div>` : ''}
      ${
        offer.mailboxFirst
          ? html`<p>${MAILBOX_FIRST}</p>`
          : options.passwordRefused
            ? html`<p>${options.passwordRefused}</p>`
            : html` <form method="post" action="/invite/${token}" novalidate>
                ${formField(csrfToken)}
                <input type="hidden" name="email" value="${offer.email}" autocomplete="username" />
                ${
                  offer.hasAccount
                    ? html`<p>You already have an orgdata account with this email. Sign in with its password to join.</p>
                        ${field({ name: 'password', label: 'Your password', type: 'password', errors: options.errors, required: true, autocomplete: 'current-password' })}
                        <button type="submit">Sign in and join</button>
                        <p class="hint">Forgot it? <a href="/forgot-password">Reset your password</a>, then open this link again.</p>`
                    : html`${field({
                          name: 'password',
                          label: 'Choose a password',
                          type: 'password',
                          errors: options.errors,
                          required: true,
                          autocomplete: 'new-password',
                          hint: 'At least 8 characters, not your email address. Only you will know it.',
                        })} <button type="submit">Join ${offer.orgName}</button>`
                }
              </form>`
      }
      ${
        options.passkey
          ? html`<div class="passkey-sign-in">
                <p>Or join without a password: a passkey uses this device's screen lock, your phone or a security key.</p>
                <button type="button" class="secondary" data-passkey-join>Join with a passkey</button>
                <p data-passkey-status role="status" class="hint"></p>
              </div>
              <script src="/assets/passkeys.js" defer></script>`
          : ''
      }
      ${
        options.sso
          ? html`<p>Your organisation signs in with single sign-on:</p>
              <p><a class="button secondary" href="/sso/start?email=${encodeURIComponent(offer.email)}">Join with SSO</a></p>`
          : ''
      }
    </div>`,
  });
}

/**
 * Single sign-on required (IDENTITY.md, `--require`) is not skipped by an invitation: an existing
 * account held to SSO by one of its organisations does not sign in with its password here either,
 * and a new member of an organisation that requires SSO, whose email SSO covers, joins through it.
 */
async function ssoRefusesPasswordJoin(db: DashboardDeps['db'], offer: InvitationOffer): Promise<string | null> {
  if (offer.hasAccount) {
    const user = await db.selectFrom('users').select('id').where('email_lower', '=', offer.email.toLowerCase()).executeTakeFirst();
    return user ? passwordRefusedBySso(db, user.id) : null;
  }
  if (offer.role !== 'member' || (await ssoOrgForEmail(db, offer.email)) !== offer.orgId) return null;
  return (await ssoSettingsOf(db, offer.orgId))?.required ? 'This organisation signs in with single sign-on: use "Join with SSO".' : null;
}

/**
 * `GET/POST /invite/TOKEN`: what an invitation link opens (see domain/identity/invitationAcceptance.ts).
 * Accepting signs the person in with a new session and uses the link up.
 */
export const invitePages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret, secureCookies } = deps;
  const show = async (request: FastifyRequest, reply: FastifyReply, offer: InvitationOffer, token: string, status: number, extra = {}) => {
    // An invited email in the organisation's SSO domains may join through the provider instead
    // (not an existing account: SSO never joins one, see domain/identity/ssoSignIn.ts).
    const sso = !offer.hasAccount && (await ssoOrgForEmail(db, offer.email)) === offer.orgId;
    // And with a passkey instead of a password (invitePasskey.ts), unless refused to them anyway.
    const passkey = (await passkeyJoinRefusal(db, offer)) === null;
    // "Require SSO" is not skipped by a password here either (see ssoRefusesPasswordJoin).
    const passwordRefused = await ssoRefusesPasswordJoin(db, offer);
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(invitePage(offer, token, formToken(request, reply, secret, secureCookies), { ...extra, sso, passkey, passwordRefused }));
  };

  app.get<{ Params: { token: string } }>('/invite/:token', async (request, reply) => {
    const offer = await findInvitation(db, request.params.token, new Date());
    if (!offer) return linkGone(reply, 'invitation');
    return show(request, reply, offer, request.params.token, 200);
  });

  app.post<{ Params: { token: string } }>('/invite/:token', async (request, reply) => {
    checkFormToken(request, secret, text(request.body, '_csrf'));
    const { token } = request.params;
    const offer = await findInvitation(db, token, new Date());
    if (!offer) return linkGone(reply, 'invitation');
    const password = text(request.body, 'password');
    if (!password) return show(request, reply, offer, token, 400, { errors: { password: 'Enter a password.' } });
    const refusedBySso = await ssoRefusesPasswordJoin(db, offer);
    if (refusedBySso) return show(request, reply, offer, token, 403, { alert: refusedBySso });
    // Signing in to an existing account through the invitation is a sign-in: the same limits.
    let attempt = null;
    if (offer.hasAccount) {
      try {
        attempt = await beginSignIn(deps, request, offer.email);
      } catch (error) {
        if (!(error instanceof UnavailableError)) throw error;
        reply.header('retry-after', '5');
        return show(request, reply, offer, token, 503, { alert: 'Signing in is unavailable for a moment. Try again in a few seconds.' });
      }
      if (attempt.waitSeconds > 0) {
        const minutes = Math.ceil(attempt.waitSeconds / 60);
        reply.header('retry-after', String(attempt.waitSeconds));
        return show(request, reply, offer, token, 429, {
          alert: `Too many failed attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
        });
      }
    }
    let accepted;
    try {
      accepted = await acceptInvitation(db, token, password, { requestId: request.id, origin: originOf(request) }, new Date());
    } catch (error) {
      if (error instanceof ValidationError) return show(request, reply, offer, token, 400, { errors: fieldErrors(error.errors) });
      if (error instanceof UnauthorizedError) return show(request, reply, offer, token, 401, { errors: { password: error.message } });
      throw error;
    }
    if (!accepted) return linkGone(reply, 'invitation');
    await attempt?.succeeded().catch((error: unknown) => request.log.warn({ err: error }, 'sign-in throttle: attempt not forgiven'));
    if (accepted.secondFactor) {
      // Not on the password alone: the membership is added once the second factor is accepted.
      const pending = { orgId: accepted.orgId, next: '/contacts', email: offer.email, invitation: accepted.secondFactor.invitationHash };
      return beginPendingSignIn(reply, deps, accepted.userId, pending);
    }
    await finishSignIn(request, reply, deps, { userId: accepted.userId, email: offer.email, orgId: accepted.orgId, method: 'invitation' });
    flash(reply, `Welcome to ${offer.orgName}. You are signed in as ${offer.email}.`);
    return reply.redirect('/contacts', 303);
  });
};
