/**
 * Table shapes, shared by SQLite and PostgreSQL. Timestamps are ISO 8601 UTC strings with
 * milliseconds (they sort as text, so keyset pagination works the same on both databases);
 * booleans are not used; JSON is stored as text.
 */
import type { Generated } from 'kysely';

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
  /** The integrator's own id, unique in the organisation when set. */
  external_id: string | null;
  /** JSON text of an object of strings; its pairs are also rows of contact_metadata. */
  metadata: Generated<string>;
  /** The words `q=` searches (domain/contacts/searchText.ts); indexed (migration 013). */
  search_text: Generated<string>;
  created_at: string;
  updated_at: string;
}

/** A contact's metadata, a pair a row, for `metadata[key]=value` (see migration 012). */
export interface ContactMetadataTable {
  org_id: string;
  contact_id: string;
  key: string;
  value: string;
  contact_created_at: string;
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
  /** The contact's created_at (it never changes): the label filter walks a label's contacts in list order. */
  contact_created_at: string;
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
  /** JSON text of an object of strings. */
  metadata: Generated<string>;
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
  /** The upload now copying its bytes into place (see domain/files/transfer.ts), and since when. */
  upload_claim: string | null;
  upload_claimed_at: string | null;
  upload_expires_at: string;
  created_at: string;
  updated_at: string;
  uploaded_at: string | null;
  /** Who created the file, and so its upload link (migration 016): file.uploaded names them. */
  created_by_type: EventActorType | null;
  created_by_id: string | null;
}

/** A blob to delete from the blob store once `purge_after` has passed (migration 009). */
export interface BlobPurgesTable {
  storage_key: string;
  purge_after: string;
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

export interface EventsTable {
  id: string;
  org_id: string;
  type: string;
  /** contact, label, group or file: the read scope a key needs to see the event. */
  resource: string;
  /** JSON of the event's `data`: {object, previous_attributes?}. */
  data: string;
  created_at: string;
  /** Who caused it (migration 016): null on events recorded before. */
  actor_type: EventActorType | null;
  /** The key's or user's id; null for `system`. */
  actor_id: string | null;
  /** The request that caused it; null for system work and older events. */
  request_id: string | null;
  /** The id of `data.object` (a group_member's: its contact's): a contact's or group's timeline. */
  subject_id: string | null;
  /** group.member_* events: the group. */
  related_id: string | null;
}

export type EventActorType = 'api_key' | 'user' | 'system';

/** One API request made with a key (migration 017): never a body, never the key. */
export interface RequestLogTable {
  request_id: string;
  org_id: string;
  key_id: string;
  at: string;
  method: string;
  /** The route's template (`/api/v1/contacts/:id`), not the path. */
  route: string;
  status: number;
  /** The problem's `code` when the answer was one. */
  error_code: string | null;
  duration_ms: number;
  /** Approximate: the client's network (/24, /48) and User-Agent product. */
  origin: string;
}

/** Requests of one key on one day (UTC) with one class of status: 2xx, 3xx, 4xx, 429, 5xx. */
export interface RequestUsageTable {
  org_id: string;
  key_id: string;
  day: string;
  class: string;
  count: number;
}

export type WebhookEndpointStatus = 'enabled' | 'disabled';

export interface WebhookEndpointsTable {
  id: string;
  org_id: string;
  url: string;
  /** JSON array of event types and patterns (`*`, `contact.*`). */
  events: string;
  secret: string;
  previous_secret: string | null;
  previous_secret_expires_at: string | null;
  status: WebhookEndpointStatus;
  disabled_reason: string | null;
  consecutive_failures: number;
  failing_since: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
}

export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

export interface WebhookDeliveriesTable {
  /** The Standard Webhooks message id (`msg_…`), the same on every attempt. */
  id: string;
  org_id: string;
  endpoint_id: string;
  /** Null for a test `ping`. */
  event_id: string | null;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: string;
  lease_until: string | null;
  last_attempt_at: string | null;
  last_status: number | null;
  last_error: string | null;
  created_at: string;
  updated_at: string;
}

export interface WebhookAttemptsTable {
  id: string;
  org_id: string;
  delivery_id: string;
  endpoint_id: string;
  attempted_at: string;
  status_code: number | null;
  error: string | null;
  latency_ms: number;
  response_excerpt: string | null;
}

/** Facts about the installation, one row each (`secret_fingerprint`). */
export interface SettingsTable {
  name: string;
  value: string;
  updated_at: string;
}

export interface Database {
  orgs: OrgsTable;
  users: UsersTable;
  memberships: MembershipsTable;
  api_keys: ApiKeysTable;
  contacts: ContactsTable;
  labels: LabelsTable;
  contact_labels: ContactLabelsTable;
  contact_metadata: ContactMetadataTable;
  idempotency_keys: IdempotencyKeysTable;
  groups: GroupsTable;
  group_members: GroupMembersTable;
  files: FilesTable;
  blob_purges: BlobPurgesTable;
  settings: SettingsTable;
  sessions: SessionsTable;
  events: EventsTable;
  request_log: RequestLogTable;
  request_usage: RequestUsageTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
}
