import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, ALL_SCOPES, DIALECTS, makeHarness, type Harness } from './helpers/harness.js';
import { signedIn } from './helpers/browserSession.js';

/** The dashboard's Activity page and the Timelines of contacts and groups (issue 20, item 2). */
describe.each(DIALECTS)('dashboard activity on %s', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(() => h.close());

  const decode = (s: string) => s.replace(/&amp;/g, '&').replace(/&#38;/g, '&');
  const link = (body: string, text: string) => {
    const match = new RegExp(`href="([^"]+)"[^>]*>${text}`).exec(body);
    return match ? decode(match[1]!) : null;
  };
  const rows = (body: string) => [...body.matchAll(/<tr id="(evt_[0-9A-Za-z]+)"/g)].map((m) => m[1]!);

  it('lists who did what, newest first, with the request_id, filters and older/newer pages, for admins and members', async () => {
    const org = await h.newOrg('Acme');
    const key = await org.key(ALL_SCOPES);
    const made = await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com' });
    const ada = made.json();
    const patched = await h.call(key, 'PATCH', `/api/v1/contacts/${ada.id}`, { last_name: 'King' });
    const admin = await signedIn(h, org.adminEmail);
    expect((await admin.post('/groups', { name: 'Friends' })).statusCode).toBe(303);
    for (let i = 0; i < 27; i++) await h.call(key, 'POST', '/api/v1/contacts', { first_name: `P${i}`, email: `p${i}@example.com` });

    const page = await admin.get('/activity');
    expect(page.statusCode).toBe(200);
    expect(page.body).toMatch(/<a href="\/activity"\s+aria-current="page"\s*>(<svg[^]*?<\/svg>)?<span>Activity<\/span><\/a/);
    const first = rows(page.body);
    expect(first).toHaveLength(25);
    expect(page.body).toContain('P26');
    expect(page.body).toContain(`test key (key …${key.slice(-4)})`);
    // Older, then newer again: no event lost or repeated.
    const older = await admin.get(link(page.body, 'Older →')!);
    const second = rows(older.body);
    expect(second).toHaveLength(30 - 25);
    expect(new Set([...first, ...second]).size).toBe(30);
    expect(older.body).toContain(patched.headers['request-id'] as string);
    expect(older.body).toContain(made.headers['request-id'] as string);
    expect(older.body).not.toContain('Older →');
    // The update, before → after, with a link to the contact.
    expect(older.body).toMatch(/<del>Lovelace<\/del>[\s\S]*<ins>King<\/ins>/);
    expect(older.body).toContain(`<a href="/contacts/${ada.id}">Ada King</a>`);
    const back = await admin.get(link(older.body, '← Newer')!);
    expect(rows(back.body)).toEqual(first);

    // Filters: the person, a type, a record.
    const byAdmin = await admin.get(`/activity?actor=${org.adminId}`);
    expect(rows(byAdmin.body)).toHaveLength(1);
    expect(byAdmin.body).toContain('group.created');
    expect(byAdmin.body).toContain(`<option value="${org.adminId}"  selected>${org.adminEmail}</option>`);
    expect(rows((await admin.get('/activity?type=contact.updated')).body)).toHaveLength(1);
    const history = await admin.get(`/activity?subject=${ada.id}`);
    expect(rows(history.body)).toHaveLength(2);
    expect(history.body).toContain('Only what happened to');
    // A cursor only works with the filters it was made for.
    const cursor = new URL(`http://x${link(page.body, 'Older →')!}`).searchParams.get('older')!;
    expect((await admin.get(`/activity?type=contact.*&older=${encodeURIComponent(cursor)}`)).statusCode).toBe(400);
    expect((await admin.get('/activity?type=nothing')).statusCode).toBe(400);

    // A member sees the same page (every member reads the activity; see activity.ts).
    const member = await addMember(h, org.orgId, 'member');
    const asMember = await signedIn(h, member.email);
    const memberPage = await asMember.get('/activity');
    expect(memberPage.statusCode).toBe(200);
    expect(rows(memberPage.body)).toEqual(first);
  });

  it("shows a contact's and a group's timeline, escaped, and nothing of another organisation", async () => {
    const org = await h.newOrg('Timeline org');
    const key = await org.key(ALL_SCOPES);
    const evil = '<script>alert(1)</script>';
    const contact = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: evil, email: 'evil@example.com' })).json();
    await h.call(key, 'PATCH', `/api/v1/contacts/${contact.id}`, { notes: `<img src=x onerror=alert(2)>` });
    const group = (await h.call(key, 'POST', '/api/v1/groups', { name: 'Group <b>bold</b>' })).json();
    await h.call(key, 'POST', `/api/v1/groups/${group.id}/members`, { contact_ids: [contact.id] });
    const admin = await signedIn(h, org.adminEmail);

    const contactPage = await admin.get(`/contacts/${contact.id}`);
    expect(contactPage.statusCode).toBe(200);
    expect(contactPage.body).toContain('<h2 id="timeline">Timeline</h2>');
    expect(contactPage.body).toMatch(
      /<code>notes<\/code><\/th>\s*<td><del>—<\/del><\/td>\s*<td><ins>&#60;img src=x onerror=alert\(2\)&#62;<\/ins>/,
    );
    expect(rows(contactPage.body)).toHaveLength(3); // created, updated, added to the group
    expect(contactPage.body).toContain(`href="/activity?subject=${contact.id}"`);
    const groupPage = await admin.get(`/groups/${group.id}`);
    expect(rows(groupPage.body)).toHaveLength(2); // created, and its member added
    expect(groupPage.body).toContain('group.member_added');
    for (const body of [contactPage.body, groupPage.body, (await admin.get('/activity')).body]) {
      expect(body).not.toContain('<script>alert');
      expect(body).not.toContain('<img src=x');
      expect(body).not.toContain('<b>bold');
    }

    // Another organisation's admin sees none of it, whatever the filters name.
    const other = await h.newOrg('Other org');
    const outsider = await signedIn(h, other.adminEmail);
    const keyId = (await h.db.kysely.selectFrom('api_keys').select('id').where('org_id', '=', org.orgId).executeTakeFirstOrThrow()).id;
    for (const url of ['/activity', `/activity?subject=${contact.id}`, `/activity?subject=${group.id}`, `/activity?actor=${keyId}`]) {
      const res = await outsider.get(url);
      expect(res.statusCode, url).toBe(200);
      expect(rows(res.body), url).toEqual([]);
      for (const secret of ['evil@example.com', 'alert', 'bold', org.adminEmail, 'test key']) expect(res.body, url).not.toContain(secret);
    }
    expect((await outsider.get(`/contacts/${contact.id}`)).statusCode).toBe(404);
  });
});
