import { SqliteAdapter, sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';
import { inTransaction } from './transaction.js';

/**
 * What an erasure does to SQLite's full-text index of contacts (contacts_fts, migration 014).
 * FTS5 forgets a row by writing a "delete" marker into a new segment: the row's terms stay in the
 * older segments' blobs (contacts_fts_data) until a merge rewrites them, so an erased name could
 * be read back from the file. PostgreSQL has nothing to do here: the terms are a generated column
 * of the contact's row (search_terms) and go with it; its GIN entries go with the dead row when
 * (auto)vacuum cleans the table, as for every deleted row.
 *
 * The erasure merges the index (below). FTS5's `secure-delete` option, which removes a deleted
 * row's terms from the segments at once, is not used, neither for good nor for the erasure alone:
 * - on this table (contentless, detail=none) it breaks the index: switched on after a contact's
 *   words were updated (the update's delete and insert of one rowid in one transaction), deleting
 *   that contact securely leaves `integrity-check` failing and the contact's old words matching
 *   its rowid again (reproduced with SQLite 3.53.2, better-sqlite3's; with detail=full it holds);
 * - on for good, every change of a contact's words costs 9–11 ms instead of 0.3–0.5 ms (measured
 *   on 100,000 contacts): the organisation's term and the one-letter prefixes are in a great
 *   many contacts, and each secure delete rewrites their lists.
 */

/** Pages of segments one merge step writes: a step is one short transaction (~0.1 s). */
const MERGE_PAGES = 200;

/**
 * Merges the whole index into one segment, which drops every term a delete marker cancels: the
 * words of contacts deleted (the erased one's included) and those a contact had before an update.
 * FTS5's `merge` with a negative page count works towards one segment like `optimize`, but a step
 * at a time: each step is its own transaction, so the server's writes go on between steps rather
 * than waiting for the whole rewrite. It rewrites the installation's index: measured on a shared
 * two-core machine, 0.9 s for 100,000 contacts and 6.8 s for 400,000, no step longer than 0.55 s
 * (the server's writes wait up to busy_timeout, 5 s). A step that changes almost nothing
 * (total_changes() grows by less than 2) means the merge is done. Returns whether it ran (false
 * on PostgreSQL).
 */
export async function mergeSearchIndex(db: Kysely<Database>): Promise<boolean> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return false;
  for (let done = false; !done;) {
    done = await inTransaction(db, async (trx) => {
      const changes = async () => (await sql<{ n: number }>`select total_changes() as n`.execute(trx)).rows[0]!.n;
      const before = await changes();
      await sql`insert into contacts_fts(contacts_fts, rank) values ('merge', ${-MERGE_PAGES})`.execute(trx);
      return (await changes()) - before < 2;
    });
  }
  return true;
}
