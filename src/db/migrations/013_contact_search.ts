import { SqliteAdapter, sql, type Kysely } from 'kysely';

/**
 * The search text as this migration computes it: a frozen copy of domain/contacts/searchText.ts
 * as it was when the migration was written (2026-11-25). A migration does, for ever, what it did
 * the day it first ran on some installation; the domain's function may change (and write new
 * contacts differently, with a migration of its own to rewrite the old ones), this copy may not.
 * Migrations import nothing outside db/migrations but kysely and Node (.dependency-cruiser.cjs).
 */
function fold(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}

function searchText(contact: { first_name: string; last_name: string; email: string; phone: string | null }): string {
  const digits = (contact.phone ?? '').replace(/\D/g, '');
  return [contact.first_name, contact.last_name, contact.email, contact.phone ?? '', digits.length > 0 ? digits : '']
    .map(fold)
    .filter(Boolean)
    .join(' ');
}

// Full-text search of contacts (`q=`, issue 18): each contact's search_text (see
// domain/contacts/searchText.ts), written by the domain with the contact, and an index of its
// words: on SQLite an FTS5 table over the column (external content, kept by triggers, so a write
// cannot forget it), on PostgreSQL a GIN index over to_tsvector('simple', search_text), which
// answers prefix queries (`ada:*`) without an extension. Existing contacts get theirs here, a
// thousand at a time (the folding of accents is JavaScript's, not SQL's).
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('contacts')
    .addColumn('search_text', 'text', (c) => c.notNull().defaultTo(''))
    .execute();
  for (let after = ''; ;) {
    const rows = (await db
      .selectFrom('contacts')
      .select(['id', 'first_name', 'last_name', 'email', 'phone'])
      .where('id', '>', after)
      .orderBy('id')
      .limit(1000)
      .execute()) as { id: string; first_name: string; last_name: string; email: string; phone: string | null }[];
    if (rows.length === 0) break;
    for (const row of rows)
      await db
        .updateTable('contacts')
        .set({ search_text: searchText(row) })
        .where('id', '=', row.id)
        .execute();
    after = rows[rows.length - 1]!.id;
  }
  if (db.getExecutor().adapter instanceof SqliteAdapter) {
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
  await sql`create index contacts_search on contacts using gin (to_tsvector('simple', search_text))`.execute(db);
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- see up()
export async function down(db: Kysely<any>): Promise<void> {
  if (db.getExecutor().adapter instanceof SqliteAdapter) {
    for (const name of ['contacts_fts_insert', 'contacts_fts_delete', 'contacts_fts_update'])
      await sql`drop trigger ${sql.raw(name)}`.execute(db);
    await sql`drop table contacts_fts`.execute(db);
  } else {
    await sql`drop index contacts_search`.execute(db);
  }
  await db.schema.alterTable('contacts').dropColumn('search_text').execute();
}
