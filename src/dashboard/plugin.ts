import cookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ServiceError, ValidationError } from '../domain/errors.js';
import { statusOf } from '../web/errorStatus.js';
import { isConnectionLost, isContention, isStatementTimeout } from '../db/errors.js';
import { setPageHeaders } from '../web/pageHeaders.js';
import { CSS, JS } from './assets.js';
import { PASSKEYS_JS, WEBAUTHN_JS } from './passkeyAssets.js';
import { checkCsrf, requireSession, showsLive, showsTheMode, text } from './context.js';
import { html } from './html.js';
import { page } from './layout.js';
import { activityPages } from './pages/data/activity.js';
import { authPages } from './pages/signIn/auth.js';
import { contactPages } from './pages/data/contacts.js';
import { developerPages } from './pages/developer/developer.js';
import { filePages } from './pages/data/files.js';
import { groupPages } from './pages/data/groups.js';
import { importPages } from './pages/data/import.js';
import { labelPages } from './pages/data/labels.js';
import { memberPages } from './pages/settings/members.js';
import { invitationPages } from './pages/settings/invitations.js';
import { invitePages } from './pages/signIn/invite.js';
import { setupPages } from './pages/signIn/setup.js';
import { invitePasskeyPages } from './pages/signIn/invitePasskey.js';
import { passwordResetPages } from './pages/signIn/passwordReset.js';
import { accountPages } from './pages/settings/account.js';
import { passkeyPages } from './pages/settings/passkeys.js';
import { passkeyReauthPages } from './pages/signIn/passkeyReauth.js';
import { passkeySignInPages } from './pages/signIn/passkeySignIn.js';
import { twoFactorPages } from './pages/settings/twoFactor.js';
import { twoFactorSignInPages } from './pages/signIn/twoFactorSignIn.js';
import { accountSessionPages } from './pages/settings/accountSessions.js';
import { memberSecurityPages } from './pages/settings/memberSecurity.js';
import { reauthPages } from './pages/signIn/reauth.js';
import { securityPages } from './pages/settings/security.js';
import { requireTwoFactorEnrolment } from './twoFactorGate.js';
import { ssoSignInPages } from './pages/signIn/ssoSignIn.js';
import { ssoLinkPages } from './pages/signIn/ssoLink.js';
import { ssoLinkPasskeyPages } from './pages/signIn/ssoLinkPasskey.js';
import { ssoSettingsPages } from './pages/settings/ssoSettings.js';
import { webhookDetailPages } from './pages/developer/webhookDetail.js';
import { webhookPages } from './pages/developer/webhooks.js';
import { requestLogPages } from './pages/developer/requestLog.js';
import { usagePages } from './pages/developer/usage.js';
import { testDataPages } from './pages/developer/testData.js';
import { overviewPages } from './pages/data/overview.js';
import { testModePages } from './pages/settings/testMode.js';
import type { DashboardDeps } from './dashboardDeps.js';
import { boundVisits } from './visitLimits.js';

export function notFoundPage(): string {
  return page({
    title: 'Not found',
    session: null,
    body: html`<h1>Not found</h1>
      <p>There is no page here. <a href="/contacts">Go to your contacts</a> or <a href="/docs">read the API reference</a>.</p>`,
  });
}

/** An error page for people, from the same domain errors the API maps to problem documents. */
function errorPage(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply) {
  let status = 500;
  let message = 'Something went wrong on our side. Try again, and tell the operator this number: ' + request.id;
  if (error instanceof ServiceError) {
    status = statusOf(error);
    message = error instanceof ValidationError ? error.errors.map((e) => `${e.field}: ${e.message}`).join('; ') : error.message;
  } else if ((error as FastifyError).statusCode && (error as FastifyError).statusCode! < 500) {
    status = (error as FastifyError).statusCode!;
    message =
      status === 413
        ? 'That upload is too large.'
        : status === 408
          ? 'The upload stopped arriving before it was complete, so nothing was imported. Try again.'
          : 'The request could not be read.';
  } else if (isContention(error)) {
    // Rolled back for another request's sake more times than a write retries it: nothing changed.
    status = 503;
    message = 'Someone else was changing the same records at the same moment; nothing was changed. Try again.';
    reply.header('retry-after', '1');
    request.log.warn({ err: error }, 'transaction contention');
  } else if (isConnectionLost(error) || isStatementTimeout(error)) {
    // As the API answers 503 for them: the database is unreachable or overloaded, nothing changed.
    status = 503;
    message = 'The database cannot be reached at the moment; nothing was changed. Try again in a few seconds.';
    reply.header('retry-after', '2');
    request.log.warn({ err: error }, 'database unavailable');
  } else {
    request.log.error({ err: error }, 'dashboard request failed');
  }
  const title =
    status === 403
      ? 'Not allowed'
      : status === 404
        ? 'Not found'
        : status === 401
          ? 'Sign in required'
          : status === 408
            ? 'The upload stopped'
            : status === 503
              ? 'Temporarily unavailable'
              : 'Something went wrong';
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .send(
      page({
        title,
        session: request.session ?? null,
        body: html`<h1>${title}</h1>
          <div class="alert" role="alert">${message}</div>
          <p><a href="/contacts">Back to contacts</a></p>`,
      }),
    );
}

/**
 * The dashboard: the second door onto the same house. Pages call the same domain functions as
 * the API with the signed-in person as the actor; cookies, CSRF and HTML live only here.
 */
export const dashboard: FastifyPluginAsync<DashboardDeps> = async (app, options) => {
  const deps: DashboardDeps = {
    db: options.db,
    secret: options.secret,
    files: options.files,
    secureCookies: options.secureCookies,
    maxImportBytes: options.maxImportBytes,
    webhooks: options.webhooks,
    dailyQuota: options.dailyQuota,
    sandboxDailyQuota: options.sandboxDailyQuota,
    signInThrottle: options.signInThrottle,
    identity: options.identity,
    countSignIn: options.countSignIn,
    reauthMinutes: options.reauthMinutes,
    sessionIdleMinutes: options.sessionIdleMinutes,
    ssoAllowPrivateIssuers: options.ssoAllowPrivateIssuers,
    oidc: options.oidc,
    txtLookup: options.txtLookup,
  };
  // Under an https PUBLIC_URL every cookie is Secure, whoever sets or clears it (IDENTITY.md rule
  // 18): the plugin's defaults for setCookie and clearCookie, which a call's own options extend.
  await app.register(cookie, { parseOptions: { secure: options.secureCookies } });
  await app.register(formbody, { bodyLimit: 1024 * 1024 });

  app.addHook('onSend', async (_request, reply, payload) => {
    if (String(reply.getHeader('content-type') ?? '').startsWith('text/html')) {
      // A page may have loosened its own policy (the sign-in page's SSO form: see ssoForm.ts).
      const own = reply.getHeader('content-security-policy');
      setPageHeaders(reply, typeof own === 'string' ? own : undefined);
    }
    return payload;
  });
  app.setErrorHandler(errorPage);

  app.get('/assets/dashboard.css', async (_request, reply) =>
    reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=300').send(CSS),
  );
  app.get('/assets/dashboard.js', async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=300').send(JS),
  );
  // Passkeys: @simplewebauthn/browser's bundle alone, and with our wiring of the pages' buttons.
  for (const [url, script] of [
    ['/assets/webauthn.js', WEBAUTHN_JS],
    ['/assets/passkeys.js', PASSKEYS_JS],
  ] as const) {
    app.get(url, async (_request, reply) =>
      reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=300').send(script),
    );
  }
  app.get('/favicon.ico', async (_request, reply) => reply.code(204).send());

  // Pages without a session that store or fetch something are counted per network and in total.
  app.addHook('onRequest', boundVisits(deps));
  await app.register(authPages, deps);
  // Pages for people who are not signed in: accepting an invitation, a forgotten password.
  await app.register(invitePages, deps);
  await app.register(setupPages, deps);
  await app.register(invitePasskeyPages, deps);
  await app.register(passwordResetPages, deps);
  await app.register(passkeySignInPages, deps);
  await app.register(twoFactorSignInPages, deps);
  await app.register(ssoSignInPages, deps);
  await app.register(ssoLinkPages, deps);
  await app.register(ssoLinkPasskeyPages, deps);

  // Everything else needs a signed-in person, and every form POST a valid CSRF token.
  await app.register(async (pages) => {
    pages.addHook('preHandler', requireSession(deps.db, deps.sessionIdleMinutes));
    pages.addHook('preHandler', async (request) => {
      // Multipart forms (file imports) check the token themselves, once the field has been read.
      const multipart = String(request.headers['content-type'] ?? '').startsWith('multipart/');
      // JSON requests of the page scripts (passkeys) may carry it in a header instead: another site can send neither.
      if (request.method === 'POST' && !multipart) checkCsrf(request, text(request.body, '_csrf') || request.headers['x-csrf-token']);
    });
    // The organisation's two-factor policy holds back, on every request, whoever it covers and has no second factor.
    pages.addHook('preHandler', requireTwoFactorEnrolment(deps.db));
    // Data and Developer pages show the session's mode (the sandbox in test mode); settings
    // pages the live organisation. Decided here, once per group: a page cannot forget it.
    await pages.register(async (data) => {
      data.addHook('preHandler', showsTheMode(deps.db));
      await data.register(overviewPages, deps);
      await data.register(contactPages, deps);
      await data.register(labelPages, deps);
      await data.register(groupPages, deps);
      await data.register(filePages, deps);
      await data.register(importPages, deps);
      await data.register(activityPages, deps);
      await data.register(developerPages, deps);
      await data.register(webhookPages, deps);
      await data.register(requestLogPages, deps);
      await data.register(usagePages, deps);
      await data.register(webhookDetailPages, deps);
      await data.register(testDataPages, deps);
    });
    await pages.register(async (settings) => {
      settings.addHook('preHandler', showsLive);
      await settings.register(testModePages, deps);
      await settings.register(memberPages, deps);
      await settings.register(invitationPages, deps);
      await settings.register(accountPages, deps);
      await settings.register(passkeyPages, deps);
      await settings.register(passkeyReauthPages, deps);
      await settings.register(twoFactorPages, deps);
      await settings.register(accountSessionPages, deps);
      await settings.register(memberSecurityPages, deps);
      await settings.register(reauthPages, deps);
      await settings.register(securityPages, deps);
      await settings.register(ssoSettingsPages, deps);
    });
  });
};
