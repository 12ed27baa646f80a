import { PostgresAdapter, sql, type Kysely } from 'kysely';
import type { Database } from './schema.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { adoptConnection, sqliteTransactions } from './database.js';
import { isContention, RetryableContention } from './errors.js';

/**
 * Runs `work` in a transaction: a new one, or the caller's when `db` already is one. The API's
 * idempotent POSTs run their domain write inside the transaction that also stores the response
 * for replay (http/idempotency.ts), so domain functions must join it rather than open their own
 * (Kysely cannot nest transactions).
 */
export function inTransaction<T>(db: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  if (db.isTransaction) return work(db);
  const runner = sqliteTransactions(db);
  if (runner) return runner.run(work);
  return db.transaction().execute((trx) => {
    adoptConnection(trx, db);
    return work(trx);
  });
}

/**
 * How many times a transaction is run at most when PostgreSQL ends it for contention. Bounded:
 * PostgreSQL finds a deadlock only after deadlock_timeout (1 s by default) of waiting, and every
 * attempt holds a pooled connection; a transaction rolled back this many times in a row meets a
 * crowd, not a passing collision, and its client is better told to come back (503 with
 * Retry-After) than held.
 */
export const CONTENTION_ATTEMPTS = 5;

/**
 * Runs `attempt` (a whole transaction), again while it fails with an error `runAgain` accepts
 * (contention by default), at most CONTENTION_ATTEMPTS times; then its error is the caller's.
 */
export async function retriedOnContention<T>(attempt: () => Promise<T>, runAgain: (error: unknown) => boolean = isContention): Promise<T> {
  for (let n = 1; ; n++) {
    try {
      return await attempt();
    } catch (error) {
      if (n >= CONTENTION_ATTEMPTS || !runAgain(error)) throw error;
      // A short pause of random length: the two sides of a deadlock do not meet again in step.
      await sleep(n * (5 + Math.random() * 20));
    }
  }
}

/**
 * Runs `work` as inTransaction does, and runs it again from its start when PostgreSQL rolls it
 * back for a deadlock or a serialization failure (isContention): nothing of it was committed.
 * For work that only talks to the database (events and webhook deliveries are rows of the same
 * transaction: the outbox), so running it again is safe: it must send nothing elsewhere.
 *
 * In a caller's transaction (a keyed request's, which stores the response with the write) the work
 * is not run again inside it, in a savepoint: a request that waited for a row this one wrote under
 * a savepoint since released waits for the whole transaction to end (PostgreSQL hands it on to
 * the top-level transaction), and would deadlock with the second run as with the first. The
 * contention goes up as RetryableContention instead, for the transaction's owner to run it all again
 * (http/idempotency.ts does).
 */
export async function inRetriedTransaction<T>(db: Kysely<Database>, work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
  if (db.isTransaction) {
    try {
      return await work(db);
    } catch (error) {
      throw isContention(error) && !(error instanceof RetryableContention) ? new RetryableContention(error) : error;
    }
  }
  return retriedOnContention(() => inTransaction(db, work));
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
