import type { Kysely } from 'kysely';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { migrateToLatest, migrations, migrator, type Db } from '../src/db/database.js';
import { createContact } from '../src/domain/contacts/contacts.js';
import { listContacts, type ContactFilters } from '../src/domain/contacts/list.js';
import { searchText } from '../src/domain/contacts/searchText.js';
import type { Ctx } from '../src/domain/context.js';
import { DIALECTS, freshDatabase } from './helpers/harness.js';

// Migration 019_contact_email_nfc on a database holding both spellings of an address (the other
// migrations' tests are in migrations.test.ts; the upgrade of every fixture in upgrade.test.ts).
describe.each(DIALECTS)('migration 019 on %s', (dialect) => {
  let db: Db | null = null;
  afterEach(async () => {
    await db?.close();
    db = null;
  });

  async function migrateTo(name: string): Promise<void> {
    const { error } = await migrator(db!).migrateTo(name);
    if (error) throw error;
  }

  it("019 puts contacts' emails in NFC, and reports a pair already holding both spellings without merging it", async () => {
    db = await freshDatabase(dialect, undefined, { migrate: false });
    await migrateTo('018_event_system_actor');
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tables as they were before 019
    const old = db.kysely as unknown as Kysely<any>;
    const at = '2024-01-01T10:00:00.000Z';
    await old
      .insertInto('orgs')
      .values([
        { id: 'org_1', name: 'Org', created_at: at },
        { id: 'org_2', name: 'Other', created_at: at },
      ])
      .execute();
    const contact = (id: string, email: string, org_id = 'org_1') => ({
      id,
      org_id,
      first_name: id,
      last_name: 'Test',
      email,
      email_lower: email.toLowerCase(),
      source_type: 'api',
      search_text: searchText({ first_name: id, last_name: 'Test', email, phone: null }),
      created_at: at,
      updated_at: at,
    });
    const nfd = (text: string) => text.normalize('NFD');
    await old
      .insertInto('contacts')
      .values([
        contact('con_a', nfd('ü-x@x.test')),
        contact('con_caps', nfd('Ü-Y@x.test')),
        contact('con_ascii', 'plain@x.test'),
        // The duplicate the bug let in: both spellings of one address in one organisation.
        contact('con_zoe1', 'zoë@x.test'),
        contact('con_zoe2', nfd('zoë@x.test')),
        // Another organisation's holder is no conflict.
        contact('con_zoe3', nfd('zoë@x.test'), 'org_2'),
      ])
      .execute();

    const lines: string[] = [];
    const write = vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    const started = new Date().toISOString();
    try {
      expect(await migrateToLatest(db)).toEqual(Object.keys(migrations).filter((name) => name >= '019'));
    } finally {
      write.mockRestore();
    }
    const rows = await db.kysely.selectFrom('contacts').select(['id', 'email', 'email_lower', 'updated_at']).orderBy('id').execute();
    const byId = Object.fromEntries(rows.map((r) => [r.id, r]));
    expect(byId.con_a).toMatchObject({ email: 'ü-x@x.test', email_lower: 'ü-x@x.test' });
    expect(byId.con_caps).toMatchObject({ email: 'Ü-Y@x.test', email_lower: 'ü-y@x.test' });
    expect(byId.con_zoe3).toMatchObject({ email: 'zoë@x.test', email_lower: 'zoë@x.test' });
    for (const id of ['con_a', 'con_caps', 'con_zoe3']) expect(byId[id]!.updated_at >= started, id).toBe(true);
    // Left as they were: ASCII, already NFC, or the NFC address held by another contact.
    expect(byId.con_ascii).toMatchObject({ email: 'plain@x.test', updated_at: at });
    expect(byId.con_zoe1).toMatchObject({ email: 'zoë@x.test', updated_at: at });
    expect(byId.con_zoe2).toMatchObject({ email: nfd('zoë@x.test'), email_lower: nfd('zoë@x.test'), updated_at: at });
    // The pair is reported, naming the organisation and both contacts (and no address).
    const reported = lines.filter((line) => line.includes('019_contact_email_nfc'));
    expect(reported).toHaveLength(1);
    expect(reported[0]).toMatch(/organisation org_1, contact con_zoe2's email is the same address as contact con_zoe1's/);
    expect(reported[0]).not.toContain('@x.test');

    // Found by email= in either spelling; not created again in the other.
    const ctx: Ctx = {
      db: db.kysely,
      orgId: 'org_1',
      actor: { kind: 'user', userId: 'usr_1', role: 'admin' },
      requestId: 'test',
      now: new Date(),
    };
    const ids = async (filters: ContactFilters) => (await listContacts(ctx, { limit: 25, after: null }, filters)).items.map((c) => c.id);
    for (const form of ['ü-x@x.test', nfd('ü-x@x.test'), nfd('Ü-X@X.TEST')]) expect(await ids({ email: form }), form).toEqual(['con_a']);
    await expect(createContact(ctx, { first_name: 'A', email: 'ü-x@x.test' }, 'api')).rejects.toMatchObject({
      code: 'contact_exists',
      extra: { existing_id: 'con_a' },
    });
  });
});
