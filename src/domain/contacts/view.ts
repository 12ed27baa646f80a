import type { Kysely, Selectable } from 'kysely';
import type { ContactsTable, Database } from '../../db/schema.js';
import { PreparedQuery } from '../../db/preparedQuery.js';
import type { LabelView } from '../labels/labels.js';

export interface ContactView {
  object: 'contact';
  id: string;
  first_name: string;
  last_name: string;
  email: string;
  phone: string | null;
  address: string | null;
  notes: string | null;
  labels: LabelView[];
  source_type: string;
  created_at: string;
  updated_at: string;
}

export type ContactRow = Omit<Selectable<ContactsTable>, 'org_id' | 'email_lower'>;

export const CONTACT_COLUMNS = [
  'contacts.id',
  'contacts.first_name',
  'contacts.last_name',
  'contacts.email',
  'contacts.phone',
  'contacts.address',
  'contacts.notes',
  'contacts.source_type',
  'contacts.created_at',
  'contacts.updated_at',
] as const;

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
  for (const link of links) {
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
    labels,
    source_type: row.source_type,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
