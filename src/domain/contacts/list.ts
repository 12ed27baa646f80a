import { PostgresAdapter, sql, type ExpressionBuilder, type SqlBool } from 'kysely';
import type { Database } from '../../db/schema.js';
import { PreparedQuery } from '../../db/preparedQuery.js';
import type { Ctx } from '../context.js';
import { afterPosition, toPage, type Page, type PageRequest } from '../pagination.js';
import { requireScope } from '../scopes.js';
import { normaliseEmail } from '../validation.js';
import { CONTACT_COLUMNS, contactJson, toContactViews, type ContactJsonRow, type ContactRow, type ContactView } from './view.js';

export interface ContactFilters {
  /** Exact match, case-insensitive, the domain compared in canonical form (`xn--` or Unicode alike). */
  email?: string;
  labelId?: string;
  /**
   * Part of the full name ("Alan Turing", "ing Al"), the email, or the phone number,
   * case-insensitive (the dashboard's search box). Phone numbers match on their digits alone:
   * "020 7946" finds "+44 20 7946 0018" and "(020) 7946-0018".
   */
  search?: string;
  /** Exact: the one contact with this external id. */
  externalId?: string;
  /** Exact: contacts whose metadata has this key with this value. */
  metadata?: { key: string; value: string };
}

/** A LIKE pattern matching `text` anywhere, with LIKE's own wildcards taken literally. */
function containing(text: string): string {
  return `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * Which filters a list request uses, and whether the rows are columns or JSON text (`j`, see
 * contactJson): each combination is compiled once (see PreparedQuery).
 */
type Flag = 0 | 1;
type Shape = `${Flag}${Flag}${Flag}${Flag}${Flag}${Flag}${'' | 'j'}`;

/** The digits of a phone number, without the separators people write in them. */
const PHONE_DIGITS = sql`replace(replace(replace(replace(replace(replace(coalesce(contacts.phone, ''), ' ', ''), '-', ''), '(', ''), ')', ''), '.', ''), '+', '')`;

/**
 * The search box's condition: `pattern` (see containing) in the full name (first and last name
 * with a space between) or the email; or `digits`, a pattern of the search's digits (null when it
 * has fewer than 3 of them, or other than phone characters), in the phone number's digits.
 */
function matching(pattern: string, digits: string) {
  return sql<SqlBool>`(lower(contacts.first_name || ' ' || contacts.last_name) like ${pattern} escape '\\' or contacts.email_lower like ${pattern} escape '\\' or ${PHONE_DIGITS} like ${digits})`;
}

/** The search's digits as a pattern for PHONE_DIGITS, when the search looks like part of a phone number. */
function phoneDigits(search: string): string | undefined {
  if (!/^[\d\s()+.-]+$/.test(search)) return undefined;
  const digits = search.replace(/\D/g, '');
  return digits.length >= 3 ? `%${digits}%` : undefined;
}

// Values: 0 org, 1 email, 2 label id, 3 search pattern, 4–5 the position after, 6 limit, 7 phone
// digits pattern, 8 external id, 9–10 metadata key and value.
const contactsPage = new PreparedQuery<ContactRow | ContactJsonRow, Shape>((db, slot, shape) => {
  const [email, label, search, after, external, meta] = [...shape].map((flag) => flag === '1');
  // Typed as the columns either way: the caller knows which rows it asked for (pageRows).
  const columns = shape.endsWith('j')
    ? ([contactJson(db).as('json'), 'contacts.id', 'contacts.created_at'] as unknown as typeof CONTACT_COLUMNS)
    : CONTACT_COLUMNS;
  const position = { createdAt: slot<string>(4), id: slot<string>(5) };
  const hasLabel = (eb: ExpressionBuilder<Database, 'contacts'>) =>
    eb.exists(
      eb
        .selectFrom('contact_labels')
        .select('contact_labels.contact_id')
        .whereRef('contact_labels.contact_id', '=', 'contacts.id')
        .where('contact_labels.label_id', '=', slot<string>(2)),
    );
  if (meta && !email && !external) {
    // The pair's rows in list order, a range of the (org_id, key, value, contact_created_at,
    // contact_id) index from the position on, each joined to its contact (as a label's links are).
    let query = db
      .selectFrom('contact_metadata')
      .innerJoin('contacts', 'contacts.id', 'contact_metadata.contact_id')
      .select(columns)
      .where('contact_metadata.org_id', '=', slot<string>(0))
      .where('contact_metadata.key', '=', slot<string>(9))
      .where('contact_metadata.value', '=', slot<string>(10));
    if (label) query = query.where(hasLabel);
    if (search) query = query.where(matching(slot<string>(3), slot<string>(7)));
    if (after) query = query.where(afterPosition('contact_metadata', position, ['contact_created_at', 'contact_id']));
    return query.orderBy('contact_metadata.contact_created_at').orderBy('contact_metadata.contact_id').limit(slot<number>(6));
  }
  if (label && !email && !external) {
    // The label's links in list order, a range of the (label_id, org_id, contact_created_at,
    // contact_id) index from the position on, each joined to its contact: a rare or unused label
    // reads a few index entries, not the organisation's contacts. The links carry their contact's
    // created_at, so the order and the cursor are those of the unfiltered list.
    const links = db.selectFrom('contact_labels');
    const lateral = search && db.getExecutor().adapter instanceof PostgresAdapter;
    let query = lateral
      ? // With the search box, PostgreSQL guesses the LIKE rare and reads every contact of the
        // organisation to sort the few it expects: a lateral subquery that cannot be pulled up
        // (OFFSET) keeps the label's links driving, in list order, each contact checked by key.
        links.innerJoinLateral(
          (eb) =>
            eb
              .selectFrom('contacts')
              .selectAll()
              .whereRef('contacts.id', '=', 'contact_labels.contact_id')
              .where('contacts.org_id', '=', slot<string>(0))
              .where(matching(slot<string>(3), slot<string>(7)))
              .offset(0)
              .as('contacts'),
          (join) => join.onTrue(),
        )
      : links.innerJoin('contacts', 'contacts.id', 'contact_labels.contact_id').where('contacts.org_id', '=', slot<string>(0));
    query = query
      .select(columns)
      .where('contact_labels.label_id', '=', slot<string>(2))
      .where('contact_labels.org_id', '=', slot<string>(0));
    if (search && !lateral) query = query.where(matching(slot<string>(3), slot<string>(7)));
    if (after) query = query.where(afterPosition('contact_labels', position, ['contact_created_at', 'contact_id']));
    return query.orderBy('contact_labels.contact_created_at').orderBy('contact_labels.contact_id').limit(slot<number>(6));
  }
  let query = db.selectFrom('contacts').select(columns).where('contacts.org_id', '=', slot<string>(0));
  if (email) query = query.where('contacts.email_lower', '=', slot<string>(1));
  if (external) query = query.where('contacts.external_id', '=', slot<string>(8));
  // With an email or external id as well, the label and the pair are checked on the one contact
  // it finds, by primary key.
  if (label) query = query.where(hasLabel);
  if (meta) {
    query = query.where((eb) =>
      eb.exists(
        eb
          .selectFrom('contact_metadata')
          .select('contact_metadata.contact_id')
          .whereRef('contact_metadata.contact_id', '=', 'contacts.id')
          .where('contact_metadata.key', '=', slot<string>(9))
          .where('contact_metadata.value', '=', slot<string>(10)),
      ),
    );
  }
  if (search) query = query.where(matching(slot<string>(3), slot<string>(7)));
  if (after) query = query.where(afterPosition('contacts', position));
  // An email or external id names at most one contact (unique in the organisation): nothing to
  // order, and PostgreSQL would otherwise add a sort step over the unique index's one row.
  if (email || external) return query.limit(slot<number>(6));
  return query.orderBy('contacts.created_at').orderBy('contacts.id').limit(slot<number>(6));
});

/** The page's rows, as columns or (`json`) as JSON text: `limit + 1` of them at most. */
async function pageRows(ctx: Ctx, page: PageRequest, filters: ContactFilters, json: boolean): Promise<unknown[]> {
  requireScope(ctx.actor, 'contacts:read');
  const email = filters.email === undefined ? undefined : normaliseEmail(filters.email).toLowerCase();
  const text = filters.search?.trim().replace(/\s+/g, ' ');
  const search = text ? containing(text) : undefined;
  const flag = (on: boolean): Flag => (on ? 1 : 0);
  const shape: Shape = `${flag(email !== undefined)}${flag(filters.labelId !== undefined)}${flag(search !== undefined)}${flag(page.after !== null)}${flag(filters.externalId !== undefined)}${flag(filters.metadata !== undefined)}${json ? 'j' : ''}`;
  return contactsPage.execute(
    ctx.db,
    [
      ctx.orgId,
      email,
      filters.labelId,
      search,
      page.after?.createdAt,
      page.after?.id,
      page.limit + 1,
      (text && phoneDigits(text)) ?? null,
      filters.externalId,
      filters.metadata?.key,
      filters.metadata?.value,
    ],
    shape,
  );
}

export async function listContacts(ctx: Ctx, page: PageRequest, filters: ContactFilters = {}): Promise<Page<ContactView>> {
  const rows = (await pageRows(ctx, page, filters, false)) as ContactRow[];
  const { items, hasMore } = toPage(rows, page.limit);
  return { items: await toContactViews(ctx.db, ctx.orgId, items), hasMore };
}

/**
 * listContacts with each contact as JSON text made by the database (see contactJson): the API's
 * list. On PostgreSQL too: serializing in the process instead (rows, labels statement, objects,
 * JSON.stringify) cost the server 1,587 µs of CPU a request against 899 µs (`npm run bench`), for
 * about 0.3 ms more of PostgreSQL's time per page (EXPLAIN ANALYZE).
 */
export async function listContactsJson(ctx: Ctx, page: PageRequest, filters: ContactFilters = {}): Promise<Page<ContactJsonRow>> {
  return toPage((await pageRows(ctx, page, filters, true)) as ContactJsonRow[], page.limit);
}
