import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ValidationError } from '../../../domain/errors.js';
import { createGroup, deleteGroup, getGroup, listGroups, type GroupInput } from '../../../domain/groups/groups.js';
import { decodeCursor, encodeCursor } from '../../../domain/pagination.js';
import { ctxOf, flash, takeFlash, text } from '../../context.js';
import { emptyState, fieldErrors, formatNumber, html, plural, type FieldErrors } from '../../html.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { formInput, groupDetailPages, groupForm, send } from './groupDetail.js';

const GROUPS_PAGE_SIZE = 50;

export const groupPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret } = deps;
  // One group's own page (details and members) lives next door.
  await app.register(groupDetailPages, deps);

  async function listPage(
    request: FastifyRequest,
    reply: FastifyReply,
    status: number,
    values: Partial<GroupInput> = {},
    errors?: FieldErrors,
  ) {
    const ctx = ctxOf(request, db);
    const binding = JSON.stringify(['dashboard:groups', ctx.orgId]);
    const cursor = status === 200 ? text(request.query, 'cursor') : '';
    const after = cursor ? decodeCursor(secret, binding, cursor) : null;
    const result = await listGroups(ctx, { limit: GROUPS_PAGE_SIZE, after });
    const last = result.items.at(-1);
    const next = result.hasMore && last ? encodeCursor(secret, binding, { createdAt: last.created_at, id: last.id }) : null;
    const session = request.session!;
    return send(
      reply,
      status,
      page({
        title: 'Groups',
        session,
        section: 'groups',
        notice: status === 200 ? takeFlash(request, reply) : null,
        body: html`<h1>Groups</h1>
          ${errors ? html`<div class="alert" role="alert">Please fix the fields marked below.</div>` : ''}
          <p class="muted">
            A group is a named list of contacts, for example a committee or a mailing. A contact can be in many groups; deleting a group
            keeps its contacts.
          </p>
          ${
            result.items.length === 0 && !cursor
              ? emptyState('No groups yet.', 'Create one with New group below, then add contacts from its page.')
              : html`<table>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">Description</th>
                      <th scope="col">Members</th>
                      <th scope="col">Created</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${result.items.map(
                      (g) =>
                        html`<tr>
                          <td><a href="/groups/${g.id}">${g.name}</a></td>
                          <td>
                            ${g.description && g.description.length > 120 ? `${g.description.slice(0, 120)}…` : (g.description ?? '')}
                          </td>
                          <td>${formatNumber(g.member_count)}</td>
                          <td><time datetime="${g.created_at}">${g.created_at.slice(0, 10)}</time></td>
                        </tr>`,
                    )}
                  </tbody>
                </table>`
          }
          <nav class="pager" aria-label="Pages">
            ${cursor ? html`<a class="button secondary" href="/groups">First page</a>` : ''}${
              next ? html`<a class="button secondary" href="/groups?${new URLSearchParams({ cursor: next }).toString()}">Next page</a>` : ''
            }
          </nav>
          <h2>New group</h2>
          ${groupForm(session, '/groups', 'Create group', values, errors)}`,
      }),
    );
  }

  app.get('/groups', async (request, reply) => listPage(request, reply, 200));

  app.post('/groups', async (request, reply) => {
    const input = formInput(request.body);
    try {
      const group = await createGroup(ctxOf(request, db), input);
      flash(reply, `Created group ${group.name}.`);
      return reply.redirect(`/groups/${group.id}`, 303);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      return listPage(request, reply, 400, input, fieldErrors(error.errors));
    }
  });

  app.get<{ Params: { id: string } }>('/groups/:id/delete', async (request, reply) => {
    const group = await getGroup(ctxOf(request, db), request.params.id);
    const session = request.session!;
    return send(
      reply,
      200,
      page({
        title: `Delete group ${group.name}`,
        session,
        section: 'groups',
        body: html`<p><a href="/groups/${group.id}">← ${group.name}</a></p>
          <h1>Delete the group ${group.name}?</h1>
          <div class="warning">
            ${
              group.member_count === 0
                ? 'The group has no members.'
                : `Its ${plural(group.member_count, 'membership', 'memberships')} will be removed; the contacts themselves stay.`
            }
            This cannot be undone.
          </div>
          <form method="post" action="/groups/${group.id}/delete" class="row">
            ${csrf(session)}
            <button type="submit" class="danger">Delete group</button>
            <a class="button secondary" href="/groups/${group.id}">Cancel</a>
          </form>`,
      }),
    );
  });

  app.post<{ Params: { id: string } }>('/groups/:id/delete', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const group = await getGroup(ctx, request.params.id);
    await deleteGroup(ctx, group.id);
    flash(reply, `Deleted group ${group.name}.`);
    return reply.redirect('/groups', 303);
  });
};
