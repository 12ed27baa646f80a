import { OperatorError } from '../operatorError.js';

/**
 * Which tables an export carries, in the order an import inserts them (a row's foreign keys
 * point at rows of tables earlier in the list), and which of them an organisation's own export
 * (`orgdata org export`) carries, by the column naming the organisation. The others hold secrets
 * or the installation's bookkeeping: users (password hashes), API keys (keyed hashes), sessions,
 * webhook endpoints (signing secrets) and their deliveries, idempotency replays, settings.
 *
 * The list is checked against the tables the database really has: a table that is in neither
 * this list nor DERIVED stops the export (a new migration's table must be placed here, or it
 * would be silently left behind).
 */
export const TABLES: readonly { name: string; orgColumn: string | null }[] = [
  { name: 'orgs', orgColumn: 'id' },
  { name: 'users', orgColumn: null },
  { name: 'memberships', orgColumn: null },
  { name: 'api_keys', orgColumn: null },
  { name: 'contacts', orgColumn: 'org_id' },
  { name: 'contact_metadata', orgColumn: 'org_id' },
  { name: 'labels', orgColumn: 'org_id' },
  { name: 'contact_labels', orgColumn: 'org_id' },
  { name: 'groups', orgColumn: 'org_id' },
  { name: 'group_members', orgColumn: 'org_id' },
  { name: 'files', orgColumn: 'org_id' },
  { name: 'blob_purges', orgColumn: null },
  { name: 'settings', orgColumn: null },
  { name: 'sessions', orgColumn: null },
  // Invitations and password-reset links (migration 020): hashes of secret links, and who was
  // invited: the installation's, like sessions, not the organisation's data.
  { name: 'invitations', orgColumn: null },
  { name: 'password_resets', orgColumn: null },
  // Second factors, passkeys, sign-in state and SSO (migration 021): secrets (sealed with
  // SECRET_KEY) and the installation's sign-in bookkeeping, not the organisation's data.
  { name: 'totp_factors', orgColumn: null },
  { name: 'recovery_codes', orgColumn: null },
  { name: 'passkeys', orgColumn: null },
  { name: 'auth_challenges', orgColumn: null },
  { name: 'sso_configs', orgColumn: null },
  { name: 'sso_domains', orgColumn: null },
  { name: 'sso_identities', orgColumn: null },
  { name: 'events', orgColumn: 'org_id' },
  { name: 'webhook_endpoints', orgColumn: null },
  { name: 'webhook_deliveries', orgColumn: null },
  { name: 'webhook_attempts', orgColumn: null },
  { name: 'idempotency_keys', orgColumn: null },
  // The request log and daily usage (migration 017): the installation's bookkeeping, not the
  // organisation's data.
  { name: 'request_log', orgColumn: null },
  { name: 'request_usage', orgColumn: null },
];

/**
 * Tables that are not data: the migrations' bookkeeping (the manifest lists the migrations
 * instead) and SQLite's full-text index of contacts (migration 014: kept by triggers on
 * contacts, so inserting the contacts rebuilds it; PostgreSQL's search_terms is a generated
 * column, left out of every export and computed again on insert).
 */
const DERIVED = [/^kysely_migration(_lock)?$/, /^contacts_fts(_.*)?$/, /^sqlite_/];

/** A query on the database at hand (the export's snapshot, or the import's target). */
export type Query = (text: string, params?: unknown[]) => Promise<Record<string, unknown>[]>;

/** The data tables of the database in import order; throws on a table this version does not know. */
export async function dataTables(dialect: 'sqlite' | 'postgres', query: Query): Promise<string[]> {
  const rows =
    dialect === 'sqlite'
      ? await query(`select name from sqlite_master where type = 'table'`)
      : await query(
          `select table_name as name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE'`,
        );
  const names = rows.map((row) => String(row.name)).filter((name) => !DERIVED.some((pattern) => pattern.test(name)));
  const unknown = names.filter((name) => !TABLES.some((table) => table.name === name));
  if (unknown.length > 0) {
    throw new OperatorError(
      'unknown_table',
      `the database has table(s) this orgdata does not know how to export: ${unknown.join(', ')}. ` +
        'Use the orgdata version that made them (src/cli/exchange/tables.ts lists the tables).',
    );
  }
  return TABLES.map((table) => table.name).filter((name) => names.includes(name));
}

/** The stored columns of a table: generated ones (PostgreSQL's search_terms) are computed again by the target. */
export async function storedColumns(dialect: 'sqlite' | 'postgres', query: Query, table: string): Promise<string[]> {
  return (await columnShapes(dialect, query, table)).map((column) => column.name);
}

/** An identifier quoted for SQL (both databases): table and column names come from the catalog, never from input. */
export function quoted(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

/** What a stored column accepts, as an import checks each value before writing any. */
export interface ColumnShape {
  name: string;
  kind: 'text' | 'integer' | 'number' | 'other';
  /** NOT NULL (or, on SQLite, a primary key, which PostgreSQL makes NOT NULL too). */
  required: boolean;
}

/** The stored columns of a table with their kinds, from the database's catalog (not a list of our own). */
export async function columnShapes(dialect: 'sqlite' | 'postgres', query: Query, table: string): Promise<ColumnShape[]> {
  const rows =
    dialect === 'sqlite'
      ? await query(`select name, type, "notnull" or pk > 0 as required from pragma_table_xinfo(?) where hidden = 0 order by cid`, [table])
      : await query(
          `select column_name as name, data_type as type, is_nullable = 'NO' as required from information_schema.columns
           where table_schema = current_schema() and table_name = $1 and is_generated = 'NEVER' order by ordinal_position`,
          [table],
        );
  return rows.map((row) => {
    const type = String(row.type).toLowerCase();
    const kind = type === 'text' ? 'text' : type.includes('int') ? 'integer' : /double|real|numeric|float/.test(type) ? 'number' : 'other';
    return { name: String(row.name), kind, required: Boolean(row.required) };
  });
}
