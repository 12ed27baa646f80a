import type { FastifyPluginAsync } from 'fastify';
import { bulkAddLabel, bulkAddToGroup, bulkDelete, BULK_LIMIT, type BulkResult, type BulkTarget } from '../../../domain/contacts/bulk.js';
import { countContacts } from '../../../domain/contacts/count.js';
import { NotFoundError, ValidationError } from '../../../domain/errors.js';
import { listContacts } from '../../../domain/contacts/list.js';
import { getContact } from '../../../domain/contacts/read.js';
import type { Ctx } from '../../../domain/context.js';
import { ctxOf, flash, list, requireAdmin, text } from '../../context.js';
import { formatNumber, html, plural, type Html } from '../../html.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { contactsFilter } from './contactExport.js';
import { countText, listQuery, pageSize } from './contactList.js';
import { send } from './contactForm.js';

const contacts = (n: number) => plural(n, 'contact');

/**
 * The contacts a deletion names: "Ada Lovelace", "Ada Lovelace and Alan Turing", up to three
 * names, then the first two and how many others ("Ada Lovelace, Alan Turing and 3 others").
 * `count` is every contact deleted; `names` the first few (in the list's order), at least two
 * when count > 3. With `more` the count is a lower bound (the count stops at 10,000).
 */
export function namedContacts(names: string[], count: number, more = false): string {
  const shown = count > 3 ? names.slice(0, 2) : names.slice(0, count);
  const others = count - shown.length;
  if (shown.length === 0) return contacts(count);
  if (others === 0) return shown.length === 1 ? shown[0]! : `${shown.slice(0, -1).join(', ')} and ${shown.at(-1)!}`;
  return `${shown.join(', ')} and ${formatNumber(others)}${more ? '+' : ''} ${others === 1 ? 'other' : 'others'}`;
}

/** The first three contacts' names of what a deletion would remove (an id of another organisation is skipped). */
async function firstNames(ctx: Ctx, target: BulkTarget, sort: Parameters<typeof listContacts>[3]): Promise<string[]> {
  const full = (c: { first_name: string; last_name: string }) => `${c.first_name} ${c.last_name}`.trim();
  if ('filters' in target) return (await listContacts(ctx, { limit: 3, after: null }, target.filters, sort)).items.map(full);
  const found = await Promise.all(
    [...new Set(target.ids)].slice(0, 3).map((id) =>
      getContact(ctx, id).catch((error: unknown) => {
        if (error instanceof NotFoundError) return null;
        throw error;
      }),
    ),
  );
  return found.filter((c) => c !== null).map(full);
}

/**
 * The contacts list's bulk actions (its form posts here, with the CSRF token every form carries):
 * the ticked rows (`ids`), or with `all=matching` every contact of the list's filter as the form
 * sends it back (search and label), never a list of ids. Deleting asks first, with the number.
 */
export const contactBulkPages: FastifyPluginAsync<DashboardDeps> = async (app, { db }) => {
  app.post('/contacts/bulk', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const body = request.body;
    const { q, labelId, sort, filters } = contactsFilter(body);
    const listFields = listQuery(q, labelId, sort, pageSize(body));
    const back = `/contacts?${new URLSearchParams(listFields).toString()}`;
    const all = text(body, 'all') === 'matching';
    const ids = list(body, 'ids');
    const action = text(body, 'action');
    if (all ? filters === null : ids.length === 0) {
      // A search of no letter or digit matches nothing: "all" of it is nobody.
      flash(reply, `Nothing was changed: ${all ? 'no contact matches this search' : 'choose at least one contact'}.`);
      return reply.redirect(back, 303);
    }
    const target: BulkTarget = all && filters ? { filters } : { ids };

    if (action === 'delete' && text(body, 'confirmed') !== 'yes') {
      requireAdmin(request);
      const [count, names] = await Promise.all([
        all && filters ? countContacts(ctx, filters) : { count: new Set(ids).size, more: false },
        firstNames(ctx, target, sort),
      ]);
      const hidden = (fields: Record<string, string>): Html[] =>
        Object.entries(fields).map(([field, value]) => html`<input type="hidden" name="${field}" value="${value}" />`);
      const tooMany = count.more;
      return send(
        reply,
        200,
        page({
          title: 'Delete contacts',
          session: request.session!,
          section: 'contacts',
          body: html`<p><a href="${back}">← Contacts</a></p>
            ${
              tooMany
                ? html`<h1>Too many contacts</h1>
                    <div class="alert" role="alert">
                      This search matches ${countText(count)}; at most ${formatNumber(BULK_LIMIT)} can be deleted at once. Narrow the search
                      or the label, then delete each part.
                    </div>`
                : html`<h1>Delete ${namedContacts(names, count.count)}?</h1>
                    <div class="warning">
                      ${all ? html`Every contact ${q || labelId ? 'matching this search' : 'of this organisation'}: ` : ''}
                      ${contacts(count.count)} will be removed from every group, with their labels. This cannot be undone.
                    </div>
                    <form method="post" action="/contacts/bulk" class="row">
                      ${csrf(request.session!)}
                      ${hidden({ ...listFields, action: 'delete', confirmed: 'yes', ...(all ? { all: 'matching' } : {}) })}
                      ${all ? '' : [...new Set(ids)].map((id) => html`<input type="hidden" name="ids" value="${id}" />`)}
                      <button type="submit" class="danger">Delete ${contacts(count.count)}</button>
                      <a class="button secondary" href="${back}">Cancel</a>
                    </form>`
            }`,
        }),
      );
    }

    let result: BulkResult;
    let done: (r: BulkResult) => string;
    try {
      if (action === 'add_label') {
        const label = text(body, 'bulk_label_id');
        result = await bulkAddLabel(ctx, target, label);
        done = (r) =>
          `Label added to ${contacts(r.changed)}${r.matched > r.changed ? ` (${contacts(r.matched - r.changed)} had it already)` : ''}.`;
      } else if (action === 'add_to_group') {
        result = await bulkAddToGroup(ctx, target, text(body, 'group_id'));
        done = (r) =>
          `Added ${contacts(r.changed)} to the group${r.matched > r.changed ? ` (${contacts(r.matched - r.changed)} were members already)` : ''}.`;
      } else if (action === 'delete') {
        result = await bulkDelete(ctx, target);
        done = (r) => `Deleted ${contacts(r.changed)}.`;
      } else {
        throw ValidationError.field('action', 'choose an action');
      }
    } catch (error) {
      // Nothing chosen, or too many: say so on the list (nothing was changed).
      if (!(error instanceof ValidationError)) throw error;
      flash(reply, `Nothing was changed: ${error.errors.map((e) => e.message).join('; ')}.`);
      return reply.redirect(back, 303);
    }
    flash(reply, done(result));
    return reply.redirect(back, 303);
  });
};
