import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, type WriteStream } from 'node:fs';
import { mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { once } from 'node:events';
import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { OperatorError } from '../operatorError.js';

/**
 * The export format of `orgdata export` and `orgdata org export` (issue 19): a directory with
 * `tables/<table>.jsonl` (one row a line, every stored column), `files/<storage_key>` (the bytes
 * of each file) and `manifest.json`, written last: a directory without one is not an export.
 * Neutral between the databases: values are JSON strings, numbers and nulls; bytes (no column
 * holds any today) would be `{"$base64": "…"}` and booleans 1 or 0, as SQLite keeps them.
 */

export const FORMAT = 'orgdata-export';
export const FORMAT_VERSION = 1;
export const MANIFEST = 'manifest.json';

export interface TableEntry {
  file: string;
  columns: string[];
  rows: number;
  bytes: number;
  sha256: string;
}

export interface BlobEntry {
  key: string;
  bytes: number;
  sha256: string;
}

export interface ExportManifest {
  format: typeof FORMAT;
  format_version: typeof FORMAT_VERSION;
  /** `instance`: the whole installation, for `orgdata import`; `org`: one organisation's data, for its owner. */
  scope: 'instance' | 'org';
  org_id?: string;
  /**
   * Org scope: the organisation's two modes (SANDBOX.md, "an org export holds both, marked"). Every
   * row whose org_id (an org row's id) is `test` is test-mode data, its sandbox's (ids begin
   * `sbx_`); `test` is null when the organisation has no sandbox.
   */
  modes?: { live: string; test: string | null };
  orgdata_version: string;
  created_at: string;
  source_dialect: 'sqlite' | 'postgres';
  migrations: string[];
  /** The fingerprint of the SECRET_KEY the data goes with (instance scope only; see db/secretFingerprint.ts). */
  secret_fingerprint?: string;
  /** In the order an import inserts them (foreign keys first). */
  tables: Record<string, TableEntry>;
  files: {
    count: number;
    bytes: number;
    entries: BlobEntry[];
    /** Files deleted between the snapshot and the copy of their bytes: an import leaves their rows out. */
    dropped: string[];
  };
}

/** Blob keys as the server makes them (`{org_id}/{file_id}`): nothing that climbs out of a directory. */
export const BLOB_KEY = /^[A-Za-z0-9_]+(\/[A-Za-z0-9_]+)*$/;

export function tableFile(table: string): string {
  return `tables/${table}.jsonl`;
}

export function blobFile(dir: string, key: string): string {
  if (!BLOB_KEY.test(key)) throw new OperatorError('export_invalid', `invalid file key ${JSON.stringify(key)}`);
  return path.join(dir, 'files', key);
}

/** One value as the format keeps it. */
export function encodeValue(value: unknown): unknown {
  if (Buffer.isBuffer(value) || value instanceof Uint8Array) return { $base64: Buffer.from(value).toString('base64') };
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
  return value;
}

export function decodeValue(value: unknown): unknown {
  if (value !== null && typeof value === 'object' && '$base64' in value) return Buffer.from(String(value.$base64), 'base64');
  return value;
}

/** A JSON-lines file written with backpressure, its length and sha256 counted on the way. */
export class LinesWriter {
  private readonly hash = createHash('sha256');
  private readonly out: WriteStream;
  bytes = 0;
  rows = 0;

  constructor(file: string) {
    this.out = createWriteStream(file, { flags: 'wx', mode: 0o600 });
  }

  async write(row: Record<string, unknown>): Promise<void> {
    const line = Buffer.from(JSON.stringify(row) + '\n');
    this.hash.update(line);
    this.bytes += line.length;
    this.rows++;
    if (!this.out.write(line)) await once(this.out, 'drain');
  }

  async close(): Promise<{ bytes: number; rows: number; sha256: string }> {
    this.out.end();
    await once(this.out, 'finish');
    return { bytes: this.bytes, rows: this.rows, sha256: this.hash.digest('hex') };
  }
}

/** Writes `source` to a new file `target` (never over one), returning its length and sha256. */
export async function saveHashed(source: NodeJS.ReadableStream, target: string): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      bytes += chunk.length;
      done(null, chunk);
    },
  });
  await mkdir(path.dirname(target), { recursive: true });
  await pipeline(source, meter, createWriteStream(target, { flags: 'wx', mode: 0o600 }));
  return { bytes, sha256: hash.digest('hex') };
}

export async function hashFile(file: string): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of createReadStream(file)) {
    hash.update(chunk as Buffer);
    bytes += (chunk as Buffer).length;
  }
  return { bytes, sha256: hash.digest('hex') };
}

/** A new export directory: absent or empty, never one that holds anything already. */
export async function prepareExportDir(dir: string): Promise<void> {
  if (existsSync(dir) && (await readdir(dir)).length > 0) {
    throw new OperatorError('target_not_empty', `${dir} is not empty: export into a new directory`);
  }
  await mkdir(path.join(dir, 'tables'), { recursive: true });
}

/** Last, and whole or not at all. */
export async function writeManifest(dir: string, manifest: ExportManifest): Promise<void> {
  await writeFile(path.join(dir, `${MANIFEST}.tmp`), JSON.stringify(manifest, null, 2) + '\n', { mode: 0o600 });
  await rename(path.join(dir, `${MANIFEST}.tmp`), path.join(dir, MANIFEST));
}

/** Reads an export's manifest and checks every byte it names against it; the manifest when all is as recorded. */
export async function verifyExport(dir: string): Promise<ExportManifest> {
  let manifest: ExportManifest;
  try {
    manifest = JSON.parse(await readFile(path.join(dir, MANIFEST), 'utf8')) as ExportManifest;
  } catch {
    throw new OperatorError(
      'export_invalid',
      `${dir} has no readable ${MANIFEST}: it is not an orgdata export, or its export did not finish (the manifest is written last)`,
    );
  }
  if (manifest.format !== FORMAT || manifest.format_version !== FORMAT_VERSION) {
    throw new OperatorError('export_invalid', `${dir}/${MANIFEST} is not an orgdata export manifest this version reads`);
  }
  const check = async (file: string, expected: { bytes: number; sha256: string }, what: string) => {
    const found = existsSync(file) ? await hashFile(file) : null;
    if (!found || found.sha256 !== expected.sha256 || found.bytes !== expected.bytes) {
      throw new OperatorError(
        'export_invalid',
        `${what} ${found ? 'differs from its checksum in' : 'is missing, unlike'} the manifest (${file}): the export is damaged; export again`,
      );
    }
  };
  for (const [table, entry] of Object.entries(manifest.tables)) {
    if (entry.file !== tableFile(table)) throw new OperatorError('export_invalid', `the manifest names an invalid file for ${table}`);
    await check(path.join(dir, entry.file), entry, `table ${table}`);
  }
  for (const entry of manifest.files.entries) await check(blobFile(dir, entry.key), entry, `file ${entry.key}`);
  return manifest;
}
