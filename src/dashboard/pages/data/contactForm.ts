import type { FastifyReply } from 'fastify';
import type { ContactInput } from '../../../domain/contacts/contacts.js';
import { ConflictError, ValidationError } from '../../../domain/errors.js';
import { listLabels, type LabelView } from '../../../domain/labels/labels.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { list, text } from '../../context.js';
import { field, fieldErrors, html, type FieldErrors, type Html } from '../../html.js';
import { csrf } from '../../layout.js';

/*
 * The contact form and what the contact pages share (contacts.ts, contactList.ts, contactBulk.ts,
 * contactDetail.ts, and labels.ts for allLabels): in a file of their own so that the pages do not import each other in a circle.
 */

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

export function send(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

/** A form error: field messages for validation, the email field for a duplicate. */
export function formErrors(error: unknown): FieldErrors | null {
  if (error instanceof ValidationError) return fieldErrors(error.errors);
  if (error instanceof ConflictError && error.code === 'contact_exists') return { email: error.message };
  return null;
}
