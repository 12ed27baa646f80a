import type { FastifyPluginAsync } from 'fastify';
import { assertAdminOfEveryOrgOf, memberOfOrg, resetTwoFactor } from '../../../domain/identity/twoFactorReset.js';
import { endSessionsOf } from '../../../domain/sessions/sessionList.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { adminOnly, flash, SESSION_COOKIE } from '../../context.js';
import { html, type Html } from '../../html.js';
import { csrf } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { requireRecentAuthentication } from '../../reauth.js';
import { causeOf } from '../../signIns.js';

const MEMBERS = '/settings/members';

/** The Members page's per-member sign-in actions (members.ts places them in each row). */
export function memberSignInActions(session: SessionView, member: { user_id: string; email: string }): Html {
  return html`<form method="post" action="${MEMBERS}/${member.user_id}/sign-out">
      ${csrf(session)}
      <button type="submit" class="secondary">Sign out everywhere<span class="visually-hidden"> (${member.email})</span></button>
    </form>
    <form method="post" action="${MEMBERS}/${member.user_id}/reset-two-factor">
      ${csrf(session)}
      <button type="submit" class="secondary">Reset two-factor<span class="visually-hidden"> of ${member.email}</span></button>
    </form>`;
}

/**
 * An admin's help for a member who lost a device or a session (IDENTITY.md, Sessions and
 * re-authentication): end all their sessions, or remove their TOTP, recovery codes and passkeys.
 * Only for members of the admin's organisation (another organisation's user id is not found and
 * nothing changes); resetting two-factor weakens an account, so it asks for a recent proof.
 */
export const memberSecurityPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;

  app.post<{ Params: { userId: string } }>(`${MEMBERS}/:userId/sign-out`, { preHandler: adminOnly }, async (request, reply) => {
    const session = request.session!;
    const member = await memberOfOrg(db, session.orgId, request.params.userId);
    // All of their sessions only for an admin of every organisation they belong to; otherwise the
    // sessions working in this organisation: an admin of A does not sign anyone out of B.
    const everywhere = await assertAdminOfEveryOrgOf(db, session.userId, member.id).then(
      () => true,
      () => false,
    );
    const ended = await endSessionsOf(db, member.id, null, causeOf(request, session.userId), new Date(), everywhere ? null : session.orgId);
    if (member.id === session.userId) {
      reply.clearCookie(SESSION_COOKIE, { path: '/' });
      return reply.redirect('/login', 303);
    }
    const where = everywhere ? 'everywhere' : `of ${session.orgName}`;
    flash(reply, `${member.email} is signed out ${where} (${ended} session${ended === 1 ? '' : 's'} ended).`);
    return reply.redirect(MEMBERS, 303);
  });

  app.post<{ Params: { userId: string } }>(
    `${MEMBERS}/:userId/reset-two-factor`,
    { preHandler: [adminOnly, requireRecentAuthentication(deps, { fallback: MEMBERS })] },
    async (request, reply) => {
      const session = request.session!;
      const member = await memberOfOrg(db, session.orgId, request.params.userId);
      await assertAdminOfEveryOrgOf(db, session.userId, member.id);
      const removed = await resetTwoFactor(db, member.id, causeOf(request, session.userId), new Date());
      // Their sessions ended with their factors, this one too when it was one's own.
      if (member.id === session.userId) {
        reply.clearCookie(SESSION_COOKIE, { path: '/' });
        return reply.redirect('/login', 303);
      }
      const what =
        removed.totp || removed.passkeys > 0
          ? 'Their authenticator app, recovery codes and passkeys are removed.'
          : 'They had no second factor.';
      const ended = removed.ended_sessions;
      flash(
        reply,
        `Two-factor authentication of ${member.email} is reset. ${what} They are signed out everywhere (${ended} session${ended === 1 ? '' : 's'} ended).`,
      );
      return reply.redirect(MEMBERS, 303);
    },
  );
};
