import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { createContact, type ContactInput } from '../../domain/contacts/contacts.js';
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
import { contactDetailPages } from './contactDetail.js';
import { contactExportPages, contactsQuery } from './contactExport.js';

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

export function formInput(body: unknown): ContactInput {
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

export function contactForm(options: {
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

export function send(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

/** A form error: field messages for validation, the email field for a duplicate. */
export function formErrors(error: unknown): FieldErrors | null {
  if (error instanceof ValidationError) return fieldErrors(error.errors);
  if (error instanceof ConflictError && error.code === 'contact_exists') return { email: error.message };
  return null;
}

export const contactPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret } = deps;
  app.get('/contacts', async (request, reply) => {
    const ctx = ctxOf(request, db);
    // The API's search (q=) and orders (sort=), the same queries.
    const { q, labelId, sort, filters } = contactsQuery(request);
    const binding = JSON.stringify(['dashboard:contacts', ctx.orgId, q, labelId, sort]);
    const cursor = text(request.query, 'cursor');
    const after = cursor ? decodeCursor(secret, binding, cursor) : null;
    const [result, labels] = await Promise.all([
      // A search of no letter or digit ("%") matches nothing.
      filters === null ? { items: [], hasMore: false, last: null } : listContacts(ctx, { limit: PAGE_SIZE, after }, filters, sort),
      allLabels(ctx),
    ]);
    const last = result.items.at(-1);
    const next = result.hasMore && last ? encodeCursor(secret, binding, result.last ?? { createdAt: last.created_at, id: last.id }) : null;
    const query = (extra: Record<string, string>) =>
      new URLSearchParams({
        ...(q ? { q } : {}),
        ...(labelId ? { label_id: labelId } : {}),
        ...(sort !== 'created_at' ? { sort } : {}),
        ...extra,
      }).toString();
    /** A column header that sorts by `key`, ascending first, then the other way; aria-sort says which. */
    const sortable = (label: string, key: 'last_name' | 'created_at' | 'updated_at', first: 'asc' | 'desc' = 'asc') => {
      const current = sort === key ? 'ascending' : sort === `-${key}` ? 'descending' : null;
      const nextSort = current === 'ascending' ? `-${key}` : current === 'descending' ? key : first === 'asc' ? key : `-${key}`;
      const link = new URLSearchParams({ ...(q ? { q } : {}), ...(labelId ? { label_id: labelId } : {}), sort: nextSort }).toString();
      return html`<th scope="col" ${current ? html`aria-sort="${current}"` : ''}>
        <a href="/contacts?${link}">${label}${current === 'ascending' ? ' ▲' : current === 'descending' ? ' ▼' : ''}</a>
      </th>`;
    };
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
            <span>
              ${request.session!.role === 'admin' ? html`<a class="button secondary" href="/contacts/export.csv?${query({})}">Export CSV</a>` : ''}
              <a class="button" href="/contacts/new">New contact</a>
            </span>
          </div>
          <form method="get" action="/contacts" class="row" role="search">
            <div class="field">
              <label for="q">Search</label><input type="search" id="q" name="q" value="${q}" placeholder="Name, email or phone" />
            </div>
            ${sort !== 'created_at' ? html`<input type="hidden" name="sort" value="${sort}" />` : ''}
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
                      ${sortable('Name', 'last_name')}
                      <th scope="col">Email</th>
                      <th scope="col">Phone</th>
                      <th scope="col">Labels</th>
                      <th scope="col">Source</th>
                      ${sortable('Created', 'created_at', 'desc')} ${sortable('Updated', 'updated_at', 'desc')}
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
                          <td><time datetime="${c.updated_at}">${c.updated_at.slice(0, 10)}</time></td>
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
      const contact = await createContact(ctx, input, 'manual');
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

  await app.register(contactExportPages, deps);
  await app.register(contactDetailPages, deps);
};
