import { contactFieldErrors, SOURCE_TYPES } from '../../domain/contacts/contacts.js';
import type { FieldError } from '../../domain/errors.js';
import { FILE_NAME_MAX } from '../../domain/files/files.js';
import { groupFieldErrors } from '../../domain/groups/groups.js';
import { isMetadataKey, metadataValueError, type Metadata } from '../../domain/metadata.js';
import { checkText, LIMITS } from '../../domain/validation.js';
import { parseJson } from '../../domain/json.js';

/**
 * The rules the API holds a row's fields to, applied by `orgdata import` to each exported row
 * before it writes any: an export edited by hand (or by a script) must not bring in what the API
 * would have refused, such as 40 MB of notes. The limits are the domain's own functions and
 * constants, never numbers repeated here. A row's value types and NOT NULL columns are checked
 * before (rowChecks.ts), so the fields named here hold strings or null.
 */
type Row = Record<string, unknown>;
export type FieldRule = (row: Row) => FieldError[];

const text = (value: unknown): string | null => (typeof value === 'string' ? value : null);

/** A stored metadata column (JSON text of an object of strings) as an object; a field error when it is not one. */
function storedMetadata(value: unknown, errors: FieldError[]): Metadata | undefined {
  if (value === null || value === undefined) return undefined;
  try {
    const parsed = parseJson(String(value)) as unknown;
    if (
      parsed !== null &&
      typeof parsed === 'object' &&
      !Array.isArray(parsed) &&
      Object.values(parsed).every((v) => typeof v === 'string')
    ) {
      return parsed as Metadata;
    }
  } catch {
    // reported below
  }
  errors.push({ field: 'metadata', message: 'must be the JSON text of an object of strings' });
  return undefined;
}

export const FIELD_RULES: Readonly<Record<string, FieldRule>> = {
  contacts: (row) => {
    const errors: FieldError[] = [];
    const metadata = storedMetadata(row.metadata, errors);
    errors.push(
      ...contactFieldErrors({
        first_name: String(row.first_name),
        last_name: String(row.last_name),
        email: String(row.email),
        phone: text(row.phone),
        address: text(row.address),
        notes: text(row.notes),
        external_id: text(row.external_id),
        metadata,
      }),
    );
    if (!(SOURCE_TYPES as readonly unknown[]).includes(row.source_type)) {
      errors.push({ field: 'source_type', message: `must be one of ${SOURCE_TYPES.join(', ')}` });
    }
    return errors;
  },
  contact_metadata: (row) => {
    const errors: FieldError[] = [];
    if (!isMetadataKey(String(row.key))) errors.push({ field: 'key', message: 'is not a metadata key the API accepts' });
    const problem = metadataValueError(String(row.value));
    if (problem) errors.push({ field: 'value', message: problem });
    return errors;
  },
  labels: (row) => {
    const errors: FieldError[] = [];
    checkText('name', String(row.name), errors, { max: LIMITS.labelName, required: true });
    return errors;
  },
  groups: (row) => {
    const errors: FieldError[] = [];
    const metadata = storedMetadata(row.metadata, errors);
    return [...errors, ...groupFieldErrors({ name: String(row.name), description: text(row.description), metadata })];
  },
  files: (row) => {
    const errors: FieldError[] = [];
    checkText('name', String(row.name), errors, { max: FILE_NAME_MAX, required: true });
    return errors;
  },
};
