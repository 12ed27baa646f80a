import type { PasskeyView } from '../../../domain/identity/passkeys.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { html, type Html } from '../../html.js';
import { csrf } from '../../layout.js';

export const PASSKEYS_PATH = '/settings/account/passkeys';

const when = (iso: string) => html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`;

function row(session: SessionView, passkey: PasskeyView): Html {
  const base = `${PASSKEYS_PATH}/${encodeURIComponent(passkey.id)}`;
  return html`<tr>
    <td><strong>${passkey.name}</strong></td>
    <td class="nowrap" data-label="Added">${when(passkey.created_at)}</td>
    <td class="nowrap" data-label="Last used">${passkey.last_used_at ? when(passkey.last_used_at) : 'Never'}</td>
    <td class="actions">
      <details class="rename">
        <summary>Rename<span class="sr-only"> ${passkey.name}</span></summary>
        <form method="post" action="${base}/rename">
          ${csrf(session)}
          <label for="rename-${passkey.id}">New name</label>
          <input type="text" id="rename-${passkey.id}" name="name" value="${passkey.name}" maxlength="64" required />
          <button type="submit" class="secondary">Save</button>
        </form>
      </details>
      <form method="post" action="${base}/remove" class="inline">
        ${csrf(session)}
        <button type="submit" class="danger">Remove<span class="sr-only"> ${passkey.name}</span></button>
      </form>
    </td>
  </tr>`;
}

/**
 * The Passkeys section of /settings/account: the person's passkeys (name, added, last used) and
 * the form that adds one. The form works through /assets/passkeys.js (the browser's WebAuthn
 * prompt sits between its two requests); the status line says what is happening.
 */
export function passkeySection(session: SessionView, passkeys: PasskeyView[]): Html {
  return html`<section aria-labelledby="passkeys-heading" id="passkeys">
    <h2 id="passkeys-heading">Passkeys</h2>
    <p class="hint">
      A passkey signs you in with this device's screen lock or a security key, without your password. It only works on this site, so it
      cannot be phished, and it counts as two factors.
    </p>
    ${
      passkeys.length
        ? html`<table class="passkeys">
            <caption class="sr-only">
              Your passkeys
            </caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Added</th>
                <th scope="col">Last used</th>
                <th scope="col"><span class="sr-only">Actions</span></th>
              </tr>
            </thead>
            <tbody>
              ${passkeys.map((p) => row(session, p))}
            </tbody>
          </table>`
        : html`<p>You have no passkeys yet.</p>`
    }
    <form method="post" action="${PASSKEYS_PATH}" data-passkey-add novalidate>
      ${csrf(session)}
      <div class="row">
        <div class="field">
          <label for="f-passkey-name">Passkey name</label>
          <input type="text" id="f-passkey-name" name="name" maxlength="64" required aria-describedby="f-passkey-name-hint" />
          <p class="hint" id="f-passkey-name-hint">Where it lives, such as “Work laptop” or “Phone”.</p>
        </div>
        <button type="submit">Add a passkey</button>
      </div>
      <p data-passkey-status role="status" class="hint"></p>
    </form>
    <script src="/assets/passkeys.js" defer></script>
  </section>`;
}
