import { sql, type Kysely } from 'kysely';
import { PreparedQuery, type Slot } from './preparedQuery.js';
import type { Database } from './schema.js';

/**
 * Rows an INSERT carries at most: a batch's hundred contacts, events or links go in one
 * statement; more are cut into statements of this many (the last one shorter), so few distinct
 * statements are ever compiled. (SQLite binds at most 32,766 values; 15 columns a contact.)
 */
const ROWS = 100;

const statements = new Map<string, PreparedQuery<never, number>>();
const skipping = new Map<string, PreparedQuery<{ id: string }, number>>();

/** `insert into table (columns) values (…), …` of `count` rows, each value a slot. */
function insertOf<T extends keyof Database & string>(
  kysely: Kysely<Database>,
  slot: Slot,
  table: T,
  columns: readonly string[],
  count: number,
) {
  return kysely
    .insertInto(table)
    .values(
      Array.from(
        { length: count },
        (_, r) => Object.fromEntries(columns.map((column, c) => [column, slot(r * columns.length + c)])) as never,
      ),
    );
}

/** The rows cut into statements' worth, each as its values in slot order. */
function* chunksOf(columns: readonly string[], rows: readonly Record<string, unknown>[]): Generator<[unknown[], number]> {
  for (let start = 0; start < rows.length; start += ROWS) {
    const chunk = rows.slice(start, start + ROWS);
    const values = new Array<unknown>(chunk.length * columns.length);
    chunk.forEach((row, r) => columns.forEach((column, c) => (values[r * columns.length + c] = row[column] ?? null)));
    yield [values, chunk.length];
  }
}

/**
 * Inserts rows, given as objects with these columns, in statements compiled once per table,
 * columns and row count (see PreparedQuery): Kysely building and compiling a multi-row insert
 * anew each time was a seventh of the server's CPU under batch upserts (`npm run bench:profile`,
 * batch-upsert). Values are bound, never spliced into the text.
 */
export async function insertRows<T extends keyof Database & string>(
  db: Kysely<Database>,
  table: T,
  columns: readonly string[],
  rows: readonly Record<string, unknown>[],
): Promise<void> {
  const name = `${table}(${columns.join(',')})`;
  let statement = statements.get(name);
  if (!statement) {
    statement = new PreparedQuery<never, number>((kysely, slot, count) => insertOf(kysely, slot, table, columns, count));
    statements.set(name, statement);
  }
  for (const [values, count] of chunksOf(columns, rows)) await statement.run(db, values, count);
}

/**
 * Inserts rows as insertRows does, except those a unique index refuses (`ON CONFLICT DO NOTHING`,
 * on both databases); returns the ids of the rows inserted. On PostgreSQL a row whose key another
 * transaction is inserting waits for it, then is skipped if that one committed: no unique
 * violation to abort the transaction, nothing to roll back.
 */
export async function insertRowsSkippingTaken<T extends keyof Database & string>(
  db: Kysely<Database>,
  table: T,
  columns: readonly string[],
  rows: readonly Record<string, unknown>[],
): Promise<Set<string>> {
  const name = `${table}(${columns.join(',')})`;
  let statement = skipping.get(name);
  if (!statement) {
    statement = new PreparedQuery<{ id: string }, number>((kysely, slot, count) =>
      insertOf(kysely, slot, table, columns, count)
        .onConflict((conflict) => conflict.doNothing())
        .returning(sql<string>`id`.as('id')),
    );
    skipping.set(name, statement);
  }
  const inserted = new Set<string>();
  for (const [values, count] of chunksOf(columns, rows)) {
    for (const row of await statement.execute(db, values, count)) inserted.add(row.id);
  }
  return inserted;
}
