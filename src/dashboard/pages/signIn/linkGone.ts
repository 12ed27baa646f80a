import type { FastifyReply } from 'fastify';
import { html } from '../../html.js';
import { page } from '../../layout.js';

/**
 * The one answer to a secret link that does not work, whatever the reason (unknown, used,
 * revoked or expired): 410 with what to do next. Telling the reasons apart would tell someone
 * holding a guessed or stolen link more than they need.
 */
export function linkGone(reply: FastifyReply, kind: 'invitation' | 'reset' | 'setup'): FastifyReply {
  if (kind === 'setup') {
    const body = html`<div class="login card">
      <h1>This set-up link no longer works</h1>
      <p>It was used already, an organisation exists now, or the link is not this server's (or it was copied incompletely).</p>
      <p><a href="/login">Sign in</a>, or ask the admin who set up orgdata for an invitation.</p>
    </div>`;
    return reply
      .code(410)
      .type('text/html; charset=utf-8')
      .send(page({ title: 'Set-up link no longer valid', session: null, body }));
  }
  const body =
    kind === 'invitation'
      ? html`<div class="login card">
          <h1>This invitation link no longer works</h1>
          <p>It was used already, revoked, or has expired (or it was copied incompletely).</p>
          <p>
            Ask an admin of the organisation to send you a new invitation. If you have accepted it already,
            <a href="/login">sign in</a>.
          </p>
        </div>`
      : html`<div class="login card">
          <h1>This password reset link no longer works</h1>
          <p>It was used already or has expired (or it was copied incompletely). Each link works once.</p>
          <p><a href="/forgot-password">Ask for a new link</a>, or <a href="/login">sign in</a> if you know your password.</p>
        </div>`;
  return reply
    .code(410)
    .type('text/html; charset=utf-8')
    .send(page({ title: kind === 'invitation' ? 'Invitation no longer valid' : 'Reset link no longer valid', session: null, body }));
}

/** Shared by the pages of people who are not signed in: the hidden field of the form guard. */
export const formField = (token: string) => html`<input type="hidden" name="_csrf" value="${token}" />`;
