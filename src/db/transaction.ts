import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/**
 * Runs `work` in a transaction: a new one, or the caller's when `db` already is one. The API's
 * idempotent POSTs run their domain write inside the transaction that also stores the response
 * for replay (http/idempotency.ts), so domain functions must join it rather than open their own
 * (Kysely cannot nest transactions).
 */
export function inTransaction<T>(db: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  return db.isTransaction ? work(db) : db.transaction().execute(work);
}
