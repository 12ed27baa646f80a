/**
 * Full-text search of contacts (`q=`): each contact keeps `search_text`, the words of its first
 * name, last name, e-mail and phone number, lower-cased and without accents, separated by spaces;
 * a query's words must each begin one of them ("ada lov" finds Ada Lovelace, "zoe" finds Zoë,
 * "7946" finds +44 20 7946 0958). The databases index it: SQLite with FTS5 (contacts_fts),
 * PostgreSQL with a GIN index over to_tsvector('simple', search_text) (migration 013).
 */

/** At most this many words of a query are used (each narrows the result). */
export const MAX_QUERY_WORDS = 8;

/** Lower case, accents removed (NFKD, combining marks dropped), anything but letters and digits a space. */
function fold(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}

export function searchText(contact: { first_name: string; last_name: string; email: string; phone: string | null }): string {
  const digits = (contact.phone ?? '').replace(/\D/g, '');
  // The phone's digits run together as well as in the groups written, so "4420794" finds it too.
  return [contact.first_name, contact.last_name, contact.email, contact.phone ?? '', digits.length > 0 ? digits : '']
    .map(fold)
    .filter(Boolean)
    .join(' ');
}

/** The words of a query, as searchText stores them; none when it has no letter or digit. */
export function searchWords(query: string): string[] {
  const words = fold(query).split(' ').filter(Boolean);
  return [...new Set(words)].slice(0, MAX_QUERY_WORDS);
}
