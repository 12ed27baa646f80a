import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { deleteContact, updateContact, type ContactInput } from '../../../domain/contacts/contacts.js';
import { attachLabel, detachLabel } from '../../../domain/contacts/labelLinks.js';
import { getContact } from '../../../domain/contacts/read.js';
import type { Ctx } from '../../../domain/context.js';
import { addMembers, CONTACT_GROUPS_SHOWN, groupsHolding, groupsOfContact } from '../../../domain/groups/members.js';
import { groupNames } from '../../../domain/groups/groups.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import type { ContactView } from '../../../domain/contacts/view.js';
import { ctxOf, flash, takeFlash, text } from '../../context.js';
import { html, type FieldErrors, type Html } from '../../html.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { allLabels, contactForm, formErrors, formInput, send } from './contactForm.js';
import { timelineSection } from './timeline.js';

/** The groups the contact page's picker offers, at most (organisations have tens). */
const GROUP_PICKER_SIZE = 500;

/**
 * The contact's groups, each a link to its page, and a picker of the groups it is not in with Add
 * (the group page's addMembers). (Files have no relation to contacts in the data model: there are
 * none to show.)
 */
async function contactGroups(ctx: Ctx, session: SessionView, contactId: string): Promise<Html> {
  const [groups, names] = await Promise.all([groupsOfContact(ctx, contactId), groupNames(ctx, GROUP_PICKER_SIZE)]);
  const holding = await groupsHolding(
    ctx,
    contactId,
    names.map((g) => g.id),
  );
  const offered = names.filter((g) => !holding.has(g.id));
  return html`<h2 id="groups">Groups</h2>
    ${
      groups.items.length === 0
        ? html`<p class="muted">In no group yet.</p>`
        : html`<ul class="contact-groups">
              ${groups.items.map((g) => html`<li><a href="/groups/${g.id}">${g.name}</a></li>`)}
            </ul>
            ${groups.hasMore ? html`<p class="muted">And more: the first ${CONTACT_GROUPS_SHOWN} are shown.</p>` : ''}`
    }
    ${
      offered.length
        ? html`<form method="post" action="/contacts/${contactId}/groups" class="row">
            ${csrf(session)}
            <div class="field">
              <label for="add-to-group">Group</label
              ><select id="add-to-group" name="group_id">
                ${offered.map((g) => html`<option value="${g.id}">${g.name}</option>`)}
              </select>
            </div>
            <button type="submit" class="secondary">Add to group</button>
          </form>`
        : html`<p class="muted">
            ${names.length ? 'It is in every group.' : html`No groups yet: <a href="/groups">create one</a>, then add the contact here.`}
          </p>`
    }`;
}

/** One contact: edit, labels, groups, delete. */
export const contactDetailPages: FastifyPluginAsync<DashboardDeps> = async (app, { db }) => {
  async function editPage(
    request: Parameters<typeof ctxOf>[0],
    reply: FastifyReply,
    contact: ContactView,
    status = 200,
    values?: Partial<ContactInput>,
    errors?: FieldErrors,
  ) {
    const ctx = ctxOf(request, db);
    const [labels, timeline] = await Promise.all([allLabels(ctx), timelineSection(ctx, contact.id)]);
    const attached = new Set(contact.labels.map((l) => l.id));
    const session = request.session!;
    return send(
      reply,
      status,
      page({
        title: `${contact.first_name} ${contact.last_name}`.trim(),
        session,
        section: 'contacts',
        notice: takeFlash(request, reply),
        body: html`<p><a href="/contacts">← Contacts</a></p>
          <h1>${`${contact.first_name} ${contact.last_name}`.trim()}</h1>
          <p class="muted">Source: ${contact.source_type} · created ${contact.created_at.slice(0, 10)} · id <code>${contact.id}</code></p>
          ${
            contact.external_id !== null || Object.keys(contact.metadata).length > 0
              ? html`<h2>From other systems</h2>
                  <p class="muted">Set through the API: the integrator's own id and metadata.</p>
                  <table>
                    <tbody>
                      ${
                        contact.external_id !== null
                          ? html`<tr>
                              <th scope="row">external_id</th>
                              <td><code>${contact.external_id}</code></td>
                            </tr>`
                          : ''
                      }
                      ${Object.entries(contact.metadata).map(
                        ([key, value]) =>
                          html`<tr>
                            <th scope="row">metadata.${key}</th>
                            <td>${value}</td>
                          </tr>`,
                      )}
                    </tbody>
                  </table>`
              : ''
          }
          ${errors ? html`<div class="alert" role="alert">Please fix the fields marked below.</div>` : ''}
          ${contactForm({ session, action: `/contacts/${contact.id}`, submit: 'Save changes', values: values ?? { ...contact, label_ids: [...attached] }, labels, errors, showLabels: false })}
          <h2>Labels</h2>
          <ul>
            ${contact.labels.map(
              (l) =>
                html`<li>
                  <span class="chip">${l.name}</span>
                  <form method="post" action="/contacts/${contact.id}/labels/${l.id}/remove" class="inline">
                    ${csrf(session)}<button type="submit" class="secondary">Remove ${l.name}</button>
                  </form>
                </li>`,
            )}
          </ul>
          ${
            labels.some((l) => !attached.has(l.id))
              ? html`<form method="post" action="/contacts/${contact.id}/labels" class="row">
                  ${csrf(session)}
                  <div class="field">
                    <label for="attach-label">Add label</label
                    ><select id="attach-label" name="label_id">
                      ${labels.filter((l) => !attached.has(l.id)).map((l) => html`<option value="${l.id}">${l.name}</option>`)}
                    </select>
                  </div>
                  <button type="submit" class="secondary">Add label</button>
                </form>`
              : html`<p class="muted">
                  ${labels.length ? 'Every label is attached.' : html`No labels yet: <a href="/labels">create one</a>.`}
                </p>`
          }
          ${await contactGroups(ctx, session, contact.id)} ${timeline}
          <h2>Delete</h2>
          <p>Deleting removes the contact from every group. This cannot be undone.</p>
          <p><a class="button secondary" href="/contacts/${contact.id}/delete">Delete contact…</a></p>`,
      }),
    );
  }

  app.get<{ Params: { id: string } }>('/contacts/:id', async (request, reply) => {
    const contact = await getContact(ctxOf(request, db), request.params.id);
    return editPage(request, reply, contact);
  });

  app.post<{ Params: { id: string } }>('/contacts/:id', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const { label_ids: _labels, ...input } = formInput(request.body);
    try {
      await updateContact(ctx, request.params.id, input);
      flash(reply, 'Saved.');
      return reply.redirect(`/contacts/${request.params.id}`, 303);
    } catch (error) {
      const errors = formErrors(error);
      if (!errors) throw error;
      return editPage(request, reply, await getContact(ctx, request.params.id), 400, input, errors);
    }
  });

  // Deleting asks first (as deleting a group or a file, and revoking a key, do): the contact page
  // links to this page, whose form deletes.
  app.get<{ Params: { id: string } }>('/contacts/:id/delete', async (request, reply) => {
    const contact = await getContact(ctxOf(request, db), request.params.id);
    const name = `${contact.first_name} ${contact.last_name}`.trim();
    const session = request.session!;
    return send(
      reply,
      200,
      page({
        title: `Delete ${name}`,
        session,
        section: 'contacts',
        body: html`<p><a href="/contacts/${contact.id}">← ${name}</a></p>
          <h1>Delete ${name}?</h1>
          <div class="warning">The contact is removed from every group, with its labels. This cannot be undone.</div>
          <form method="post" action="/contacts/${contact.id}/delete" class="row">
            ${csrf(session)}
            <button type="submit" class="danger">Delete ${name}</button>
            <a class="button secondary" href="/contacts/${contact.id}">Cancel</a>
          </form>`,
      }),
    );
  });

  app.post<{ Params: { id: string } }>('/contacts/:id/delete', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const contact = await getContact(ctx, request.params.id);
    await deleteContact(ctx, request.params.id);
    flash(reply, `Deleted ${`${contact.first_name} ${contact.last_name}`.trim()}.`);
    return reply.redirect('/contacts', 303);
  });

  app.post<{ Params: { id: string } }>('/contacts/:id/labels', async (request, reply) => {
    await attachLabel(ctxOf(request, db), request.params.id, text(request.body, 'label_id'));
    flash(reply, 'Label added.');
    return reply.redirect(`/contacts/${request.params.id}`, 303);
  });

  // Adds the contact to a group from its page: the group page's addMembers, for one contact.
  app.post<{ Params: { id: string } }>('/contacts/:id/groups', async (request, reply) => {
    const groupId = text(request.body, 'group_id');
    if (groupId === '') {
      flash(reply, 'Nothing was changed: choose a group.');
      return reply.redirect(`/contacts/${request.params.id}#groups`, 303);
    }
    const ctx = ctxOf(request, db);
    const group = await addMembers(ctx, groupId, [request.params.id]);
    flash(reply, `Added to ${group.name}.`);
    return reply.redirect(`/contacts/${request.params.id}#groups`, 303);
  });

  app.post<{ Params: { id: string; labelId: string } }>('/contacts/:id/labels/:labelId/remove', async (request, reply) => {
    await detachLabel(ctxOf(request, db), request.params.id, request.params.labelId);
    flash(reply, 'Label removed.');
    return reply.redirect(`/contacts/${request.params.id}`, 303);
  });
};
