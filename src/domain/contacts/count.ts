import { PostgresAdapter, sql, type RawBuilder } from 'kysely';
import type { Ctx } from '../context.js';
import { requireScope } from '../scopes.js';
import type { ContactFilters } from './list.js';
import { isLong, termsQuery } from './searchText.js';

/**
 * Up to this many contacts a count is exact; above it the dashboard says "10,000+". Counting
 * reads at most this many index entries (plus one), however large the organisation: an exact
 * count of a million contacts on every page view would read a million. Bulk actions act on at
 * most this many contacts at once (see bulk.ts), so an exact count is also what they would touch.
 */
export const COUNT_BOUND = 10_000;

export interface ContactCount {
  /** Exact when `more` is false; otherwise COUNT_BOUND. */
  count: number;
  /** More than COUNT_BOUND contacts match. */
  more: boolean;
}

/** The filters of the dashboard's list: its search's words and its label. */
export type ListedFilters = Pick<ContactFilters, 'words' | 'labelId'>;

/**
 * How many contacts the filters select, exactly up to COUNT_BOUND. Each query stops at
 * COUNT_BOUND + 1 rows of the index that drives it:
 *
 * - no filter: the (org_id, created_at, id) index of contacts;
 * - a label: its links' (label_id, org_id, …) index, the words (if any) checked on each contact,
 *   as the list's own walk of a label does — unless the words match few contacts (see below);
 * - words alone: the terms' index (FTS5 on SQLite, the GIN index on PostgreSQL), each match's
 *   words longer than a term checked on its row.
 *
 * So a count costs at most what walking COUNT_BOUND matches costs; where matches are sparse in
 * the driving index (a label on every contact, a word on few of them) it reads as far as the
 * list's page would walk for the same filter.
 */
export async function countContacts(ctx: Ctx, filters: ListedFilters): Promise<ContactCount> {
  requireScope(ctx.actor, 'contacts:read');
  const words = filters.words ?? [];
  // A label and words: driven by whichever selects fewer. The words alone are counted first (at
  // most COUNT_BOUND + 1 entries of the terms' index); when they match no more than that, their
  // matches are read and each checked for the label, else the label's links are walked, each
  // checked for the words. (Measured at 100,000 contacts: a word in one contact with a label on a
  // third took 35 ms walking the label's links, 0.2 ms from the terms.)
  const byWords = filters.labelId !== undefined && words.length > 0 && !(await countMatches(ctx, { words })).more;
  return countMatches(ctx, filters, byWords);
}

async function countMatches(ctx: Ctx, filters: ListedFilters, labelByWords = false): Promise<ContactCount> {
  const limit = COUNT_BOUND + 1;
  const words = filters.words ?? [];
  const postgres = ctx.db.getExecutor().adapter instanceof PostgresAdapter;
  /** Each word begins a word of the contact's search_text (the list's test on a row, see list.ts). */
  const like = (checked: string[]): RawBuilder<unknown> =>
    sql.join(
      checked.map((word) => sql`and (' ' || c.search_text) like ${`% ${word}%`}`),
      sql` `,
    );
  const labelled =
    filters.labelId === undefined
      ? sql``
      : sql`and exists (select 1 from contact_labels cl where cl.contact_id = c.id and cl.label_id = ${filters.labelId})`;
  let matches: RawBuilder<unknown>;
  if (filters.labelId !== undefined && words.length === 0) {
    // The links alone (they are the organisation's contacts'): an index-only range.
    matches = sql`select 1 from contact_labels cl where cl.label_id = ${filters.labelId} and cl.org_id = ${ctx.orgId} limit ${limit}`;
  } else if (filters.labelId !== undefined && !labelByWords) {
    const text = postgres
      ? sql`and c.search_terms @> cast(${termsQuery(ctx, words)} as text[]) ${like(words.filter(isLong))}`
      : like(words);
    matches = sql`select 1 from contact_labels cl inner join contacts c on c.id = cl.contact_id
      where cl.label_id = ${filters.labelId} and cl.org_id = ${ctx.orgId} and c.org_id = ${ctx.orgId} ${text} limit ${limit}`;
  } else if (words.length > 0) {
    const long = words.filter(isLong);
    const byTerms = sql`select c.id from contacts c where c.org_id = ${ctx.orgId}
      and c.search_terms @> cast(${termsQuery(ctx, words)} as text[]) ${like(long)}`;
    matches = postgres
      ? filters.labelId === undefined
        ? sql`${byTerms} limit ${limit}`
        : // The few matches first (OFFSET 0 keeps the planner from walking the label's links
          // instead: measured 87 ms at 1,000,000 contacts), then the label checked on each.
          sql`select 1 from (${byTerms} offset 0) as c where true ${labelled} limit ${limit}`
      : long.length === 0 && filters.labelId === undefined
        ? // The organisation's term is part of the query (see termsQuery): the index alone answers.
          sql`select rowid from contacts_fts where contacts_fts match ${termsQuery(ctx, words)} limit ${limit}`
        : sql`select 1 from contacts_fts cross join contacts c on c.rowid = contacts_fts.rowid
            where contacts_fts match ${termsQuery(ctx, words)} and c.org_id = ${ctx.orgId} ${like(long)} ${labelled} limit ${limit}`;
  } else {
    matches = sql`select 1 from contacts c where c.org_id = ${ctx.orgId} limit ${limit}`;
  }
  return boundedCount(ctx, matches);
}

/**
 * Counts the rows of `matches`, a query that stops at COUNT_BOUND + 1 rows: exact up to
 * COUNT_BOUND, else `more` (shared with the overview's counts of groups and files).
 */
export async function boundedCount(ctx: Ctx, matches: RawBuilder<unknown>): Promise<ContactCount> {
  const { rows } = await sql<{ n: number | string }>`select count(*) as n from (${matches}) as matches`.execute(ctx.db);
  const n = Number(rows[0]?.n ?? 0);
  return n > COUNT_BOUND ? { count: COUNT_BOUND, more: true } : { count: n, more: false };
}
