import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { UnavailableError } from '../../../domain/errors.js';
import { secondFactorsOf } from '../../../domain/identity/totp.js';
import { confirmTotpSetup, renewRecoveryCodes, startTotpSetup, totpStateOf, turnOffTotp } from '../../../domain/identity/twoFactorSetup.js';
import { flash, startSession, takeFlash, text } from '../../context.js';
import { rotateSession } from '../../../domain/sessions/sessions.js';
import { requireAccountProof } from '../../reauth.js';
import { markAddedInSso, ssoMade } from '../../../domain/identity/ssoTrust.js';
import { listPasskeys } from '../../../domain/identity/passkeys.js';
import { passkeySection } from './passkeyViews.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { html, type Html } from '../../html.js';
import { page } from '../../layout.js';
import { causeOf } from '../../signIns.js';
import { offView, onView, qrSvg, recoveryCodesView, setupView, TWO_FACTOR, type ViewOptions } from './twoFactorViews.js';
import { beginSignIn } from '../../devices.js';

/**
 * `/settings/account/two-factor`: the signed-in person's own TOTP factor (IDENTITY.md). Set up
 * (an unconfirmed factor and its QR code), confirm with a first code (the recovery codes are then
 * shown once), make new recovery codes or turn it off (both with a current code, counted by the
 * sign-in throttle: a stolen session must not be a way to guess codes).
 */
export const twoFactorPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret, secureCookies } = deps;
  const person = (request: FastifyRequest) => ({ id: request.session!.userId, email: request.session!.email });

  async function send(request: FastifyRequest, reply: FastifyReply, status: number, body: Html, noOwnSignIn = false) {
    // Passkeys are the other second factor: offered here too, as this is the one page a person the
    // organisation's policy holds back can reach (see twoFactorGate.ts).
    const passkeys = noOwnSignIn ? '' : passkeySection(request.session!, await listPasskeys(db, request.session!.userId));
    return reply
      .code(status)
      .header('cache-control', 'no-store')
      .type('text/html; charset=utf-8')
      .send(
        page({
          title: 'Two-factor authentication',
          session: request.session!,
          notice: takeFlash(request, reply),
          body: html`<p><a href="/settings/account">Your account</a></p>
            <h1>Two-factor authentication</h1>
            ${body} ${passkeys}`,
        }),
      );
  }

  async function show(request: FastifyRequest, reply: FastifyReply, status: number, options: ViewOptions = {}) {
    const session = request.session!;
    const [state, factors] = await Promise.all([totpStateOf(db, secret, person(request)), secondFactorsOf(db, session.userId)]);
    if (state.confirmed) return send(request, reply, status, onView(session, factors, options));
    // A set-up waiting for its first code shows its secret only to a session that may enrol: not
    // to one an organisation's SSO opened without the account's own proof (rule 8), which could
    // otherwise read the secret the holder is about to confirm in another session.
    const proof = session.accountProofAt;
    const mayEnrol =
      session.method !== 'sso' || (proof !== null && Date.parse(proof) >= Date.now() - Math.max(deps.reauthMinutes, 1) * 60_000);
    if (state.pending && mayEnrol) {
      return send(request, reply, status, setupView(session, state.pending, await qrSvg(state.pending.uri), options));
    }
    if (state.pending && !options.alert) {
      options = {
        ...options,
        alert: 'A set-up of an authenticator app is waiting in another session. Set it up here to start again with a new secret.',
      };
    }
    // An account SSO made, with nothing of its own to prove it by: say how to get a password first.
    const noOwnSignIn = factors.passkeys === 0 && (await ssoMade(db, session.userId));
    return send(request, reply, status, offView(session, factors, { ...options, noOwnSignIn }), noOwnSignIn);
  }

  /** Counts a code attempt like a sign-in attempt; a reply when the attempt may not go ahead. */
  async function throttled(request: FastifyRequest, reply: FastifyReply, form: ViewOptions['form']) {
    let attempt;
    try {
      attempt = await beginSignIn(deps, request, request.session!.email);
    } catch (error) {
      if (!(error instanceof UnavailableError)) throw error;
      reply.header('retry-after', '5');
      return { refused: await show(request, reply, 503, { form, alert: 'This is unavailable for a moment. Try again in a few seconds.' }) };
    }
    if (attempt.waitSeconds > 0) {
      const minutes = Math.ceil(attempt.waitSeconds / 60);
      reply.header('retry-after', String(attempt.waitSeconds));
      return {
        refused: await show(request, reply, 429, {
          form,
          alert: `Too many wrong codes. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`,
        }),
      };
    }
    return { attempt };
  }

  /** Credentials made in a session SSO opened are recorded so: a mailbox proof removes them (rule 10). */
  async function markIfSso(request: FastifyRequest, what: ('totp_factors' | 'recovery_codes')[], since: Date) {
    const session = request.session!;
    if (session.method !== 'sso') return;
    for (const table of what) await markAddedInSso(db, table, session.userId, since);
  }

  const WRONG = 'That code is not right (or was used already). Enter the current code from your app, or a recovery code.';

  app.get(TWO_FACTOR, async (request, reply) => show(request, reply, 200));

  // A new second factor is sensitive (a stolen session must not enrol its own): a recent proof of
  // identity first. Confirming needs the key only this step makes.
  app.post(`${TWO_FACTOR}/setup`, { preHandler: requireAccountProof(deps, { fallback: TWO_FACTOR }) }, async (request, reply) => {
    const started = await startTotpSetup(db, secret, person(request), new Date());
    if (!started)
      return show(request, reply, 409, { alert: 'Two-factor authentication is already on. Turn it off first to use another app.' });
    return reply.redirect(TWO_FACTOR, 303);
  });

  // In a session SSO opened, confirming and new codes also need the account's own proof (rule 8);
  // elsewhere the current code they ask for is enough.
  const inSso = requireAccountProof(deps, { fallback: TWO_FACTOR, ssoOnly: true });

  app.post(`${TWO_FACTOR}/confirm`, { preHandler: inSso }, async (request, reply) => {
    const code = text(request.body, 'code').trim();
    if (!code) return show(request, reply, 400, { errors: { code: 'Enter the 6-digit code your app shows.' } });
    const state = await totpStateOf(db, secret, person(request));
    if (!state.pending) {
      const alert = state.confirmed ? 'Two-factor authentication is already on.' : 'Start the set-up first.';
      return show(request, reply, 409, { alert });
    }
    const session = request.session!;
    const started = new Date();
    const confirmed = await confirmTotpSetup(
      db,
      secret,
      person(request),
      code,
      causeOf(request, session.userId),
      new Date(),
      session.sessionHash,
    );
    if (!confirmed)
      return show(request, reply, 400, {
        errors: { code: 'That code is not right. Check the code in your app (and its clock) and try again.' },
      });
    await markIfSso(request, ['totp_factors', 'recovery_codes'], started);
    // A privilege change: the other sessions ended, this one gets a new token (rotation).
    const rotated = await rotateSession(db, request.sessionToken!);
    if (rotated) {
      await startSession(request, reply, db, rotated, secureCookies);
      request.session = { ...session, sessionHash: rotated.idHash, csrfToken: rotated.csrfToken };
    }
    const others = confirmed.ended_sessions;
    return send(
      request,
      reply,
      200,
      html`<div class="notice" role="status">
          Two-factor authentication is on.${others > 0 ? ` ${others} other session${others === 1 ? ' was' : 's were'} signed out.` : ''}
        </div>
        ${recoveryCodesView(confirmed.codes)}`,
    );
  });

  app.post(`${TWO_FACTOR}/recovery-codes`, { preHandler: inSso }, async (request, reply) => {
    const code = text(request.body, 'code').trim();
    if (!code) return show(request, reply, 400, { form: 'renew', errors: { code: 'Enter a code from your app.' } });
    if (!(await totpStateOf(db, secret, person(request))).confirmed) {
      return show(request, reply, 409, { alert: 'Two-factor authentication is off: there are no recovery codes to renew.' });
    }
    const { attempt, refused } = await throttled(request, reply, 'renew');
    if (!attempt) return refused;
    const renewing = new Date();
    const codes = await renewRecoveryCodes(db, secret, person(request), code, causeOf(request, request.session!.userId), new Date());
    if (!codes) return show(request, reply, 401, { form: 'renew', errors: { code: WRONG } });
    await markIfSso(request, ['recovery_codes'], renewing);
    await attempt.succeeded().catch((error: unknown) => request.log.warn({ err: error }, 'sign-in throttle: attempt not forgiven'));
    return send(
      request,
      reply,
      200,
      html`<div class="notice" role="status">Your old recovery codes no longer work.</div>
        ${recoveryCodesView(codes)}`,
    );
  });

  // Turning it off is sensitive: a recent proof of identity first (REAUTH_MINUTES), then a current code.
  app.post(`${TWO_FACTOR}/disable`, { preHandler: requireAccountProof(deps, { fallback: TWO_FACTOR }) }, async (request, reply) => {
    const code = text(request.body, 'code').trim();
    if (!code) return show(request, reply, 400, { form: 'disable', errors: { code: 'Enter a code from your app, or a recovery code.' } });
    if (!(await totpStateOf(db, secret, person(request))).confirmed) {
      return show(request, reply, 409, { alert: 'Two-factor authentication is already off.' });
    }
    const { attempt, refused } = await throttled(request, reply, 'disable');
    if (!attempt) return refused;
    const used = await turnOffTotp(db, secret, person(request), code, causeOf(request, request.session!.userId), new Date());
    if (!used) return show(request, reply, 401, { form: 'disable', errors: { code: WRONG } });
    await attempt.succeeded().catch((error: unknown) => request.log.warn({ err: error }, 'sign-in throttle: attempt not forgiven'));
    flash(reply, 'Two-factor authentication is off. Your recovery codes no longer work.');
    return reply.redirect(TWO_FACTOR, 303);
  });
};
