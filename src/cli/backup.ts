import { createReadStream, existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, readdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import type { Config } from '../config.js';
import { version } from '../version.js';
import { hashFile, saveHashed } from './exchange/format.js';
import { OperatorError } from './operatorError.js';
import { RestoreTrail } from './restoreTrail.js';

/**
 * `orgdata backup --to DIR` and `orgdata restore --from DIR` (issue 19): a consistent copy of a
 * SQLite installation taken while the server runs, and its return into an empty DATA_DIR.
 *
 * The database is copied with SQLite's online backup API, page by page from one read snapshot:
 * never the file (with WAL, the file alone misses what the -wal holds), and not VACUUM INTO (it
 * renumbers the rowids of tables without an INTEGER PRIMARY KEY, which the contacts' full-text
 * index refers to). File bytes are copied after the snapshot, each checked against the sha256 its
 * row records; a file deleted between the snapshot and its copy is dropped from the copy (as if
 * deleted a moment earlier). A manifest, written last, names the version, the migrations, the rows
 * of every table and the sha256 of every file: a directory without one is not a backup.
 */

export const MANIFEST = 'manifest.json';
const DATABASE = 'orgdata.sqlite';
/** Blob keys as the local store makes them (see LocalBlobStore): nothing that climbs out of a directory. */
const BLOB_KEY = /^[A-Za-z0-9_]+(\/[A-Za-z0-9_]+)*$/;

export interface BackupManifest {
  format: 'orgdata-backup';
  format_version: 1;
  orgdata_version: string;
  created_at: string;
  database: { file: string; bytes: number; sha256: string; migrations: string[]; tables: Record<string, number> };
  files: {
    /** `local`: the bytes are in files/ here; `s3`: they stayed in the bucket. */
    store: 'local' | 's3';
    count: number;
    bytes: number;
    entries: { key: string; bytes: number; sha256: string }[];
    /** Files deleted while the backup ran: their rows are left out of the copy. */
    dropped: string[];
  };
  /** Whether DATA_DIR/secret.key is in the backup (SECRET_KEY unset); else restore needs SECRET_KEY as it was. */
  secret_key: 'included' | 'not_included';
}

async function isEmptyDir(dir: string): Promise<boolean> {
  if (!existsSync(dir)) return true;
  return (await readdir(dir)).length === 0;
}

function notOnPostgres(config: Config, what: 'backup' | 'restore'): void {
  if (!config.databaseUrl) return;
  throw new OperatorError(
    'not_supported',
    `orgdata ${what} copies a SQLite installation; this one uses PostgreSQL (DATABASE_URL). Back it up with PostgreSQL's own tools: ` +
      '`pg_dump --format=custom --file=orgdata.dump "$DATABASE_URL"` while it runs, and `pg_restore --dbname="$DATABASE_URL" orgdata.dump` ' +
      'into an empty database; keep versioning on in the S3 bucket (the file bytes) and keep SECRET_KEY. See docs/operations.md, "Back up and restore".',
  );
}

/** Rows of every table of a SQLite database but the full-text index's own. */
function tableCounts(db: SQLite.Database): Record<string, number> {
  const tables = db
    .prepare(
      `select name from sqlite_master where type = 'table' and name not like 'sqlite_%' and name not like 'contacts_fts%' order by name`,
    )
    .all() as { name: string }[];
  return Object.fromEntries(
    tables.map(({ name }) => [name, (db.prepare(`select count(*) as n from "${name.replace(/"/g, '""')}"`).get() as { n: number }).n]),
  );
}

export async function backup(config: Config, dir: string): Promise<BackupManifest> {
  notOnPostgres(config, 'backup');
  const source = path.join(config.dataDir, DATABASE);
  if (!existsSync(source)) throw new OperatorError('not_found', `there is no database at ${source}: is DATA_DIR the server's?`);
  if (!(await isEmptyDir(dir))) throw new OperatorError('target_not_empty', `${dir} is not empty: back up into a new directory`);
  await mkdir(dir, { recursive: true });
  await chmod(dir, 0o700); // an empty folder the operator made may be open to others
  const copy = path.join(dir, DATABASE);

  const live = new SQLite(source, { readonly: true, fileMustExist: true });
  live.pragma('busy_timeout = 5000');
  try {
    // After the first step, all the remaining pages in one step: a writer in another process
    // restarts a backup between steps, so a step-by-step copy under constant writes might never end.
    await live.backup(copy, { progress: () => 1_000_000_000 });
  } catch (error) {
    live.close();
    throw error;
  }

  const db = new SQLite(copy);
  const dropped: string[] = [];
  const entries: BackupManifest['files']['entries'] = [];
  try {
    db.pragma('journal_mode = DELETE'); // one file, no -wal beside it
    if (config.blobStore === 'local') {
      const rows = db.prepare(`select id, storage_key, sha256 from files where storage_key is not null order by id`).all() as {
        id: string;
        storage_key: string;
        sha256: string | null;
      }[];
      for (const row of rows) {
        if (!BLOB_KEY.test(row.storage_key)) throw new OperatorError('backup_failed', `file ${row.id} has an invalid storage key`);
        const from = path.join(config.dataDir, 'files', 'blobs', row.storage_key);
        if (!existsSync(from)) {
          // Deleted (and purged) after the snapshot: the copy forgets it too. Still there: its
          // bytes are lost, which a backup must not hide.
          if (live.prepare('select 1 from files where id = ?').get(row.id)) {
            throw new OperatorError('backup_failed', `file ${row.id}: its bytes are missing from the store (${from})`);
          }
          db.prepare('delete from files where id = ?').run(row.id);
          dropped.push(row.id);
          continue;
        }
        const copied = await saveHashed(createReadStream(from), path.join(dir, 'files', 'blobs', row.storage_key));
        if (row.sha256 && copied.sha256 !== row.sha256) {
          throw new OperatorError('backup_failed', `file ${row.id}: its bytes do not match the sha256 recorded at upload (${from})`);
        }
        entries.push({ key: row.storage_key, ...copied });
      }
    }
    const migrations = (db.prepare('select name from kysely_migration order by name').all() as { name: string }[]).map((r) => r.name);
    const tables = tableCounts(db);
    db.close();
    const database = { file: DATABASE, ...(await hashFile(copy)), migrations, tables };
    const secretFile = path.join(config.dataDir, 'secret.key');
    const secretIncluded = !config.secretKeyGiven && existsSync(secretFile);
    if (secretIncluded) {
      await copyFile(secretFile, path.join(dir, 'secret.key'));
      await chmod(path.join(dir, 'secret.key'), 0o600); // copyFile keeps the source's mode
    }
    const manifest: BackupManifest = {
      format: 'orgdata-backup',
      format_version: 1,
      orgdata_version: version(),
      created_at: new Date().toISOString(),
      database,
      files: {
        store: config.blobStore,
        count: entries.length,
        bytes: entries.reduce((sum, e) => sum + e.bytes, 0),
        entries,
        dropped,
      },
      secret_key: secretIncluded ? 'included' : 'not_included',
    };
    // Last, and whole or not at all: a directory without a manifest is an unfinished backup.
    await writeFile(path.join(dir, `${MANIFEST}.tmp`), JSON.stringify(manifest, null, 2) + '\n', { mode: 0o600 });
    await rename(path.join(dir, `${MANIFEST}.tmp`), path.join(dir, MANIFEST));
    return manifest;
  } finally {
    if (db.open) db.close();
    live.close();
  }
}

/** Reads and checks a backup's manifest and every byte it names; the manifest when all is as recorded. */
export async function verifyBackup(dir: string): Promise<BackupManifest> {
  let manifest: BackupManifest;
  try {
    manifest = JSON.parse(await readFile(path.join(dir, MANIFEST), 'utf8')) as BackupManifest;
  } catch {
    throw new OperatorError('backup_invalid', `${dir} has no readable ${MANIFEST}: not a backup, or one that did not finish`);
  }
  if (manifest.format !== 'orgdata-backup' || manifest.format_version !== 1) {
    throw new OperatorError('backup_invalid', `${dir}/${MANIFEST} is not an orgdata backup manifest this version reads`);
  }
  const check = async (file: string, expected: { bytes: number; sha256: string }, what: string) => {
    const found = existsSync(file) ? await hashFile(file) : null;
    if (!found || found.sha256 !== expected.sha256 || found.bytes !== expected.bytes) {
      throw new OperatorError('backup_invalid', `${what} ${found ? 'differs from' : 'is missing, unlike'} the manifest (${file})`);
    }
  };
  await check(path.join(dir, DATABASE), manifest.database, 'the database');
  for (const entry of manifest.files.entries) {
    if (!BLOB_KEY.test(entry.key)) throw new OperatorError('backup_invalid', `the manifest names an invalid file key ${entry.key}`);
    await check(path.join(dir, 'files', 'blobs', entry.key), entry, `file ${entry.key}`);
  }
  return manifest;
}

export async function restore(config: Config, dir: string): Promise<BackupManifest> {
  notOnPostgres(config, 'restore');
  const manifest = await verifyBackup(dir);
  if (!(await isEmptyDir(config.dataDir))) {
    throw new OperatorError('target_not_empty', `DATA_DIR (${config.dataDir}) is not empty: restore into a new, empty directory`);
  }
  if (manifest.secret_key === 'not_included' && !config.secretKeyGiven) {
    throw new OperatorError(
      'secret_key_required',
      'this backup does not hold the secret key: set SECRET_KEY (or SECRET_KEY_FILE) as the server had it',
    );
  }
  const trail = new RestoreTrail();
  try {
    await trail.folder(config.dataDir);
    const target = path.join(config.dataDir, DATABASE);
    const restoring = `${target}.restoring`;
    // SQLite's own files beside the copy, should the check below leave any.
    for (const suffix of ['-journal', '-wal', '-shm']) trail.file(`${restoring}${suffix}`);
    await trail.copy(path.join(dir, DATABASE), restoring);
    for (const entry of manifest.files.entries) {
      const to = path.join(config.dataDir, 'files', 'blobs', entry.key);
      await trail.folder(path.dirname(to));
      await trail.copy(path.join(dir, 'files', 'blobs', entry.key), to);
    }
    if (manifest.secret_key === 'included') await trail.copy(path.join(dir, 'secret.key'), path.join(config.dataDir, 'secret.key'));
    const db = new SQLite(restoring);
    try {
      const problems = db.pragma('quick_check', { simple: true });
      if (problems !== 'ok') throw new OperatorError('backup_invalid', `the database copy fails SQLite's check: ${String(problems)}`);
      const tables = tableCounts(db);
      for (const [name, rows] of Object.entries(manifest.database.tables)) {
        if (tables[name] !== rows)
          throw new OperatorError('backup_invalid', `table ${name} has ${tables[name]} rows, the manifest ${rows}`);
      }
      db.pragma('journal_mode = WAL');
    } finally {
      db.close();
    }
    await rename(restoring, trail.file(target));
    await stat(target);
    return manifest;
  } catch (error) {
    // Nothing half-restored is left to be served, and nothing restore did not write is removed.
    await trail.undo();
    throw error;
  }
}
