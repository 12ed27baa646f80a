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
const statementsByList = new WeakMap<readonly string[], Map<string, PreparedQuery<never, number>>>();
const skippingByList = new WeakMap<readonly string[], Map<string, PreparedQuery<{ id: string }, number>>>();

/**
 * The statement of `table` and `columns`, found by the columns list itself (callers pass
 * constants: no joining of the names and hashing of the text per insert, which a create did four
 * times), else by its name, else made.
 */
function statementFor<S>(
  byList: WeakMap<readonly string[], Map<string, S>>,
  byName: Map<string, S>,
  table: string,
  columns: readonly string[],
  make: () => S,
): S {
  let tables = byList.get(columns);
  if (!tables) byList.set(columns, (tables = new Map()));
  let statement = tables.get(table);
  if (!statement) {
    const name = `${table}(${columns.join(',')})`;
    statement = byName.get(name) ?? make();
    byName.set(name, statement);
    tables.set(table, statement);
  }
  return statement;
}

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

type ValuesOf = (rows: readonly Record<string, unknown>[], start: number, end: number) => unknown[];
const valuesOfList = new WeakMap<readonly string[], ValuesOf>();

/**
 * The values of rows `start` to `end` (one statement's worth) in slot order, read by a function
 * written for `columns` (once per list): each column read by its name at a site of its own, which
 * sees one kind of row. A loop reading `row[columns[c]]` was one site for every table and column,
 * where V8 looked each name up the slow way (megamorphic: about 2,600 instructions a create; issue
 * 46). The names are our constants (the *_COLUMNS lists), quoted as JSON: no input reaches the code.
 */
function valuesOf(columns: readonly string[], rows: readonly Record<string, unknown>[], start: number, end: number): unknown[] {
  let read = valuesOfList.get(columns);
  if (!read) {
    const reads = columns.map((column) => `values[i++] = row[${JSON.stringify(column)}] ?? null;`).join(' ');
    read = new Function(
      'rows',
      'start',
      'end',
      `const values = new Array((end - start) * ${columns.length}); let i = 0; for (let r = start; r < end; r++) { const row = rows[r]; ${reads} } return values;`,
    ) as ValuesOf;
    valuesOfList.set(columns, read);
  }
  return read(rows, start, end);
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
  if (rows.length === 0) return;
  const statement = statementFor(
    statementsByList,
    statements,
    table,
    columns,
    () => new PreparedQuery<never, number>((kysely, slot, count) => insertOf(kysely, slot, table, columns, count)),
  );
  for (let start = 0; start < rows.length; start += ROWS) {
    const end = Math.min(rows.length, start + ROWS);
    await statement.run(db, valuesOf(columns, rows, start, end), end - start);
  }
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
  if (rows.length === 0) return new Set();
  const statement = statementFor(
    skippingByList,
    skipping,
    table,
    columns,
    () =>
      new PreparedQuery<{ id: string }, number>((kysely, slot, count) =>
        insertOf(kysely, slot, table, columns, count)
          .onConflict((conflict) => conflict.doNothing())
          .returning(sql<string>`id`.as('id')),
      ),
  );
  const inserted = new Set<string>();
  for (let start = 0; start < rows.length; start += ROWS) {
    const end = Math.min(rows.length, start + ROWS);
    const made = await statement.execute(db, valuesOf(columns, rows, start, end), end - start);
    for (let i = 0; i < made.length; i++) inserted.add(made[i]!.id);
  }
  return inserted;
}
