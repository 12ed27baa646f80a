import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { UnavailableError, ValidationError } from '../../../domain/errors.js';
import { findPasswordReset, requestPasswordReset, resetPassword } from '../../../domain/identity/passwordResets.js';
import { originOf, SESSION_COOKIE, text } from '../../context.js';
import { checkFormToken, formToken } from '../../formGuard.js';
import { field, fieldErrors, html, type FieldErrors, type Html } from '../../html.js';
import { page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { formField, linkGone } from './linkGone.js';

const card = (title: string, body: Html) =>
  page({
    title,
    session: null,
    body: html`<div class="login card">
      <h1>${title}</h1>
      ${body}
    </div>`,
  });

const NO_MAIL = html`<p>This orgdata does not send email, so it cannot send you a link to reset your password.</p>
  <p>
    Ask an admin of your organisation to have the operator who runs orgdata make you a reset link (<code>orgdata users reset-link</code>),
    or to set up mail (<code>SMTP_URL</code>).
  </p>
  <p><a href="/login">Back to sign in</a></p>`;

function askForm(csrfToken: string, options: { email?: string; errors?: FieldErrors; alert?: string } = {}): Html {
  return html`<p>
      Enter the email address you sign in with. If it has an orgdata account, we will email it a link to choose a new password.
    </p>
    ${options.alert ? html`<div class="alert" role="alert">${options.alert}</div>` : ''}
    <form method="post" action="/forgot-password" novalidate>
      ${formField(csrfToken)}
      ${field({ name: 'email', label: 'Email', type: 'email', value: options.email, errors: options.errors, required: true, autocomplete: 'username' })}
      <button type="submit">Email me a link</button>
    </form>
    <p><a href="/login">Back to sign in</a></p>`;
}

function resetForm(token: string, email: string, csrfToken: string, errors?: FieldErrors): Html {
  return html`<p>Choose a new password for <strong>${email}</strong>. Setting it signs you out everywhere.</p>
    <form method="post" action="/reset-password/${token}" novalidate>
      ${formField(csrfToken)}
      <input type="hidden" name="email" value="${email}" autocomplete="username" />
      ${field({
        name: 'password',
        label: 'New password',
        type: 'password',
        errors,
        required: true,
        autocomplete: 'new-password',
        hint: 'At least 8 characters, not your email address.',
      })}
      <button type="submit">Set password</button>
    </form>`;
}

/**
 * `/forgot-password` and `/reset-password/TOKEN` (see domain/identity/passwordResets.ts). The
 * answer to a request is the same page and status whatever the email (no account enumeration),
 * and the mail is sent after it: an existing account's answer does not wait on the mail server
 * (it only stores the link first, a few milliseconds).
 */
export const passwordResetPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret, secureCookies, signInThrottle, identity } = deps;
  const send = (reply: FastifyReply, status: number, body: string) => reply.code(status).type('text/html; charset=utf-8').send(body);
  const token = (request: FastifyRequest, reply: FastifyReply) => formToken(request, reply, secret, secureCookies);

  app.get('/forgot-password', async (request, reply) => {
    if (!identity.mailer) return send(reply, 200, card('Forgot your password?', NO_MAIL));
    // `?email=` fills the field in (the two-factor page links here for an account SSO made).
    const email = text(request.query, 'email').trim().slice(0, 320);
    return send(reply, 200, card('Forgot your password?', askForm(token(request, reply), email ? { email } : {})));
  });

  app.post('/forgot-password', async (request, reply) => {
    if (!identity.mailer) return send(reply, 200, card('Forgot your password?', NO_MAIL));
    checkFormToken(request, secret, text(request.body, '_csrf'));
    const email = text(request.body, 'email').trim().slice(0, 320);
    if (!email) {
      return send(
        reply,
        400,
        card('Forgot your password?', askForm(token(request, reply), { errors: { email: 'Enter your email address.' } })),
      );
    }
    // Counted like sign-in attempts (per email and network), in a budget of their own: asking
    // for links uses up no account's or network's sign-in budget. Every request counts.
    let attempt;
    try {
      attempt = await signInThrottle.begin(email, request.ip, { budget: 'reset' });
    } catch (error) {
      if (!(error instanceof UnavailableError)) throw error;
      reply.header('retry-after', '5');
      const alert = 'This is unavailable for a moment. Try again in a few seconds.';
      return send(reply, 503, card('Forgot your password?', askForm(token(request, reply), { email, alert })));
    }
    if (attempt.waitSeconds > 0) {
      const minutes = Math.ceil(attempt.waitSeconds / 60);
      reply.header('retry-after', String(attempt.waitSeconds));
      const alert = `Too many requests. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`;
      return send(reply, 429, card('Forgot your password?', askForm(token(request, reply), { email, alert })));
    }
    const { delivery } = await requestPasswordReset(db, identity, email, { requestId: request.id, origin: originOf(request) }, new Date());
    // Not awaited: the answer must not wait on the mail server (its time would tell that the
    // account exists). A failure is logged; the person can ask again.
    delivery.then(
      (outcome) => {
        if (outcome?.status === 'failed') request.log.warn({ reason: outcome.reason }, 'password reset mail not sent');
      },
      (error: unknown) => request.log.error({ err: error }, 'password reset mail not sent'),
    );
    const minutes = identity.resetTtlMinutes;
    return send(
      reply,
      200,
      card(
        'Check your email',
        html`<p>
            If an orgdata account uses that address, we have sent it a link to choose a new password. The link works once, for ${minutes}
            minute${minutes === 1 ? '' : 's'}.
          </p>
          <p>Nothing arrived? Check the address and your spam folder, then <a href="/forgot-password">ask again</a>.</p>
          <p><a href="/login">Back to sign in</a></p>`,
      ),
    );
  });

  app.get<{ Params: { token: string } }>('/reset-password/:token', async (request, reply) => {
    const reset = await findPasswordReset(db, request.params.token, new Date());
    if (!reset) return linkGone(reply, 'reset');
    return send(reply, 200, card('Choose a new password', resetForm(request.params.token, reset.email, token(request, reply))));
  });

  app.post<{ Params: { token: string } }>('/reset-password/:token', async (request, reply) => {
    checkFormToken(request, secret, text(request.body, '_csrf'));
    const linkToken = request.params.token;
    const reset = await findPasswordReset(db, linkToken, new Date());
    if (!reset) return linkGone(reply, 'reset');
    let done;
    try {
      done = await resetPassword(
        db,
        linkToken,
        text(request.body, 'password'),
        { requestId: request.id, origin: originOf(request) },
        new Date(),
      );
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      const form = resetForm(linkToken, reset.email, token(request, reply), fieldErrors(error.errors));
      return send(reply, 400, card('Choose a new password', form));
    }
    if (!done) return linkGone(reply, 'reset');
    // Every session of theirs ended, this browser's too (if it had one).
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return send(
      reply,
      200,
      card(
        'Your password is set',
        html`<p>You have been signed out everywhere. Sign in with your new password.</p>
          <p><a class="button" href="/login">Sign in</a></p>`,
      ),
    );
  });
};
