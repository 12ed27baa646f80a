import { expect } from 'vitest';
import type { Db } from '../../src/db/database.js';
import { checkSecretFingerprint } from '../../src/db/secretFingerprint.js';
import { authenticateKey } from '../../src/domain/apiKeys/apiKeys.js';
import { batchContacts } from '../../src/domain/contacts/batch.js';
import { createContact, updateContact } from '../../src/domain/contacts/contacts.js';
import { importContacts } from '../../src/domain/contacts/import.js';
import { listContacts, type ContactFilters } from '../../src/domain/contacts/list.js';
import { searchWords } from '../../src/domain/contacts/searchText.js';
import type { ContactView } from '../../src/domain/contacts/view.js';
import type { Ctx } from '../../src/domain/context.js';
import { listEvents } from '../../src/domain/events/events.js';
import { listFiles } from '../../src/domain/files/files.js';
import { listGroups } from '../../src/domain/groups/groups.js';
import { listMembers } from '../../src/domain/groups/members.js';
import { decodeCursor, encodeCursor, type Page, type PageRequest, type Position } from '../../src/domain/pagination.js';
import { findSession } from '../../src/domain/sessions/sessions.js';
import { deliveryLog } from '../../src/domain/webhooks/deliveries.js';
import { listEndpoints } from '../../src/domain/webhooks/endpoints.js';
import { claim } from '../../src/infra/idempotency/store.js';
import { SECRET } from './harness.js';
import type { Seed, SeedContact } from './fixtureRows.js';

// After the upgrade: everything the fixtures wrote, read back through today's domain functions.

export function adminCtx(db: Db, seed: Seed): Ctx {
  return {
    db: db.kysely,
    orgId: seed.orgId,
    actor: { kind: 'user', userId: seed.adminId, role: 'admin' },
    requestId: 'upgrade',
    now: new Date(),
  };
}

/** Every item of a list, a page of `limit` at a time, following the positions as a cursor would. */
async function walk<T extends { id: string }>(list: (page: PageRequest) => Promise<Page<T> & { last?: Position | null }>, limit = 2) {
  const all: T[] = [];
  let after: Position | null = null;
  for (let pages = 0; pages < 100; pages++) {
    const page: Page<T> & { last?: Position | null } = await list({ limit, after });
    all.push(...page.items);
    if (!page.hasMore) return all;
    const last = page.items.at(-1) as T & { created_at?: string };
    // Through a signed cursor, as the API hands it out and takes it back.
    after = decodeCursor(SECRET, 'upgrade', encodeCursor(SECRET, 'upgrade', page.last ?? { createdAt: last.created_at!, id: last.id }));
  }
  throw new Error('the list does not end');
}

const ids = (items: { id: string }[]) => items.map((item) => item.id);

export async function checkUpgraded(db: Db, seed: Seed): Promise<void> {
  const ctx = adminCtx(db, seed);
  const contacts = (filters: ContactFilters) => listContacts(ctx, { limit: 25, after: null }, filters).then((page) => page.items);

  // Every contact, in order, a page of two at a time, as today's API shows it.
  const listed = await walk((page) => listContacts(ctx, page));
  expect(ids(listed)).toEqual(ids(seed.contacts));
  for (const [i, want] of seed.contacts.entries()) expectContact(listed[i]!, want);
  // Newest first, and ordered by name, with cursors too.
  expect(ids(await walk((page) => listContacts(ctx, page, {}, '-created_at')))).toEqual(ids(seed.contacts).reverse());
  // (By the database's lower(): SQLite's folds ASCII only, so the order is compared with one page's.)
  const byName = await listContacts(ctx, { limit: 100, after: null }, {}, 'last_name');
  expect(ids(byName.items).sort()).toEqual(ids(seed.contacts).sort());
  expect(ids(await walk((page) => listContacts(ctx, page, {}, 'last_name')))).toEqual(ids(byName.items));
  // A contact whose stored address took its canonical form (015) changed for an incremental sync.
  for (const want of seed.contacts.filter((c) => c.storedEmail !== c.email)) {
    expect(listed.find((c) => c.id === want.id)!.updated_at > want.created_at, `updated_at of ${want.storedEmail}`).toBe(true);
  }

  for (const want of seed.contacts) {
    // email= in other cases (and for the IDN domain in its other form) finds exactly it.
    for (const form of emailForms(want.email)) expect(ids(await contacts({ email: form })), `email=${form}`).toEqual([want.id]);
    // q= finds it by the start of its names and by its e-mail's domain.
    for (const query of [want.last_name.slice(0, 3), `${want.first_name} ${want.last_name}`, want.email.split('@')[1]!]) {
      const found = ids(await contacts({ words: searchWords(query) }));
      expect(found, `q=${query}`).toContain(want.id);
    }
    if (want.phone) expect(ids(await contacts({ words: searchWords('7946') }))).toContain(want.id);
    for (const labelId of want.labelIds) expect(ids(await contacts({ labelId }))).toContain(want.id);
    if (want.external_id) expect(ids(await contacts({ externalId: want.external_id }))).toEqual([want.id]);
    for (const [key, value] of Object.entries(want.metadata)) expect(ids(await contacts({ metadata: { key, value } }))).toEqual([want.id]);
    // Creating it again, in any form of its address, is refused; a POST, a CSV import, a batch alike.
    const again = emailForms(want.email).at(-1)!;
    await expect(createContact(ctx, { first_name: 'Again', email: again }, 'api'), `POST ${again}`).rejects.toMatchObject({
      code: 'contact_exists',
    });
    const imported = await importContacts(ctx, `first_name,email\nAgain,${again}\n`, { partial: false });
    expect(imported.counts, `import ${again}`).toMatchObject({ created: 0, refused: 1 });
  }
  // A label's contacts list in creation order, whenever the label was given.
  for (const label of seed.labels) {
    const holders = seed.contacts.filter((c) => c.labelIds.includes(label.id));
    expect(ids(await walk((page) => listContacts(ctx, page, { labelId: label.id }), 1))).toEqual(ids(holders));
  }

  // Keys, sessions, webhook endpoints (before the writes below queue deliveries), idempotent
  // replays, the secret's fingerprint.
  if (seed.apiKey) expect(await authenticateKey(db.kysely, SECRET, seed.apiKey, new Date())).toMatchObject({ orgId: seed.orgId });
  if (seed.revokedApiKey) await expect(authenticateKey(db.kysely, SECRET, seed.revokedApiKey, new Date())).rejects.toThrow(/revoked/);
  if (seed.testApiKey) {
    const { key, orgId, contactId } = seed.testApiKey;
    expect(await authenticateKey(db.kysely, SECRET, key, new Date())).toMatchObject({ orgId, livemode: false });
    const sandboxCtx = { ...ctx, orgId };
    expect(ids((await listContacts(sandboxCtx, { limit: 100, after: null })).items)).toEqual([contactId]);
  }
  if (seed.sessionToken)
    expect(await findSession(db.kysely, seed.sessionToken, new Date())).toMatchObject({ userId: seed.adminId, orgId: seed.orgId });
  if (seed.endpoint) {
    expect(ids(await listEndpoints(ctx))).toEqual([seed.endpoint.id]);
    const log = await deliveryLog(ctx, seed.endpoint.id);
    expect([log.attempts.length, log.pending]).toEqual([seed.endpoint.attempts, seed.endpoint.pending]);
  }
  if (seed.idempotency) {
    const { key, fingerprint, body } = seed.idempotency;
    expect(await claim(db.kysely, seed.orgId, key, fingerprint, new Date())).toMatchObject({
      outcome: 'replay',
      response: { status: 201, body },
    });
  }
  for (const { table, where, count, values } of seed.rows) {
    const [[column, value]] = Object.entries(where) as [[string, string]];
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a table named by the fixture
    const found = (await (db.kysely as any).selectFrom(table).selectAll().where(column, '=', value).execute()) as Record<string, unknown>[];
    expect(found, `${table} ${value}`).toHaveLength(count ?? 1);
    if (values) expect(found[0], `${table} ${value}`).toMatchObject(values);
  }
  await checkSecretFingerprint(db.kysely, SECRET);

  // A batch upsert matching on email updates the contacts that exist, in whatever form they were stored.
  const upserted = await batchContacts(
    ctx,
    seed.contacts.map((c) => ({
      input: { first_name: c.first_name, last_name: c.last_name, email: emailForms(c.email).at(-1)!, notes: 'synced' },
    })),
    { mode: 'upsert', matchOn: 'email', atomic: true },
  );
  expect(upserted.map((o) => ('contact' in o ? [o.status, o.contact.id] : o.error.code))).toEqual(seed.contacts.map((c) => [200, c.id]));

  // A contact from before can be patched, and is found by its new words and in updated_after=.
  const first = seed.contacts[0]!;
  const before = new Date(Date.now() - 1).toISOString(); // updated_after= is strict
  const patched = await updateContact({ ...ctx, now: new Date() }, first.id, { last_name: 'Byron' });
  expect(patched).toMatchObject({ id: first.id, last_name: 'Byron', email: first.email, created_at: first.created_at });
  expect(ids(await contacts({ words: ['byron'] }))).toEqual([first.id]);
  expect(ids(await contacts({ updatedAfter: before }))).toContain(first.id);
  expect(await listContacts(ctx, { limit: 25, after: null }).then((p) => p.items.length)).toBe(seed.contacts.length);

  // Groups, their members in the order added, their metadata.
  const groups = await walk((page) => listGroups(ctx, page), 1);
  expect(groups.map((g) => [g.id, g.name, g.member_count, g.metadata])).toEqual(
    seed.groups.map((g) => [g.id, g.name, g.memberIds.length, g.metadata]),
  );
  for (const group of seed.groups)
    expect((await walk((page) => listMembers(ctx, group.id, page), 1)).map((m) => m.contact_id)).toEqual(group.memberIds);

  // Files, all and by status.
  expect(ids(await walk((page) => listFiles(ctx, page)))).toEqual(ids(seed.files));
  for (const status of ['pending', 'ready'] as const) {
    expect(ids((await listFiles(ctx, { limit: 25, after: null }, { status })).items)).toEqual(
      ids(seed.files.filter((f) => f.status === status)),
    );
  }

  // Events, with patterns; the update above added one more.
  const events = await walk((page) => listEvents(ctx, page), 3);
  expect(ids(events).slice(0, seed.events.length)).toEqual(seed.events);
  // Events from before 016 name no actor (null, not a guess); those after it keep theirs.
  for (const event of events.slice(0, seed.events.length)) {
    const { actor, request_id } = JSON.parse(event.json) as { actor: unknown; request_id: unknown };
    expect({ actor, request_id }).toEqual(seed.eventActors[event.id]);
  }
  if (seed.events.length > 0) {
    const contactEvents = await walk((page) => listEvents(ctx, page, { type: 'contact.*' }));
    expect(contactEvents.length).toBeGreaterThan(0);
    for (const event of contactEvents) expect(JSON.parse(event.json)).toMatchObject({ type: expect.stringMatching(/^contact\./) });
  }
}

function expectContact(got: ContactView, want: SeedContact): void {
  expect(got).toMatchObject({
    id: want.id,
    first_name: want.first_name,
    last_name: want.last_name,
    email: want.email,
    phone: want.phone,
    source_type: want.source_type,
    created_at: want.created_at,
    external_id: want.external_id,
    metadata: want.metadata,
  });
  expect(got.labels.map((l) => l.id).sort()).toEqual([...want.labelIds].sort());
}

/** Other ways to write the same address: upper-cased domain, and an IDN domain in its `xn--` form. */
export function emailForms(email: string): string[] {
  const at = email.lastIndexOf('@');
  const local = email.slice(0, at);
  const domain = email.slice(at + 1);
  const ace = new URL(`http://${domain}`).hostname; // Node's IDNA: the ASCII form
  // Accents decomposed (`u` and a combining diaeresis) are the same address (019).
  return [email, email.toUpperCase(), email.normalize('NFD'), `${local}@${ace.toUpperCase()}`];
}
