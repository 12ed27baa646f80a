import { SqliteAdapter, sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * What an erasure does to SQLite's full-text index of contacts (contacts_fts, migration 014).
 * FTS5 forgets a row by writing a "delete" marker into a new segment: the row's terms stay in the
 * older segments' blobs (contacts_fts_data) until a merge happens to rewrite them, so an erased
 * name could be read back from the file. PostgreSQL has nothing to do here: the terms are a
 * generated column of the contact's row (search_terms) and go with it, its GIN entries with the
 * dead row when autovacuum cleans the table, as for every deleted row.
 *
 * FTS5's `secure-delete` option (SQLite ≥ 3.44; better-sqlite3 bundles a newer one) removes the
 * terms from the segments themselves. It is turned on for the erasure's deletion only, not for
 * good (a migration could set it for every write): measured on 100,000 contacts, an update of a
 * contact's words cost 9–11 ms with it against 0.3–0.5 ms without, because the organisation's
 * term and the one-letter prefixes are in a great many contacts and each delete rewrites their
 * lists. The option is stored in the index's configuration, so the change is part of the
 * transaction (rolled back with it) and other connections reread it.
 */

/** Runs `work` (the contact's deletion) in `trx` with FTS5's secure-delete on; off again after. */
export async function withSecureSearchDelete<T>(trx: Kysely<Database>, work: () => Promise<T>): Promise<T> {
  if (!(trx.getExecutor().adapter instanceof SqliteAdapter)) return work();
  await sql`insert into contacts_fts(contacts_fts, rank) values ('secure-delete', 1)`.execute(trx);
  const result = await work();
  await sql`insert into contacts_fts(contacts_fts, rank) values ('secure-delete', 0)`.execute(trx);
  return result;
}

/**
 * Merges the whole index into one segment (FTS5's `optimize`), which drops every term a delete
 * marker cancels: those of a contact deleted earlier, or the words a contact had before an
 * update, which secure-delete at the erasure cannot reach (their markers were written already).
 * Costs a rewrite of the installation's index, about 0.7 s per 100,000 contacts measured, during
 * which other writers wait (busy_timeout 5 s): the erasure runs it only when such terms may exist.
 * Returns whether it ran (false on PostgreSQL).
 */
export async function compactSearchIndex(db: Kysely<Database>): Promise<boolean> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return false;
  await sql`insert into contacts_fts(contacts_fts) values ('optimize')`.execute(db);
  return true;
}
