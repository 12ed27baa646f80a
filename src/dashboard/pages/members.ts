import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ConflictError, NotFoundError, ValidationError } from '../../domain/errors.js';
import { addOrgMember, changeMemberRole, listOrgMembers, removeOrgMember, type MemberView } from '../../domain/orgs/members.js';
import type { SessionView } from '../../domain/sessions/sessions.js';
import { ctxOf, flash, requireAdmin, takeFlash, text } from '../context.js';
import { field, fieldErrors, html, type FieldErrors, type Html } from '../html.js';
import { csrf, page } from '../layout.js';
import type { DashboardDeps } from '../dashboardDeps.js';

const MEMBERS = '/settings/members';

const keys = (n: number) => `${n} API key${n === 1 ? '' : 's'}`;

function send(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

interface AddValues {
  email?: string;
  role?: string;
}

function addForm(session: SessionView, values: AddValues = {}, errors?: FieldErrors): Html {
  const role = values.role ?? 'member';
  return html`<form method="post" action="${MEMBERS}" novalidate>
    ${csrf(session)}
    ${field({ name: 'email', label: 'Email', type: 'email', value: values.email, errors, required: true, autocomplete: 'off' })}
    ${field({
      name: 'password',
      label: 'Password',
      type: 'password',
      errors,
      required: true,
      autocomplete: 'new-password',
      hint: 'At least 8 characters. Someone who already has an orgdata account keeps their own password.',
    })}
    <div class="field${errors?.role ? ' has-error' : ''}">
      <label for="f-role">Role</label>
      <select id="f-role" name="role" ${errors?.role ? html` aria-invalid="true" aria-describedby="f-role-error"` : ''}>
        <option value="member" ${role === 'member' ? html` selected` : ''}>Member: works with contacts, labels, groups and files</option>
        <option value="admin" ${role === 'admin' ? html` selected` : ''}>Admin: also manages members and API keys</option>
      </select>
      ${errors?.role ? html`<p class="error" id="f-role-error">${errors.role}</p>` : ''}
    </div>
    <button type="submit">Add member</button>
  </form>`;
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

export const memberPages: FastifyPluginAsync<DashboardDeps> = async (app, { db }) => {
  async function listPage(
    request: FastifyRequest,
    reply: FastifyReply,
    options: { status?: number; values?: AddValues; errors?: FieldErrors; rowError?: { email: string; message: string } } = {},
  ) {
    const session = request.session!;
    const members = await listOrgMembers(ctxOf(request, db));
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
          <p>Admins manage members and API keys. An API key stops working when the admin who created it is demoted or removed.</p>
          <table>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Role</th>
                <th scope="col">Joined</th>
                <th scope="col">Live API keys</th>
                <th scope="col"><span class="visually-hidden">Remove</span></th>
              </tr>
            </thead>
            <tbody>
              ${members.map((m) => memberRow(session, m, rowError && rowError.email.toLowerCase() === m.email.toLowerCase() ? rowError.message : undefined))}
            </tbody>
          </table>
          <h2>Add a member</h2>
          ${options.errors ? html`<div class="alert" role="alert">Please fix the fields marked below.</div>` : ''}
          ${addForm(session, options.values, options.errors)}`,
      }),
    );
  }

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

  app.post(MEMBERS, async (request, reply) => {
    requireAdmin(request);
    const values = { email: text(request.body, 'email').trim(), role: text(request.body, 'role') };
    try {
      const added = await addOrgMember(ctxOf(request, db), { ...values, password: text(request.body, 'password') });
      flash(
        reply,
        `Added ${added.email} as ${added.role === 'admin' ? 'an admin' : 'a member'}.${added.created ? '' : ' They already had an account and keep their password.'}`,
      );
      return reply.redirect(MEMBERS, 303);
    } catch (error) {
      let errors: FieldErrors | null = null;
      if (error instanceof ValidationError) errors = fieldErrors(error.errors);
      else if (error instanceof ConflictError && error.code === 'member_exists') errors = { email: error.message };
      if (!errors) throw error;
      return listPage(request, reply, { status: 400, values, errors });
    }
  });

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
    try {
      const changed = await changeMemberRole(ctxOf(request, db), { email: member.email, role });
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
    try {
      const removed = await removeOrgMember(ctxOf(request, db), { email: member.email });
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
