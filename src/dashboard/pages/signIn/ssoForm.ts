import { html, type Html } from '../../html.js';

/**
 * The small form of the sign-in page (and of `GET /sso/start`, with the email filled in). It posts,
 * with the browser's form token: a sign-in started from another site (login CSRF, IDENTITY.md
 * rule 18) could otherwise sign the visitor in to an account of the attacker's through a provider
 * that signs in without asking.
 */
export function ssoForm(csrf: string, email = '', next = ''): Html {
  return html`<form method="post" action="/sso/start" class="sso" novalidate>
    <h2>Sign in with SSO</h2>
    <input type="hidden" name="_csrf" value="${csrf}" />
    <input type="hidden" name="next" value="${next}" />
    <div class="field">
      <label for="sso-email">Work email</label>
      <input id="sso-email" name="email" type="email" value="${email}" autocomplete="email" required />
    </div>
    <button type="submit" class="secondary">Sign in with SSO</button>
  </form>`;
}

/**
 * The sign-in page's Content-Security-Policy: the usual one, except that forms may lead off the
 * site. The SSO form's POST to /sso/start is answered by a redirect to the organisation's provider,
 * and browsers hold a form's whole redirect chain to `form-action` ('self' would stop it there).
 * The page's only other form posts to /login; nothing on it is unescaped input.
 */
export function signInPageCsp(allowHttp: boolean): string {
  const targets = allowHttp ? "'self' https: http:" : "'self' https:";
  return `default-src 'self'; img-src 'self' data:; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action ${targets}`;
}
