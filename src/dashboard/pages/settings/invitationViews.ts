import type { InvitationLink, InvitationView } from '../../../domain/identity/invitations.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { emptyState, field, html, type FieldErrors, type Html } from '../../html.js';
import { csrf } from '../../layout.js';

/** The Members page's invitation parts: the Invite form, the pending invitations, a new link shown once. */

export const INVITATIONS = '/settings/members/invitations';

export interface InviteValues {
  email?: string;
  role?: string;
}

const day = (iso: string) => html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`;

export function inviteForm(session: SessionView, values: InviteValues = {}, errors?: FieldErrors): Html {
  const role = values.role ?? 'member';
  return html`<form method="post" action="/settings/members" novalidate>
    ${csrf(session)}
    ${field({
      name: 'email',
      label: 'Email',
      type: 'email',
      value: values.email,
      errors,
      required: true,
      autocomplete: 'off',
      hint: 'They receive a link to join and choose their own password (or sign in, if they already have an orgdata account).',
    })}
    <div class="field${errors?.role ? ' has-error' : ''}">
      <label for="f-role">Role</label>
      <select id="f-role" name="role" ${errors?.role ? html` aria-invalid="true" aria-describedby="f-role-error"` : ''}>
        <option value="member" ${role === 'member' ? html` selected` : ''}>Member: works with contacts, labels, groups and files</option>
        <option value="admin" ${role === 'admin' ? html` selected` : ''}>Admin: also manages members and API keys</option>
      </select>
      ${errors?.role ? html`<p class="error" id="f-role-error">${errors.role}</p>` : ''}
    </div>
    <button type="submit">Invite</button>
  </form>`;
}

/**
 * A link just made: when it was mailed, a sentence; otherwise the link itself, shown this once
 * with a copy button (like a new API key), and why it was not mailed.
 */
export function newLinkBox(link: InvitationLink, action: 'invited' | 'resent'): Html {
  const verb = action === 'invited' ? 'Invited' : 'Sent a new invitation to';
  if (link.mail.status === 'sent') {
    return html`<div class="notice" role="status">${verb} ${link.email}: the invitation is on its way by email.</div>`;
  }
  const why =
    link.mail.status === 'failed'
      ? html`<div class="warning" role="alert">
          <p><strong>The invitation is saved, but the email to ${link.email} could not be sent</strong> (${link.mail.reason}).</p>
          <p>Copy the link below and send it to them yourself, or press Resend later.</p>
        </div>`
      : html`<div class="notice" role="status">
          ${verb} ${link.email}. This orgdata does not send email: copy the link below and send it to them yourself.
        </div>`;
  return html`${why}
    <div class="card invite-link">
      <h2>Invitation link for ${link.email}</h2>
      <div class="key-box">
        <code id="invite-link">${link.url}</code><button type="button" class="secondary" data-copy="invite-link">Copy</button>
      </div>
      <p class="hint">You will not see it again: it works once, until ${day(link.expires_at)}. Resend makes a new one.</p>
    </div>`;
}

export function pendingInvitations(session: SessionView, invitations: InvitationView[]): Html {
  if (invitations.length === 0) return emptyState('No pending invitations.', 'To invite someone, use the form below.');
  return html`<table class="invitations">
    <thead>
      <tr>
        <th scope="col">Email</th>
        <th scope="col">Role</th>
        <th scope="col">Invited by</th>
        <th scope="col">Expires</th>
        <th scope="col"><span class="visually-hidden">Actions</span></th>
      </tr>
    </thead>
    <tbody>
      ${invitations.map(
        (i) =>
          html`<tr>
            <td>${i.email}</td>
            <td>${i.role === 'admin' ? 'Admin' : 'Member'}</td>
            <td>${i.invited_by ?? html`<span class="muted">the operator</span>`}</td>
            <td class="nowrap">${i.expired ? html`<strong>Expired</strong> ${day(i.expires_at)}` : day(i.expires_at)}</td>
            <td class="actions">
              <form method="post" action="${INVITATIONS}/${i.id}/resend" class="inline">
                ${csrf(session)}<button type="submit" class="secondary">Resend<span class="visually-hidden"> to ${i.email}</span></button>
              </form>
              <form method="post" action="${INVITATIONS}/${i.id}/revoke" class="inline">
                ${csrf(session)}<button type="submit" class="danger">
                  Revoke<span class="visually-hidden"> ${i.email}'s invitation</span>
                </button>
              </form>
            </td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}
