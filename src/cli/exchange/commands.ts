import path from 'node:path';
import type { Config } from '../../config.js';
import type { CommandResult } from '../dataCommands.js';
import { required, type Options } from '../operatorError.js';
import { exportData } from './export.js';
import type { ExportManifest } from './format.js';
import { importData } from './import.js';

function rowsOf(manifest: ExportManifest): number {
  return Object.values(manifest.tables).reduce((sum, table) => sum + table.rows, 0);
}

function filesOf(manifest: ExportManifest): string {
  const { count, bytes, dropped } = manifest.files;
  return `${count} file(s), ${bytes} bytes${dropped.length ? ` (${dropped.length} deleted while it ran, left out)` : ''}`;
}

/** `orgdata export --to DIR`: the whole installation, for `orgdata import` (see export.ts). */
export async function exportCommand(config: Config, values: Options): Promise<CommandResult> {
  const dir = path.resolve(required(values, 'to'));
  const manifest = await exportData(config, dir, { kind: 'instance' });
  return {
    json: manifest,
    text:
      `exported ${rowsOf(manifest)} rows in ${Object.keys(manifest.tables).length} tables and ${filesOf(manifest)} to ${dir}. ` +
      'It holds every secret of the installation (key hashes, webhook secrets, sessions): keep it as safe as the data. ' +
      'Import it with `orgdata import --from DIR` and the same SECRET_KEY.',
  };
}

/** `orgdata org export --org ORG_ID --to DIR`: one organisation's data, without secrets, for its owner. */
export async function orgExportCommand(config: Config, values: Options): Promise<CommandResult> {
  const orgId = required(values, 'org');
  const dir = path.resolve(required(values, 'to'));
  const manifest = await exportData(config, dir, { kind: 'org', orgId });
  return {
    json: manifest,
    text: `exported organisation ${orgId}: ${rowsOf(manifest)} rows in ${Object.keys(manifest.tables).length} tables and ${filesOf(manifest)} to ${dir}`,
  };
}

/** `orgdata import --from DIR`: an instance export into this (empty) installation (see import.ts). */
export async function importCommand(config: Config, values: Options): Promise<CommandResult> {
  const dir = path.resolve(required(values, 'from'));
  const { manifest, rows, files } = await importData(config, dir);
  const where = config.databaseUrl ? 'PostgreSQL' : `SQLite in ${config.dataDir}`;
  return {
    json: { imported: { rows, files }, manifest },
    text:
      `imported ${rows} rows and ${files} file(s) from the export of ${manifest.created_at} (${manifest.source_dialect}, orgdata ${manifest.orgdata_version}) ` +
      `into ${where} with the ${config.blobStore} blob store; start the servers with the same SECRET_KEY`,
  };
}
