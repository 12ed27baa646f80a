import { PostgresAdapter, sql, type ExpressionBuilder, type SqlBool } from 'kysely';
import type { Database } from '../../db/schema.js';
import { PreparedQuery } from '../../db/preparedQuery.js';
import type { Ctx } from '../context.js';
import { afterPosition, toPage, type Page, type PageRequest, type Position } from '../pagination.js';
import { requireScope } from '../scopes.js';
import { normaliseEmail } from '../validation.js';
import { fewMatches, isLong, termsQuery } from './searchText.js';
import { CONTACT_COLUMNS, contactJson, toContactViews, type ContactJsonRow, type ContactRow, type ContactView } from './view.js';

export interface ContactFilters {
  /** Exact match, case-insensitive, the domain compared in canonical form (`xn--` or Unicode alike). */
  email?: string;
  labelId?: string;
  /** Exact: the one contact with this external id. */
  externalId?: string;
  /** Exact: contacts whose metadata has this key with this value. */
  metadata?: { key: string; value: string };
  /** Only contacts changed after this instant (stored form, see parseInstant). */
  updatedAfter?: string;
  /** Full-text: every word (see searchWords) begins a word of the contact's names, e-mail or phone. */
  words?: string[];
}

/**
 * The orders a list can take: by a key, then by id to break ties; `-` for descending.
 * `last_name` compares lower-cased.
 */
export const CONTACT_SORTS = ['created_at', '-created_at', 'updated_at', '-updated_at', 'last_name', '-last_name'] as const;
export type ContactSort = (typeof CONTACT_SORTS)[number];

const SORT_KEYS = {
  created_at: sql<string>`contacts.created_at`,
  updated_at: sql<string>`contacts.updated_at`,
  last_name: sql<string>`lower(contacts.last_name)`,
};

/** The sort's key of the current contacts row, the value a position (and cursor) holds. */
function sortKey(sort: ContactSort) {
  return SORT_KEYS[sort.replace('-', '') as keyof typeof SORT_KEYS];
}

/**
 * Which filters a list request uses, and whether the rows are columns or JSON text (`j`, see
 * contactJson): each combination is compiled once (see PreparedQuery).
 */
interface Shape {
  email: boolean;
  label: boolean;
  after: boolean;
  external: boolean;
  meta: boolean;
  updatedAfter: boolean;
  /** The index of terms is asked (see matchingTerms). */
  words: boolean;
  /** How many words are checked on the row against search_text (see textConditions). */
  checks: number;
  /** The words match few contacts (see FEW_MATCHES): read them from the terms' index, then sort. */
  few: boolean;
  sort: ContactSort;
  json: boolean;
}

// Values: 0 org, 1 email, 2 label id, 3 unused, 4–5 the position after (the sort key's
// value and the id), 6 limit, 7 unused, 8 external id, 9–10 metadata key and value,
// 11 updated after, 12 the terms' query (FTS5's syntax, or PostgreSQL's text[]), 13… the LIKE
// patterns of the words checked on the row. The shape is the JSON of a Shape.
const contactsPage = new PreparedQuery<ContactRow | ContactJsonRow, string>(
  (db, slot, shapeText) => {
    const { email, label, after, external, meta, updatedAfter, words, checks, few, sort, json } = JSON.parse(shapeText) as Shape;
    const sqlite = !(db.getExecutor().adapter instanceof PostgresAdapter);
    // The index of terms (migration 014): on SQLite the matches' rowids from FTS5, a list built once
    // per query, from which the few matches are read and sorted (`few`); on PostgreSQL the GIN-indexed
    // search_terms, which the planner reads for a rare term or checks on each row of the list's walk
    // for a common one. (A per-contact MATCH with rowid = … re-runs the full-text query for each
    // contact: measured at 200,000 contacts, a common word took seconds.)
    const matchingTerms = sqlite
      ? sql<SqlBool>`contacts.rowid in (select rowid from contacts_fts where contacts_fts match ${slot<string>(12)})`
      : sql<SqlBool>`contacts.search_terms @> cast(${slot<string>(12)} as text[])`;
    // A word checked on the row: it begins a word of search_text. What the terms cannot say (a word
    // longer than their six characters), and on SQLite the whole test when a walk in list order
    // meets matches often (no list of every match is built then).
    const textConditions = [
      ...(words ? [matchingTerms] : []),
      ...Array.from({ length: checks }, (_, i) => sql<SqlBool>`(' ' || contacts.search_text) like ${slot<string>(13 + i)}`),
    ];
    const textMatch = textConditions.length > 0 ? sql<SqlBool>`(${sql.join(textConditions, sql` and `)})` : null;
    const key = sortKey(sort);
    // Typed as the columns either way: the caller knows which rows it asked for (pageRows).
    const columns = json
      ? ([contactJson(db).as('json'), 'contacts.id', 'contacts.created_at', key.as('sort_key')] as unknown as typeof CONTACT_COLUMNS)
      : ([...CONTACT_COLUMNS, key.as('sort_key')] as unknown as typeof CONTACT_COLUMNS);
    const position = { createdAt: slot<string>(4), id: slot<string>(5) };
    // Only the order of creation (either way: the dashboard's previous page walks the list backwards)
    // can be walked from a label's links or a pair's rows (they hold the contact's created_at);
    // another order walks the contacts, each filter a condition on it.
    const descending = sort.startsWith('-');
    const direction = descending ? 'desc' : 'asc';
    const byCreation = sort === 'created_at' || sort === '-created_at';
    const hasLabel = (eb: ExpressionBuilder<Database, 'contacts'>) =>
      eb.exists(
        eb
          .selectFrom('contact_labels')
          .select('contact_labels.contact_id')
          .whereRef('contact_labels.contact_id', '=', 'contacts.id')
          .where('contact_labels.label_id', '=', slot<string>(2)),
      );
    if (meta && !email && !external && byCreation) {
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
      if (updatedAfter) query = query.where('contacts.updated_at', '>', slot<string>(11));
      if (textMatch) query = query.where(textMatch);
      if (after) query = query.where(afterPosition('contact_metadata', position, ['contact_created_at', 'contact_id'], descending));
      return query
        .orderBy('contact_metadata.contact_created_at', direction)
        .orderBy('contact_metadata.contact_id', direction)
        .limit(slot<number>(6));
    }
    if (label && !email && !external && byCreation) {
      // The label's links in list order, a range of the (label_id, org_id, contact_created_at,
      // contact_id) index from the position on, each joined to its contact: a rare or unused label
      // reads a few index entries, not the organisation's contacts. The links carry their contact's
      // created_at, so the order and the cursor are those of the unfiltered list.
      const links = db.selectFrom('contact_labels');
      let query = links.innerJoin('contacts', 'contacts.id', 'contact_labels.contact_id').where('contacts.org_id', '=', slot<string>(0));
      query = query
        .select(columns)
        .where('contact_labels.label_id', '=', slot<string>(2))
        .where('contact_labels.org_id', '=', slot<string>(0));
      if (updatedAfter) query = query.where('contacts.updated_at', '>', slot<string>(11));
      if (textMatch) query = query.where(textMatch);
      if (after) query = query.where(afterPosition('contact_labels', position, ['contact_created_at', 'contact_id'], descending));
      return query
        .orderBy('contact_labels.contact_created_at', direction)
        .orderBy('contact_labels.contact_id', direction)
        .limit(slot<number>(6));
    }
    // With few matches, SQLite's `+` keeps the page indexes out: the matches' rowids drive, and the
    // few rows are sorted. Otherwise (a common word) the walk in list order fills a page soon.
    let query =
      few && sqlite
        ? db
            .selectFrom('contacts')
            .select(columns)
            .where(sql<SqlBool>`+contacts.org_id = ${slot<string>(0)}`)
        : db.selectFrom('contacts').select(columns).where('contacts.org_id', '=', slot<string>(0));
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
    if (updatedAfter) query = query.where('contacts.updated_at', '>', slot<string>(11));
    if (textMatch) query = query.where(textMatch);
    // An email or external id names at most one contact (unique in the organisation): nothing to
    // order, and PostgreSQL would otherwise add a sort step over the unique index's one row.
    if (email || external) return query.limit(slot<number>(6));
    // Keyset order on (key, id), over the (org_id, key, id) indexes (migration 013); descending
    // walks them backwards. The position is the last row's own values, so rows written during a
    // walk never make a seen row repeat or an unseen one be skipped, except a row whose key itself
    // moves: by updated_at, a contact changed during the walk moves past the position and is seen
    // again later, never lost.
    if (after)
      query = query.where(sql<SqlBool>`(${key}, contacts.id) ${sql.raw(descending ? '<' : '>')} (${position.createdAt}, ${position.id})`);
    // With few matches, an expression of the key (SQLite's `+`, PostgreSQL's `|| ''`) leaves the
    // planner no index walk in list order: it reads the matches from the terms' index and sorts them.
    const unwalkable = (expression: ReturnType<typeof sql<string>>) => (sqlite ? sql`+${expression}` : sql`${expression} || ''`);
    return query
      .orderBy(few ? unwalkable(key) : key, direction)
      .orderBy(few && !sqlite ? sql`contacts.id || ''` : 'contacts.id', direction)
      .limit(slot<number>(6));
  },
  (shapeText) => !(JSON.parse(shapeText) as Shape).words,
);

/** The page's rows, as columns or (`json`) as JSON text: `limit + 1` of them at most. */
async function pageRows(ctx: Ctx, page: PageRequest, filters: ContactFilters, json: boolean, sort: ContactSort): Promise<unknown[]> {
  requireScope(ctx.actor, 'contacts:read');
  const email = filters.email === undefined ? undefined : normaliseEmail(filters.email).toLowerCase();
  const words = filters.words;
  const terms = words && termsQuery(ctx, words);
  const sqlite = typeof terms === 'string';
  const few = terms !== undefined && (await fewMatches(ctx, terms));
  // The words checked on the row: on SQLite's walk every one, otherwise those longer than a term.
  const checked = words ? (sqlite && !few ? words : words.filter(isLong)) : [];
  const shape: Shape = {
    email: email !== undefined,
    label: filters.labelId !== undefined,
    after: page.after !== null,
    external: filters.externalId !== undefined,
    meta: filters.metadata !== undefined,
    updatedAfter: filters.updatedAfter !== undefined,
    words: terms !== undefined && (!sqlite || few),
    checks: checked.length,
    few,
    sort,
    json,
  };
  return contactsPage.execute(
    ctx.db,
    [
      ctx.orgId,
      email,
      filters.labelId,
      null, // (unused: was the LIKE search's pattern)
      page.after?.createdAt,
      page.after?.id,
      page.limit + 1,
      null, // (unused: was the LIKE search's phone digits)
      filters.externalId,
      filters.metadata?.key,
      filters.metadata?.value,
      filters.updatedAfter,
      terms,
      ...checked.map((word) => `% ${word}%`),
    ],
    JSON.stringify(shape),
  );
}

/** The same order the other way round: a walk in it from a page's first contact goes back a page. */
export function reversedSort(sort: ContactSort): ContactSort {
  return (sort.startsWith('-') ? sort.slice(1) : `-${sort}`) as ContactSort;
}

/**
 * A page of contacts, with the positions of its first and last ones in the page's order (the last
 * for the next cursor; the first for a walk back in reversedSort, the dashboard's previous page).
 */
export async function listContacts(
  ctx: Ctx,
  page: PageRequest,
  filters: ContactFilters = {},
  sort: ContactSort = 'created_at',
): Promise<Page<ContactView> & { first: Position | null; last: Position | null }> {
  const rows = (await pageRows(ctx, page, filters, false, sort)) as (ContactRow & { sort_key: string })[];
  const { items, hasMore } = toPage(rows, page.limit);
  const position = (row: (typeof items)[number] | undefined) => (row ? { createdAt: row.sort_key, id: row.id } : null);
  return {
    items: await toContactViews(ctx.db, ctx.orgId, items),
    hasMore,
    first: position(items[0]),
    last: position(items.at(-1)),
  };
}

/**
 * listContacts with each contact as JSON text made by the database (see contactJson): the API's
 * list. On PostgreSQL too: serializing in the process instead (rows, labels statement, objects,
 * JSON.stringify) cost the server 1,587 µs of CPU a request against 899 µs (`npm run bench`), for
 * about 0.3 ms more of PostgreSQL's time per page (EXPLAIN ANALYZE). Each item's `sort_key` is
 * its value of the sort's key, which the next cursor holds.
 */
export async function listContactsJson(
  ctx: Ctx,
  page: PageRequest,
  filters: ContactFilters = {},
  sort: ContactSort = 'created_at',
): Promise<Page<ContactJsonRow>> {
  return toPage((await pageRows(ctx, page, filters, true, sort)) as ContactJsonRow[], page.limit);
}
