import { SqliteAdapter, sql, type Kysely } from 'kysely';

// `q=` at a million contacts (issue 18). Migration 013's indexes answered a prefix (`first*`,
// `first:*`) by reading every term that begins with it and merging their lists of contacts in
// full: at 1,000,000 contacts a word in every contact cost 27 ms to count in FTS5 and a rare
// conjunction with it ("first 12345") 18 ms in PostgreSQL's GIN index, whatever the page.
// Here each database keeps the words' first one to six characters as terms of their own, so a
// prefix up to six characters is one term whose list is read lazily, as far as needed, and
// intersected by skipping (measured: 0.05–0.7 ms). A longer word is looked up by its first six
// characters and checked on the row against search_text (domain/contacts/list.ts).
//
// SQLite: FTS5's own prefix indexes (`prefix='1 2 3 4 5 6'`), over a contentless table without
// positions (detail=none: only which contacts hold a term; no phrase queries are made) that also
// holds a term naming the organisation, so a search can count its matches in one organisation.
// Triggers keep it, so no write can forget it. PostgreSQL: a generated column of the terms, with
// a GIN index; its statistics tell the planner a common term from a rare one.
const PREFIX = 6;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) {
    for (const name of ['contacts_fts_insert', 'contacts_fts_delete', 'contacts_fts_update'])
      await sql`drop trigger ${sql.raw(name)}`.execute(db);
    await sql`drop table contacts_fts`.execute(db);
    const prefixes = Array.from({ length: PREFIX }, (_, i) => i + 1).join(' ');
    await sql`create virtual table contacts_fts using fts5(terms, content='', columnsize=0, detail=none,
      prefix=${sql.lit(prefixes)}, tokenize='unicode61 remove_diacritics 2')`.execute(db);
    // The organisation's term: 'o' and its id in hexadecimal (ids are case-sensitive; FTS5 folds case).
    const terms = (row: 'new' | 'old') => sql.raw(`${row}.search_text || ' o' || lower(hex(${row}.org_id))`);
    await sql`create trigger contacts_fts_insert after insert on contacts begin
      insert into contacts_fts(rowid, terms) values (new.rowid, ${terms('new')}); end`.execute(db);
    // A contentless table forgets a row by being told its terms again ('delete'): the old row's,
    // exactly as inserted. (contentless_delete=1 needs no terms, but made every update 5 times
    // slower: 162 µs against 34 µs, measured on 20,000 rows.)
    await sql`create trigger contacts_fts_delete after delete on contacts begin
      insert into contacts_fts(contacts_fts, rowid, terms) values ('delete', old.rowid, ${terms('old')}); end`.execute(db);
    // Only when the words change: a patch of other fields leaves the index alone.
    await sql`create trigger contacts_fts_update after update of search_text on contacts when old.search_text is not new.search_text begin
      insert into contacts_fts(contacts_fts, rowid, terms) values ('delete', old.rowid, ${terms('old')});
      insert into contacts_fts(rowid, terms) values (new.rowid, ${terms('new')}); end`.execute(db);
    await sql`insert into contacts_fts(rowid, terms) select rowid, search_text || ' o' || lower(hex(org_id)) from contacts`.execute(db);
    return;
  }
  await sql`drop index contacts_search`.execute(db);
  // Every word's first 1..6 characters (char_length counts characters, as the domain does).
  await sql`create function orgdata_search_terms(words text) returns text[] language sql immutable strict parallel safe as $$
    select coalesce(array_agg(distinct left(word, n)), '{}')
    from unnest(string_to_array(words, ' ')) as word, generate_series(1, least(char_length(word), ${sql.lit(PREFIX)})) as n
  $$`.execute(db);
  await sql`alter table contacts add column search_terms text[] generated always as (orgdata_search_terms(search_text)) stored`.execute(db);
  await sql`create index contacts_search_terms on contacts using gin (search_terms)`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) {
    for (const name of ['contacts_fts_insert', 'contacts_fts_delete', 'contacts_fts_update'])
      await sql`drop trigger ${sql.raw(name)}`.execute(db);
    await sql`drop table contacts_fts`.execute(db);
    // As migration 013 made it.
    await sql`create virtual table contacts_fts using fts5(search_text, content='contacts', content_rowid='rowid', tokenize='unicode61 remove_diacritics 2')`.execute(
      db,
    );
    await sql`create trigger contacts_fts_insert after insert on contacts begin
      insert into contacts_fts(rowid, search_text) values (new.rowid, new.search_text); end`.execute(db);
    await sql`create trigger contacts_fts_delete after delete on contacts begin
      insert into contacts_fts(contacts_fts, rowid, search_text) values ('delete', old.rowid, old.search_text); end`.execute(db);
    await sql`create trigger contacts_fts_update after update of search_text on contacts begin
      insert into contacts_fts(contacts_fts, rowid, search_text) values ('delete', old.rowid, old.search_text);
      insert into contacts_fts(rowid, search_text) values (new.rowid, new.search_text); end`.execute(db);
    await sql`insert into contacts_fts(contacts_fts) values ('rebuild')`.execute(db);
    return;
  }
  await sql`drop index contacts_search_terms`.execute(db);
  await sql`alter table contacts drop column search_terms`.execute(db);
  await sql`drop function orgdata_search_terms(text)`.execute(db);
  await sql`create index contacts_search on contacts using gin (to_tsvector('simple', search_text))`.execute(db);
}
