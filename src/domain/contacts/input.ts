import type { MetadataInput } from '../metadata.js';

/** A contact as a client gives it (create, or an upsert's item), and the columns it is written to. */
export interface ContactInput {
  first_name: string;
  last_name?: string;
  email: string;
  phone?: string | null;
  address?: string | null;
  notes?: string | null;
  label_ids?: string[];
  /** The integrator's own id: 1–255 characters of one-line text, unique in the organisation; null for none. */
  external_id?: string | null;
  metadata?: MetadataInput;
}

export type ContactPatch = Partial<ContactInput>;

/** The columns of a contact's row, in the order inserts bind them. */
export const CONTACT_INSERT_COLUMNS = [
  'id',
  'org_id',
  'first_name',
  'last_name',
  'email',
  'email_lower',
  'phone',
  'address',
  'notes',
  'source_type',
  'external_id',
  'metadata',
  'search_text',
  'created_at',
  'updated_at',
] as const;

/** The columns of a label link and of a metadata pair, as inserted. */
export const LINK_COLUMNS = ['org_id', 'contact_id', 'label_id', 'created_at', 'contact_created_at'] as const;
export const PAIR_COLUMNS = ['org_id', 'contact_id', 'key', 'value', 'contact_created_at'] as const;
