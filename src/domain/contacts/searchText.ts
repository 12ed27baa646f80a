import { PostgresAdapter, sql } from 'kysely';
import type { Ctx } from '../context.js';
/**
 * Full-text search of contacts (`q=`): each contact keeps `search_text`, the words of its first
 * name, last name, e-mail and phone number, lower-cased and without accents, separated by spaces;
 * a query's words must each begin one of them ("ada lov" finds Ada Lovelace, "zoe" finds Zoë,
 * "7946" finds +44 20 7946 0958). The databases index it: SQLite with FTS5 (contacts_fts),
 * PostgreSQL with a GIN index over to_tsvector('simple', search_text) (migration 013).
 */

/** At most this many words of a query are used (each narrows the result). */
export const MAX_QUERY_WORDS = 8;

const ASCII = /^[\x00-\x7f]*$/;

/** Lower case, accents removed (NFKD, combining marks dropped), anything but letters and digits a space. */
export function fold(text: string): string {
  // ASCII, nearly every name, e-mail and phone: NFKD leaves it as it is and it holds no mark, and
  // its letters and digits are [a-z0-9] once lower-cased: the same text without the Unicode passes.
  if (ASCII.test(text))
    return text
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, ' ')
      .trim();
  return text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}

/**
 * A contact's words, as `fold` makes them of each of its fields in turn, joined by single spaces;
 * folded in one pass over the fields joined by spaces, which gives the same text (a space is what
 * fold leaves between words, normalization never reaches across one, and it ends a word for the
 * final sigma as a field's end does; test/searchText.test.ts holds the field-by-field way to
 * compare): five passes of the regular expressions and their strings were about 10,000
 * instructions of a create (issue 46).
 */
export function searchText(contact: { first_name: string; last_name: string; email: string; phone: string | null }): string {
  const phone = contact.phone ?? '';
  const digits = phone.replace(/\D/g, '');
  // The phone's digits run together as well as in the groups written, so "4420794" finds it too.
  return fold(`${contact.first_name} ${contact.last_name} ${contact.email} ${phone} ${digits}`);
}

/** The words of a query, as searchText stores them; none when it has no letter or digit. */
export function searchWords(query: string): string[] {
  const words = fold(query).split(' ').filter(Boolean);
  return [...new Set(words)].slice(0, MAX_QUERY_WORDS);
}

/** Each word's first characters, as the terms hold them (migration 014): up to six characters, not UTF-16 units. */
const TERM_LENGTH = 6;
export const termOf = (word: string): string => [...word].slice(0, TERM_LENGTH).join('');
export const isLong = (word: string): boolean => [...word].length > TERM_LENGTH;

/**
 * The terms' query in the dialect's form: FTS5's (the organisation's term and each word's term as
 * a prefix, all required; the words are letters and digits only) or PostgreSQL's text[].
 */
export function termsQuery(ctx: Ctx, words: string[]): string | string[] {
  if (ctx.db.getExecutor().adapter instanceof PostgresAdapter) return [...new Set(words.map(termOf))];
  return [`"o${Buffer.from(ctx.orgId, 'utf8').toString('hex')}"`, ...words.map((word) => `"${termOf(word)}"*`)].join(' AND ');
}

/**
 * Up to this many matches in the organisation, a search reads its matches from the terms' index
 * and sorts them; above it, it walks the list in order checking each contact, which soon fills a
 * page. Counting up to it reads at most this many entries (measured at 1,000,000 contacts on
 * SQLite: 0.3 ms for a word in every contact). Between the two lies the slowest search: a word in
 * one contact of a thousand walks 26,000 rows for a page of 25 (about 15 ms).
 *
 * On PostgreSQL the count is planned for its terms (most common elements statistics): a rare term
 * is read from the GIN index, a common one by a scan that stops at the limit. Its planner alone
 * cannot be trusted with the page: a rare word with a common one ("first 12345") was estimated
 * at 4,592 matches of 1,000,000 and walked in list order, reading every contact (measured).
 */
export const FEW_MATCHES = 1000;

export async function fewMatches(ctx: Ctx, terms: string | string[]): Promise<boolean> {
  const { rows } =
    typeof terms === 'string'
      ? await sql<{
          n: number;
        }>`select count(*) as n from (select rowid from contacts_fts where contacts_fts match ${terms} limit ${FEW_MATCHES + 1})`.execute(
          ctx.db,
        )
      : await sql<{ n: number }>`select count(*) as n from (select 1 from contacts where org_id = ${ctx.orgId}
          and search_terms @> cast(${terms} as text[]) limit ${FEW_MATCHES + 1}) as matches`.execute(ctx.db);
  return Number(rows[0]?.n ?? 0) <= FEW_MATCHES;
}
