import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../../../db/schema.js';
import { endSessionsOf, listSessions, revokeSession, type SessionListItem } from '../../../domain/sessions/sessionList.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { flash, SESSION_COOKIE } from '../../context.js';
import { html, type Html } from '../../html.js';
import { csrf } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { causeOf } from '../../signIns.js';
import { requireAccountProof } from '../../reauth.js';

const ACCOUNT = '/settings/account';
const SESSIONS = `${ACCOUNT}/sessions`;

const METHODS: Record<string, string> = {
  password: 'Password',
  'password+totp': 'Password and authenticator code',
  'password+recovery_code': 'Password and recovery code',
  'password+passkey': 'Password and passkey',
  passkey: 'Passkey',
  sso: 'Single sign-on',
  invitation: 'Accepted an invitation',
  password_reset: 'Reset the password',
};

const when = (iso: string | null) => (iso ? html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>` : html`—`);

function sessionRow(session: SessionView, item: SessionListItem): Html {
  const [address, browser] = (item.origin ?? '').split(' · ');
  return html`<tr${item.current ? html` class="current"` : ''}>
    <td data-label="Signed in">${when(item.created_at)}${item.current ? html` <strong class="badge">This session</strong>` : ''}</td>
    <td data-label="Last seen">${when(item.last_seen_at)}</td>
    <td data-label="Approximate origin">${address || 'Unknown'}</td>
    <td data-label="Browser">${browser || 'Unknown'}</td>
    <td data-label="How">${METHODS[item.method] ?? item.method}</td>
    <td>
      ${
        item.current
          ? ''
          : html`<form method="post" action="${SESSIONS}/${item.id}/revoke" class="inline">
              ${csrf(session)}
              <button type="submit" class="secondary">
                Revoke<span class="visually-hidden"> the session signed in ${item.created_at.slice(0, 16).replace('T', ' ')}</span>
              </button>
            </form>`
      }
    </td>
  </tr>`;
}

/** The "Your sessions" section of /settings/account (account.ts places it). */
export async function sessionsSection(db: Kysely<Database>, session: SessionView): Promise<Html> {
  const sessions = await listSessions(db, session.userId, session.sessionHash, new Date());
  const others = sessions.filter((s) => !s.current).length;
  return html`<section aria-labelledby="your-sessions">
    <h2 id="your-sessions">Your sessions</h2>
    <p>Where you are signed in to orgdata. Revoke any session you do not recognise, and change your password.</p>
    <table class="sessions">
      <thead>
        <tr>
          <th scope="col">Signed in</th>
          <th scope="col">Last seen</th>
          <th scope="col">Approximate origin</th>
          <th scope="col">Browser</th>
          <th scope="col">How</th>
          <th scope="col"><span class="visually-hidden">Revoke</span></th>
        </tr>
      </thead>
      <tbody>
        ${sessions.map((item) => sessionRow(session, item))}
      </tbody>
    </table>
    ${
      others > 0
        ? html`<form method="post" action="${SESSIONS}/revoke-others">
            ${csrf(session)}
            <button type="submit" class="danger">Sign out everywhere else</button>
          </form>`
        : html`<p class="muted">You are signed in nowhere else.</p>`
    }
  </section>`;
}

/**
 * Revoking one of your sessions (by its short id, never the cookie) and signing out everywhere
 * else. A session id that is not yours is "not found": nothing ends.
 */
export const accountSessionPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;
  // Ending the account's other sessions from a session an organisation's SSO opened would let
  // that organisation's provider sign the holder out everywhere: the account's own proof first (rule 8).
  const ownProofInSso = { preHandler: requireAccountProof(deps, { fallback: ACCOUNT, ssoOnly: true }) };
  app.post<{ Params: { id: string } }>(`${SESSIONS}/:id/revoke`, ownProofInSso, async (request, reply) => {
    const session = request.session!;
    const revoked = await revokeSession(db, session.userId, request.params.id, causeOf(request, session.userId), new Date());
    if (revoked.id === session.sessionHash.slice(0, 16)) {
      // Revoking this very session is signing out.
      reply.clearCookie(SESSION_COOKIE, { path: '/' });
      return reply.redirect('/login', 303);
    }
    flash(reply, `The session ${revoked.origin ? `from ${revoked.origin} ` : ''}is signed out.`);
    return reply.redirect(ACCOUNT, 303);
  });

  app.post(`${SESSIONS}/revoke-others`, ownProofInSso, async (request: FastifyRequest, reply) => {
    const session = request.session!;
    const ended = await endSessionsOf(db, session.userId, session.sessionHash, causeOf(request, session.userId), new Date());
    flash(reply, ended === 0 ? 'You were signed in nowhere else.' : `Signed out of ${ended} other session${ended === 1 ? '' : 's'}.`);
    return reply.redirect(ACCOUNT, 303);
  });
};
