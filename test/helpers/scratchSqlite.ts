import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Kysely } from 'kysely';
import { afterEach, beforeEach } from 'vitest';
import { migrateToLatest, openDatabase, type Db } from '../../src/db/database.js';
import type { Database } from '../../src/db/schema.js';

/**
 * A migrated SQLite database in a directory of its own for each test of the calling describe
 * (its beforeEach and afterEach are registered here), with two helpers on the orgs table: the
 * transaction tests' (test/sqliteTransactions*.test.ts) common ground.
 */
export function scratchSqlite(prefix: string) {
  let dir = '';
  let db: Db | undefined;
  beforeEach(async () => {
    dir = mkdtempSync(path.join(tmpdir(), prefix));
    db = openDatabase({ databaseUrl: null, dataDir: dir });
    await migrateToLatest(db);
  });
  afterEach(async () => {
    // A test may have closed it already.
    await db?.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  const scratch = {
    get db(): Db {
      return db!;
    },
    /** A test that reopens the database hands the new one here (closed after it as the first). */
    set db(opened: Db) {
      db = opened;
    },
    get dir(): string {
      return dir;
    },
    /** The organisations' names, in order. */
    names: async () => (await scratch.db.kysely.selectFrom('orgs').select('name').orderBy('name').execute()).map((row) => row.name),
    /** Adds an organisation named `name` through `trx`. */
    addOrg: (trx: Kysely<Database>, name: string) =>
      trx
        .insertInto('orgs')
        .values({ id: `org_${name}`, name, created_at: '2026-11-27T00:00:00.000Z' } as never)
        .execute(),
  };
  return scratch;
}
