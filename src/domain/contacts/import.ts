import { inRetriedTransaction } from '../../db/transaction.js';
import { parse } from 'csv-parse/sync';
import type { Kysely } from 'kysely';
import { isUniqueViolation } from '../../db/errors.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { ConflictError, ValidationError } from '../errors.js';
import { requireScope } from '../scopes.js';
import { normaliseEmail } from '../validation.js';
import { contactFieldErrors, insertContacts, type ContactInput } from './contacts.js';

export const MAX_IMPORT_ROWS = 5_000;
export const IMPORT_COLUMNS = ['first_name', 'last_name', 'email', 'phone', 'address', 'notes', 'labels'] as const;
type Column = (typeof IMPORT_COLUMNS)[number];
const REQUIRED_COLUMNS: Column[] = ['first_name', 'email'];
const LOOKUP_CHUNK = 500;

/**
 * What became of one data row. The header is row 1, so the first data row is row 2.
 * - created: written (its id is given);
 * - would_be_created: passed every check, but nothing was written because the import was all or
 *   nothing and another row was refused;
 * - refused: not written, for the reasons given.
 */
export type ImportRowStatus = 'created' | 'would_be_created' | 'refused';

export interface ImportRowResult {
  row: number;
  status: ImportRowStatus;
  email: string;
  name: string;
  id?: string;
  reasons: string[];
}

export interface ImportResult {
  /** Whether any contact was written. False when all-or-nothing met a refused row (or no row was valid). */
  written: boolean;
  partial: boolean;
  counts: { rows: number; created: number; would_be_created: number; refused: number };
  rows: ImportRowResult[];
}

/** A problem with the file as a whole, reported on the form's file field. */
function fileError(message: string): ValidationError {
  return ValidationError.field('file', message);
}

/**
 * The uploaded bytes as text: UTF-8 (with or without a byte-order mark) or UTF-16 with a mark.
 * Spreadsheets, archives and other binary files are refused with a hint on how to save a CSV.
 */
export function decodeCsv(bytes: Uint8Array): string {
  if (bytes.length === 0) throw fileError('The file is empty. Choose a CSV file with a header row and one row per contact.');
  const starts = (...prefix: number[]) => prefix.every((b, i) => bytes[i] === b);
  if (starts(0x50, 0x4b, 0x03, 0x04) || starts(0xd0, 0xcf, 0x11, 0xe0)) {
    throw fileError(
      'This is a spreadsheet workbook, not a CSV file. In your spreadsheet, save or download the sheet as "CSV UTF-8" and import that.',
    );
  }
  let text: string;
  try {
    if (starts(0xff, 0xfe)) text = new TextDecoder('utf-16le', { fatal: true }).decode(bytes);
    else if (starts(0xfe, 0xff)) text = new TextDecoder('utf-16be', { fatal: true }).decode(bytes);
    else text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw fileError('The file is not UTF-8 text. Save it as "CSV UTF-8" and import it again.');
  }
  if (text.includes('\u0000')) throw fileError('This is not a CSV file: it contains binary data.');
  return text.replace(/^\uFEFF/, '');
}

/** The separator of the header line: commas, or the semicolons or tabs some spreadsheets write. */
function delimiterOf(text: string): string {
  const header = text.slice(0, text.search(/\r|\n|$/));
  if (header.includes(',')) return ',';
  if (header.includes(';')) return ';';
  if (header.includes('\t')) return '\t';
  return ',';
}

/** A header as a column name, forgiving spreadsheet spellings: "First Name", "E-mail", "EMAIL". */
function columnOf(header: string): Column | null {
  const key = header.toLowerCase().replace(/[\s_-]+/g, '');
  return IMPORT_COLUMNS.find((c) => c.replace('_', '') === key) ?? null;
}

interface ParsedRow {
  row: number;
  cells: Partial<Record<Column, string>>;
  fieldCount: number;
}

function parseCsv(text: string): { columns: Column[]; rows: ParsedRow[] } {
  let parsed: { record: string[]; info: { records: number; empty_lines: number } }[];
  try {
    // Blank lines are skipped by the parser (cheap), and parsing stops one record past the
    // limit: a file of millions of short or ragged lines costs no more than a full legal file.
    parsed = (parse as (input: string, options: object) => unknown)(text, {
      bom: true,
      delimiter: delimiterOf(text),
      relax_column_count: true,
      skip_empty_lines: true,
      info: true,
      to: MAX_IMPORT_ROWS + 2,
    }) as { record: string[]; info: { records: number; empty_lines: number } }[];
  } catch (error) {
    throw fileError(`The file could not be read as CSV: ${error instanceof Error ? error.message : String(error)}.`);
  }
  const records = parsed.map((p) => p.record);
  // The row as a spreadsheet numbers it: skipped blank lines still count.
  const lineOf = parsed.map((p) => p.info.records + p.info.empty_lines);
  const [header, ...data] = records;
  if (!header || header.every((cell) => cell.trim() === '')) {
    throw fileError('The file is empty. Its first row must name the columns, e.g. first_name,last_name,email.');
  }
  const columns: Column[] = [];
  const unknown: string[] = [];
  for (const raw of header) {
    const column = columnOf(raw);
    if (column === null) unknown.push(raw.trim() === '' ? '(empty)' : `"${raw.trim()}"`);
    else if (columns.includes(column)) throw fileError(`The column ${column} appears twice in the header row.`);
    else columns.push(column);
  }
  if (unknown.length > 0) {
    throw fileError(
      `The header row has ${unknown.length === 1 ? 'an unknown column' : 'unknown columns'}: ${unknown.join(', ')}. ` +
        `Accepted columns: ${IMPORT_COLUMNS.join(', ')}.`,
    );
  }
  const missing = REQUIRED_COLUMNS.filter((c) => !columns.includes(c));
  if (missing.length > 0) {
    throw fileError(`The header row has no ${missing.join(' or ')} column; every file needs first_name and email.`);
  }
  const rows: ParsedRow[] = [];
  data.forEach((record, i) => {
    if (record.every((cell) => cell.trim() === '')) return; // blank lines are skipped, but keep their number
    const cells: Partial<Record<Column, string>> = {};
    columns.forEach((column, c) => (cells[column] = record[c] ?? ''));
    rows.push({ row: lineOf[i + 1] ?? i + 2, cells, fieldCount: record.length });
  });
  if (rows.length === 0) throw fileError('The file has a header row but no contacts under it.');
  if (rows.length > MAX_IMPORT_ROWS) {
    throw fileError(
      `The file has more than ${MAX_IMPORT_ROWS.toLocaleString('en')} rows; at most ${MAX_IMPORT_ROWS.toLocaleString('en')} can be imported at once. Split it.`,
    );
  }
  return { columns, rows };
}

function inputOf(cells: ParsedRow['cells'], labelIds: string[]): ContactInput {
  const optional = (column: Column) => {
    const value = (cells[column] ?? '').trim();
    return value === '' ? null : value;
  };
  return {
    first_name: (cells.first_name ?? '').trim(),
    last_name: (cells.last_name ?? '').trim(),
    email: normaliseEmail((cells.email ?? '').trim()),
    phone: optional('phone'),
    address: optional('address'),
    notes: optional('notes'),
    label_ids: labelIds,
  };
}

/** The organisation's labels by lower-cased name. */
async function labelsByName(db: Kysely<Database>, orgId: string): Promise<Map<string, string>> {
  const rows = await db.selectFrom('labels').select(['id', 'name_lower']).where('org_id', '=', orgId).execute();
  return new Map(rows.map((r) => [r.name_lower, r.id]));
}

/** Which of these lower-cased emails already belong to a contact of the organisation. */
async function existingEmails(db: Kysely<Database>, orgId: string, emails: string[]): Promise<Set<string>> {
  const found = new Set<string>();
  const unique = [...new Set(emails)];
  for (let i = 0; i < unique.length; i += LOOKUP_CHUNK) {
    const rows = await db
      .selectFrom('contacts')
      .select('email_lower')
      .where('org_id', '=', orgId)
      .where('email_lower', 'in', unique.slice(i, i + LOOKUP_CHUNK))
      .execute();
    for (const r of rows) found.add(r.email_lower);
  }
  return found;
}

interface CheckedRow {
  result: ImportRowResult;
  input: ContactInput;
}

/** Every row checked with the same rules as createContact, plus duplicates in the file and in the organisation. */
async function checkRows(db: Kysely<Database>, orgId: string, rows: ParsedRow[], columnCount: number): Promise<CheckedRow[]> {
  const labels = await labelsByName(db, orgId);
  const taken = await existingEmails(
    db,
    orgId,
    rows.map((r) => normaliseEmail((r.cells.email ?? '').trim()).toLowerCase()).filter((e) => e !== ''),
  );
  const firstRowOf = new Map<string, number>();
  return rows.map(({ row, cells, fieldCount }) => {
    const reasons: string[] = [];
    if (fieldCount !== columnCount) reasons.push(`row: has ${fieldCount} fields but the header has ${columnCount}`);
    const labelIds: string[] = [];
    const seenLabels = new Set<string>();
    for (const name of (cells.labels ?? '').split(';').map((n) => n.trim())) {
      if (name === '' || seenLabels.has(name.toLowerCase())) continue;
      seenLabels.add(name.toLowerCase());
      const id = labels.get(name.toLowerCase());
      if (id) labelIds.push(id);
      else
        reasons.push(
          `labels: no label named "${name}" in this organisation (an import does not create labels: create it on the Labels page first)`,
        );
    }
    const input = inputOf(cells, labelIds);
    for (const e of contactFieldErrors(input)) reasons.push(`${e.field === 'label_ids' ? 'labels' : e.field}: ${e.message}`);
    const email = input.email.toLowerCase();
    if (email !== '') {
      const first = firstRowOf.get(email);
      if (first !== undefined) reasons.push(`email: the same email as row ${first} of this file`);
      else firstRowOf.set(email, row);
      if (taken.has(email)) reasons.push('email: a contact with this email already exists in this organisation');
    }
    const name = `${input.first_name} ${input.last_name ?? ''}`.trim();
    return { input, result: { row, status: reasons.length > 0 ? 'refused' : 'would_be_created', email: input.email, name, reasons } };
  });
}

function summary(rows: ImportRowResult[], partial: boolean): ImportResult {
  const count = (status: ImportRowStatus) => rows.filter((r) => r.status === status).length;
  const created = count('created');
  return {
    written: created > 0,
    partial,
    counts: { rows: rows.length, created, would_be_created: count('would_be_created'), refused: count('refused') },
    rows,
  };
}

/**
 * Imports contacts from CSV text (a header row naming the columns, then one contact per row).
 * Every row is checked with createContact's rules; `labels` holds label names separated by `;`,
 * and names the organisation does not have are refused, not created. All or nothing by default:
 * if any row is refused nothing is written; with `partial` the valid rows are written anyway.
 * Either way the valid rows are written in one transaction, and every row is reported.
 */
export async function importContacts(ctx: Ctx, csvText: string, options: { partial: boolean }): Promise<ImportResult> {
  requireScope(ctx.actor, 'contacts:write');
  const { columns, rows } = parseCsv(csvText);
  for (let attempt = 1; ; attempt++) {
    try {
      return await inRetriedTransaction(ctx.db, async (trx) => {
        const checked = await checkRows(trx, ctx.orgId, rows, columns.length);
        const refused = checked.some((c) => c.result.status === 'refused');
        // All or nothing: report what each row would have become, and write nothing.
        if (refused && !options.partial)
          return summary(
            checked.map((c) => c.result),
            options.partial,
          );
        const valid = checked.filter((c) => c.result.status !== 'refused');
        const contacts = await insertContacts(
          trx,
          ctx,
          valid.map((c) => c.input),
          'csv_import',
        );
        const created = new Map(valid.map((c, i) => [c.result.row, contacts[i]!.id]));
        const rowsOut = checked.map(({ result }): ImportRowResult => {
          const id = created.get(result.row);
          return id ? { ...result, status: 'created', id } : result;
        });
        return summary(rowsOut, options.partial);
      });
    } catch (error) {
      // Another request created one of these emails after the check: check again, once.
      if (!isUniqueViolation(error)) throw error;
      if (attempt >= 2)
        throw new ConflictError('contact_exists', 'Contacts with these emails were being created at the same time. Import the file again.');
    }
  }
}
