import { Readable } from 'node:stream';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { contactsCsv, EXPORT_COLUMNS } from '../../../domain/contacts/export.js';
import { CONTACT_SORTS, type ContactFilters, type ContactSort } from '../../../domain/contacts/list.js';
import { searchWords } from '../../../domain/contacts/searchText.js';
import { ctxOf, requireAdmin, text } from '../../context.js';
import type { DashboardDeps } from '../../dashboardDeps.js';

/**
 * The contacts list's search, label and order, as its query string gives them (the list page,
 * the export and the bulk actions share it: "all matching" is the list's own filter).
 */
export function contactsQuery(request: FastifyRequest): ReturnType<typeof contactsFilter> {
  return contactsFilter(request.query);
}

/**
 * The dashboard list's order when none is asked: newest first (the id breaks ties, as in every
 * order). The API's default order stays as documented (oldest first); only the dashboard differs.
 */
export const DASHBOARD_SORT: ContactSort = '-created_at';

/** contactsQuery from any fields: a query string's, or a bulk action form's. */
export function contactsFilter(values: unknown): {
  q: string;
  labelId: string;
  sort: ContactSort;
  /** The filters, or null when the search has no letter or digit (it matches nothing). */
  filters: ContactFilters | null;
} {
  const q = text(values, 'q').slice(0, 200);
  const labelId = text(values, 'label_id');
  // The API's orders (sort=): an unknown one is the dashboard's default, newest first.
  const asked = text(values, 'sort');
  const sort: ContactSort = (CONTACT_SORTS as readonly string[]).includes(asked) ? (asked as ContactSort) : DASHBOARD_SORT;
  const words = searchWords(q);
  const filters =
    q.trim() !== '' && words.length === 0 ? null : { words: words.length > 0 ? words : undefined, labelId: labelId || undefined };
  return { q, labelId, sort, filters };
}

/**
 * "Export CSV" of the contacts list as filtered and ordered (admins: the whole address book
 * leaves with it). Streamed as it is read (see domain/contacts/export.ts): a million contacts need
 * no more memory than ten.
 */
export const contactExportPages: FastifyPluginAsync<DashboardDeps> = async (app, { db }) => {
  app.get('/contacts/export.csv', async (request, reply) => {
    requireAdmin(request);
    const ctx = ctxOf(request, db);
    const { sort, filters } = contactsQuery(request);
    const body = Readable.from(filters ? contactsCsv(ctx, filters, sort) : [EXPORT_COLUMNS.join(',') + '\r\n']);
    return reply
      .header('content-type', 'text/csv; charset=utf-8')
      .header('content-disposition', `attachment; filename="contacts-${ctx.now.toISOString().slice(0, 10)}.csv"`)
      .header('cache-control', 'no-store')
      .send(body);
  });
};
