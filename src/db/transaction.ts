import { PostgresAdapter, sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';
import { adoptConnection } from './database.js';

/**
 * Runs `work` in a transaction: a new one, or the caller's when `db` already is one. The API's
 * idempotent POSTs run their domain write inside the transaction that also stores the response
 * for replay (http/idempotency.ts), so domain functions must join it rather than open their own
 * (Kysely cannot nest transactions).
 */
export function inTransaction<T>(db: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  if (db.isTransaction) return work(db);
  return db.transaction().execute((trx) => {
    adoptConnection(trx, db);
    return work(trx);
  });
}

/**
 * Locks a row of the organisation for the rest of the transaction (PostgreSQL `FOR UPDATE`), so
 * that what an update reads before changing it (an event's previous_attributes) is what it
 * changes. SQLite needs no lock: its one connection runs one transaction at a time. Returns
 * whether the row exists.
 */
export async function lockRow(
  trx: Kysely<Database>,
  table: 'contacts' | 'labels' | 'groups' | 'files',
  orgId: string,
  id: string,
): Promise<boolean> {
  const forUpdate = trx.getExecutor().adapter instanceof PostgresAdapter ? sql`for update` : sql``;
  const result = await sql`select id from ${sql.table(table)} where org_id = ${orgId} and id = ${id} ${forUpdate}`.execute(trx);
  return result.rows.length > 0;
}

/**
 * Locks the organisation's row for the rest of the transaction (PostgreSQL `FOR UPDATE`), so that
 * a per-organisation limit checked by counting and then inserting holds under concurrent requests
 * on any instance: the second request waits at the lock and then counts the first one's row.
 * SQLite's transactions take the database's write lock when they begin (BEGIN IMMEDIATE), which
 * serialises them already.
 */
export async function lockOrg(trx: Kysely<Database>, orgId: string): Promise<void> {
  if (trx.getExecutor().adapter instanceof PostgresAdapter) {
    await sql`select id from orgs where id = ${orgId} for update`.execute(trx);
  }
}
