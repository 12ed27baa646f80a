import Database from 'better-sqlite3';

/** One run of a statement: its SQL, the values bound, the method and the database it ran on. */
export interface StatementCall {
  sql: string;
  values: unknown[];
  method: 'run' | 'get' | 'all';
  db: Database.Database;
}

/**
 * Reports every statement better-sqlite3 prepares from now on to `onCall` each time it runs (`run`,
 * `get`, `all`), values and all, for the floors and the ladder (bench/floor.ts, floorWrites.ts,
 * ladderServer.ts) to record what the app runs. Returns the undo: statements prepared after it run
 * as better-sqlite3 has them (a measured connection must be opened after it).
 */
export function recordStatements(onCall: (call: StatementCall) => void): () => void {
  const prepare = Database.prototype.prepare;
  Database.prototype.prepare = function (this: Database.Database, sql: string) {
    const statement = prepare.call(this, sql) as Database.Statement;
    for (const method of ['run', 'get', 'all'] as const) {
      const original = (statement[method] as (...args: unknown[]) => unknown).bind(statement);
      Object.assign(statement, {
        [method]: (...values: unknown[]) => {
          onCall({ sql, method, db: this, values: values.length === 1 && Array.isArray(values[0]) ? (values[0] as unknown[]) : values });
          return original(...values);
        },
      });
    }
    return statement;
  } as typeof prepare;
  return () => {
    Database.prototype.prepare = prepare;
  };
}
