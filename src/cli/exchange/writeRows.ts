import path from 'node:path';
import type { Kysely } from 'kysely';
import { isConnectionLost, isStatementTimeout } from '../../db/errors.js';
import type { Database } from '../../db/schema.js';
import { inTransaction } from '../../db/transaction.js';
import { OperatorError } from '../operatorError.js';
import { decodeValue, type ExportManifest, type TableEntry } from './format.js';
import { readRows } from './jsonLines.js';

/** Rows an insert round trip carries. */
const BATCH = 1000;

/**
 * The second pass of `orgdata import` (after rowChecks.ts read every row): the tables in
 * foreign-key order, all in ONE transaction, so that what the first pass cannot see (a row naming
 * another that is not there, an id twice) leaves the target as empty as it was, never with the
 * first tables written. The rows are still streamed a batch at a time: the database holds the
 * transaction, not this process. Returns the rows written.
 */
export async function writeRows(db: Kysely<Database>, dir: string, manifest: ExportManifest): Promise<number> {
  return inTransaction(db, async (trx) => {
    let rows = 0;
    for (const [table, entry] of Object.entries(manifest.tables))
      rows += await insertTable(trx, dir, table, entry, skipRow(table, manifest));
    return rows;
  });
}

/** Rows an import leaves out: files the export dropped (deleted while it ran). */
function skipRow(table: string, manifest: ExportManifest): (row: Record<string, unknown>) => boolean {
  if (table === 'files') {
    const dropped = new Set(manifest.files.dropped);
    return (row) => dropped.has(String(row.id));
  }
  return () => false;
}

async function insertTable(
  trx: Kysely<Database>,
  dir: string,
  table: string,
  entry: TableEntry,
  skip: (row: Record<string, unknown>) => boolean,
): Promise<number> {
  let batch: Record<string, unknown>[] = [];
  let lines: [number, number] = [0, 0];
  let count = 0;
  const flush = async () => {
    const rows = batch;
    batch = [];
    try {
      // The target recorded its SECRET_KEY's fingerprint when it was migrated: the same as the
      // export's (checked), whose row, as it was, takes its place.
      if (table === 'settings') {
        const names = rows.map((row) => String(row.name));
        if (names.length > 0) await trx.deleteFrom('settings').where('name', 'in', names).execute();
      }
      // The batch in one statement (values bound, at most 30,000 of them: SQLite's limit is
      // 32,766), not insertRows' statements of 100 rows, which the API's small writes want: a
      // round trip per 1,000 rows made the import into PostgreSQL 25 % faster (bench:exchange).
      const perStatement = Math.max(1, Math.floor(30_000 / entry.columns.length));
      for (let start = 0; start < rows.length; start += perStatement) {
        await trx
          .insertInto(table as keyof Database)
          .values(rows.slice(start, start + perStatement) as never)
          .execute();
      }
    } catch (error) {
      if (isConnectionLost(error) || isStatementTimeout(error)) throw error;
      throw new OperatorError(
        'import_failed',
        `${entry.file} lines ${lines[0]}–${lines[1]}: the target database refused them ` +
          `(${error instanceof Error ? error.message : String(error)}). Nothing was written.`,
      );
    }
    count += rows.length;
  };
  for await (const { line, row: stored } of readRows(path.join(dir, entry.file), entry.file)) {
    if (skip(stored)) continue;
    const row: Record<string, unknown> = {};
    for (const column of entry.columns) row[column] = decodeValue(stored[column]);
    if (batch.length === 0) lines = [line, line];
    lines[1] = line;
    batch.push(row);
    if (batch.length >= BATCH) await flush();
  }
  if (batch.length > 0) await flush();
  return count;
}
