/**
 * Table shapes, shared by SQLite and PostgreSQL. Timestamps are ISO 8601 UTC strings with
 * milliseconds (they sort as text, so keyset pagination works the same on both databases);
 * booleans are not used; JSON is stored as text.
 */
export interface OrgsTable {
  id: string;
  name: string;
  created_at: string;
}

export interface UsersTable {
  id: string;
  email: string;
  email_lower: string;
  name: string;
  password_hash: string;
  created_at: string;
  deactivated_at: string | null;
}

export type Role = 'admin' | 'member';

export interface MembershipsTable {
  org_id: string;
  user_id: string;
  role: Role;
  created_at: string;
}

export interface ApiKeysTable {
  id: string;
  org_id: string;
  name: string;
  key_hash: string;
  last4: string;
  /** Space-separated scopes as granted (write scopes imply their read scope at check time). */
  scopes: string;
  created_by: string;
  created_at: string;
  expires_at: string | null;
  revoked_at: string | null;
  revoked_reason: string | null;
  last_used_at: string | null;
  last_used_origin: string | null;
}

export interface ContactsTable {
  id: string;
  org_id: string;
  first_name: string;
  last_name: string;
  email: string;
  email_lower: string;
  phone: string | null;
  address: string | null;
  notes: string | null;
  source_type: string;
  created_at: string;
  updated_at: string;
}

export interface LabelsTable {
  id: string;
  org_id: string;
  name: string;
  name_lower: string;
  created_at: string;
  updated_at: string;
}

export interface ContactLabelsTable {
  org_id: string;
  contact_id: string;
  label_id: string;
  created_at: string;
}

export interface IdempotencyKeysTable {
  org_id: string;
  key: string;
  fingerprint: string;
  /** 'in_progress' while the first request runs; 'done' once its response is stored. */
  state: string;
  locked_until: string;
  response_status: number | null;
  response_headers: string | null;
  response_body: string | null;
  created_at: string;
  expires_at: string;
}

export interface GroupsTable {
  id: string;
  org_id: string;
  name: string;
  description: string | null;
  created_at: string;
  updated_at: string;
}

export interface GroupMembersTable {
  org_id: string;
  group_id: string;
  contact_id: string;
  added_at: string;
}

export type FileStatus = 'pending' | 'ready';

export interface FilesTable {
  id: string;
  org_id: string;
  name: string;
  content_type: string;
  size: number;
  status: FileStatus;
  sha256: string | null;
  /** Where the blob store keeps the bytes; null until uploaded. */
  storage_key: string | null;
  upload_expires_at: string;
  created_at: string;
  updated_at: string;
  uploaded_at: string | null;
}

export interface SessionsTable {
  /** SHA-256 of the session cookie's value: a stolen database holds no usable session. */
  id_hash: string;
  user_id: string;
  /** The organisation the user is working in (they may belong to several). */
  org_id: string;
  csrf_token: string;
  created_at: string;
  expires_at: string;
}

export interface Database {
  orgs: OrgsTable;
  users: UsersTable;
  memberships: MembershipsTable;
  api_keys: ApiKeysTable;
  contacts: ContactsTable;
  labels: LabelsTable;
  contact_labels: ContactLabelsTable;
  idempotency_keys: IdempotencyKeysTable;
  groups: GroupsTable;
  group_members: GroupMembersTable;
  files: FilesTable;
  sessions: SessionsTable;
}
