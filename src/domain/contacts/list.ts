import { sql, type SqlBool } from 'kysely';
import type { Ctx } from '../context.js';
import { afterPosition, toPage, type Page, type PageRequest } from '../pagination.js';
import { requireScope } from '../scopes.js';
import { normaliseEmail } from '../validation.js';
import { CONTACT_COLUMNS, toContactViews, type ContactView } from './view.js';

export interface ContactFilters {
  /** Exact match, case-insensitive, the domain compared in canonical form (`xn--` or Unicode alike). */
  email?: string;
  labelId?: string;
  /** Part of the first name, last name or email, case-insensitive (the dashboard's search box). */
  search?: string;
}

/** A LIKE pattern matching `text` anywhere, with LIKE's own wildcards taken literally. */
function containing(text: string): string {
  return `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

export async function listContacts(ctx: Ctx, page: PageRequest, filters: ContactFilters = {}): Promise<Page<ContactView>> {
  requireScope(ctx.actor, 'contacts:read');
  let query = ctx.db.selectFrom('contacts').select(CONTACT_COLUMNS).where('contacts.org_id', '=', ctx.orgId);
  if (filters.email !== undefined) query = query.where('contacts.email_lower', '=', normaliseEmail(filters.email).toLowerCase());
  if (filters.labelId !== undefined) {
    const labelId = filters.labelId;
    query = query.where((eb) =>
      eb.exists(
        eb
          .selectFrom('contact_labels')
          .select('contact_labels.contact_id')
          .whereRef('contact_labels.contact_id', '=', 'contacts.id')
          .where('contact_labels.label_id', '=', labelId),
      ),
    );
  }
  if (filters.search !== undefined && filters.search.trim() !== '') {
    const pattern = containing(filters.search.trim());
    query = query.where(
      sql<SqlBool>`(lower(contacts.first_name) like ${pattern} escape '\\' or lower(contacts.last_name) like ${pattern} escape '\\' or contacts.email_lower like ${pattern} escape '\\')`,
    );
  }
  if (page.after) query = query.where(afterPosition('contacts', page.after));
  const rows = await query
    .orderBy('contacts.created_at')
    .orderBy('contacts.id')
    .limit(page.limit + 1)
    .execute();
  const { items, hasMore } = toPage(rows, page.limit);
  return { items: await toContactViews(ctx.db, ctx.orgId, items), hasMore };
}
