import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { MIGRATION_NAMES, migrateToLatest, migrator, openDatabase, type Db } from '../src/db/database.js';
import { DIALECTS, freshDatabase, type Dialect } from './helpers/harness.js';
import { FIXTURES, newFixture } from './helpers/migrationFixtures.js';
import { checkUpgraded } from './helpers/upgradeChecks.js';

// Issue 19, item 6: a database at every earlier migration, with data in it as it was shaped then,
// upgraded to the latest and read back through today's domain functions. The last migration's
// round upgrades nothing; it proves the latest fixture fits today's tables, so the next migration
// starts from one. A migration without a fixture fails its round by name.

/** An empty database, no migration applied: a SQLite file in a directory of its own, or a PostgreSQL schema. */
async function emptyDatabase(dialect: Dialect): Promise<Db> {
  if (dialect === 'postgres') return freshDatabase(dialect, undefined, { migrate: false });
  const dataDir = mkdtempSync(path.join(tmpdir(), 'orgdata-upgrade-'));
  const db = openDatabase({ databaseUrl: null, dataDir });
  return {
    ...db,
    close: async () => {
      await db.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function migrateTo(db: Db, name: string): Promise<void> {
  const { error } = await migrator(db).migrateTo(name);
  if (error) throw error;
}

/** The tables of the database (not Kysely's, not the search index's) without a row. */
async function emptyTables(db: Db): Promise<string[]> {
  // On PostgreSQL the catalog of this schema alone: Kysely's introspector reads every schema's
  // tables, and another test dropping its schema meanwhile failed it (as it did the migrator,
  // src/db/database.ts ownTables).
  const all =
    db.dialect === 'postgres'
      ? (
          await sql<{ name: string }>`select c.relname as name from pg_catalog.pg_class c
            join pg_catalog.pg_namespace n on n.oid = c.relnamespace
            where n.nspname = ${db.pgSchema} and c.relkind in ('r', 'p')`.execute(db.kysely)
        ).rows.map((row) => row.name)
      : (await db.kysely.introspection.getTables()).filter((t) => !t.isView).map((t) => t.name);
  const names = all.filter((name) => !name.startsWith('kysely_') && !name.startsWith('contacts_fts'));
  const empty: string[] = [];
  for (const name of names) {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- any table of the database
    const row = await (db.kysely as any)
      .selectFrom(name)
      .select(sql`1`.as('one'))
      .limit(1)
      .executeTakeFirst();
    if (!row) empty.push(name);
  }
  return empty.sort();
}

describe('upgrade fixtures', () => {
  it('cover every migration, in order', () => {
    expect(Object.keys(FIXTURES)).toEqual(MIGRATION_NAMES);
  });
});

describe.each(DIALECTS)('upgrade on %s', (dialect) => {
  it.concurrent.each(MIGRATION_NAMES.map((name, i) => [name, i] as const))(
    'from %s to the latest, with data in every table',
    async (name, i) => {
      const applied = MIGRATION_NAMES.slice(0, i + 1);
      const missing = applied.filter((migration) => !(migration in FIXTURES));
      if (missing.length > 0) throw new Error(`no fixture for ${missing.join(', ')} in test/helpers/migrationFixtures.ts`);
      const db = await emptyDatabase(dialect);
      try {
        await migrateTo(db, name);
        const fixture = newFixture(db.kysely, applied);
        for (const migration of applied) await FIXTURES[migration]!(fixture);
        expect(await emptyTables(db), 'tables the fixtures left empty').toEqual([]);
        const ran = await migrateToLatest(db);
        expect(ran).toEqual(MIGRATION_NAMES.slice(i + 1));
        await checkUpgraded(db, fixture.seed);
      } finally {
        await db.close();
      }
    },
    60_000,
  );
});
