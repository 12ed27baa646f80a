import QRCode from 'qrcode';
import type { SecondFactors } from '../../../domain/identity/totp.js';
import type { PendingSetup } from '../../../domain/identity/twoFactorSetup.js';
import { escapeHtml, field, Html, html, type FieldErrors } from '../../html.js';
import { csrf } from '../../layout.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';

export const TWO_FACTOR = '/settings/account/two-factor';

export interface ViewOptions {
  errors?: FieldErrors;
  alert?: string;
  /** Which of the page's two code forms the errors belong to. */
  form?: 'disable' | 'renew';
  /** An account SSO made, with no password or factor of its own: it cannot enrol from an SSO session (rule 8). */
  noOwnSignIn?: boolean;
}

/**
 * The QR code of the otpauth URI, drawn here as inline SVG: the secret never leaves for a chart
 * service, and the page needs no script. The SVG is the qrcode package's own output (no user text
 * in it but the URI it encodes), given a name for screen readers.
 */
export async function qrSvg(uri: string): Promise<Html> {
  const svg = await QRCode.toString(uri, { type: 'svg', margin: 2, errorCorrectionLevel: 'M' });
  return new Html(
    svg.replace(
      '<svg ',
      '<svg role="img" aria-label="QR code for your authenticator app (the same key is written out below)" width="220" height="220" class="qr" ',
    ),
  );
}

/**
 * The otpauth URI as it reads (`…?secret=…&issuer=orgdata…`): its ampersands are left bare, which
 * HTML allows where they begin no character reference (parameter names here never do); the rest
 * is escaped as usual, and a URI made by otplib holds no `<` or quote anyway.
 */
const uriText = (uri: string) => new Html(escapeHtml(uri).replaceAll('&#38;', '&'));

/** The base32 secret in groups of four, easier to type into an app by hand. */
export const grouped = (secret: string) => (secret.match(/.{1,4}/g) ?? []).join(' ');

const codeField = (errors: FieldErrors | undefined, hint: string) =>
  field({ name: 'code', label: 'Code', errors, required: true, autocomplete: 'one-time-code', hint });

export function setupView(session: SessionView, pending: PendingSetup, qr: Html, options: ViewOptions): Html {
  return html`<h2>Set up your authenticator app</h2>
    <ol>
      <li>Scan this QR code with an authenticator app (1Password, Google Authenticator, Authy, a password manager…).</li>
      <li>Then type the 6-digit code it shows, to prove it works.</li>
    </ol>
    <figure>${qr}</figure>
    <p>Cannot scan it? Enter this key by hand (time-based, 6 digits, 30 seconds):</p>
    <p><code id="totp-secret">${grouped(pending.secret)}</code></p>
    <p>Or, on the device with your app, the set-up link:</p>
    <p><code id="totp-uri" class="wrap">${uriText(pending.uri)}</code></p>
    ${options.alert ? html`<div class="alert" role="alert">${options.alert}</div>` : ''}
    <form method="post" action="${TWO_FACTOR}/confirm" novalidate>
      ${csrf(session)} ${codeField(options.errors, 'The code your app shows now.')}
      <button type="submit">Turn on two-factor authentication</button>
    </form>
    <form method="post" action="${TWO_FACTOR}/setup" class="again">
      ${csrf(session)}
      <button type="submit" class="secondary">Start again with a new key</button>
    </form>`;
}

export function onView(session: SessionView, factors: SecondFactors, options: ViewOptions): Html {
  const left = factors.recoveryCodesLeft;
  return html`<p><strong>Two-factor authentication is on.</strong> Signing in asks for a code from your authenticator app.</p>
    <p>${left} recovery code${left === 1 ? '' : 's'} left.${left <= 3 ? ' Make new ones before you run out.' : ''}</p>
    ${options.alert ? html`<div class="alert" role="alert">${options.alert}</div>` : ''}
    <h2>New recovery codes</h2>
    <form method="post" action="${TWO_FACTOR}/recovery-codes" novalidate>
      ${csrf(session)}
      ${codeField(
        options.form === 'renew' ? options.errors : undefined,
        'A code from your app (or a recovery code). Your old recovery codes stop working.',
      )}
      <button type="submit">Make new recovery codes</button>
    </form>
    <h2>Turn off two-factor authentication</h2>
    <form method="post" action="${TWO_FACTOR}/disable" novalidate>
      ${csrf(session)}
      ${
        // Two forms on the page have a `code` field: this one's ids are made distinct.
        new Html(
          codeField(
            options.form === 'disable' ? options.errors : undefined,
            'A code from your app, or a recovery code. Signing in will then ask for your password only.',
          ).value.replaceAll('f-code', 'f-disable-code'),
        )
      }
      <button type="submit" class="danger">Turn off</button>
    </form>`;
}

export function offView(session: SessionView, factors: SecondFactors, options: ViewOptions): Html {
  if (options.noOwnSignIn) return noOwnSignInView(session);
  return html`<p><strong>Two-factor authentication is off.</strong> Signing in asks for your password only.</p>
    ${
      factors.passkeys > 0
        ? html`<p>
            You have ${factors.passkeys} passkey${factors.passkeys === 1 ? '' : 's'}: signing in with a password also asks for one.
          </p>`
        : ''
    }
    ${options.alert ? html`<div class="alert" role="alert">${options.alert}</div>` : ''}
    <p>With it on, someone who learns your password still cannot sign in without your phone or authenticator app.</p>
    <form method="post" action="${TWO_FACTOR}/setup">
      ${csrf(session)}
      <button type="submit">Set up two-factor authentication</button>
    </form>`;
}

export function recoveryCodesView(codes: string[]): Html {
  return html`<h2>Your recovery codes</h2>
    <div class="notice" role="status">
      Store these codes somewhere safe (a password manager, or printed). This is the only time they are shown.
    </div>
    <p>Each code signs you in once in place of a code from your app, if you lose it.</p>
    <ul id="recovery-codes" class="codes">
      ${codes.map((code) => html`<li><code>${code}</code></li>`)}
    </ul>
    <p><a href="${TWO_FACTOR}">I have stored them</a></p>`;
}

/**
 * An account made by its organisation's single sign-on has no password or second factor of its
 * own, and a session SSO opened is no proof for the account (IDENTITY.md rule 8): a second factor
 * cannot be added from it. The way on: a password through a reset link (which proves the mailbox),
 * then the set-up, signed in with that password.
 */
export function noOwnSignInView(session: SessionView): Html {
  return html`<div class="alert" role="alert">
      <p>
        <strong>Two-factor authentication cannot be set up from a single sign‑on session.</strong> Your account was made by your
        organisation's single sign‑on and has no password of its own, and single sign‑on alone cannot add a second factor to an account.
      </p>
    </div>
    <ol>
      <li>
        <a href="/forgot-password?email=${encodeURIComponent(session.email)}">Reset your password</a>: we email a link to
        <strong>${session.email}</strong>, which proves this mailbox is yours. Open it and choose a password.
      </li>
      <li>Sign in with that password and come back here to set up an authenticator app or a passkey.</li>
    </ol>`;
}
