import type { Kysely, Selectable } from 'kysely';
import type { ContactsTable, Database } from '../../db/schema.js';
import { toLabelView, type LabelView } from '../labels/labels.js';

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

/** Loads the labels of many contacts in one query and shapes each contact for clients. */
export async function toContactViews(db: Kysely<Database>, orgId: string, rows: ContactRow[]): Promise<ContactView[]> {
  if (rows.length === 0) return [];
  const links = await db
    .selectFrom('contact_labels')
    .innerJoin('labels', 'labels.id', 'contact_labels.label_id')
    .select(['contact_labels.contact_id', 'labels.id', 'labels.name', 'labels.created_at', 'labels.updated_at'])
    .where('contact_labels.org_id', '=', orgId)
    .where(
      'contact_labels.contact_id',
      'in',
      rows.map((r) => r.id),
    )
    .orderBy('labels.created_at')
    .orderBy('labels.id')
    .execute();
  const byContact = new Map<string, LabelView[]>();
  for (const link of links) {
    const list = byContact.get(link.contact_id) ?? [];
    list.push(toLabelView(link));
    byContact.set(link.contact_id, list);
  }
  return rows.map((row) => ({
    object: 'contact',
    id: row.id,
    first_name: row.first_name,
    last_name: row.last_name,
    email: row.email,
    phone: row.phone,
    address: row.address,
    notes: row.notes,
    labels: byContact.get(row.id) ?? [],
    source_type: row.source_type,
    created_at: row.created_at,
    updated_at: row.updated_at,
  }));
}
