import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { createChallenge, takeChallenge } from '../../../domain/identity/challenges.js';
import { ssoOrgForEmail, ssoProviderOf } from '../../../domain/identity/ssoConfigs.js';
import { resolveSsoUser, SsoRefused } from '../../../domain/identity/ssoSignIn.js';
import { text } from '../../context.js';
import { checkFormToken, formToken } from '../../formGuard.js';
import { signInPageCsp, ssoForm } from './ssoForm.js';
import { html } from '../../html.js';
import { page } from '../../layout.js';
import { causeOf, finishSignIn, signInFailed } from '../../signIns.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { safeNext } from './auth.js';
import { SSO_LINK_COOKIE, SSO_LINK_PATH, SSO_LINK_TTL_MS } from './ssoLink.js';
import type { PendingSsoLink } from '../../../domain/identity/ssoLinks.js';

/** The browser's half of an SSO sign-in in progress: the challenge token (state, nonce, PKCE verifier). */
export const SSO_COOKIE = 'od_sso';
const SSO_TTL_MS = 10 * 60_000;

interface SsoChallenge {
  orgId: string;
  state: string;
  nonce: string;
  verifier: string;
  next: string;
}

function ssoPage(reply: FastifyReply, status: number, title: string, message: string) {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .send(
      page({
        title,
        session: null,
        body: html`<div class="login card">
          <h1>${title}</h1>
          <div class="alert" role="alert">${message}</div>
          <p><a href="/login">Back to sign in</a></p>
        </div>`,
      }),
    );
}

/**
 * `POST /sso/start` (the form; `GET /sso/start?email=…` shows it) and `GET /sso/callback` (IDENTITY.md "Single sign-on"). The start finds
 * the organisation by the email's domain and sends the browser to its provider; the state, nonce
 * and PKCE verifier wait in an `sso` challenge (10 minutes, single use) named by the `od_sso`
 * cookie. The callback takes that challenge (a replayed callback URL finds none), has the
 * provider's answer checked (infra/oidc), and decides who that is (domain/identity/ssoSignIn.ts).
 */
export const ssoSignInPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret, oidc } = deps;
  const redirectUri = `${deps.identity.publicUrl}/sso/callback`;

  // A link to /sso/start (the invitation page's "Join with SSO", a bookmark) shows the form with
  // the email filled in: it starts nothing, calls no provider and stores nothing. Only the form's
  // POST, with this browser's token, starts a sign-in (login CSRF, IDENTITY.md rule 18).
  app.get('/sso/start', async (request, reply) => {
    const email = text(request.query, 'email').trim().slice(0, 320);
    const csrf = formToken(request, reply, secret, deps.secureCookies);
    return reply
      .header('content-security-policy', signInPageCsp(deps.ssoAllowPrivateIssuers))
      .type('text/html; charset=utf-8')
      .send(
        page({
          title: 'Sign in with SSO',
          session: null,
          body: html`<div class="login card">
            <h1>Sign in with single sign‑on</h1>
            <p>Continue to your organisation's sign-in page.</p>
            ${ssoForm(csrf, email, safeNext(text(request.query, 'next')))}
            <p><a href="/login">Sign in another way</a></p>
          </div>`,
        }),
      );
  });

  app.post('/sso/start', async (request, reply) => {
    checkFormToken(request, secret, text(request.body, '_csrf'));
    const email = text(request.body, 'email').trim();
    const orgId = email.length <= 320 ? await ssoOrgForEmail(db, email) : null;
    const provider = orgId ? await ssoProviderOf(db, secret, orgId) : null;
    // One answer for every email without SSO (unknown domain, malformed, none): nothing to learn.
    if (!provider) {
      return ssoPage(
        reply,
        400,
        'Single sign-on',
        'Single sign-on is not set up for this email address. Sign in with your password instead.',
      );
    }
    let authorization;
    try {
      authorization = await oidc.begin(provider, redirectUri);
    } catch (error) {
      if (!(error instanceof SsoRefused)) throw error;
      request.log.warn({ err: error, orgId }, 'sso: provider not reachable at start');
      return ssoPage(reply, error.status, 'Single sign-on unavailable', error.message);
    }
    const challenge: SsoChallenge = {
      orgId: provider.orgId,
      state: authorization.state,
      nonce: authorization.nonce,
      verifier: authorization.verifier,
      next: safeNext(text(request.body, 'next')),
    };
    const token = await createChallenge(db, 'sso', null, challenge, SSO_TTL_MS, new Date());
    reply.setCookie(SSO_COOKIE, token, {
      path: '/sso',
      httpOnly: true,
      sameSite: 'lax',
      secure: deps.secureCookies,
      maxAge: SSO_TTL_MS / 1000,
    });
    return reply.redirect(authorization.url, 303);
  });

  app.get('/sso/callback', async (request, reply) => {
    const refuse = async (error: SsoRefused) => {
      await signInFailed(request, deps, { user: error.user, method: 'sso', reason: error.reason });
      return ssoPage(reply, error.status, 'Sign-in refused', error.message);
    };
    const now = new Date();
    const token = request.cookies[SSO_COOKIE];
    reply.clearCookie(SSO_COOKIE, { path: '/sso' });
    const challenge = await takeChallenge<SsoChallenge>(db, 'sso', token, now);
    if (!challenge || challenge.data.state !== text(request.query, 'state')) {
      return refuse(
        new SsoRefused('bad_state', 'This sign-in has expired or was not started in this browser. Start again from the sign-in page.'),
      );
    }
    const provider = await ssoProviderOf(db, secret, challenge.data.orgId);
    if (!provider) return refuse(new SsoRefused('sso_removed', 'Single sign-on is no longer set up for this organisation.'));
    const callbackUrl = new URL(redirectUri);
    callbackUrl.search = new URL(request.url, 'http://orgdata.invalid').search;
    try {
      const claims = await oidc.finish(provider, callbackUrl, challenge.data);
      const who = await resolveSsoUser(db, provider, claims, (userId) => causeOf(request, userId), now);
      if (who.kind === 'consent') {
        // An account with this email exists and is not linked: no link and no session until its
        // holder signs in with the account's own factors (IDENTITY.md rule 10, ssoLink.ts).
        const pending: PendingSsoLink = {
          orgId: provider.orgId,
          issuer: claims.issuer,
          subject: claims.subject,
          next: challenge.data.next,
        };
        const linkToken = await createChallenge(db, 'sso_link', who.userId, pending, SSO_LINK_TTL_MS, now);
        reply.setCookie(SSO_LINK_COOKIE, linkToken, {
          path: '/sso',
          httpOnly: true,
          sameSite: 'lax',
          secure: deps.secureCookies,
          maxAge: SSO_LINK_TTL_MS / 1000,
        });
        return reply.redirect(SSO_LINK_PATH, 303);
      }
      await finishSignIn(request, reply, deps, { userId: who.userId, email: who.email, orgId: provider.orgId, method: 'sso' });
      return reply.redirect(challenge.data.next, 303);
    } catch (error) {
      if (!(error instanceof SsoRefused)) throw error;
      return refuse(error);
    }
  });
};
