import type { FastifyPluginAsync } from 'fastify';
import { ServiceError, UnavailableError } from '../../../domain/errors.js';
import { checkPassword, SignInRefused } from '../../../domain/sessions/passwordSignIn.js';
import { signOut, switchOrg } from '../../../domain/sessions/sessions.js';
import { finishSignIn, signInFailed } from '../../signIns.js';
import { SESSION_COOKIE, checkCsrf, flash, requireSession, takeFlash, text } from '../../context.js';
import { field, html, type FieldErrors } from '../../html.js';
import { page } from '../../layout.js';
import { checkFormToken, crossSite, formToken } from '../../formGuard.js';
import { hasSecondFactor } from '../../../domain/identity/totp.js';
import { safeNext } from './safeNext.js';
import { beginPendingSignIn } from './twoFactorSignIn.js';

export { safeNext };
import type { DashboardDeps } from '../../dashboardDeps.js';
import { passwordRefusedBySso } from '../../../domain/identity/ssoSignIn.js';
import { signInPageCsp, ssoForm } from './ssoForm.js';
import { beginSignIn } from '../../devices.js';

/**
 * A fresh install has no organisation, so nobody can sign in yet: say how to make the first one.
 * Only whether any organisation exists shows, and only until one does.
 */
const FRESH_INSTALL = html`<div class="fresh-install" role="note">
  <p>
    <strong>No organisation yet.</strong> Open the one-time <strong>set-up link</strong> the server printed when it started
    (<code>PUBLIC_URL/setup/…</code>, in its output and its log): it creates the first organisation and its admin.
  </p>
  <p class="hint">Or make them from a terminal in the server's directory (it asks for the admin's password):</p>
  <pre><code>npm run orgdata -- org create --name "Your organisation" --admin-email you@example.com</code></pre>
</div>`;

async function noOrganisationYet(db: DashboardDeps['db']): Promise<boolean> {
  // A sandbox (test mode) is no organisation anyone signs into.
  const any = await db.selectFrom('orgs').select('id').where('live_org_id', 'is', null).limit(1).executeTakeFirst();
  return any === undefined;
}

function signInPage(options: {
  /** The form guard's token for this browser (formGuard.ts): login CSRF, IDENTITY.md rule 18. */
  csrf: string;
  email?: string;
  errors?: FieldErrors;
  alert?: string;
  next?: string;
  notice?: string | null;
  freshInstall?: boolean;
}): string {
  return page({
    title: 'Sign in',
    session: null,
    notice: options.notice,
    body: html`<div class="login card">
      <h1>Sign in to orgdata</h1>
      ${options.freshInstall ? FRESH_INSTALL : ''} ${options.alert ? html`<div class="alert" role="alert">${options.alert}</div>` : ''}
      <form method="post" action="/login" novalidate>
        <input type="hidden" name="_csrf" value="${options.csrf}" />
        <input type="hidden" name="next" value="${options.next ?? ''}" />
        ${field({ name: 'email', label: 'Email', type: 'email', value: options.email, errors: options.errors, required: true, autocomplete: 'username' })}
        ${field({ name: 'password', label: 'Password', type: 'password', errors: options.errors, required: true, autocomplete: 'current-password' })}
        <button type="submit">Sign in</button>
      </form>
      <div class="passkey-sign-in">
        <button type="button" class="secondary" data-passkey-sign-in>Sign in with a passkey</button>
        <p data-passkey-status role="status" class="hint"></p>
      </div>
      <script src="/assets/passkeys.js" defer></script>
      <p><a href="/forgot-password">Forgot your password?</a></p>
      ${ssoForm(options.csrf)}
    </div>`,
  });
}

export const authPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;
  const csp = signInPageCsp(deps.ssoAllowPrivateIssuers);
  app.addHook('onRequest', async (_request, reply) => {
    reply.header('content-security-policy', csp);
  });
  app.get('/login', async (request, reply) => {
    const next = text(request.query, 'next');
    // The hint is a convenience: a database that cannot answer must not cost the sign-in page.
    const freshInstall = await noOrganisationYet(db).catch(() => false);
    const csrf = formToken(request, reply, deps.secret, deps.secureCookies);
    return reply.type('text/html; charset=utf-8').send(signInPage({ csrf, next, notice: takeFlash(request, reply), freshInstall }));
  });

  app.post('/login', async (request, reply) => {
    const email = text(request.body, 'email');
    const password = text(request.body, 'password');
    const next = text(request.body, 'next');
    // Every answer below shows the form again, with this browser's token (a fresh one if it had none).
    const loginPage = (options: Omit<Parameters<typeof signInPage>[0], 'csrf'>) =>
      signInPage({ ...options, csrf: formToken(request, reply, deps.secret, deps.secureCookies) });
    // Login CSRF (IDENTITY.md rule 18): a form another site posts, with no Origin header or with
    // its own token, would sign this browser in to the attacker's account. Checked before anything
    // else, the password included.
    if (crossSite(request)) {
      // Nothing is set for a form from another site, not even the form guard's cookie.
      return reply
        .code(403)
        .type('text/html; charset=utf-8')
        .send(signInPage({ csrf: '', email, next, alert: "Sign in from this site's own sign-in page." }));
    }
    try {
      checkFormToken(request, deps.secret, text(request.body, '_csrf'));
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      const alert = 'This sign-in form has expired or did not come from this site. Sign in again below.';
      return reply.code(403).type('text/html; charset=utf-8').send(loginPage({ email, next, alert }));
    }
    const errors: FieldErrors = {};
    if (!email.trim()) errors.email = 'Enter your email address.';
    if (!password) errors.password = 'Enter your password.';
    if (Object.keys(errors).length) return reply.code(400).type('text/html; charset=utf-8').send(loginPage({ email, errors, next }));
    let attempt;
    try {
      attempt = await beginSignIn(deps, request, email);
    } catch (error) {
      // The shared attempt counters (Redis) cannot be reached: refuse rather than count nothing.
      if (!(error instanceof UnavailableError)) throw error;
      return reply
        .code(503)
        .header('retry-after', '5')
        .type('text/html; charset=utf-8')
        .send(loginPage({ email, next, alert: 'Signing in is unavailable for a moment. Try again in a few seconds.' }));
    }
    const wait = attempt.waitSeconds;
    if (wait > 0) {
      const minutes = Math.ceil(wait / 60);
      return reply
        .code(429)
        .header('retry-after', String(wait))
        .type('text/html; charset=utf-8')
        .send(loginPage({ email, next, alert: `Too many failed attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.` }));
    }
    try {
      const holder = await checkPassword(db, email, password);
      // Single sign-on required by one of the person's organisations (IDENTITY.md, `--require`).
      const ssoOnly = await passwordRefusedBySso(db, holder.userId);
      if (ssoOnly) {
        await signInFailed(request, deps, { user: { id: holder.userId, email: holder.email }, method: 'password', reason: 'sso_required' });
        return reply
          .code(403)
          .type('text/html; charset=utf-8')
          .send(loginPage({ email, next, alert: ssoOnly }));
      }
      // Not forgiving the attempt only leaves one count too many: no reason to fail the sign-in.
      await attempt.succeeded().catch((error: unknown) => request.log.warn({ err: error }, 'sign-in throttle: attempt not forgiven'));
      // A second factor is asked before any session exists: until then, only a pending sign-in.
      if (await hasSecondFactor(db, holder.userId)) {
        return beginPendingSignIn(reply, deps, holder.userId, { orgId: holder.orgId, next, email: holder.email });
      }
      await finishSignIn(request, reply, deps, { userId: holder.userId, email: holder.email, orgId: holder.orgId, method: 'password' });
      return reply.redirect(safeNext(next), 303);
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      if (error instanceof SignInRefused) await signInFailed(request, deps, { user: error.user, method: 'password', reason: error.reason });
      return reply
        .code(401)
        .type('text/html; charset=utf-8')
        .send(loginPage({ email, next, alert: error.message }));
    }
  });

  app.post('/logout', { preHandler: requireSession(db, deps.sessionIdleMinutes) }, async (request, reply) => {
    checkCsrf(request, text(request.body, '_csrf'));
    if (request.sessionToken) await signOut(db, request.sessionToken);
    reply.clearCookie(SESSION_COOKIE, { path: '/' });
    return reply.redirect('/login', 303);
  });

  app.post('/orgs/switch', { preHandler: requireSession(db, deps.sessionIdleMinutes) }, async (request, reply) => {
    checkCsrf(request, text(request.body, '_csrf'));
    await switchOrg(db, request.sessionToken!, request.session!, text(request.body, 'org_id'));
    const org = request.session!.orgs.find((o) => o.id === text(request.body, 'org_id'));
    flash(reply, `You are now working in ${org?.name ?? 'the organisation'}.`);
    return reply.redirect('/contacts', 303);
  });
};
