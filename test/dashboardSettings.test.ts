import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedIn, type DashboardUser } from './helpers/browserSession.js';
import { addMember, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

const keyIn = (body: string) => /<code id="new-key">\s*(od_live_[A-Za-z0-9]{43})\s*<\/code>/.exec(body)?.[1];

describe.each(DIALECTS)('dashboard settings on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let admin: DashboardUser;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg('Settings Org');
    admin = await signedIn(h, org.adminEmail);
  });
  afterAll(() => h.close());

  it('creates a key shown once, with write including read, and lists it by its last four characters', async () => {
    const res = await admin.post('/settings/developer/keys', { name: 'Sync', scopes: ['contacts:write', 'files:read'], expires: '90' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('You will not see it again');
    const key = keyIn(res.body)!;
    expect(key).toBeDefined();
    expect(res.headers.location).toBeUndefined();
    expect(String(res.headers['set-cookie'] ?? '')).not.toContain(key);
    const api = await h.call(key, 'GET', '/api/v1/contacts');
    expect(api.statusCode).toBe(200);
    expect((await h.call(key, 'GET', '/api/v1/files')).statusCode).toBe(200);
    expect((await h.call(key, 'GET', '/api/v1/groups')).statusCode).toBe(403);

    const list = await admin.get('/settings/developer');
    expect(list.body).not.toContain(key);
    expect(list.body).toContain(`…${key.slice(-4)}`);
    expect(list.body).toContain('contacts:read');
    expect(list.body).toContain(org.adminEmail);
  });

  it('links the official client README, which the server itself serves', async () => {
    const page = await admin.get('/settings/developer');
    expect(page.body).toContain('href="/docs/client"');
    const readme = await h.app.inject({ method: 'GET', url: '/docs/client' });
    expect(readme.statusCode).toBe(200);
    // Rendered as a page (it was raw markdown), with no script allowed to run in it.
    expect(readme.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(readme.headers['content-security-policy']).toContain("default-src 'none'");
    expect(readme.body).toContain('<h1>@orgdata/client</h1>');
    expect(readme.body).toContain('<pre><code class="language-sh">');
    expect(readme.body).not.toContain('```');
  });

  it('refuses a key without a name or scopes, with messages next to the fields', async () => {
    const res = await admin.post('/settings/developer/keys', { name: '', expires: '90' });
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('id="f-name-error"');
    expect(res.body).toContain('Choose at least one scope.');
    expect(keyIn(res.body)).toBeUndefined();
    const forged = await admin.post('/settings/developer/keys', { name: 'X', scopes: ['contacts:admin'], expires: '90' });
    expect(forged.statusCode).toBe(400);
    expect(forged.body).toContain('Unknown scope contacts:admin;');
  });

  it('revokes a key after confirmation, and the API refuses it at once', async () => {
    const key = keyIn(
      (await admin.post('/settings/developer/keys', { name: 'Short-lived', scopes: ['contacts:read'], expires: 'never' })).body,
    )!;
    expect((await h.call(key, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    const row = await h.db.kysely
      .selectFrom('api_keys')
      .select(['id', 'expires_at'])
      .where('name', '=', 'Short-lived')
      .executeTakeFirstOrThrow();
    expect(row.expires_at).toBeNull();
    const confirm = await admin.get(`/settings/developer/keys/${row.id}/revoke`);
    expect(confirm.body).toContain('Requests with it are refused at once');
    expect((await admin.post(`/settings/developer/keys/${row.id}/revoke`)).statusCode).toBe(303);
    expect((await h.call(key, 'GET', '/api/v1/contacts')).statusCode).toBe(401);
  });

  it('lets no member manage keys or members, even by posting directly', async () => {
    const member = await addMember(h, org.orgId, 'member');
    const asMember = await signedIn(h, member.email);
    const keyRow = await h.db.kysely.selectFrom('api_keys').select('id').where('org_id', '=', org.orgId).executeTakeFirstOrThrow();
    for (const [url, fields] of [
      ['/settings/developer/keys', { name: 'Sneaky', scopes: ['contacts:write'], expires: '90' }],
      [`/settings/developer/keys/${keyRow.id}/revoke`, {}],
      ['/settings/members', { email: 'new@example.com', role: 'admin' }],
      ['/settings/members/role', { email: member.email, role: 'admin', confirm: 'yes' }],
      ['/settings/members/remove', { email: org.adminEmail, confirm: 'yes' }],
    ] as const) {
      const res = await asMember.post(url, fields);
      expect(res.statusCode, url).toBe(403);
    }
    expect(await h.db.kysely.selectFrom('api_keys').select('id').where('name', '=', 'Sneaky').executeTakeFirst()).toBeUndefined();
    const role = await h.db.kysely.selectFrom('memberships').select('role').where('user_id', '=', member.id).executeTakeFirstOrThrow();
    expect(role.role).toBe('member');
  });

  it('warns before demoting an admin with keys, then revokes them', async () => {
    const bob = await addMember(h, org.orgId, 'admin');
    const bobSession = await signedIn(h, bob.email);
    const bobKey = keyIn(
      (await bobSession.post('/settings/developer/keys', { name: 'Bob', scopes: ['contacts:read'], expires: '90' })).body,
    )!;
    expect((await h.call(bobKey, 'GET', '/api/v1/contacts')).statusCode).toBe(200);

    const ask = await admin.post('/settings/members/role', { email: bob.email, role: 'member' });
    expect(ask.statusCode).toBe(200);
    expect(ask.body).toContain(`Demoting ${bob.email} revokes the 1 API key they created`);
    // Nothing changed yet.
    expect((await h.call(bobKey, 'GET', '/api/v1/contacts')).statusCode).toBe(200);

    const done = await admin.post('/settings/members/role', { email: bob.email, role: 'member', confirm: 'yes' });
    expect(done.statusCode).toBe(303);
    expect((await h.call(bobKey, 'GET', '/api/v1/contacts')).statusCode).toBe(401);
    const flash = String(done.headers['set-cookie']).split(';')[0]!;
    const page = await h.app.inject({ method: 'GET', url: '/settings/members', headers: { cookie: `${admin.cookie}; ${flash}` } });
    expect(decodeURIComponent(page.body)).toContain('1 API key they created was revoked');
    // Bob, now a member, is locked out of the Developer page at once.
    expect((await bobSession.get('/settings/developer')).statusCode).toBe(403);
  });

  it('invites members with field errors (no password field: people choose their own), and keeps the last admin', async () => {
    const form = await admin.get('/settings/members');
    expect(form.body).toContain('<button type="submit">Invite</button>');
    expect(form.body).not.toContain('type="password"');
    const bad = await admin.post('/settings/members', { email: 'not-an-email', role: 'owner' });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toContain('id="f-email-error"');
    expect(bad.body).toContain('id="f-role-error"');
    expect(bad.body).not.toContain('type="password"');
    const solo = await h.newOrg('Solo');
    const soloAdmin = await signedIn(h, solo.adminEmail);
    const refused = await soloAdmin.post('/settings/members/role', { email: solo.adminEmail, role: 'member', confirm: 'yes' });
    expect(refused.statusCode).toBe(400);
    expect(refused.body).toContain('at least one admin');
  });
});
