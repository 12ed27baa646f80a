import { sql } from 'kysely';
import { ConfigError, type Config } from '../config.js';
import { migrateToLatest, openDatabase, type Db } from '../db/database.js';
import { checkSecretFingerprint } from '../db/secretFingerprint.js';
import { openRevocationGuard } from '../infra/choose.js';

/**
 * Opens the existing database for a command (never creating one: see openDatabase's mustExist),
 * applies pending migrations and checks SECRET_KEY against the data's (checkSecretFingerprint).
 */
export async function withDb<T>(config: Config, run: (db: Db) => Promise<T>): Promise<T> {
  const db = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMode: config.databasePoolMode, mustExist: true });
  // Servers over PostgreSQL cache verified keys and hear of revocations through Redis (REDIS_URL)
  // or PostgreSQL's NOTIFY: a revocation made here is published there too (on SQLite they see
  // the file change).
  // A revocation that could not be published commits all the same; the operator is told.
  const unpublished: string[] = [];
  const onUnpublished = (error: unknown) => unpublished.push(error instanceof Error ? error.message : String(error));
  const feed = db.dialect === 'postgres' ? await openRevocationGuard(config, db, { listen: false, onUnpublished }) : null;
  try {
    if (db.dialect === 'postgres') await requireTables(db);
    await migrateToLatest(db);
    await checkSecretFingerprint(db.kysely, config.secretKey);
    return await run(db);
  } finally {
    await feed?.close?.();
    await db.close();
    if (unpublished.length > 0) {
      process.stderr.write(
        `orgdata: warning: the revocation is saved, but could not be published through Redis (${unpublished[0]}). ` +
          'Servers that cannot reach Redis do not use their key cache; one that still reaches it may accept the key for up to 60 s.\n',
      );
    }
  }
}

/** A PostgreSQL database the server has never used has no tables: the command is pointed at the wrong one. */
async function requireTables(db: Db): Promise<void> {
  const { rows } = await sql<{ found: string | null }>`select to_regclass('kysely_migration')::text as found`.execute(db.kysely);
  if (!rows[0]?.found) {
    throw new ConfigError(
      'DATABASE_URL',
      'that database has no orgdata tables. Point DATABASE_URL at the database the server uses, or run `orgdata migrate` (or start the server) to create them.',
    );
  }
}
