import type { Kysely } from 'kysely';
import { PreparedQuery } from './preparedQuery.js';
import type { Database } from './schema.js';

/**
 * Rows an INSERT carries at most: a batch's hundred contacts, events or links go in one
 * statement; more are cut into statements of this many (the last one shorter), so few distinct
 * statements are ever compiled. (SQLite binds at most 32,766 values; 15 columns a contact.)
 */
const ROWS = 100;

const statements = new Map<string, PreparedQuery<never, number>>();

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
    statement = new PreparedQuery<never, number>((kysely, slot, count) =>
      kysely
        .insertInto(table)
        .values(
          Array.from(
            { length: count },
            (_, r) => Object.fromEntries(columns.map((column, c) => [column, slot(r * columns.length + c)])) as never,
          ),
        ),
    );
    statements.set(name, statement);
  }
  for (let start = 0; start < rows.length; start += ROWS) {
    const chunk = rows.slice(start, start + ROWS);
    const values = new Array<unknown>(chunk.length * columns.length);
    chunk.forEach((row, r) => columns.forEach((column, c) => (values[r * columns.length + c] = row[column] ?? null)));
    await statement.run(db, values, chunk.length);
  }
}
