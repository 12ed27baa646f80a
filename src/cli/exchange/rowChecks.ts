import path from 'node:path';
import { OperatorError } from '../operatorError.js';
import { FIELD_RULES, type FieldRule } from './fieldRules.js';
import type { ExportManifest, TableEntry } from './format.js';
import { readRows } from './jsonLines.js';
import type { ColumnShape } from './tables.js';

/**
 * The first pass of `orgdata import`, before it writes anything: every line of every table file
 * is read (one at a time: an export may be larger than memory) and must be a JSON object with
 * exactly the table's columns, each value of the column's type, no null in a NOT NULL column, and
 * fields within the API's limits (fieldRules.ts). The checksums prove the files are those the
 * manifest names, not that the manifest was not rewritten with them: a file edited by hand and its
 * hash recomputed must be refused here, naming the file and line, rather than half imported.
 */
export async function checkRows(dir: string, manifest: ExportManifest, shapes: Record<string, ColumnShape[]>): Promise<void> {
  try {
    for (const [table, entry] of Object.entries(manifest.tables)) await checkTable(dir, entry, shapes[table] ?? [], FIELD_RULES[table]);
  } catch (error) {
    if (error instanceof OperatorError) throw new OperatorError(error.code, `${error.message}. Nothing was written.`);
    throw error;
  }
}

async function checkTable(dir: string, entry: TableEntry, columns: ColumnShape[], rule: FieldRule | undefined): Promise<void> {
  const known = new Set(columns.map((column) => column.name));
  let rows = 0;
  for await (const { line, row } of readRows(path.join(dir, entry.file), entry.file)) {
    rows++;
    const problem = rowProblem(row, columns, known) ?? firstFieldProblem(rule?.(row) ?? []);
    if (problem) throw new OperatorError('export_invalid', `${entry.file} line ${line}: ${problem}`);
  }
  if (rows !== entry.rows) throw new OperatorError('export_invalid', `${entry.file} holds ${rows} rows, the manifest ${entry.rows}`);
}

function firstFieldProblem(errors: { field: string; message: string }[]): string | null {
  return errors.length > 0 ? `${errors[0]!.field} ${errors[0]!.message}` : null;
}

function rowProblem(row: Record<string, unknown>, columns: ColumnShape[], known: Set<string>): string | null {
  for (const name of Object.keys(row)) if (!known.has(name)) return `column ${JSON.stringify(name).slice(0, 80)} is not one of the table's`;
  for (const column of columns) {
    if (!(column.name in row)) return `column ${column.name} is missing`;
    const value = row[column.name];
    if (value === null) {
      if (column.required) return `column ${column.name} must not be null`;
      continue;
    }
    const problem = valueProblem(column.kind, value);
    if (problem) return `column ${column.name} ${problem}`;
  }
  return null;
}

/** Values as format.ts writes them: strings, numbers, and `{"$base64": …}` for bytes (no column holds any today). */
function valueProblem(kind: ColumnShape['kind'], value: unknown): string | null {
  switch (kind) {
    case 'text':
      if (typeof value !== 'string') return 'must be a string';
      // PostgreSQL cannot store NUL, and no field the API accepts holds one.
      return value.includes('\u0000') ? 'holds a NUL character' : null;
    case 'integer':
      // Integers past 2^53 are written as strings of digits (encodeValue).
      return Number.isSafeInteger(value) || (typeof value === 'string' && /^-?\d{1,19}$/.test(value)) ? null : 'must be an integer';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value) ? null : 'must be a number';
    case 'other':
      if (typeof value !== 'object') return null;
      return Object.keys(value as object).join() === '$base64' && typeof (value as { $base64: unknown }).$base64 === 'string'
        ? null
        : 'must be a string, a number or {"$base64": …}';
  }
}
