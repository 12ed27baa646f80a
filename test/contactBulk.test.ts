import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bulkAddLabel } from '../src/domain/contacts/bulk.js';
import { createGroup } from '../src/domain/groups/groups.js';
import { addMembers } from '../src/domain/groups/members.js';
import { createLabel } from '../src/domain/labels/labels.js';
import { signedIn, type DashboardUser } from './helpers/browserSession.js';
import { seedContacts } from './helpers/contactSeed.js';
import { addMember, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

// Issue 20, item 5: the contacts list's bulk actions, through the dashboard's forms.
describe.each(DIALECTS)('dashboard bulk actions on contacts on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let other: Org;
  let admin: DashboardUser;
  let member: DashboardUser;
  let otherIds: string[];
  let n = 0;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    other = await h.newOrg();
    admin = await signedIn(h, org.adminEmail);
    member = await signedIn(h, (await addMember(h, org.orgId, 'member')).email);
    otherIds = await seedContacts(other, 5, (i) => ({ first_name: 'Bulky', last_name: 'Other', email: `o${i}@example.com` }));
  });
  afterAll(() => h.close());

  /** Contacts with this first name (a word of their own for the search), made for one test. */
  const seed = (count: number, firstName: string) =>
    seedContacts(org, count, (i) => ({ first_name: firstName, last_name: `N${i}`, email: `b${n++}@example.com` }));

  // What happened since a mark is told apart by event id, not by time: a write finishing in the
  // millisecond the mark was taken (SQLite in-process, 50 rows) would otherwise count as after it.
  const mark = async () =>
    new Set((await h.db.kysely.selectFrom('events').select('id').where('org_id', '=', org.orgId).execute()).map((r) => r.id));
  const events = async (type: string, before: Set<string>) =>
    (
      await h.db.kysely
        .selectFrom('events')
        .select(['id', 'subject_id', 'related_id', 'actor_type', 'data'])
        .where('org_id', '=', org.orgId)
        .where('type', '=', type)
        .execute()
    ).filter((e) => !before.has(e.id));
  const flashOf = (res: { headers: Record<string, unknown> }) =>
    decodeURIComponent(/od_flash=([^;]*)/.exec(String(res.headers['set-cookie']))?.[1] ?? '');
  const linked = async (labelId: string) =>
    (await h.db.kysely.selectFrom('contact_labels').select('contact_id').where('label_id', '=', labelId).execute()).map(
      (r) => r.contact_id,
    );
  const exists = async (ids: string[]) => (await h.db.kysely.selectFrom('contacts').select('id').where('id', 'in', ids).execute()).length;

  it('adds a label to every contact of "all matching" (1,000), one event per contact changed and none for the others', async () => {
    const ids = await seed(1000, 'Labelme');
    const bystanders = await seed(20, 'Bystander');
    const label = await createLabel(org.adminCtx(), { name: `VIP ${n}` });
    // 200 have it already: they change nothing and get no event.
    await bulkAddLabel(org.adminCtx(), { ids: ids.slice(0, 200) }, label.id);
    const since = await mark();
    const res = await admin.post('/contacts/bulk', { q: 'labelme', action: 'add_label', bulk_label_id: label.id, all: 'matching' });
    expect(res.statusCode, res.body).toBe(303);
    expect(res.headers.location).toBe('/contacts?q=labelme');
    expect(flashOf(res)).toBe('Label added to 800 contacts (200 contacts had it already).');
    expect((await linked(label.id)).sort()).toEqual([...ids].sort());
    const updated = await events('contact.updated', since);
    expect(updated).toHaveLength(800);
    expect(new Set(updated.map((e) => e.subject_id))).toEqual(new Set(ids.slice(200)));
    expect(updated.every((e) => e.actor_type === 'user')).toBe(true);
    const data = JSON.parse(updated[0]!.data) as { object: { labels: { id: string }[] }; previous_attributes: { labels: unknown[] } };
    expect(data.object.labels.map((l) => l.id)).toContain(label.id);
    expect(data.previous_attributes.labels).toEqual([]);
    expect(bystanders.some((id) => updated.some((e) => e.subject_id === id))).toBe(false);
  });

  it('adds ticked rows to a group, one member_added event per new member', async () => {
    const ids = await seed(1000, 'Groupme');
    const group = await createGroup(org.adminCtx(), { name: `Group ${n}` });
    await addMembers(org.adminCtx(), group.id, ids.slice(0, 50));
    const since = await mark();
    const res = await member.post('/contacts/bulk', { action: 'add_to_group', group_id: group.id, ids });
    expect(res.statusCode, res.body).toBe(303);
    expect(flashOf(res)).toBe('Added 950 contacts to the group (50 contacts were members already).');
    const added = await events('group.member_added', since);
    expect(added).toHaveLength(950);
    expect(new Set(added.map((e) => e.subject_id))).toEqual(new Set(ids.slice(50)));
    expect(added.every((e) => e.related_id === group.id)).toBe(true);
    const members = await h.db.kysely.selectFrom('group_members').select('contact_id').where('group_id', '=', group.id).execute();
    expect(members).toHaveLength(1000);
  });

  it('deletes after a confirmation that says how many, admins only, honouring the filter', async () => {
    const ids = await seed(1000, 'Deleteme');
    const label = await createLabel(org.adminCtx(), { name: `Doomed ${n}` });
    await bulkAddLabel(org.adminCtx(), { ids }, label.id);
    const keep = await seed(10, 'Deleteme'); // the same word, without the label: the filter keeps them
    const fields = { q: 'deleteme', label_id: label.id, action: 'delete', all: 'matching' };
    const ask = await admin.post('/contacts/bulk', fields);
    expect(ask.statusCode).toBe(200);
    // The confirmation names the first two, newest first as the list shows them, and counts the others.
    expect(ask.body).toContain('<h1>Delete Deleteme N999, Deleteme N998 and 998 others?</h1>');
    expect(ask.body).toContain('1,000 contacts will be removed');
    expect(ask.body).toContain('value="yes"');
    expect(await exists(ids)).toBe(1000);
    // Members may not delete in bulk: neither the question nor the deed.
    expect((await member.post('/contacts/bulk', fields)).statusCode).toBe(403);
    expect((await member.post('/contacts/bulk', { ...fields, confirmed: 'yes' })).statusCode).toBe(403);
    expect(await exists(ids)).toBe(1000);
    const since = await mark();
    const done = await admin.post('/contacts/bulk', { ...fields, confirmed: 'yes' });
    expect(done.statusCode, done.body).toBe(303);
    expect(flashOf(done)).toBe('Deleted 1,000 contacts.');
    expect(await exists(ids)).toBe(0);
    expect(await exists(keep)).toBe(10);
    const deleted = await events('contact.deleted', since);
    expect(deleted).toHaveLength(1000);
    expect(new Set(deleted.map((e) => e.subject_id))).toEqual(new Set(ids));
    // The ticked rows' way asks too, with their number.
    const two = await admin.post('/contacts/bulk', { action: 'delete', ids: keep.slice(0, 2) });
    expect(two.body).toContain('<h1>Delete Deleteme N0 and Deleteme N1?</h1>');
    expect(two.body).toContain('Delete 2 contacts</button>');
    const one = await admin.post('/contacts/bulk', { action: 'delete', ids: keep.slice(3, 4) });
    expect(one.body).toContain('<h1>Delete Deleteme N3?</h1>');
    const four = await admin.post('/contacts/bulk', { action: 'delete', ids: keep.slice(4, 8) });
    expect(four.body).toContain('<h1>Delete Deleteme N4, Deleteme N5 and 2 others?</h1>');
  });

  it('refuses a form without the CSRF token, and changes nothing', async () => {
    const ids = await seed(3, 'Csrf');
    const label = await createLabel(org.adminCtx(), { name: `Csrf ${n}` });
    const res = await admin.post('/contacts/bulk', { action: 'add_label', bulk_label_id: label.id, ids }, { csrf: null });
    expect(res.statusCode).toBe(403);
    const wrong = await admin.post('/contacts/bulk', { action: 'delete', confirmed: 'yes', ids }, { csrf: 'x'.repeat(admin.csrf.length) });
    expect(wrong.statusCode).toBe(403);
    expect(await linked(label.id)).toEqual([]);
    expect(await exists(ids)).toBe(3);
  });

  it("refuses another organisation's ids, touching neither organisation's contacts", async () => {
    const ids = await seed(5, 'Mixed');
    const label = await createLabel(org.adminCtx(), { name: `Mixed ${n}` });
    const since = await mark();
    for (const action of ['add_label', 'delete']) {
      const res = await admin.post('/contacts/bulk', { action, confirmed: 'yes', bulk_label_id: label.id, ids: [...ids, otherIds[0]!] });
      expect(res.statusCode).toBe(404);
      expect(res.body).toContain(otherIds[0]);
    }
    expect(await linked(label.id)).toEqual([]);
    expect(await exists([...ids, ...otherIds])).toBe(10);
    expect(await events('contact.updated', since)).toEqual([]);
    expect(await events('contact.deleted', since)).toEqual([]);
    // "All matching" is this organisation's: the other's "Bulky" contacts are not matched.
    const res = await admin.post('/contacts/bulk', { q: 'bulky', action: 'add_label', bulk_label_id: label.id, all: 'matching' });
    expect(flashOf(res)).toBe('Label added to 0 contacts.');
  });

  it('says what is missing when nothing is ticked, or the action is unknown', async () => {
    const label = await createLabel(org.adminCtx(), { name: `Nobody ${n}` });
    const none = await admin.post('/contacts/bulk', { action: 'add_label', bulk_label_id: label.id, q: 'z' });
    expect(none.statusCode).toBe(303);
    expect(none.headers.location).toBe('/contacts?q=z');
    expect(flashOf(none)).toBe('Nothing was changed: choose at least one contact.');
    const nobody = await admin.post('/contacts/bulk', { action: 'delete' });
    expect(nobody.statusCode).toBe(303);
    expect(flashOf(nobody)).toBe('Nothing was changed: choose at least one contact.');
    const percent = await admin.post('/contacts/bulk', { action: 'add_label', bulk_label_id: label.id, q: '%', all: 'matching' });
    expect(flashOf(percent)).toBe('Nothing was changed: no contact matches this search.');
    const odd = await admin.post('/contacts/bulk', { action: 'explode', ids: otherIds });
    expect(flashOf(odd)).toBe('Nothing was changed: choose an action.');
  });

  it('is all or nothing: a failure on the 900th contact leaves the first 899 unchanged, with no event', async () => {
    const ids = await seed(1000, 'Atomic');
    const label = await createLabel(org.adminCtx(), { name: `Atomic ${n}` });
    const victim = [...ids].sort()[899]!;
    if (dialect === 'sqlite') {
      await sql
        .raw(
          `create trigger fail_bulk before insert on contact_labels when new.contact_id = '${victim}' begin select raise(abort, 'injected'); end`,
        )
        .execute(h.db.kysely);
    } else {
      await sql
        .raw(
          `create function fail_bulk() returns trigger language plpgsql as $$ begin if new.contact_id = '${victim}' then raise exception 'injected'; end if; return new; end $$;
           create trigger fail_bulk before insert on contact_labels for each row execute function fail_bulk()`,
        )
        .execute(h.db.kysely);
    }
    try {
      const since = await mark();
      const stamps = () => h.db.kysely.selectFrom('contacts').select(['id', 'updated_at']).where('id', 'in', ids).orderBy('id').execute();
      const before = await stamps();
      expect(before).toHaveLength(1000);
      await expect(bulkAddLabel(org.adminCtx(), { ids }, label.id)).rejects.toThrow(/injected/);
      expect(await linked(label.id)).toEqual([]);
      expect(await events('contact.updated', since)).toEqual([]);
      expect(await stamps()).toEqual(before);
      // Through the dashboard: an error page, and still nothing.
      expect((await admin.post('/contacts/bulk', { action: 'add_label', bulk_label_id: label.id, ids })).statusCode).toBe(500);
      expect(await linked(label.id)).toEqual([]);
      expect(await events('contact.updated', since)).toEqual([]);
      expect(await stamps()).toEqual(before);
    } finally {
      await sql.raw('drop trigger fail_bulk' + (dialect === 'sqlite' ? '' : ' on contact_labels')).execute(h.db.kysely);
    }
  });
});

describe.each(DIALECTS)('bulk actions above 10,000 contacts on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    await seedContacts(org, 10_001, (i) => ({ first_name: 'Many', last_name: `N${i}`, email: `m${i}@example.com` }));
  }, 120_000);
  afterAll(() => h.close());

  it('counts "10,000+" and refuses to act on more than 10,000 at once, changing nothing', async () => {
    const admin = await signedIn(h, org.adminEmail);
    const page = await admin.get('/contacts');
    expect(page.body).toContain('10,000+ contacts</p>');
    expect((await admin.get('/contacts?q=many')).body).toContain('10,000+ contacts</p>');
    const label = await createLabel(org.adminCtx(), { name: 'Too many' });
    const res = await admin.post('/contacts/bulk', { action: 'add_label', bulk_label_id: label.id, all: 'matching' });
    expect(res.statusCode).toBe(303);
    expect(decodeURIComponent(/od_flash=([^;]*)/.exec(String(res.headers['set-cookie']))![1]!)).toBe(
      'Nothing was changed: more than 10,000 contacts at once: narrow the search or the label, then act on each part.',
    );
    expect(await h.db.kysely.selectFrom('contact_labels').select('contact_id').where('label_id', '=', label.id).execute()).toEqual([]);
    const ask = await admin.post('/contacts/bulk', { action: 'delete', all: 'matching' });
    expect(ask.body).toContain('<h1>Too many contacts</h1>');
    expect(ask.body).not.toContain('value="yes"');
    const events = await h.db.kysely
      .selectFrom('events')
      .select('id')
      .where('org_id', '=', org.orgId)
      .where('type', '=', 'contact.updated')
      .execute();
    expect(events).toEqual([]);
  });
});
