import { SqliteAdapter, sql, type Kysely, type RawBuilder, type Selectable } from 'kysely';
import type { ContactsTable, Database } from '../../db/schema.js';
import { PreparedQuery } from '../../db/preparedQuery.js';
import type { LabelView } from '../labels/labels.js';
import type { JsonItem } from '../pagination.js';
import { parseMetadata, type Metadata } from '../metadata.js';

export interface ContactView {
  object: 'contact';
  id: string;
  first_name: string;
  last_name: string;
  email: string;
  phone: string | null;
  address: string | null;
  notes: string | null;
  external_id: string | null;
  metadata: Metadata;
  labels: LabelView[];
  source_type: string;
  created_at: string;
  updated_at: string;
}

export type ContactRow = Omit<Selectable<ContactsTable>, 'org_id' | 'email_lower' | 'search_text'>;

export const CONTACT_COLUMNS = [
  'contacts.id',
  'contacts.first_name',
  'contacts.last_name',
  'contacts.email',
  'contacts.phone',
  'contacts.address',
  'contacts.notes',
  'contacts.external_id',
  'contacts.metadata',
  'contacts.source_type',
  'contacts.created_at',
  'contacts.updated_at',
] as const;

/** A contact rendered as JSON text by the database (contactJson), with the columns its list position needs. */
export type ContactJsonRow = JsonItem;

/**
 * The contact of the current `contacts` row as JSON text, its labels (oldest first) included,
 * made by the database in the statement that reads the row: the read paths of the API (a page, one
 * contact) send this text as it is. Measured with `npm run bench:profile`: turning a page's ten
 * columns and its labels into JavaScript objects (better-sqlite3 makes a string per value), then
 * serializing them again, cost more than the database spends building the text, and the labels
 * needed a second statement. The shape is toContactView's; the contract tests validate every
 * response against the declared schema, so the two cannot drift apart unnoticed.
 */
export function contactJson(db: Kysely<Database>): RawBuilder<string> {
  if (!(db.getExecutor().adapter instanceof SqliteAdapter)) return compactPostgresContactJson();
  const label = sql`json_object('object', 'label', 'id', l.id, 'name', l.name, 'created_at', l.created_at, 'updated_at', l.updated_at)`;
  // json(): a scalar subquery's result loses its JSON subtype from SQLite 3.54 on (better-sqlite3
  // 13), and json_object would embed the array as a string ("[]").
  const labels = sql`json((select json_group_array(${label} order by l.created_at, l.id) ${LABELS_OF_CONTACT}))`;
  return sql<string>`json_object('object', 'contact', 'id', contacts.id, 'first_name', contacts.first_name, 'last_name', contacts.last_name,
    'email', contacts.email, 'phone', contacts.phone, 'address', contacts.address, 'notes', contacts.notes,
    'external_id', contacts.external_id, 'metadata', json(contacts.metadata), 'labels', ${labels},
    'source_type', contacts.source_type, 'created_at', contacts.created_at, 'updated_at', contacts.updated_at)`;
}

const LABELS_OF_CONTACT = sql`from contact_labels cl inner join labels l on l.id = cl.label_id where cl.contact_id = contacts.id`;

/**
 * PostgreSQL's json_build_object and json_agg write `"key" : value` and `, ` between items, while
 * SQLite's json_object (and JSON.stringify, which every other answer goes through) write no spaces:
 * the same contact would differ byte for byte between the databases. So the text is put together
 * here, each value quoted by to_json (strings escaped as JSON) and nulls spelt out. The metadata is
 * stored as JSON.stringify's compact text and embedded as it is (its keys in their stored order).
 */
function compactPostgresContactJson(): RawBuilder<string> {
  const fields = (pairs: [string, string][]) =>
    sql.join(
      pairs.map(([key, column]) => sql`${sql.lit(`,"${key}":`)} || coalesce(to_json(${sql.ref(column)})::text, 'null')`),
      sql` || `,
    );
  const label = sql`'{"object":"label"' || ${fields([
    ['id', 'l.id'],
    ['name', 'l.name'],
    ['created_at', 'l.created_at'],
    ['updated_at', 'l.updated_at'],
  ])} || '}'`;
  const labels = sql`coalesce((select '[' || string_agg(${label}, ',' order by l.created_at, l.id) || ']' ${LABELS_OF_CONTACT}), '[]')`;
  return sql<string>`'{"object":"contact"' || ${fields([
    ['id', 'contacts.id'],
    ['first_name', 'contacts.first_name'],
    ['last_name', 'contacts.last_name'],
    ['email', 'contacts.email'],
    ['phone', 'contacts.phone'],
    ['address', 'contacts.address'],
    ['notes', 'contacts.notes'],
    ['external_id', 'contacts.external_id'],
  ])} || ',"metadata":' || contacts.metadata || ',"labels":' || ${labels} || ${fields([
    ['source_type', 'contacts.source_type'],
    ['created_at', 'contacts.created_at'],
    ['updated_at', 'contacts.updated_at'],
  ])} || '}'`;
}

/** The labels of `shape` contacts, oldest label first. Values: 0 org, then the contact ids. */
const labelsOfContacts = new PreparedQuery<LabelView & { contact_id: string }, number>((db, slot, count) =>
  db
    .selectFrom('contact_labels')
    .innerJoin('labels', 'labels.id', 'contact_labels.label_id')
    .select(['contact_labels.contact_id', 'labels.id', 'labels.name', 'labels.created_at', 'labels.updated_at'])
    .where('contact_labels.org_id', '=', slot<string>(0))
    .where(
      'contact_labels.contact_id',
      'in',
      Array.from({ length: count }, (_, i) => slot<string>(i + 1)),
    )
    .orderBy('labels.created_at')
    .orderBy('labels.id')
    // Typed as the view it becomes: the row has every member but `object`, added below.
    .$castTo<LabelView & { contact_id: string }>(),
);

/** Loads the labels of many contacts in one query and shapes each contact for clients. */
export async function toContactViews(db: Kysely<Database>, orgId: string, rows: ContactRow[]): Promise<ContactView[]> {
  if (rows.length === 0) return [];
  const values = new Array<string>(rows.length + 1);
  values[0] = orgId;
  for (let i = 0; i < rows.length; i++) values[i + 1] = rows[i]!.id;
  const links = await labelsOfContacts.execute(db, values, rows.length);
  const byContact = new Map<string, LabelView[]>();
  for (let i = 0; i < links.length; i++) {
    const link = links[i]!;
    const label: LabelView = { object: 'label', id: link.id, name: link.name, created_at: link.created_at, updated_at: link.updated_at };
    const list = byContact.get(link.contact_id);
    if (list) list.push(label);
    else byContact.set(link.contact_id, [label]);
  }
  const views = new Array<ContactView>(rows.length);
  for (let i = 0; i < rows.length; i++) views[i] = toContactView(rows[i]!, byContact.get(rows[i]!.id) ?? []);
  return views;
}

/** A contact as clients see it, with its labels. */
export function toContactView(row: ContactRow, labels: LabelView[]): ContactView {
  return {
    object: 'contact',
    id: row.id,
    first_name: row.first_name,
    last_name: row.last_name,
    email: row.email,
    phone: row.phone,
    address: row.address,
    notes: row.notes,
    external_id: row.external_id,
    metadata: parseMetadata(row.metadata),
    labels,
    source_type: row.source_type,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
