import { html, type Html } from '../html.js';

/** The small form of the sign-in page (and of the invitation page, with the email filled in). */
export function ssoForm(email = ''): Html {
  return html`<form method="get" action="/sso/start" class="sso" novalidate>
    <h2>Sign in with SSO</h2>
    <label for="sso-email">Work email</label>
    <input id="sso-email" name="email" type="email" value="${email}" autocomplete="email" required />
    <button type="submit" class="secondary">Sign in with SSO</button>
  </form>`;
}
