import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { searchText } from '../../src/domain/contacts/searchText.js';
import { newId } from '../../src/domain/ids.js';

// The rows test/helpers/migrationFixtures.ts writes, in the tables' shape at migration M (see
// `Fixture.has`), and `Seed`: what was written, for test/helpers/upgradeChecks.ts to find again.

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tables as they were at M, not today's Database type
export type OldDb = Kysely<any>;

export interface SeedContact {
  id: string;
  /** As today's API returns it: the domain in canonical form. */
  email: string;
  /** Stored as written at the time (may be a domain form from before normalisation). */
  storedEmail: string;
  first_name: string;
  last_name: string;
  phone: string | null;
  source_type: string;
  created_at: string;
  labelIds: string[];
  external_id: string | null;
  metadata: Record<string, string>;
}

/** What the fixtures wrote, for the checks to find again. */
export interface Seed {
  orgId: string;
  otherOrgId: string;
  adminId: string;
  contacts: SeedContact[];
  labels: { id: string; name: string }[];
  groups: { id: string; name: string; memberIds: string[]; metadata: Record<string, string> }[];
  files: { id: string; name: string; status: 'pending' | 'ready' }[];
  events: string[];
  /** Who caused each event (migration 016): null before it. */
  eventActors: Record<string, { actor: unknown; request_id: string | null }>;
  apiKey: string | null;
  revokedApiKey: string | null;
  /** An `od_test_` key of the organisation's sandbox (migration 026), with the sandbox's id and its one contact. */
  testApiKey: { key: string; orgId: string; contactId: string } | null;
  sessionToken: string | null;
  idempotency: { key: string; fingerprint: string; body: string } | null;
  endpoint: { id: string; attempts: number; pending: number } | null;
  /**
   * Rows of tables no domain function lists (blob_purges, settings): found once after the upgrade
   * (`count`: how many, 0 for a row a migration removes), with `values` when given.
   */
  rows: { table: string; where: Record<string, string>; count?: number; values?: Record<string, unknown> }[];
}

export interface Fixture {
  db: OldDb;
  /** Whether a migration is applied: the shape the rows must take. */
  has(migration: string): boolean;
  seed: Seed;
  /** The next instant, a minute after the last: rows list in the order they are written. */
  at(): string;
}

const BASE = Date.parse('2025-01-01T09:00:00.000Z');

export function newFixture(db: OldDb, applied: readonly string[]): Fixture {
  let minutes = 0;
  return {
    db,
    has: (migration) => applied.includes(migration),
    at: () => new Date(BASE + ++minutes * 60_000).toISOString(),
    seed: {
      orgId: newId('org'),
      otherOrgId: newId('org'),
      adminId: newId('usr'),
      contacts: [],
      labels: [],
      groups: [],
      files: [],
      events: [],
      eventActors: {},
      apiKey: null,
      revokedApiKey: null,
      testApiKey: null,
      sessionToken: null,
      idempotency: null,
      endpoint: null,
      rows: [],
    },
  };
}

type ContactSpec = Pick<SeedContact, 'first_name' | 'last_name' | 'storedEmail' | 'email'> &
  Partial<Pick<SeedContact, 'phone' | 'labelIds' | 'external_id' | 'metadata'>> & {
    /** As stored at M; `import` (before 011) reads `csv_import` after it. */
    source?: 'manual' | 'import' | 'api' | 'csv_import';
    orgId?: string;
  };

/** A contact row in the shape at M, with its label links and metadata pairs. */
export async function insertContact(f: Fixture, spec: ContactSpec): Promise<SeedContact> {
  const at = f.at();
  const orgId = spec.orgId ?? f.seed.orgId;
  // `import` was renamed by 011: a database past it holds only the new name.
  const source = spec.source === 'import' && f.has('011_source_types') ? 'csv_import' : (spec.source ?? 'manual');
  const contact: SeedContact = {
    id: newId('con'),
    email: spec.email,
    storedEmail: spec.storedEmail,
    first_name: spec.first_name,
    last_name: spec.last_name,
    phone: spec.phone ?? null,
    source_type: source === 'import' ? 'csv_import' : source,
    created_at: at,
    labelIds: spec.labelIds ?? [],
    external_id: spec.external_id ?? null,
    metadata: spec.metadata ?? {},
  };
  const row: Record<string, unknown> = {
    id: contact.id,
    org_id: orgId,
    first_name: contact.first_name,
    last_name: contact.last_name,
    email: spec.storedEmail,
    email_lower: spec.storedEmail.toLowerCase(),
    phone: contact.phone,
    address: '12 Rue de la Paix\nParis',
    notes: 'met at the fair',
    source_type: source,
    created_at: at,
    updated_at: at,
  };
  if (f.has('012_contact_sync')) Object.assign(row, { external_id: contact.external_id, metadata: JSON.stringify(contact.metadata) });
  if (f.has('013_contact_search')) row.search_text = searchText({ ...contact, email: spec.storedEmail });
  await f.db.insertInto('contacts').values(row).execute();
  for (const labelId of contact.labelIds) await linkLabel(f, contact, labelId, at);
  for (const [key, value] of Object.entries(contact.metadata)) {
    await f.db
      .insertInto('contact_metadata')
      .values({ org_id: orgId, contact_id: contact.id, key, value, contact_created_at: at })
      .execute();
  }
  if (orgId === f.seed.orgId) f.seed.contacts.push(contact);
  return contact;
}

export async function linkLabel(f: Fixture, contact: SeedContact, labelId: string, at = f.at()): Promise<void> {
  const link: Record<string, unknown> = { org_id: f.seed.orgId, contact_id: contact.id, label_id: labelId, created_at: at };
  if (f.has('006_contact_label_order')) link.contact_created_at = contact.created_at;
  await f.db.insertInto('contact_labels').values(link).execute();
  if (!contact.labelIds.includes(labelId)) contact.labelIds.push(labelId);
}

export async function insertLabel(f: Fixture, name: string): Promise<string> {
  const at = f.at();
  const id = newId('lbl');
  await f.db
    .insertInto('labels')
    .values({ id, org_id: f.seed.orgId, name, name_lower: name.toLowerCase(), created_at: at, updated_at: at })
    .execute();
  f.seed.labels.push({ id, name });
  return id;
}

export async function insertFile(f: Fixture, name: string, status: 'pending' | 'ready', claim = false): Promise<void> {
  const at = f.at();
  const id = newId('file');
  const bytes = `bytes of ${name}`;
  const row: Record<string, unknown> = {
    id,
    org_id: f.seed.orgId,
    name,
    content_type: 'text/plain',
    size: bytes.length,
    status,
    sha256: status === 'ready' ? createHash('sha256').update(bytes).digest('hex') : null,
    storage_key: status === 'ready' ? `${f.seed.orgId}/${id}` : null,
    upload_expires_at: '2099-01-01T00:00:00.000Z',
    created_at: at,
    updated_at: at,
    uploaded_at: status === 'ready' ? at : null,
  };
  if (claim) Object.assign(row, { upload_claim: 'claim-1', upload_claimed_at: at });
  await f.db.insertInto('files').values(row).execute();
  f.seed.files.push({ id, name, status });
}

export async function insertEvent(
  f: Fixture,
  type: string,
  object: Record<string, unknown>,
  cause?: { actor_type: string; actor_id: string | null; request_id: string | null },
): Promise<string> {
  const at = f.at();
  const id = newId('evt');
  const resource = type.split('.')[0]!;
  await f.db
    .insertInto('events')
    .values({ id, org_id: f.seed.orgId, type, resource, data: JSON.stringify({ object }), created_at: at, ...cause })
    .execute();
  f.seed.events.push(id);
  f.seed.eventActors[id] = cause
    ? { actor: cause.actor_id ? { type: cause.actor_type, id: cause.actor_id } : { type: cause.actor_type }, request_id: cause.request_id }
    : { actor: null, request_id: null };
  return id;
}

/** An address as stored before 015 (which converts it), or in canonical form from then on. */
export const legacy = (f: Fixture, stored: string, canonical: string) => (f.has('015_contact_email_domains') ? canonical : stored);

/** An address whose accents are decomposed (NFD) as stored before 019 (which composes them), in NFC from then on. */
export const decomposed = (f: Fixture, nfd: string) => (f.has('019_contact_email_nfc') ? nfd.normalize('NFC') : nfd);

export const contactObject = (c: SeedContact) => ({ object: 'contact', id: c.id, email: c.storedEmail, first_name: c.first_name });
