import type { FastifyPluginAsync } from 'fastify';
import type { Ctx } from '../../../domain/context.js';
import { BULK_LIMIT } from '../../../domain/contacts/bulk.js';
import { countContacts, type ContactCount } from '../../../domain/contacts/count.js';
import { listContacts, reversedSort, type ContactFilters, type ContactSort } from '../../../domain/contacts/list.js';
import type { ContactView } from '../../../domain/contacts/view.js';
import { groupNames } from '../../../domain/groups/groups.js';
import { decodeCursor, encodeCursor, type Position } from '../../../domain/pagination.js';
import { ctxOf, takeFlash, text } from '../../context.js';
import { emptyState, formatNumber, html, plural, type Html } from '../../html.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { contactsQuery, DASHBOARD_SORT } from './contactExport.js';
import { allLabels, send } from './contactForm.js';

export const PAGE_SIZES = [25, 50, 100] as const;

/** The page size the query string asks for, if it is one of PAGE_SIZES, else the first. */
export function pageSize(values: unknown): number {
  const asked = Number(text(values, 'limit'));
  return (PAGE_SIZES as readonly number[]).includes(asked) ? asked : PAGE_SIZES[0];
}

/**
 * One page of the list, and the positions its previous and next links start from. Both ways are
 * keyset walks: next goes on after the last contact shown; previous walks the same order reversed
 * from the first one shown (reversedSort) and turns the rows round, so going back reads one page,
 * however deep. A walk back that reaches the beginning shows the first page itself.
 */
async function contactsPage(
  ctx: Ctx,
  filters: ContactFilters,
  sort: ContactSort,
  limit: number,
  after: Position | null,
  before: Position | null,
): Promise<{ items: ContactView[]; previous: Position | null; next: Position | null }> {
  if (before) {
    const back = await listContacts(ctx, { limit, after: before }, filters, reversedSort(sort));
    if (back.hasMore) return { items: back.items.reverse(), previous: back.last, next: back.first };
    after = null;
  }
  const result = await listContacts(ctx, { limit, after }, filters, sort);
  return { items: result.items, previous: after ? result.first : null, next: result.hasMore ? result.last : null };
}

/** The list's query string fields, defaults left out: its links, and where a bulk action returns. */
export function listQuery(q: string, labelId: string, sort: ContactSort, limit: number): Record<string, string> {
  return {
    ...(q ? { q } : {}),
    ...(labelId ? { label_id: labelId } : {}),
    ...(sort !== DASHBOARD_SORT ? { sort } : {}),
    ...(limit !== PAGE_SIZES[0] ? { limit: String(limit) } : {}),
  };
}

export function countText({ count, more }: ContactCount): string {
  if (more) return `${formatNumber(count)}+ contacts`;
  return plural(count, 'contact');
}

function name(contact: ContactView): string {
  return `${contact.first_name} ${contact.last_name}`.trim();
}

export const contactListPages: FastifyPluginAsync<DashboardDeps> = async (app, { db, secret }) => {
  app.get('/contacts', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const session = request.session!;
    // The API's search (q=) and orders (sort=), the same queries.
    const { q, labelId, sort, filters } = contactsQuery(request);
    const limit = pageSize(request.query);
    // Cursors are bound to the filters and order, and to their way: a next cursor is no previous one.
    const binding = (way: 'after' | 'before') =>
      JSON.stringify(['dashboard:contacts', ctx.orgId, q, labelId, sort, ...(way === 'before' ? ['before'] : [])]);
    const cursor = text(request.query, 'cursor');
    const before = text(request.query, 'before');
    const after = cursor ? decodeCursor(secret, binding('after'), cursor) : null;
    const back = before && !cursor ? decodeCursor(secret, binding('before'), before) : null;
    const [result, count, labels, groups] = await Promise.all([
      // A search of no letter or digit ("%") matches nothing.
      filters === null ? { items: [], previous: null, next: null } : contactsPage(ctx, filters, sort, limit, after, back),
      filters === null ? { count: 0, more: false } : countContacts(ctx, filters),
      allLabels(ctx),
      // The bulk action's picker: the first 500 groups (organisations have tens).
      groupNames(ctx, 500),
    ]);
    const filterFields = listQuery(q, labelId, sort, limit);
    const query = (extra: Record<string, string>) => new URLSearchParams({ ...filterFields, ...extra }).toString();
    /** A column header that sorts by `key`, ascending first, then the other way; aria-sort says which. */
    const sortable = (label: string, key: 'last_name' | 'created_at' | 'updated_at', first: 'asc' | 'desc' = 'asc') => {
      const current = sort === key ? 'ascending' : sort === `-${key}` ? 'descending' : null;
      const nextSort = current === 'ascending' ? `-${key}` : current === 'descending' ? key : first === 'asc' ? key : `-${key}`;
      return html`<th scope="col" ${current ? html`aria-sort="${current}"` : ''}>
        <a href="/contacts?${query({ sort: nextSort })}"
          >${label}${current === 'ascending' ? ' ▲' : current === 'descending' ? ' ▼' : ''}</a
        >
      </th>`;
    };
    const hidden = (fields: Record<string, string>): Html[] =>
      Object.entries(fields).map(([field, value]) => html`<input type="hidden" name="${field}" value="${value}" />`);
    const admin = session.role === 'admin';
    const bulk = html`<fieldset class="bulk">
      <legend>With the selected contacts</legend>
      ${hidden(filterFields)}
      <div class="row">
        <div class="field">
          <label for="bulk-action">Action</label
          ><select id="bulk-action" name="action" data-bulk-action>
            ${labels.length ? html`<option value="add_label">Add label</option>` : ''}
            ${groups.length ? html`<option value="add_to_group">Add to group</option>` : ''}
            ${admin ? html`<option value="delete">Delete…</option>` : ''}
          </select>
        </div>
        ${
          labels.length
            ? html`<div class="field" data-bulk-for="add_label">
                <label for="bulk-label">Label to add</label
                ><select id="bulk-label" name="bulk_label_id">
                  ${labels.map((l) => html`<option value="${l.id}">${l.name}</option>`)}
                </select>
              </div>`
            : ''
        }
        ${
          groups.length
            ? html`<div class="field" data-bulk-for="add_to_group">
                <label for="bulk-group">Group to add to</label
                ><select id="bulk-group" name="group_id">
                  ${groups.map((g) => html`<option value="${g.id}">${g.name}</option>`)}
                </select>
              </div>`
            : ''
        }
        <button type="submit" class="secondary">Apply</button>
      </div>
      <label class="check"
        ><input type="checkbox" name="all" value="matching" /> All ${countText(count)}${q || labelId ? ' matching this search' : ''}, not
        only those ticked</label
      >
      <p class="hint">At most ${formatNumber(BULK_LIMIT)} contacts at once.</p>
    </fieldset>`;
    return send(
      reply,
      200,
      page({
        title: 'Contacts',
        session,
        section: 'contacts',
        notice: takeFlash(request, reply),
        body: html`<div class="toolbar">
            <h1>Contacts</h1>
            <span>
              ${admin ? html`<a class="button secondary" href="/contacts/export.csv?${query({})}">Export CSV</a>` : ''}
              <a class="button" href="/contacts/new">New contact</a>
            </span>
          </div>
          <form method="get" action="/contacts" class="row" role="search">
            <div class="field">
              <label for="q">Search</label><input type="search" id="q" name="q" value="${q}" placeholder="Name, email or phone" />
            </div>
            ${sort !== DASHBOARD_SORT ? html`<input type="hidden" name="sort" value="${sort}" />` : ''}
            <div class="field">
              <label for="label-filter">Label</label
              ><select id="label-filter" name="label_id">
                <option value="">Any label</option>
                ${labels.map((l) => html`<option value="${l.id}" ${l.id === labelId ? html` selected` : ''}>${l.name}</option>`)}
              </select>
            </div>
            <div class="field">
              <label for="page-size">Per page</label
              ><select id="page-size" name="limit">
                ${PAGE_SIZES.map((n) => html`<option value="${n}" ${n === limit ? html` selected` : ''}>${n}</option>`)}
              </select>
            </div>
            <button type="submit" class="secondary">Search</button>
          </form>
          <p class="muted" id="contacts-count" aria-live="polite">${countText(count)}</p>
          ${
            result.items.length === 0
              ? q || labelId
                ? emptyState('No contact matches this search.', 'Try other words or another label, or clear the search.')
                : emptyState(
                    'No contacts yet.',
                    html`Create one with New contact, <a href="/import">import a CSV</a>, or add them through the API.`,
                  )
              : html`<form method="post" action="/contacts/bulk" id="bulk">
                  ${csrf(session)} ${bulk}
                  <table>
                    <thead>
                      <tr>
                        <th scope="col"><input type="checkbox" data-select-all="ids" aria-label="Select every contact on this page" /></th>
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
                            <td><input type="checkbox" name="ids" value="${c.id}" aria-label="Select ${name(c)}" /></td>
                            <td><a href="/contacts/${c.id}">${name(c)}</a></td>
                            <td>${c.email}</td>
                            <td>${c.phone ?? ''}</td>
                            <td>${c.labels.map((l) => html`<span class="chip">${l.name}</span>`)}</td>
                            <td>${c.source_type}</td>
                            <td><time datetime="${c.created_at}">${c.created_at.slice(0, 10)}</time></td>
                            <td><time datetime="${c.updated_at}">${c.updated_at.slice(0, 10)}</time></td>
                          </tr>`,
                      )}
                    </tbody>
                  </table>
                </form>`
          }
          <nav class="pager" aria-label="Pages">
            ${cursor || before ? html`<a class="button secondary" href="/contacts?${query({})}">First page</a>` : ''}
            ${
              result.previous
                ? html`<a
                    class="button secondary"
                    rel="prev"
                    href="/contacts?${query({ before: encodeCursor(secret, binding('before'), result.previous) })}"
                    >Previous page</a
                  >`
                : ''
            }
            ${
              result.next
                ? html`<a
                    class="button secondary"
                    rel="next"
                    href="/contacts?${query({ cursor: encodeCursor(secret, binding('after'), result.next) })}"
                    >Next page</a
                  >`
                : ''
            }
          </nav>`,
      }),
    );
  });
};
