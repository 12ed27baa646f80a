import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/**
 * The browser side of passkeys, served by us (no CDN: the pages' policy is `default-src 'self'`).
 * `/assets/webauthn.js` is @simplewebauthn/browser's own UMD bundle (it defines
 * `window.SimpleWebAuthnBrowser`), read from node_modules once at start-up: it is a production
 * dependency, so `npm ci --omit=dev` (scripts/build-runtime.sh, the Dockerfile) installs it, and a
 * missing file stops the server at start rather than breaking sign-in later. The package exports
 * only its entry point, so the bundle is found from there (`script/index.js` → `dist/bundle/`).
 * `/assets/passkeys.js` is that bundle followed by our wiring of the pages' buttons, so a page
 * needs one script tag: `<script src="/assets/passkeys.js" defer></script>`.
 */
function readBundle(): string {
  const entry = createRequire(import.meta.url).resolve('@simplewebauthn/browser');
  return readFileSync(path.join(path.dirname(entry), '..', 'dist', 'bundle', 'index.umd.min.js'), 'utf8');
}

/**
 * Each button names its ceremony with a data attribute; the two endpoints it talks to take and
 * answer JSON, and the second answers `{redirect}` where the page goes next (as does a 410 for a
 * link that stopped working: "Join with a passkey" talks to the invitation's own URL). The session's CSRF
 * token (the page's `_csrf` field, when there is one) goes in the body; pages without a session
 * are protected by the Origin check and the ceremony's cookie instead.
 */
const WIRING = String.raw`
(() => {
  const webauthn = window.SimpleWebAuthnBrowser;
  const supported = Boolean(webauthn && webauthn.browserSupportsWebAuthn());
  const field = (name) => { const input = document.querySelector('input[name="' + name + '"]'); return input ? input.value : ''; };
  const nextTarget = () => field('next') || new URLSearchParams(window.location.search).get('next') || '';
  function statusNear(control) {
    const scope = control.closest('form, section, .card') || document.body;
    let status = scope.querySelector('[data-passkey-status]');
    if (!status) {
      status = document.createElement('p');
      status.setAttribute('data-passkey-status', '');
      status.setAttribute('role', 'status');
      control.insertAdjacentElement('afterend', status);
    }
    return status;
  }
  async function send(url, body) {
    let response;
    try {
      response = await fetch(url, { method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body) });
    } catch {
      throw new Error('The server could not be reached. Check your connection and try again.');
    }
    let data = null;
    try { data = await response.json(); } catch { data = null; }
    if (!response.ok || !data) {
      const error = new Error((data && data.message) || 'This page has expired. Reload it and try again.');
      // An answer that names where to go (a link that stopped working: its page; confirm it is you
      // first: /reauth; a pending sign-in gone: /login) is followed.
      if (data && typeof data.redirect === 'string') error.redirect = data.redirect;
      throw error;
    }
    return data;
  }
  function explain(error) {
    const name = error && error.name;
    if (name === 'NotAllowedError' || name === 'AbortError') return 'No passkey was used: the request was cancelled or timed out. Try again.';
    if (name === 'InvalidStateError') return 'This device already holds a passkey for your account.';
    if (name === 'SecurityError') return 'Passkeys only work on this site at its own address (PUBLIC_URL).';
    return (error && error.message) || 'The passkey did not work. Try again.';
  }
  async function ceremony(control, kind, optionsUrl, verifyUrl, extra) {
    const status = statusNear(control);
    if (!supported) { status.textContent = 'This browser cannot use passkeys.'; return; }
    control.disabled = true;
    status.textContent = kind === 'create' ? 'Follow your browser\u2019s prompt to create the passkey\u2026' : 'Follow your browser\u2019s prompt to use your passkey\u2026';
    try {
      const optionsJSON = await send(optionsUrl, Object.assign({ _csrf: field('_csrf') }, extra));
      const response = kind === 'create' ? await webauthn.startRegistration({ optionsJSON }) : await webauthn.startAuthentication({ optionsJSON });
      status.textContent = 'Checking\u2026';
      const done = await send(verifyUrl, Object.assign({ _csrf: field('_csrf'), response }, extra));
      // Going to the page already shown (adding a passkey on the account page) must load it again.
      const target = new URL(done.redirect, window.location.href);
      if (target.pathname === window.location.pathname && target.search === window.location.search) {
        window.history.replaceState(null, '', target.href);
        window.location.reload();
      } else {
        window.location.assign(target.href);
      }
    } catch (error) {
      if (error && error.redirect) { window.location.assign(new URL(error.redirect, window.location.href).href); return; }
      status.textContent = explain(error);
      control.disabled = false;
    }
  }
  const CEREMONIES = {
    'data-passkey-sign-in': ['/login/passkey/options', '/login/passkey', () => ({ next: nextTarget() })],
    'data-passkey-second-factor': ['/login/two-factor/passkey/options', '/login/two-factor/passkey', () => ({})],
    'data-passkey-reauth': ['/reauth/passkey/options', '/reauth/passkey', () => ({ next: nextTarget() })],
    'data-passkey-link': ['/sso/link/passkey/options', '/sso/link/passkey', () => ({})],
  };
  document.addEventListener('click', (event) => {
    for (const [attribute, [optionsUrl, verifyUrl, extra]] of Object.entries(CEREMONIES)) {
      const button = event.target.closest('[' + attribute + ']');
      if (button) { event.preventDefault(); void ceremony(button, 'get', optionsUrl, verifyUrl, extra()); return; }
    }
    // The invitation page (/invite/TOKEN): a new account made with its passkey.
    const join = event.target.closest('[data-passkey-join]');
    if (join) {
      event.preventDefault();
      const invite = window.location.pathname.replace(/\/+$/, '');
      void ceremony(join, 'create', invite + '/passkey/options', invite + '/passkey', {});
    }
  });
  document.addEventListener('submit', (event) => {
    const form = event.target;
    if (!form.matches('[data-passkey-add]')) return;
    event.preventDefault();
    const button = form.querySelector('button[type=submit]') || form;
    void ceremony(button, 'create', '/settings/account/passkeys/options', '/settings/account/passkeys', { name: form.elements.name.value });
  });
})();
`;

export const WEBAUTHN_JS = readBundle();
export const PASSKEYS_JS = `${WEBAUTHN_JS}\n;${WIRING}`;
