/**
 * Table shapes, shared by SQLite and PostgreSQL. Timestamps are ISO 8601 UTC strings with
 * milliseconds (they sort as text, so keyset pagination works the same on both databases);
 * booleans are not used; JSON is stored as text. The tables of events, of the request log and of
 * webhooks are in tables/.
 */
import type { Generated } from 'kysely';
import type { EventActorType, EventsTable } from './tables/events.js';
import type {
  AuthChallengesTable,
  InvitationsTable,
  PasskeysTable,
  PasswordResetsTable,
  RecoveryCodesTable,
  SsoConfigsTable,
  SsoDomainsTable,
  SsoIdentitiesTable,
  TotpFactorsTable,
} from './tables/identity.js';
import type { RequestLogTable, RequestUsageTable } from './tables/requests.js';
import type { WebhookAttemptsTable, WebhookDeliveriesTable, WebhookEndpointsTable } from './tables/webhooks.js';

export interface OrgsTable {
  id: string;
  name: string;
  created_at: string;
  /** Who must have a second factor (migration 021). */
  require_two_factor: Generated<TwoFactorPolicy>;
  /** On a sandbox (test mode, migration 026): the live organisation it belongs to; null on a live one. */
  live_org_id: Generated<string | null>;
}

export type TwoFactorPolicy = 'nobody' | 'admins' | 'everyone';

export interface UsersTable {
  id: string;
  email: string;
  email_lower: string;
  name: string;
  password_hash: string;
  created_at: string;
  deactivated_at: string | null;
  /** The organisation whose SSO made the account, until its holder proves the mailbox (migration 022). */
  sso_org_id: Generated<string | null>;
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
  /** SHA-256 of method, route and body (http/idempotency.ts); 'erased' once its answer named an erased contact. */
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
  /** How it was opened: password, password+totp, password+recovery_code, passkey, sso, invitation, password_reset… (migration 021). */
  method: Generated<string>;
  /** When its person last proved who they are (re-authentication); null = created_at. */
  authenticated_at: string | null;
  last_seen_at: string | null;
  /** Approximate origin when opened or last seen: the /24 or /48 and the browser's product. */
  origin: string | null;
  /** When the account's own factors were last proved in it (migration 022); null in an SSO-opened session until then. */
  account_proof_at: Generated<string | null>;
  /** 1 while the session shows the organisation's sandbox (test mode, migration 028); 0 live. */
  test_mode: Generated<number>;
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
  invitations: InvitationsTable;
  password_resets: PasswordResetsTable;
  totp_factors: TotpFactorsTable;
  recovery_codes: RecoveryCodesTable;
  passkeys: PasskeysTable;
  auth_challenges: AuthChallengesTable;
  sso_configs: SsoConfigsTable;
  sso_domains: SsoDomainsTable;
  sso_identities: SsoIdentitiesTable;
  events: EventsTable;
  request_log: RequestLogTable;
  request_usage: RequestUsageTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  webhook_attempts: WebhookAttemptsTable;
}
