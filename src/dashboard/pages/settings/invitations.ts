import type { FastifyPluginAsync } from 'fastify';
import { ValidationError } from '../../../domain/errors.js';
import { inviteMember, resendInvitation, revokeInvitation } from '../../../domain/identity/invitations.js';
import { adminOnly, ctxOf, flash, originOf, requireAdmin, text } from '../../context.js';
import { fieldErrors } from '../../html.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { INVITATIONS } from './invitationViews.js';
import { MEMBERS, membersPage } from './members.js';
import { requireRecentAuthentication } from '../../reauth.js';

/**
 * Settings → Members, invitations (admins): invite, resend, revoke (see
 * domain/identity/invitations.ts). A link that was mailed is announced; one that was not (no
 * SMTP_URL, or the mail failed) is shown on the page this once, never put in a cookie or a URL.
 * Inviting is a grant of power (IDENTITY.md rule 11: a member reads the data, an admin makes keys):
 * inviting or re-inviting anyone asks for a recent proof of identity (REAUTH_MINUTES), as creating an API key does.
 */
export const invitationPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, identity } = deps;
  const asAdmin = {
    preHandler: [
      adminOnly,
      // Every invitation widens who can reach the data (a member reads it all), not only an admin's.
      requireRecentAuthentication(deps, { fallback: MEMBERS }),
    ],
  };
  const reinvitingAdmin = {
    preHandler: [adminOnly, requireRecentAuthentication(deps, { fallback: MEMBERS })],
  };

  app.post(MEMBERS, asAdmin, async (request, reply) => {
    requireAdmin(request);
    const values = { email: text(request.body, 'email').trim(), role: text(request.body, 'role') };
    try {
      const link = await inviteMember(ctxOf(request, db), identity, values, originOf(request));
      if (link.mail.status === 'sent') {
        flash(reply, `Invited ${link.email}: the invitation is on its way by email.`);
        return reply.redirect(MEMBERS, 303);
      }
      return membersPage(request, reply, db, { link: { link, action: 'invited' } });
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      return membersPage(request, reply, db, { status: 400, values, errors: fieldErrors(error.errors) });
    }
  });

  app.post<{ Params: { id: string } }>(`${INVITATIONS}/:id/resend`, reinvitingAdmin, async (request, reply) => {
    requireAdmin(request);
    const link = await resendInvitation(ctxOf(request, db), identity, request.params.id, originOf(request));
    if (link.mail.status === 'sent') {
      flash(reply, `Sent a new invitation to ${link.email}; the previous link no longer works.`);
      return reply.redirect(MEMBERS, 303);
    }
    return membersPage(request, reply, db, { link: { link, action: 'resent' } });
  });

  app.post<{ Params: { id: string } }>(`${INVITATIONS}/:id/revoke`, async (request, reply) => {
    requireAdmin(request);
    const revoked = await revokeInvitation(ctxOf(request, db), request.params.id, originOf(request));
    flash(reply, `Revoked the invitation of ${revoked.email}: its link no longer works.`);
    return reply.redirect(MEMBERS, 303);
  });
};
