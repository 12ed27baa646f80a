import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { NotFoundError, ValidationError } from '../../../domain/errors.js';
import { listInvitations, type InvitationLink } from '../../../domain/identity/invitations.js';
import { changeMemberRole, listOrgMembers, removeOrgMember, type MemberView } from '../../../domain/orgs/members.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import type { Kysely } from 'kysely';
import type { Database } from '../../../db/schema.js';
import { ctxOf, flash, originOf, requireAdmin, takeFlash, text } from '../../context.js';
import { html, plural, type FieldErrors, type Html } from '../../html.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { memberSignInActions } from './memberSecurity.js';
import { reauthenticationNeeded } from '../../reauth.js';
import { inviteForm, newLinkBox, pendingInvitations, type InviteValues } from './invitationViews.js';

export const MEMBERS = '/settings/members';

const keys = (n: number) => plural(n, 'API key');

function send(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

function memberRow(session: SessionView, m: MemberView, rowError?: string): Html {
  const you = m.user_id === session.userId;
  const id = `role-${m.user_id}`;
  return html`<tr${rowError ? html` class="has-error"` : ''}>
  <td>${m.email}${you ? html` <span class="muted">(you)</span>` : ''}</td>
  <td>
    <form method="post" action="${MEMBERS}/role" class="row">${csrf(session)}
      <input type="hidden" name="email" value="${m.email}">
      <label for="${id}" class="visually-hidden">Role of ${m.email}</label>
      <select id="${id}" name="role"${rowError ? html` aria-invalid="true" aria-describedby="${id}-error"` : ''}>
        <option value="admin"${m.role === 'admin' ? html` selected` : ''}>Admin</option>
        <option value="member"${m.role === 'member' ? html` selected` : ''}>Member</option>
      </select>
      <button type="submit" class="secondary">Change role<span class="visually-hidden"> of ${m.email}</span></button>
    </form>
    ${rowError ? html`<p class="error" id="${id}-error">${rowError}</p>` : ''}
  </td>
  <td><time datetime="${m.joined_at}">${m.joined_at.slice(0, 10)}</time></td>
  <td>${m.active_keys}</td>
  <td class="member-actions">${memberSignInActions(session, m)}</td>
  <td>
    <form method="post" action="${MEMBERS}/remove" class="inline">${csrf(session)}
      <input type="hidden" name="email" value="${m.email}">
      <button type="submit" class="danger">Remove<span class="visually-hidden"> ${m.email}</span></button>
    </form>
  </td>
</tr>`;
}

/** "Demoting ada@example.com revokes the 2 API keys they created. Integrations using them stop working at once." */
function keysWarning(verb: string, member: MemberView): string {
  const n = member.active_keys;
  return `${verb} ${member.email} revokes the ${keys(n)} they created. Integrations using ${n === 1 ? 'it' : 'them'} stop working at once.`;
}

export interface MembersPageOptions {
  status?: number;
  values?: InviteValues;
  errors?: FieldErrors;
  rowError?: { email: string; message: string };
  /** A link just made (an invitation, a resend), shown this once unless it was mailed. */
  link?: { link: InvitationLink; action: 'invited' | 'resent' };
}

/** The Members page: members with their roles, pending invitations, and the Invite form. */
export async function membersPage(request: FastifyRequest, reply: FastifyReply, db: Kysely<Database>, options: MembersPageOptions = {}) {
  const session = request.session!;
  const ctx = ctxOf(request, db);
  const [members, invitations] = await Promise.all([listOrgMembers(ctx), listInvitations(ctx)]);
  const { rowError } = options;
  return send(
    reply,
    options.status ?? 200,
    page({
      title: 'Members',
      session,
      section: 'members',
      notice: takeFlash(request, reply),
      body: html`<h1>Members of ${session.orgName}</h1>
        ${rowError ? html`<div class="alert" role="alert">${rowError.email}: ${rowError.message}</div>` : ''}
        ${options.link ? newLinkBox(options.link.link, options.link.action) : ''}
        <p>Admins manage members and API keys. An API key stops working when the admin who created it is demoted or removed.</p>
        <table class="members">
          <thead>
            <tr>
              <th scope="col">Email</th>
              <th scope="col">Role</th>
              <th scope="col">Joined</th>
              <th scope="col">Live API keys</th>
              <th scope="col">Sign-in</th>
              <th scope="col"><span class="visually-hidden">Remove</span></th>
            </tr>
          </thead>
          <tbody>
            ${members.map((m) => memberRow(session, m, rowError && rowError.email.toLowerCase() === m.email.toLowerCase() ? rowError.message : undefined))}
          </tbody>
        </table>
        <h2>Pending invitations</h2>
        ${pendingInvitations(session, invitations)}
        <h2 id="invite">Invite someone</h2>
        ${options.errors ? html`<div class="alert" role="alert">Please fix the fields marked below.</div>` : ''}
        ${inviteForm(session, options.values, options.errors)}`,
    }),
  );
}

export const memberPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;
  const listPage = (request: FastifyRequest, reply: FastifyReply, options: MembersPageOptions = {}) =>
    membersPage(request, reply, db, options);

  /**
   * The member the form names (a 404 page if they are not, or no longer, a member), and whether
   * they are the only admin: then there is nothing to confirm, the domain refuses the change.
   */
  async function memberNamed(request: FastifyRequest, email: string): Promise<MemberView & { onlyAdmin: boolean }> {
    const members = await listOrgMembers(ctxOf(request, db));
    const member = members.find((m) => m.email.toLowerCase() === email.toLowerCase());
    if (!member) throw new NotFoundError(`${email} is not a member of this organisation.`);
    return { ...member, onlyAdmin: member.role === 'admin' && members.filter((m) => m.role === 'admin').length === 1 };
  }

  /** Says what a demotion or removal does, before it is done. */
  function confirmPage(reply: FastifyReply, request: FastifyRequest, member: MemberView, action: 'demote' | 'remove') {
    const session = request.session!;
    const verb = action === 'demote' ? 'Demoting' : 'Removing';
    const you = member.user_id === session.userId;
    return send(
      reply,
      200,
      page({
        title: action === 'demote' ? 'Demote admin' : 'Remove member',
        session,
        section: 'members',
        body: html`<h1>${action === 'demote' ? `Demote ${member.email}?` : `Remove ${member.email}?`}</h1>
          ${
            member.active_keys > 0
              ? html`<div class="warning" role="alert">
                  <p><strong>${keysWarning(verb, member)}</strong></p>
                  <p>Create replacement keys first if they are still needed.</p>
                </div>`
              : ''
          }
          <p>
            ${
              action === 'demote'
                ? `${member.email} stays a member but can no longer manage members or API keys.`
                : `${member.email} loses access to ${session.orgName} at once.`
            }${you ? ' This is you: you will lose access to these settings.' : ''}
          </p>
          <form method="post" action="${MEMBERS}/${action === 'demote' ? 'role' : 'remove'}">
            ${csrf(session)}
            <input type="hidden" name="email" value="${member.email}" />
            ${action === 'demote' ? html`<input type="hidden" name="role" value="member" />` : ''}
            <input type="hidden" name="confirm" value="yes" />
            <button type="submit" class="danger">
              ${action === 'demote' ? 'Demote' : 'Remove'}
              ${member.email}${member.active_keys > 0 ? ` and revoke ${keys(member.active_keys)}` : ''}
            </button>
            <a class="button secondary" href="${MEMBERS}">Cancel</a>
          </form>`,
      }),
    );
  }

  /** After a change: back to the list, unless someone demoted or removed themselves and can no longer see it. */
  function done(reply: FastifyReply, request: FastifyRequest, email: string, message: string) {
    flash(reply, message);
    const self = email.toLowerCase() === request.session!.email.toLowerCase();
    return reply.redirect(self ? '/contacts' : MEMBERS, 303);
  }

  const revokedSentence = (n: number) =>
    n > 0 ? ` ${keys(n)} they created ${n === 1 ? 'was' : 'were'} revoked.` : ' No API keys were revoked.';

  app.get(MEMBERS, async (request, reply) => {
    requireAdmin(request);
    return listPage(request, reply);
  });

  // A confirmation page is the answer to a POST: its address, reloaded or come back to (after /reauth), is the list.
  for (const path of [`${MEMBERS}/role`, `${MEMBERS}/remove`]) app.get(path, async (_request, reply) => reply.redirect(MEMBERS, 303));

  app.post(`${MEMBERS}/role`, async (request, reply) => {
    requireAdmin(request);
    const email = text(request.body, 'email');
    const role = text(request.body, 'role');
    const member = await memberNamed(request, email);
    if (role === member.role) {
      flash(reply, `${member.email} is already ${role === 'admin' ? 'an admin' : 'a member'}.`);
      return reply.redirect(MEMBERS, 303);
    }
    const demoting = member.role === 'admin' && role === 'member';
    if (demoting && member.active_keys > 0 && !member.onlyAdmin && text(request.body, 'confirm') !== 'yes') {
      return confirmPage(reply, request, member, 'demote');
    }
    // Who holds power changes (IDENTITY.md rule 11): a recent proof of identity first. Asked here, after
    // the confirmation page, so that with REAUTH_MINUTES=0 the single-use pass is spent on the change.
    const reauth = await reauthenticationNeeded(request, reply, deps, MEMBERS);
    if (reauth) return reply.redirect(reauth, 303);
    try {
      const changed = await changeMemberRole(ctxOf(request, db), { email: member.email, role }, originOf(request));
      const now = `${changed.email} is now ${changed.role === 'admin' ? 'an admin' : 'a member'}.`;
      return done(reply, request, changed.email, demoting ? now + revokedSentence(changed.revoked_keys) : now);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      return listPage(request, reply, {
        status: 400,
        rowError: { email: member.email, message: error.errors.map((e) => e.message).join('; ') },
      });
    }
  });

  app.post(`${MEMBERS}/remove`, async (request, reply) => {
    requireAdmin(request);
    const member = await memberNamed(request, text(request.body, 'email'));
    if (!member.onlyAdmin && text(request.body, 'confirm') !== 'yes') return confirmPage(reply, request, member, 'remove');
    // Who holds power changes (IDENTITY.md rule 11): a recent proof of identity first. Asked here, after
    // the confirmation page, so that with REAUTH_MINUTES=0 the single-use pass is spent on the change.
    const reauth = await reauthenticationNeeded(request, reply, deps, MEMBERS);
    if (reauth) return reply.redirect(reauth, 303);
    try {
      const removed = await removeOrgMember(ctxOf(request, db), { email: member.email }, originOf(request));
      return done(reply, request, removed.email, `Removed ${removed.email}.${revokedSentence(removed.revoked_keys)}`);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      return listPage(request, reply, {
        status: 400,
        rowError: { email: member.email, message: error.errors.map((e) => e.message).join('; ') },
      });
    }
  });
};
