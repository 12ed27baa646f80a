import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGroup } from '../src/domain/groups/groups.js';
import { addMembers } from '../src/domain/groups/members.js';
import { errorSentence } from '../src/dashboard/html.js';
import { signedIn, type DashboardUser } from './helpers/browserSession.js';
import { seedContacts } from './helpers/contactSeed.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

// Issue 32 item 5, the small frictions, through HTTP: a group's picker without its members, adding
// a contact to a group from its page, validation messages as sentences, one number format, and
// empty states worded one way.
const unescape = (body: string) => body.replace(/&#39;/g, "'").replace(/&#34;/g, '"').replace(/&#38;/g, '&');
const offered = (body: string) => [...body.matchAll(/name="contact_ids" value="([^"]+)"/g)].map((m) => m[1]!);

describe('validation messages as sentences', () => {
  it.each([
    ['first_name', 'must NOT have fewer than 1 characters', "First name can't be empty."],
    ['first_name', 'must not be empty', "First name can't be empty."],
    ['last_name', 'must have required property last_name', "Last name can't be empty."],
    ['notes', 'must be at most 10000 characters', 'Notes can be at most 10,000 characters long.'],
    ['notes', 'must NOT have more than 200 characters', 'Notes can be at most 200 characters long.'],
    ['name', 'must NOT have fewer than 3 characters', 'Name must be at least 3 characters long.'],
    ['email', 'must match format "email"', 'Email must be an email address such as ada@example.com.'],
    ['email', 'must be a valid email address such as ada@example.com', 'Email must be an email address such as ada@example.com.'],
    ['url', 'must match format "uri"', 'URL must be a full URL such as https://example.com/hook.'],
    ['name', 'must match pattern "^[a-z]+$"', "Name has characters or a form that isn't allowed."],
    ['url', 'must use https', 'URL must use https.'],
    ['scopes', 'choose at least one scope', 'Choose at least one scope.'],
  ])('%s: %s', (field, message, sentence) => {
    expect(errorSentence(field, message)).toBe(sentence);
  });
});

describe.each(DIALECTS)('dashboard frictions on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let admin: DashboardUser;
  let ids: string[];
  let groupId: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    ids = await seedContacts(org, 30, (i) => ({ first_name: 'Pick', last_name: `P${i}`, email: `pick${i}@example.com` }));
    groupId = (await createGroup(org.adminCtx(), { name: 'Club' })).id;
    admin = await signedIn(h, org.adminEmail);
  });
  afterAll(() => h.close());

  it('offers only contacts not in the group yet, past the first 25 matches', async () => {
    // The first 27 matches are members: the picker reads on and offers the last three.
    await addMembers(org.adminCtx(), groupId, ids.slice(0, 27));
    const page = await admin.get(`/groups/${groupId}?q=pick`);
    expect(page.statusCode).toBe(200);
    expect(offered(page.body)).toEqual(ids.slice(27));
    expect(page.body).toContain('Only contacts not in the group yet are listed.');
    // An empty search lists the first non-members too.
    expect(offered((await admin.get(`/groups/${groupId}?q=`)).body)).toEqual(ids.slice(27));
    await addMembers(org.adminCtx(), groupId, ids.slice(27));
    const full = await admin.get(`/groups/${groupId}?q=pick`);
    expect(offered(full.body)).toEqual([]);
    expect(unescape(full.body)).toContain('Every contact matching “pick” is already in the group.');
    expect(unescape((await admin.get(`/groups/${groupId}?q=zzznobody`)).body)).toContain('No contact matches “zzznobody”.');
  });

  it("adds a contact to a group from the contact's page, offering only the groups it is not in", async () => {
    const other = await createGroup(org.adminCtx(), { name: 'Choir' });
    const third = await createGroup(org.adminCtx(), { name: 'Band' });
    const contact = ids[0]!; // in Club already
    const page = await admin.get(`/contacts/${contact}`);
    const picker = /<select id="add-to-group" name="group_id">([\s\S]*?)<\/select>/.exec(page.body)![1]!;
    expect([...picker.matchAll(/value="([^"]+)"/g)].map((m) => m[1])).toEqual([other.id, third.id]);
    const added = await admin.post(`/contacts/${contact}/groups`, { group_id: other.id });
    expect(added.statusCode).toBe(303);
    expect(added.headers.location).toBe(`/contacts/${contact}#groups`);
    const after = await admin.get(`/contacts/${contact}`);
    expect(after.body).toContain(`<a href="/groups/${other.id}">Choir</a>`);
    const left = /<select id="add-to-group" name="group_id">([\s\S]*?)<\/select>/.exec(after.body)![1]!;
    expect([...left.matchAll(/value="([^"]+)"/g)].map((m) => m[1])).toEqual([third.id]);
    // The same domain function as the group page: the event and the member count.
    const events = await h.db.kysely
      .selectFrom('events')
      .select(['type', 'subject_id'])
      .where('org_id', '=', org.orgId)
      .where('type', '=', 'group.member_added')
      .where('related_id', '=', other.id)
      .execute();
    expect(events).toEqual([{ type: 'group.member_added', subject_id: contact }]);
    // Without the CSRF token: refused, nothing changes.
    expect((await admin.post(`/contacts/${contact}/groups`, { group_id: third.id }, { csrf: null })).statusCode).toBe(403);
    // No group chosen: said, nothing changes; another organisation's group: not found.
    const none = await admin.post(`/contacts/${contact}/groups`, {});
    expect(none.statusCode).toBe(303);
    const theirs = await createGroup((await h.newOrg()).adminCtx(), { name: 'Theirs' });
    expect((await admin.post(`/contacts/${contact}/groups`, { group_id: theirs.id })).statusCode).toBe(404);
    expect((await admin.post(`/contacts/con_nobody/groups`, { group_id: third.id })).statusCode).toBe(404);
    const members = await h.db.kysely.selectFrom('group_members').select('group_id').where('contact_id', '=', contact).execute();
    expect(members.map((m) => m.group_id).sort()).toEqual([groupId, other.id].sort());
  });

  it('says what is wrong with a field in a sentence on the dashboard forms, the API unchanged', async () => {
    const contact = await admin.post('/contacts', { first_name: '', email: 'nope' });
    expect(contact.statusCode).toBe(400);
    const body = unescape(contact.body);
    expect(body).toContain(`<p class="error" id="f-first_name-error">First name can't be empty.</p>`);
    expect(body).toContain(`<p class="error" id="f-email-error">Email must be an email address such as ada@example.com.</p>`);
    expect(body).not.toContain('must not be empty');
    const group = await admin.post('/groups', { name: '' });
    expect(group.statusCode).toBe(400);
    expect(unescape(group.body)).toMatch(
      /<p class="error" id="f-name-error">Name (can't be empty|must be 1 to 200 characters long)\.<\/p>/,
    );
    const key = await org.key(['contacts:write']);
    const api = await h.call(key, 'POST', '/api/v1/contacts', { first_name: '', email: 'x@example.com' });
    expect(api.statusCode).toBe(400);
    expect(JSON.stringify(api.json())).not.toContain("can't");
  });

  it('prints counts one way (10,000 style) and words empty lists one way', async () => {
    const big = await createGroup(org.adminCtx(), { name: 'Big' });
    const many = await seedContacts(org, 1200, (i) => ({ first_name: 'Many', last_name: `M${i}`, email: `many${i}@example.com` }));
    for (let i = 0; i < many.length; i += 100) await addMembers(org.adminCtx(), big.id, many.slice(i, i + 100));
    expect((await admin.get(`/groups/${big.id}`)).body).toContain('1,200 members');
    expect((await admin.get('/groups')).body).toContain('<td>1,200</td>');
    expect((await admin.get('/contacts')).body).toContain('1,230 contacts');

    const empty = await h.newOrg();
    const user = await signedIn(h, empty.adminEmail);
    for (const [url, title] of [
      ['/contacts', 'No contacts yet.'],
      ['/labels', 'No labels yet.'],
      ['/groups', 'No groups yet.'],
      ['/files', 'No files yet.'],
      ['/settings/developer', 'No API keys yet.'],
      ['/settings/developer/webhooks', 'No webhook endpoints yet.'],
      ['/settings/developer/logs', 'No requests yet.'],
      ['/settings/members', 'No pending invitations.'],
    ] as const) {
      const res = await user.get(url);
      expect(res.statusCode, url).toBe(200);
      // The title, then one line on how to add the first.
      expect(res.body, url).toMatch(
        new RegExp(`<div class="empty-state">\\s*<p class="empty-title">${title.replace('.', '\\.')}</p>\\s*<p class="hint">[^<]+`),
      );
    }
    // The Members page's hint names the form once (it said "Invite someone with Invite someone below").
    const members = (await user.get('/settings/members')).body;
    expect(members).toContain('<p class="hint">To invite someone, use the form below.</p>');
    expect(members).not.toMatch(/Invite someone with Invite someone/);
    expect((await user.get('/contacts?q=nobody')).body).toContain('<p class="empty-title">No contact matches this search.</p>');
  });
});
