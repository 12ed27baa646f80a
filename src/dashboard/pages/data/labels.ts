import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { listContacts } from '../../../domain/contacts/list.js';
import { ConflictError, ValidationError } from '../../../domain/errors.js';
import { createLabel, deleteLabel, getLabel, updateLabel, type LabelView } from '../../../domain/labels/labels.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { ctxOf, flash, takeFlash, text } from '../../context.js';
import { emptyState, field, fieldErrors, formatNumber, html, plural, type FieldErrors, type Html } from '../../html.js';
import { icon } from '../../icons.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { allLabels } from './contactForm.js';

/** How many contacts the delete confirmation counts before it says "100 or more". */
const COUNT_UP_TO = 100;

function send(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

/** A form error: field messages for validation, the name field for a duplicate. */
function formErrors(error: unknown): FieldErrors | null {
  if (error instanceof ValidationError) return fieldErrors(error.errors);
  if (error instanceof ConflictError && error.code === 'label_exists') return { name: error.message };
  return null;
}

/** What the list page shows besides the labels: a failed create or rename, with what was typed. */
interface ListState {
  create?: { value: string; errors: FieldErrors };
  rename?: { id: string; value: string; errors: FieldErrors };
}

function renameForm(session: SessionView, label: LabelView, state: ListState): Html {
  const failed = state.rename?.id === label.id ? state.rename : undefined;
  const id = `rename-${label.id}`;
  const error = failed?.errors.name;
  return html`<form method="post" action="/labels/${label.id}/rename" class="row" novalidate>
    ${csrf(session)}
    <div class="field${error ? ' has-error' : ''}">
      <label for="${id}">New name<span class="visually-hidden"> for ${label.name}</span></label>
      <input
        type="text"
        name="name"
        id="${id}"
        value="${failed?.value ?? label.name}"
        required${error ? html` aria-invalid="true" aria-describedby="${id}-error"` : ''}
      />
      ${error ? html`<p class="error" id="${id}-error">${error}</p>` : ''}
    </div>
    <button type="submit" class="secondary">Rename<span class="visually-hidden"> ${label.name}</span></button>
  </form>`;
}

function listBody(session: SessionView, labels: LabelView[], state: ListState): Html {
  return html`<h1>Labels</h1>
    ${state.create || state.rename ? html`<div class="alert" role="alert">Please fix the field marked below.</div>` : ''}
    <p class="muted">
      Labels tag contacts, for example "Volunteer" or "Newsletter". Attach one from a contact's page (or with <code>label_ids</code> in the
      API), then filter the <a href="/contacts">contact list</a> by it. Renaming a label renames it on every contact; deleting it detaches
      it from every contact, and the contacts stay.
    </p>
    <h2>New label</h2>
    <form method="post" action="/labels" class="row" novalidate>
      ${csrf(session)} ${field({ name: 'name', label: 'Name', value: state.create?.value, errors: state.create?.errors, required: true })}
      <button type="submit">Create label</button>
    </form>
    <h2>All labels</h2>
    ${
      labels.length === 0
        ? emptyState('No labels yet.', 'Create one with New label above, then attach it to contacts.')
        : html`<table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Contacts</th>
                <th scope="col">Id (for the API)</th>
                <th scope="col">Rename</th>
                <th scope="col">Delete</th>
              </tr>
            </thead>
            <tbody>
              ${labels.map(
                (label) =>
                  html`<tr>
                    <td><span class="chip">${label.name}</span></td>
                    <td>
                      <a href="/contacts?${new URLSearchParams({ label_id: label.id }).toString()}">Contacts labelled ${label.name}</a>
                    </td>
                    <td><code>${label.id}</code></td>
                    <td>${renameForm(session, label, state)}</td>
                    <td>
                      <a class="button secondary" href="/labels/${label.id}/delete"
                        >Delete<span class="visually-hidden"> ${label.name}</span></a
                      >
                    </td>
                  </tr>`,
              )}
            </tbody>
          </table>`
    }`;
}

export const labelPages: FastifyPluginAsync<DashboardDeps> = async (app, { db }) => {
  async function listPage(request: FastifyRequest, reply: FastifyReply, status: number, state: ListState) {
    const labels = await allLabels(ctxOf(request, db));
    return send(
      reply,
      status,
      page({
        title: 'Labels',
        session: request.session!,
        section: 'labels',
        notice: status === 200 ? takeFlash(request, reply) : null,
        body: listBody(request.session!, labels, state),
      }),
    );
  }

  app.get('/labels', async (request, reply) => listPage(request, reply, 200, {}));

  app.post('/labels', async (request, reply) => {
    const name = text(request.body, 'name');
    try {
      const label = await createLabel(ctxOf(request, db), { name });
      flash(reply, `Created label ${label.name}.`);
      return reply.redirect('/labels', 303);
    } catch (error) {
      const errors = formErrors(error);
      if (!errors) throw error;
      return listPage(request, reply, 400, { create: { value: name, errors } });
    }
  });

  app.post<{ Params: { id: string } }>('/labels/:id/rename', async (request, reply) => {
    const name = text(request.body, 'name');
    try {
      const label = await updateLabel(ctxOf(request, db), request.params.id, { name });
      flash(reply, `Renamed the label to ${label.name}.`);
      return reply.redirect('/labels', 303);
    } catch (error) {
      const errors = formErrors(error);
      if (!errors) throw error;
      return listPage(request, reply, 400, { rename: { id: request.params.id, value: name, errors } });
    }
  });

  app.get<{ Params: { id: string } }>('/labels/:id/delete', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const label = await getLabel(ctx, request.params.id);
    const tagged = await listContacts(ctx, { limit: COUNT_UP_TO, after: null }, { labelId: label.id });
    const count = tagged.hasMore ? `${formatNumber(COUNT_UP_TO)} or more contacts` : plural(tagged.items.length, 'contact');
    const session = request.session!;
    return send(
      reply,
      200,
      page({
        title: `Delete label ${label.name}`,
        session,
        section: 'labels',
        body: html`<p><a href="/labels">← Labels</a></p>
          <h1>Delete the label ${label.name}?</h1>
          <div class="warning">
            ${
              tagged.items.length === 0
                ? 'No contact has this label, so no contact changes.'
                : html`It will be detached from ${count}. The contacts themselves stay.`
            }
            This cannot be undone.
          </div>
          <form method="post" action="/labels/${label.id}/delete" class="row">
            ${csrf(session)}
            <button type="submit" class="danger">${icon('trash-2')}Delete label</button>
            <a class="button secondary" href="/labels">Cancel</a>
          </form>`,
      }),
    );
  });

  app.post<{ Params: { id: string } }>('/labels/:id/delete', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const label = await getLabel(ctx, request.params.id);
    await deleteLabel(ctx, label.id);
    flash(reply, `Deleted label ${label.name}.`);
    return reply.redirect('/labels', 303);
  });
};
