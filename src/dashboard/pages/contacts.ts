import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import {
  attachLabel,
  createContact,
  deleteContact,
  detachLabel,
  getContact,
  updateContact,
  type ContactInput,
} from '../../domain/contacts/contacts.js';
import { listContacts } from '../../domain/contacts/list.js';
import type { ContactView } from '../../domain/contacts/view.js';
import { ConflictError, ValidationError } from '../../domain/errors.js';
import { listLabels, type LabelView } from '../../domain/labels/labels.js';
import { decodeCursor, encodeCursor } from '../../domain/pagination.js';
import { ctxOf, flash, list, takeFlash, text } from '../context.js';
import { field, fieldErrors, html, type FieldErrors, type Html } from '../html.js';
import { csrf, page } from '../layout.js';
import type { SessionView } from '../../domain/sessions/sessions.js';
import type { DashboardDeps } from '../plugin.js';

const PAGE_SIZE = 25;

/** Every label of the organisation, for pickers (organisations have tens, not thousands). */
export async function allLabels(ctx: Parameters<typeof listLabels>[0]): Promise<LabelView[]> {
  const out: LabelView[] = [];
  let after = null;
  for (;;) {
    const page = await listLabels(ctx, { limit: 100, after });
    out.push(...page.items);
    const last = page.items.at(-1);
    if (!page.hasMore || !last) return out;
    after = { createdAt: last.created_at, id: last.id };
  }
}

function formInput(body: unknown): ContactInput {
  const optional = (name: string) => (text(body, name).trim() === '' ? null : text(body, name));
  return {
    first_name: text(body, 'first_name'),
    last_name: text(body, 'last_name'),
    email: text(body, 'email').trim(),
    phone: optional('phone'),
    address: optional('address'),
    notes: optional('notes'),
    label_ids: list(body, 'label_ids'),
  };
}

function contactForm(options: {
  session: SessionView;
  action: string;
  submit: string;
  values: Partial<ContactInput>;
  labels: LabelView[];
  errors?: FieldErrors;
  showLabels: boolean;
}): Html {
  const { values, errors } = options;
  const chosen = new Set(values.label_ids ?? []);
  return html`<form method="post" action="${options.action}" novalidate>
    ${csrf(options.session)}
    <div class="row">
      ${field({ name: 'first_name', label: 'First name', value: values.first_name, errors, required: true })}
      ${field({ name: 'last_name', label: 'Last name', value: values.last_name, errors })}
    </div>
    ${field({ name: 'email', label: 'Email', type: 'email', value: values.email, errors, required: true })}
    ${field({ name: 'phone', label: 'Phone', type: 'text', value: values.phone, errors })}
    ${field({ name: 'address', label: 'Address', value: values.address, errors, multiline: true })}
    ${field({ name: 'notes', label: 'Notes', value: values.notes, errors, multiline: true })}
    ${
      options.showLabels && options.labels.length
        ? html`<fieldset class="checks">
              <legend>Labels</legend>
              ${options.labels.map(
                (label) =>
                  html`<label
                    ><input type="checkbox" name="label_ids" value="${label.id}" ${chosen.has(label.id) ? html` checked` : ''} />
                    ${label.name}</label
                  >`,
              )}
            </fieldset>
            ${errors?.label_ids ? html`<p class="error">${errors.label_ids}</p>` : ''}`
        : ''
    }
    <button type="submit">${options.submit}</button>
  </form>`;
}

function labelChips(contact: ContactView): Html {
  return html`${contact.labels.map((l) => html`<span class="chip">${l.name}</span>`)}`;
}

function send(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

/** A form error: field messages for validation, the email field for a duplicate. */
function formErrors(error: unknown): FieldErrors | null {
  if (error instanceof ValidationError) return fieldErrors(error.errors);
  if (error instanceof ConflictError && error.code === 'contact_exists') return { email: error.message };
  return null;
}

export const contactPages: FastifyPluginAsync<DashboardDeps> = async (app, { db, secret }) => {
  app.get('/contacts', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const q = text(request.query, 'q').slice(0, 200);
    const labelId = text(request.query, 'label_id');
    const binding = JSON.stringify(['dashboard:contacts', ctx.orgId, q, labelId]);
    const cursor = text(request.query, 'cursor');
    const after = cursor ? decodeCursor(secret, binding, cursor) : null;
    const [result, labels] = await Promise.all([
      listContacts(ctx, { limit: PAGE_SIZE, after }, { search: q || undefined, labelId: labelId || undefined }),
      allLabels(ctx),
    ]);
    const last = result.items.at(-1);
    const next = result.hasMore && last ? encodeCursor(secret, binding, { createdAt: last.created_at, id: last.id }) : null;
    const query = (extra: Record<string, string>) =>
      new URLSearchParams({ ...(q ? { q } : {}), ...(labelId ? { label_id: labelId } : {}), ...extra }).toString();
    return send(
      reply,
      200,
      page({
        title: 'Contacts',
        session: request.session!,
        section: 'contacts',
        notice: takeFlash(request, reply),
        body: html`<div class="toolbar">
            <h1>Contacts</h1>
            <a class="button" href="/contacts/new">New contact</a>
          </div>
          <form method="get" action="/contacts" class="row" role="search">
            <div class="field">
              <label for="q">Search</label><input type="search" id="q" name="q" value="${q}" placeholder="Name or email" />
            </div>
            <div class="field">
              <label for="label-filter">Label</label
              ><select id="label-filter" name="label_id">
                <option value="">Any label</option>
                ${labels.map((l) => html`<option value="${l.id}" ${l.id === labelId ? html` selected` : ''}>${l.name}</option>`)}
              </select>
            </div>
            <button type="submit" class="secondary">Search</button>
          </form>
          ${
            result.items.length === 0
              ? html`<p class="muted">
                  ${q || labelId ? 'No contact matches.' : 'No contacts yet. Create one, import a CSV, or add them through the API.'}
                </p>`
              : html`<table>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">Email</th>
                      <th scope="col">Phone</th>
                      <th scope="col">Labels</th>
                      <th scope="col">Source</th>
                      <th scope="col">Created</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${result.items.map(
                      (c) =>
                        html`<tr>
                          <td><a href="/contacts/${c.id}">${`${c.first_name} ${c.last_name}`.trim()}</a></td>
                          <td>${c.email}</td>
                          <td>${c.phone ?? ''}</td>
                          <td>${labelChips(c)}</td>
                          <td>${c.source_type}</td>
                          <td><time datetime="${c.created_at}">${c.created_at.slice(0, 10)}</time></td>
                        </tr>`,
                    )}
                  </tbody>
                </table>`
          }
          <nav class="pager" aria-label="Pages">
            ${cursor ? html`<a class="button secondary" href="/contacts?${query({})}">First page</a>` : ''}${
              next ? html`<a class="button secondary" href="/contacts?${query({ cursor: next })}">Next page</a>` : ''
            }
          </nav>`,
      }),
    );
  });

  app.get('/contacts/new', async (request, reply) => {
    const labels = await allLabels(ctxOf(request, db));
    return send(
      reply,
      200,
      page({
        title: 'New contact',
        session: request.session!,
        section: 'contacts',
        body: html`<h1>New contact</h1>
          ${contactForm({ session: request.session!, action: '/contacts', submit: 'Create contact', values: {}, labels, showLabels: true })}`,
      }),
    );
  });

  app.post('/contacts', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const input = formInput(request.body);
    try {
      const contact = await createContact(ctx, input);
      flash(reply, `Created ${contact.first_name} ${contact.last_name}`.trim() + '.');
      return reply.redirect(`/contacts/${contact.id}`, 303);
    } catch (error) {
      const errors = formErrors(error);
      if (!errors) throw error;
      const labels = await allLabels(ctx);
      return send(
        reply,
        400,
        page({
          title: 'New contact',
          session: request.session!,
          section: 'contacts',
          body: html`<h1>New contact</h1>
            <div class="alert" role="alert">Please fix the fields marked below.</div>
            ${contactForm({ session: request.session!, action: '/contacts', submit: 'Create contact', values: input, labels, errors, showLabels: true })}`,
        }),
      );
    }
  });

  async function editPage(
    request: Parameters<typeof ctxOf>[0],
    reply: FastifyReply,
    contact: ContactView,
    status = 200,
    values?: Partial<ContactInput>,
    errors?: FieldErrors,
  ) {
    const ctx = ctxOf(request, db);
    const labels = await allLabels(ctx);
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
          <h2>Delete</h2>
          <form method="post" action="/contacts/${contact.id}/delete">
            ${csrf(session)}
            <p>Deleting removes the contact from every group. This cannot be undone.</p>
            <button type="submit" class="danger">Delete contact</button>
          </form>`,
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

  app.post<{ Params: { id: string; labelId: string } }>('/contacts/:id/labels/:labelId/remove', async (request, reply) => {
    await detachLabel(ctxOf(request, db), request.params.id, request.params.labelId);
    flash(reply, 'Label removed.');
    return reply.redirect(`/contacts/${request.params.id}`, 303);
  });
};
