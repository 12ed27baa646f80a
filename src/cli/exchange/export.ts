import path from 'node:path';
import type { Config } from '../../config.js';
import type { Db } from '../../db/database.js';
import { secretFingerprint } from '../../db/secretFingerprint.js';
import { openBlobStore } from '../../infra/choose.js';
import type { BlobStore } from '../../domain/files/blobStore.js';
import { version } from '../../version.js';
import { OperatorError } from '../operatorError.js';
import { withDb } from '../withDb.js';
import {
  blobFile,
  encodeValue,
  FORMAT,
  FORMAT_VERSION,
  LinesWriter,
  prepareExportDir,
  saveHashed,
  tableFile,
  writeManifest,
  type BlobEntry,
  type ExportManifest,
  type TableEntry,
} from './format.js';
import { readRows } from './jsonLines.js';
import { openSnapshot, type Snapshot } from './snapshot.js';
import { dataTables, storedColumns, TABLES } from './tables.js';

export type ExportScope = { kind: 'instance' } | { kind: 'org'; orgId: string };

/**
 * `orgdata export --to DIR` (the whole installation, for `orgdata import`) and `orgdata org
 * export --org ORG_ID --to DIR` (one organisation's data without any secret, for its owner).
 * The rows come from one snapshot; the file bytes are read afterwards, outside any transaction
 * (a bucket that stalls must not hold the database), each checked against the sha256 its row
 * records. A file deleted in between is listed as dropped and its row left out by an import.
 */
export async function exportData(config: Config, dir: string, scope: ExportScope): Promise<ExportManifest> {
  // withDb: the database exists, is migrated, and goes with this SECRET_KEY (else nothing is written).
  return withDb(config, async (db) => {
    await prepareExportDir(dir);
    const snapshot = await openSnapshot(config);
    let tables: Record<string, TableEntry>;
    let migrations: string[];
    let modes: ExportManifest['modes'];
    try {
      // An organisation's export holds both its modes (SANDBOX.md): its live data and its sandbox's.
      const orgIds = scope.kind === 'org' ? await orgIdsOf(snapshot, scope.orgId) : [];
      if (scope.kind === 'org') modes = { live: scope.orgId, test: orgIds[1] ?? null };
      tables = await writeTables(snapshot, dir, scope, orgIds);
      migrations = (await snapshot.query('select name from kysely_migration order by name')).map((row) => String(row.name));
    } finally {
      await snapshot.close();
    }
    const store = await openBlobStore(config);
    const files = await copyBlobs(db, store, dir, tables.files);
    const manifest: ExportManifest = {
      format: FORMAT,
      format_version: FORMAT_VERSION,
      scope: scope.kind,
      ...(scope.kind === 'org' ? { org_id: scope.orgId, modes } : {}),
      orgdata_version: version(),
      created_at: new Date().toISOString(),
      source_dialect: db.dialect,
      migrations,
      ...(scope.kind === 'instance' ? { secret_fingerprint: secretFingerprint(config.secretKey) } : {}),
      tables,
      files,
    };
    await writeManifest(dir, manifest);
    return manifest;
  });
}

/** The organisation's id and, when it has one, its sandbox's (test mode): [live] or [live, sandbox]. */
async function orgIdsOf(snapshot: Snapshot, orgId: string): Promise<string[]> {
  const p = snapshot.dialect === 'sqlite' ? '?' : '$1';
  const found = await snapshot.query(`select id from orgs where id = ${p} and live_org_id is null`, [orgId]);
  if (found.length === 0) throw new OperatorError('not_found', `there is no organisation ${orgId} (see \`orgdata org list\`)`);
  const sandbox = await snapshot.query(`select id from orgs where live_org_id = ${p}`, [orgId]);
  return sandbox[0] ? [orgId, String(sandbox[0].id)] : [orgId];
}

async function writeTables(snapshot: Snapshot, dir: string, scope: ExportScope, orgIds: string[]): Promise<Record<string, TableEntry>> {
  const tables: Record<string, TableEntry> = {};
  for (const name of await dataTables(snapshot.dialect, snapshot.query)) {
    const orgColumn = TABLES.find((table) => table.name === name)!.orgColumn;
    if (scope.kind === 'org' && !orgColumn) continue;
    const columns = await storedColumns(snapshot.dialect, snapshot.query, name);
    const writer = new LinesWriter(path.join(dir, tableFile(name)));
    try {
      for await (const row of snapshot.rows(name, columns, scope.kind === 'org' ? [orgColumn!, orgIds] : undefined)) {
        const line: Record<string, unknown> = {};
        for (const column of columns) line[column] = encodeValue(row[column]);
        await writer.write(line);
      }
    } finally {
      tables[name] = { file: tableFile(name), columns, ...(await writer.close()) };
    }
  }
  return tables;
}

/** Copies the bytes of every file the exported rows name, reading those rows back from the export. */
async function copyBlobs(db: Db, store: BlobStore, dir: string, files: TableEntry | undefined): Promise<ExportManifest['files']> {
  const entries: BlobEntry[] = [];
  const dropped: string[] = [];
  if (files) {
    for await (const { row } of readRows(path.join(dir, files.file), files.file)) {
      const key = row.storage_key;
      if (typeof key !== 'string') continue; // never uploaded: no bytes
      const blob = await store.get(key);
      if (!blob) {
        // Deleted (and purged) after the snapshot: the export forgets it too. Still there: its
        // bytes are lost, which an export must not hide.
        const live = await db.kysely.selectFrom('files').select('id').where('id', '=', String(row.id)).executeTakeFirst();
        if (live) throw new OperatorError('export_failed', `file ${String(row.id)}: its bytes are missing from the blob store (${key})`);
        dropped.push(String(row.id));
        continue;
      }
      const copied = await saveHashed(blob.stream, blobFile(dir, key));
      if (copied.sha256 !== row.sha256 || copied.bytes !== row.size) {
        throw new OperatorError(
          'export_failed',
          `file ${String(row.id)}: the bytes in the blob store (${copied.bytes} bytes, sha256 ${copied.sha256}) ` +
            `are not those recorded at upload (${String(row.size)} bytes, sha256 ${String(row.sha256)})`,
        );
      }
      entries.push({ key, ...copied });
    }
  }
  return { count: entries.length, bytes: entries.reduce((sum, e) => sum + e.bytes, 0), entries, dropped };
}
