import { readFileSync } from 'node:fs';
import { sql, type Kysely } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { migrateToLatest, migrator, type Db } from '../src/db/database.js';
import { batchContacts } from '../src/domain/contacts/batch.js';
import { createContact } from '../src/domain/contacts/contacts.js';
import { importContacts } from '../src/domain/contacts/import.js';
import { listContacts, type ContactFilters } from '../src/domain/contacts/list.js';
import { searchText } from '../src/domain/contacts/searchText.js';
import type { Ctx } from '../src/domain/context.js';
import { DIALECTS, freshDatabase, type Dialect } from './helpers/harness.js';

/** An empty database of this dialect, no migration applied; dropped by the afterEach below. */
const emptyDatabase = (dialect: Dialect): Promise<Db> => freshDatabase(dialect, undefined, { migrate: false });

async function migrateTo(db: Db, name: string): Promise<void> {
  const { error } = await migrator(db).migrateTo(name);
  if (error) throw error;
}

describe.each(DIALECTS)('migrations on %s', (dialect) => {
  let db: Db | null = null;
  afterEach(async () => {
    await db?.close();
    db = null;
  });

  it('006 gives the label links of an existing database their contact’s created_at, and lists them in order', async () => {
    db = await emptyDatabase(dialect);
    await migrateTo(db, '005_list_indexes');
    // Rows as a database made before 006 holds them: the links have no contact_created_at yet.
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tables as they were before 006, not today's Database type
    const old = db.kysely as unknown as Kysely<any>;
    const at = (day: number) => `2024-01-${String(day).padStart(2, '0')}T10:00:00.000Z`;
    await old
      .insertInto('orgs')
      .values({ id: 'org_1', name: 'Org', created_at: at(1) })
      .execute();
    const contact = (id: string, day: number) => ({
      id,
      org_id: 'org_1',
      first_name: id,
      last_name: '',
      email: `${id}@example.com`,
      email_lower: `${id}@example.com`,
      source_type: 'manual',
      created_at: at(day),
      updated_at: at(day),
    });
    // Created out of id order, so the list order (created_at, id) is not the insertion order.
    await old
      .insertInto('contacts')
      .values([contact('con_c', 2), contact('con_a', 3), contact('con_b', 2), contact('con_d', 4)])
      .execute();
    const label = (id: string) => ({ id, org_id: 'org_1', name: id, name_lower: id, created_at: at(1), updated_at: at(1) });
    await old
      .insertInto('labels')
      .values([label('lbl_x'), label('lbl_y')])
      .execute();
    const link = (contactId: string, labelId: string, day: number) => ({
      org_id: 'org_1',
      contact_id: contactId,
      label_id: labelId,
      created_at: at(day),
    });
    // con_c was given lbl_x long after it was created, after the others.
    await old
      .insertInto('contact_labels')
      .values([
        link('con_a', 'lbl_x', 3),
        link('con_d', 'lbl_x', 4),
        link('con_b', 'lbl_x', 5),
        link('con_c', 'lbl_x', 9),
        link('con_d', 'lbl_y', 4),
      ])
      .execute();

    await migrateToLatest(db);

    const links = await db.kysely
      .selectFrom('contact_labels')
      .innerJoin('contacts', 'contacts.id', 'contact_labels.contact_id')
      .select(['contact_labels.contact_id', 'contact_labels.label_id', 'contact_labels.created_at', 'contact_labels.contact_created_at'])
      .select('contacts.created_at as contact_created')
      .orderBy('contact_labels.contact_id')
      .orderBy('contact_labels.label_id')
      .execute();
    expect(links).toHaveLength(5);
    for (const row of links) expect(row.contact_created_at).toBe(row.contact_created);
    expect(links.find((row) => row.contact_id === 'con_c')?.created_at).toBe(at(9)); // the link's own time is kept

    const ctx = {
      db: db.kysely,
      orgId: 'org_1',
      actor: { kind: 'user', userId: 'usr_1', role: 'admin' } as const,
      requestId: 'test',
      now: new Date(),
    };
    const ids = async (labelId: string) => (await listContacts(ctx, { limit: 10, after: null }, { labelId })).items.map((c) => c.id);
    expect(await ids('lbl_x')).toEqual(['con_b', 'con_c', 'con_a', 'con_d']);
    expect(await ids('lbl_y')).toEqual(['con_d']);

    // The column is required from now on: a link that does not say when its contact was made is refused.
    await expect(
      old
        .insertInto('contact_labels')
        .values(link('con_a', 'lbl_y', 10))
        .execute(),
    ).rejects.toThrow();
    // Deleting a contact or a label still removes its links.
    await db.kysely.deleteFrom('contacts').where('id', '=', 'con_a').execute();
    await db.kysely.deleteFrom('labels').where('id', '=', 'lbl_y').execute();
    expect(await db.kysely.selectFrom('contact_labels').select('contact_id').orderBy('contact_id').execute()).toEqual([
      { contact_id: 'con_b' },
      { contact_id: 'con_c' },
      { contact_id: 'con_d' },
    ]);
  });

  it('011 renames imported contacts csv_import, in their events too, and leaves text inside values alone', async () => {
    db = await emptyDatabase(dialect);
    await migrateTo(db, '010_settings');
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tables as they were before 011
    const old = db.kysely as unknown as Kysely<any>;
    const at = '2024-01-01T10:00:00.000Z';
    await old.insertInto('orgs').values({ id: 'org_1', name: 'Org', created_at: at }).execute();
    const contact = (id: string, source_type: string, notes: string | null = null) => ({
      id,
      org_id: 'org_1',
      first_name: id,
      last_name: '',
      email: `${id}@example.com`,
      email_lower: `${id}@example.com`,
      notes,
      source_type,
      created_at: at,
      updated_at: at,
    });
    const tricky = 'pasted: "source_type":"import"';
    const rows = [contact('con_i', 'import'), contact('con_m', 'manual', tricky)];
    await old.insertInto('contacts').values(rows).execute();
    await old
      .insertInto('events')
      .values(
        rows.map((row, i) => ({
          id: `evt_${i}`,
          org_id: 'org_1',
          type: 'contact.created',
          resource: 'contact',
          data: JSON.stringify({ object: { object: 'contact', ...row } }),
          created_at: at,
        })),
      )
      .execute();
    expect(await migrateToLatest(db)).toContain('011_source_types');
    const sources = await old.selectFrom('contacts').select(['id', 'source_type', 'notes']).orderBy('id').execute();
    expect(sources).toEqual([
      { id: 'con_i', source_type: 'csv_import', notes: null },
      { id: 'con_m', source_type: 'manual', notes: tricky },
    ]);
    const events = await old.selectFrom('events').select(['id', 'data']).orderBy('id').execute();
    expect(events.map((e: { data: string }) => JSON.parse(e.data).object.source_type)).toEqual(['csv_import', 'manual']);
    expect(JSON.parse(events[1]!.data).object.notes).toBe(tricky);
  });

  it('015 gives contacts stored before domain normalisation their canonical email, unless another contact holds it', async () => {
    db = await emptyDatabase(dialect);
    await migrateTo(db, '014_search_prefixes');
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tables as they were before 015
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
      // As migration 013 and the version before 015 wrote it: from the address as stored.
      search_text: searchText({ first_name: id, last_name: 'Test', email, phone: null }),
      created_at: at,
      updated_at: at,
    });
    await old
      .insertInto('contacts')
      .values([
        contact('con_ada', 'Ada@XN--BCHER-KVA.example'),
        contact('con_zoe', 'Zoe@Example.COM'),
        contact('con_fine', 'fine@bücher.example'),
        // The duplicate the bug let in: the canonical address is taken, the old row stays as it is.
        contact('con_bob1', 'bob@bücher.example'),
        contact('con_bob2', 'bob@xn--bcher-kva.example'),
        // Two old forms of one address: the first (by id) takes it.
        contact('con_cy1', 'cy@xn--bcher-kva.example'),
        contact('con_cy2', 'cy@bu\u0308cher.example'),
        // Another organisation's holder is no conflict.
        contact('con_bob3', 'bob@XN--BCHER-KVA.example', 'org_2'),
      ])
      .execute();
    const ctx: Ctx = {
      db: db.kysely,
      orgId: 'org_1',
      actor: { kind: 'user', userId: 'usr_1', role: 'admin' },
      requestId: 'test',
      now: new Date(),
    };
    const ids = async (filters: ContactFilters, orgId = 'org_1') =>
      (await listContacts({ ...ctx, orgId }, { limit: 25, after: null }, filters)).items.map((c) => c.id);
    // The bug, before 015: the address in its canonical form does not find the contact.
    expect(await ids({ email: 'ada@bücher.example' })).toEqual([]);

    const started = new Date().toISOString();
    expect(await migrateToLatest(db)).toEqual([
      '015_contact_email_domains',
      '016_event_actors',
      '017_request_log',
      '018_event_system_actor',
      '019_contact_email_nfc',
      '020_invitations_password_resets',
      '021_sign_in_factors',
      '022_sso_trust',
      '023_sso_domain_verification',
      '025_bounded_sign_in',
      '026_sso_links_consent',
      '027_sandbox',
      '028_session_test_mode',
    ]);
    const rows = await db.kysely.selectFrom('contacts').select(['id', 'email', 'email_lower', 'updated_at']).orderBy('id').execute();
    const byId = Object.fromEntries(rows.map((r) => [r.id, r]));
    expect(byId.con_ada).toMatchObject({ email: 'Ada@bücher.example', email_lower: 'ada@bücher.example' });
    expect(byId.con_zoe).toMatchObject({ email: 'Zoe@example.com', email_lower: 'zoe@example.com' });
    expect(byId.con_bob3).toMatchObject({ email: 'bob@bücher.example' });
    expect(byId.con_cy1).toMatchObject({ email: 'cy@bücher.example' });
    for (const id of ['con_ada', 'con_zoe', 'con_bob3', 'con_cy1']) expect(byId[id]!.updated_at >= started, id).toBe(true);
    // Left as they were: already canonical, or the canonical address taken.
    expect(byId.con_fine).toMatchObject({ email: 'fine@bücher.example', updated_at: at });
    expect(byId.con_bob1).toMatchObject({ email: 'bob@bücher.example', updated_at: at });
    expect(byId.con_bob2).toMatchObject({ email: 'bob@xn--bcher-kva.example', updated_at: at });
    expect(byId.con_cy2).toMatchObject({ email: 'cy@bu\u0308cher.example', updated_at: at });

    // Found by email= in any form, and by q= through the search index of 014.
    for (const form of ['ada@bücher.example', 'ADA@BÜCHER.EXAMPLE', 'Ada@xn--bcher-kva.example'])
      expect(await ids({ email: form }), form).toEqual(['con_ada']);
    expect(await ids({ words: ['bucher'] })).toEqual(expect.arrayContaining(['con_ada', 'con_fine', 'con_bob1', 'con_cy1']));
    expect(await ids({ words: ['xn'] })).toEqual(['con_bob2']);
    expect(await ids({ updatedAfter: at })).toEqual(['con_ada', 'con_cy1', 'con_zoe']);
    expect(await ids({ email: 'bob@bücher.example' }, 'org_2')).toEqual(['con_bob3']);
    // Not created twice: a POST, a CSV import row, a batch upsert on email.
    await expect(createContact(ctx, { first_name: 'Ada', email: 'ada@bücher.example' }, 'api')).rejects.toMatchObject({
      code: 'contact_exists',
      extra: { existing_id: 'con_ada' },
    });
    expect((await importContacts(ctx, 'first_name,email\nAda,Ada@XN--BCHER-KVA.example\n', { partial: true })).counts).toMatchObject({
      created: 0,
      refused: 1,
    });
    const [upserted] = await batchContacts(ctx, [{ input: { first_name: 'Ada', email: 'Ada@bücher.example', notes: 'synced' } }], {
      mode: 'upsert',
      matchOn: 'email',
      atomic: true,
    });
    expect(upserted).toMatchObject({ status: 200, contact: { id: 'con_ada', notes: 'synced' } });
    expect(await ids({ email: 'ada@bücher.example' })).toEqual(['con_ada']);

    // The query CHANGELOG.md gives for this database finds the pairs left behind.
    const changelog = readFileSync(new URL('../CHANGELOG.md', import.meta.url), 'utf8');
    const section = changelog.slice(changelog.indexOf('`015_contact_email_domains`'));
    const queries = [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]!.replace(/^ {2}/gm, '').trim().replace(/;$/, ''));
    const { rows: pairs } = await sql
      .raw<{ left_id: string; holder_id: string }>(queries[dialect === 'sqlite' ? 0 : 1]!)
      .execute(db.kysely);
    expect(pairs.map((p) => [p.left_id, p.holder_id])).toEqual([['con_bob2', 'con_bob1']]);
  });

  it('016 finds what older events happened to (subject, group) and names no actor for them', async () => {
    db = await emptyDatabase(dialect);
    await migrateTo(db, '015_contact_email_domains');
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tables as they were before 016
    const old = db.kysely as unknown as Kysely<any>;
    const at = '2024-01-01T10:00:00.000Z';
    await old.insertInto('orgs').values({ id: 'org_1', name: 'Org', created_at: at }).execute();
    const event = (id: string, type: string, object: object) => ({
      id,
      org_id: 'org_1',
      type,
      resource: type.split('.')[0],
      data: JSON.stringify({ object }),
      created_at: at,
    });
    await old
      .insertInto('events')
      .values([
        event('evt_1', 'contact.created', { object: 'contact', id: 'con_1', first_name: 'Ada' }),
        event('evt_2', 'group.member_added', { object: 'group_member', id: 'con_1', group_id: 'grp_1', contact_id: 'con_1' }),
        event('evt_3', 'contact.deleted', { object: 'contact', id: 'con_2', erased: true }),
      ])
      .execute();
    expect(await migrateToLatest(db)).toEqual([
      '016_event_actors',
      '017_request_log',
      '018_event_system_actor',
      '019_contact_email_nfc',
      '020_invitations_password_resets',
      '021_sign_in_factors',
      '022_sso_trust',
      '023_sso_domain_verification',
      '025_bounded_sign_in',
      '026_sso_links_consent',
      '027_sandbox',
      '028_session_test_mode',
    ]);
    const rows = await db.kysely
      .selectFrom('events')
      .select(['id', 'subject_id', 'related_id', 'actor_type', 'actor_id', 'request_id'])
      .orderBy('id')
      .execute();
    expect(rows).toEqual([
      { id: 'evt_1', subject_id: 'con_1', related_id: null, actor_type: null, actor_id: null, request_id: null },
      { id: 'evt_2', subject_id: 'con_1', related_id: 'grp_1', actor_type: null, actor_id: null, request_id: null },
      { id: 'evt_3', subject_id: 'con_2', related_id: null, actor_type: null, actor_id: null, request_id: null },
    ]);
  });

  it('023 keeps SSO domains as unverified claims with a token each; claims share a domain, one holds it verified', async () => {
    db = await emptyDatabase(dialect);
    await migrateTo(db, '021_sign_in_factors');
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the tables as they were before 023
    const old = db.kysely as unknown as Kysely<any>;
    const at = '2024-01-01T10:00:00.000Z';
    await old
      .insertInto('orgs')
      .values([
        { id: 'org_1', name: 'One', created_at: at },
        { id: 'org_2', name: 'Two', created_at: at },
      ])
      .execute();
    await old
      .insertInto('sso_domains')
      .values([
        { domain: 'one.example', org_id: 'org_1' },
        { domain: 'also-one.example', org_id: 'org_1' },
      ])
      .execute();
    expect(await migrateToLatest(db)).toContain('023_sso_domain_verification');
    const rows = await db.kysely.selectFrom('sso_domains').selectAll().orderBy('domain').execute();
    expect(rows.map((r) => [r.org_id, r.domain, r.verified_at, r.verified_method])).toEqual([
      ['org_1', 'also-one.example', null, null],
      ['org_1', 'one.example', null, null],
    ]);
    for (const row of rows) expect(row.token).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect(rows[0]!.token).not.toBe(rows[1]!.token);

    // Another organisation may claim the same domain; only one may hold it verified.
    const claim = (orgId: string, verified: boolean) => ({
      org_id: orgId,
      domain: 'one.example',
      token: `t-${orgId}`,
      created_at: at,
      verified_at: verified ? at : null,
      verified_method: verified ? 'dns' : null,
    });
    await expect(db.kysely.insertInto('sso_domains').values(claim('org_1', false)).execute()).rejects.toThrow();
    await db.kysely.insertInto('sso_domains').values(claim('org_2', false)).execute();
    await db.kysely.updateTable('sso_domains').set({ verified_at: at, verified_method: 'dns' }).where('org_id', '=', 'org_2').execute();
    await expect(
      db.kysely
        .updateTable('sso_domains')
        .set({ verified_at: at })
        .where('org_id', '=', 'org_1')
        .where('domain', '=', 'one.example')
        .execute(),
    ).rejects.toThrow();

    // Undone, a domain goes back to one organisation: its verified owner.
    await migrateTo(db, '021_sign_in_factors');
    const back = await old.selectFrom('sso_domains').selectAll().orderBy('domain').execute();
    expect(back).toEqual([
      { domain: 'also-one.example', org_id: 'org_1' },
      { domain: 'one.example', org_id: 'org_2' },
    ]);
    await migrateToLatest(db);
    expect(
      (await db.kysely.selectFrom('sso_domains').select(['org_id', 'verified_at']).execute()).every((r) => r.verified_at === null),
    ).toBe(true);
  });

  it('undoes 006 to 019 and applies them again', async () => {
    db = await emptyDatabase(dialect);
    await migrateToLatest(db);
    await migrateTo(db, '005_list_indexes');
    expect(await migrateToLatest(db)).toEqual([
      '006_contact_label_order',
      '007_event_resource_order',
      '008_drop_events_age',
      '009_blob_purges',
      '010_settings',
      '011_source_types',
      '012_contact_sync',
      '013_contact_search',
      '014_search_prefixes',
      '015_contact_email_domains',
      '016_event_actors',
      '017_request_log',
      '018_event_system_actor',
      '019_contact_email_nfc',
      '020_invitations_password_resets',
      '021_sign_in_factors',
      '022_sso_trust',
      '023_sso_domain_verification',
      '025_bounded_sign_in',
      '026_sso_links_consent',
      '027_sandbox',
      '028_session_test_mode',
    ]);
  });
});
