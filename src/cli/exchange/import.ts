import { createReadStream } from 'node:fs';
import { CompiledQuery } from 'kysely';
import type { Config } from '../../config.js';
import { migrateToLatest, openDatabase, type Db } from '../../db/database.js';
import { checkSecretFingerprint, secretFingerprint } from '../../db/secretFingerprint.js';
import { openBlobStore } from '../../infra/choose.js';
import type { BlobStore } from '../../domain/files/blobStore.js';
import { OperatorError } from '../operatorError.js';
import { blobFile, verifyExport, type ExportManifest } from './format.js';
import { checkRows } from './rowChecks.js';
import { columnShapes, dataTables, quoted, type ColumnShape, type Query } from './tables.js';
import { writeRows } from './writeRows.js';

export interface ImportSummary {
  manifest: ExportManifest;
  rows: number;
  files: number;
}

/**
 * `orgdata import --from DIR`: an instance export (see export.ts) into an empty installation,
 * on whichever database and blob store this configuration names. Everything that can refuse is
 * checked before the first row is written: the export's every byte, its scope, that SECRET_KEY is
 * the one the data goes with, that both sides have the same migrations, that the target holds no
 * data and its blob store answers, and every row of every table (rowChecks.ts). The rows are then
 * written in one transaction (writeRows.ts): what the database alone can refuse writes nothing
 * either.
 */
export async function importData(config: Config, dir: string): Promise<ImportSummary> {
  const manifest = await verifyExport(dir);
  if (manifest.scope !== 'instance') {
    throw new OperatorError(
      'export_scope',
      `${dir} is the export of one organisation (${manifest.org_id ?? '?'}), made for its owner to read: ` +
        '`orgdata import` takes an export of a whole installation (`orgdata export --to DIR`)',
    );
  }
  requireSameSecret(config, manifest);
  const db = openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolMode: config.databasePoolMode });
  try {
    await migrateToLatest(db);
    await checkSecretFingerprint(db.kysely, config.secretKey);
    const query = queryOf(db);
    await requireSameMigrations(query, manifest);
    await requireEmpty(db);
    const store = await openBlobStore(config);
    await requireEmptyStore(store);
    const tables = await dataTables(db.dialect, query);
    const shapes: Record<string, ColumnShape[]> = {};
    for (const [table, entry] of Object.entries(manifest.tables)) {
      if (!tables.includes(table)) throw new OperatorError('export_invalid', `the target has no table ${table}`);
      shapes[table] = await columnShapes(db.dialect, query, table);
      const columns = shapes[table].map((column) => column.name);
      if ([...columns].sort().join() !== [...entry.columns].sort().join()) {
        throw new OperatorError(
          'export_invalid',
          `table ${table}: the export's columns (${entry.columns.join(', ')}) are not the target's`,
        );
      }
    }
    // Two passes: every row checked, then every row written (in one transaction).
    await checkRows(dir, manifest, shapes);
    const rows = await writeRows(db.kysely, dir, manifest);
    await advanceSequences(db, query);
    // After the rows, outside any transaction: each blob is one request to a bucket.
    for (const entry of manifest.files.entries) {
      const staged = await store.stage(entry.key, createReadStream(blobFile(dir, entry.key)), entry.bytes);
      if (staged.sha256 !== entry.sha256) {
        await staged.discard();
        throw new OperatorError('import_failed', `file ${entry.key} changed while it was read (sha256 ${staged.sha256})`);
      }
      await staged.commit();
    }
    return { manifest, rows, files: manifest.files.entries.length };
  } finally {
    await db.close();
  }
}

function requireSameSecret(config: Config, manifest: ExportManifest): void {
  if (config.secretKey && secretFingerprint(config.secretKey) === manifest.secret_fingerprint) return;
  throw new OperatorError(
    'secret_key_mismatch',
    `${config.secretKey ? 'this SECRET_KEY is not the one the exported data goes with' : 'SECRET_KEY is not set'} ` +
      `(the export's fingerprint is ${manifest.secret_fingerprint ?? 'missing'}${config.secretKey ? `, this one's ${secretFingerprint(config.secretKey)}` : ''}). ` +
      'API keys are stored as hashes keyed with it, and cursors, signed links, sessions and webhook deliveries depend on it: ' +
      "with another secret none of them would work. Import with the source installation's SECRET_KEY (when it was not set there, " +
      'it was generated into its DATA_DIR/secret.key: SECRET_KEY="$(cat OLD_DATA_DIR/secret.key)"), and start the new servers with it. Nothing was written.',
  );
}

async function requireSameMigrations(query: Query, manifest: ExportManifest): Promise<void> {
  const target = (await query('select name from kysely_migration order by name')).map((row) => String(row.name));
  if (target.join() === manifest.migrations.join()) return;
  const newer = manifest.migrations.filter((name) => !target.includes(name));
  throw new OperatorError(
    'migrations_differ',
    newer.length > 0
      ? `the export was made by a newer orgdata (${manifest.orgdata_version}; migrations this one lacks: ${newer.join(', ')}): ` +
          'upgrade this orgdata to that version first, then import. Nothing was imported.'
      : `the export was made by an older orgdata (${manifest.orgdata_version}) whose database lacked migrations ` +
          `${target.filter((name) => !manifest.migrations.includes(name)).join(', ')}: upgrade the source first ` +
          '(install this version there and run `orgdata migrate`), export again, then import. Nothing was imported.',
  );
}

async function requireEmpty(db: Db): Promise<void> {
  for (const table of ['orgs', 'users'] as const) {
    const found = await db.kysely.selectFrom(table).select('id').limit(1).executeTakeFirst();
    if (found) {
      throw new OperatorError(
        'target_not_empty',
        `the target database already holds data (${table}): import only into a new, empty installation ` +
          '(a new DATA_DIR, or an empty PostgreSQL database). Nothing was written.',
      );
    }
  }
}

async function requireEmptyStore(store: BlobStore): Promise<void> {
  try {
    await store.probe?.(5000);
    if (!(await store.hasBlobs())) return;
  } catch (error) {
    throw new OperatorError(
      'storage_unavailable',
      `the target's blob store cannot be reached (${error instanceof Error ? error.message : String(error)}); check BLOB_STORE and S3_*. Nothing was written.`,
    );
  }
  throw new OperatorError(
    'target_not_empty',
    "the target's blob store already holds files: import only into an empty bucket (or DATA_DIR/files). Nothing was written.",
  );
}

/**
 * Columns numbered by a sequence (none today: every id is a text id) would hand out numbers
 * already imported; each sequence is set past the largest value imported.
 */
async function advanceSequences(db: Db, query: Query): Promise<void> {
  if (db.dialect !== 'postgres') return;
  const owned = await query(
    `select table_name, column_name, pg_get_serial_sequence(quote_ident(table_name), column_name) as sequence
     from information_schema.columns where table_schema = current_schema() and column_default like 'nextval(%'`,
  );
  for (const { table_name: table, column_name: column, sequence } of owned) {
    if (!sequence) continue;
    await query(`select setval($1, coalesce((select max(${quoted(String(column))}) from ${quoted(String(table))}), 0) + 1, false)`, [
      sequence,
    ]);
  }
}

function queryOf(db: Db): Query {
  return async (text, params = []) => (await db.kysely.executeQuery(CompiledQuery.raw(text, params))).rows as Record<string, unknown>[];
}
