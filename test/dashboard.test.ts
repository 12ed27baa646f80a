import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { formBody, signedIn } from './helpers/browserSession.js';
import { postSignIn } from './helpers/signInForm.js';

describe.each(DIALECTS)('dashboard sign-in, sessions and CSRF on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg('Dash Org');
  });
  afterAll(() => h.close());

  const login = (email: string, password: string, remoteAddress = '198.51.100.7') =>
    postSignIn(h.app, { email, password }, { remoteAddress });

  it('redirects to sign-in, signs in with a secure session cookie, and signs out', async () => {
    const anonymous = await h.app.inject({ method: 'GET', url: '/contacts' });
    expect(anonymous.statusCode).toBe(303);
    expect(anonymous.headers.location).toBe('/login?next=%2Fcontacts');
    const form = await h.app.inject({ method: 'GET', url: '/login' });
    expect(form.statusCode).toBe(200);
    expect(form.body).toContain('<label for="f-email">Email</label>');
    expect(form.headers['content-security-policy']).toContain("default-src 'self'");

    const ok = await login(org.adminEmail, 'correct horse battery');
    expect(ok.statusCode).toBe(303);
    expect(ok.headers.location).toBe('/');
    const setCookie = String(ok.headers['set-cookie']);
    expect(setCookie).toMatch(/od_session=[A-Za-z0-9_-]{40,}/);
    expect(setCookie).toContain('HttpOnly');
    expect(setCookie).toContain('SameSite=Lax');
    const cookie = setCookie.split(';')[0]!;
    const page = await h.app.inject({ method: 'GET', url: '/contacts', headers: { cookie } });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<h1>Contacts</h1>');
    expect(page.body).toContain('Dash Org');

    const csrf = /name="_csrf" value="([^"]+)"/.exec(page.body)![1]!;
    const out = await h.app.inject({
      method: 'POST',
      url: '/logout',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
      payload: formBody({ _csrf: csrf }),
    });
    expect(out.statusCode).toBe(303);
    expect((await h.app.inject({ method: 'GET', url: '/contacts', headers: { cookie } })).statusCode).toBe(303);
  });

  it('refuses a wrong password without saying whether the account exists, and throttles guessing', async () => {
    const wrong = await login(org.adminEmail, 'wrong password', '203.0.113.50');
    const unknown = await login('nobody@example.com', 'wrong password', '203.0.113.50');
    expect(wrong.statusCode).toBe(401);
    expect(unknown.statusCode).toBe(401);
    expect(wrong.body).toContain('The email or password is not right.');
    expect(unknown.body).toContain('The email or password is not right.');
    for (let i = 0; i < 4; i++) await login(org.adminEmail, 'wrong password', '203.0.113.50');
    const throttled = await login(org.adminEmail, 'correct horse battery', '203.0.113.50');
    expect(throttled.statusCode).toBe(429);
    expect(throttled.body).toContain('Too many failed attempts');
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThan(0);
    // Another address is not affected.
    expect((await login(org.adminEmail, 'correct horse battery', '203.0.113.51')).statusCode).toBe(303);
  });

  it('shows errors next to the fields of the sign-in form', async () => {
    const res = await login('', '');
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('id="f-email-error"');
    expect(res.body).toContain('id="f-password-error"');
  });

  it('refuses form posts without the session CSRF token, changing nothing', async () => {
    const user = await signedIn(h, org.adminEmail);
    for (const csrf of [null, '', 'forged-token-forged-token-forged']) {
      const res = await user.post('/contacts', { first_name: 'Csrf', email: 'csrf@example.com' }, { csrf });
      expect(res.statusCode).toBe(403);
      expect(res.headers['content-type']).toContain('text/html');
    }
    const key = await org.key(['contacts:read']);
    expect((await h.call(key, 'GET', '/api/v1/contacts?email=csrf@example.com')).json().data).toEqual([]);
    expect((await user.post('/contacts', { first_name: 'Csrf', email: 'csrf@example.com' })).statusCode).toBe(303);
  });

  it('never opens to an API key, and keeps members out of the settings pages', async () => {
    const key = await org.key(['contacts:write']);
    const withKey = await h.app.inject({ method: 'GET', url: '/contacts', headers: { authorization: `Bearer ${key}` } });
    expect(withKey.statusCode).toBe(401);
    expect(withKey.headers['content-type']).toContain('text/html');
    for (const url of ['/settings/developer', '/settings/members']) {
      const res = await h.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${key}` } });
      expect(res.statusCode, url).toBe(401);
    }
    const member = await addMember(h, org.orgId, 'member');
    const asMember = await signedIn(h, member.email);
    expect((await asMember.get('/contacts')).statusCode).toBe(200);
    for (const url of ['/settings/developer', '/settings/members']) {
      const res = await asMember.get(url);
      expect(res.statusCode, url).toBe(403);
      expect(res.body).toContain('Not allowed');
    }
    expect((await asMember.get('/contacts')).body).not.toContain('href="/settings/developer"');
  });

  it('loses access at once when removed from the organisation', async () => {
    const member = await addMember(h, org.orgId, 'member');
    const user = await signedIn(h, member.email);
    expect((await user.get('/contacts')).statusCode).toBe(200);
    await h.db.kysely.deleteFrom('memberships').where('user_id', '=', member.id).execute();
    expect((await user.get('/contacts')).statusCode).toBe(303);
  });

  it('switches between organisations the user belongs to, and only those', async () => {
    const other = await h.newOrg('Second Org');
    await h.db.kysely
      .insertInto('memberships')
      .values({ org_id: other.orgId, user_id: org.adminId, role: 'member', created_at: new Date().toISOString() })
      .execute();
    const user = await signedIn(h, org.adminEmail);
    const before = await user.get('/contacts');
    expect(before.body).toContain('Second Org');
    const switched = await user.post('/orgs/switch', { org_id: other.orgId });
    expect(switched.statusCode).toBe(303);
    const after = await user.get('/contacts');
    expect(after.body).toMatch(/<option value="[^"]+"\s+selected>Second Org<\/option>/);
    const stranger = await h.newOrg('Not Mine');
    expect((await user.post('/orgs/switch', { org_id: stranger.orgId })).statusCode).toBe(403);
  });

  it('does not redirect off-site after sign-in', async () => {
    const res = await postSignIn(
      h.app,
      { email: org.adminEmail, password: 'correct horse battery', next: '//evil.example/x' },
      { remoteAddress: '198.51.100.99' },
    );
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/');
  });

  it('creates, edits and deletes a contact through the forms, shared with the API', async () => {
    const user = await signedIn(h, org.adminEmail);
    const key = await org.key(['contacts:write']);
    const invalid = await user.post('/contacts', { first_name: '', email: 'nope' });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.body).toContain('id="f-email-error"');
    expect(invalid.body).toContain('id="f-first_name-error"');
    const created = await user.post('/contacts', { first_name: 'Form', last_name: 'Made', email: 'form@example.com', phone: '' });
    expect(created.statusCode).toBe(303);
    const viaApi = (await h.call(key, 'GET', '/api/v1/contacts?email=form@example.com')).json().data[0];
    expect(viaApi).toMatchObject({ first_name: 'Form', last_name: 'Made', phone: null, source_type: 'manual' });
    const apiMade = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Api', email: 'api-made@example.com' })).json();
    const list = await user.get('/contacts?q=api-made');
    expect(list.body).toContain('api-made@example.com');
    const duplicate = await user.post(`/contacts/${viaApi.id}`, { first_name: 'Form', email: 'api-made@example.com' });
    expect(duplicate.statusCode).toBe(400);
    expect(duplicate.body).toContain('already exists');
    // Deleting asks first: the contact's page links to a confirmation, whose form deletes.
    const detail = await user.get(`/contacts/${apiMade.id}`);
    expect(detail.body).toContain(`href="/contacts/${apiMade.id}/delete"`);
    expect(detail.body).not.toContain(`action="/contacts/${apiMade.id}/delete"`);
    const confirm = await user.get(`/contacts/${apiMade.id}/delete`);
    expect(confirm.statusCode).toBe(200);
    expect(confirm.body).toContain('This cannot be undone.');
    expect(confirm.body).toContain(`action="/contacts/${apiMade.id}/delete"`);
    expect((await h.call(key, 'GET', `/api/v1/contacts/${apiMade.id}`)).statusCode).toBe(200);
    expect((await user.post(`/contacts/${apiMade.id}/delete`)).statusCode).toBe(303);
    expect((await h.call(key, 'GET', `/api/v1/contacts/${apiMade.id}`)).statusCode).toBe(404);
  });

  it('searches full names, emails and phone numbers, with or without separators (the API’s q=), and sorts by column', async () => {
    const own = await h.newOrg();
    const user = await signedIn(h, own.adminEmail);
    const key = await own.key(['contacts:write']);
    const make = async (body: Record<string, string>) => (await h.call(key, 'POST', '/api/v1/contacts', body)).json().id as string;
    const alan = await make({ first_name: 'Alan', last_name: 'Turing', email: 'alan@example.com', phone: '+44 (20) 7946-0018' });
    const ada = await make({ first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', phone: '020 7946 0999' });
    const found = async (q: string) => {
      const res = await user.get(`/contacts?q=${encodeURIComponent(q)}`);
      expect(res.statusCode).toBe(200);
      return [alan, ada].filter((id) => res.body.includes(`/contacts/${id}`));
    };
    expect(await found('Alan Turing')).toEqual([alan]);
    expect(await found('  alan   TURING ')).toEqual([alan]);
    expect(await found('Al Tur')).toEqual([alan]);
    expect(await found('n Tur')).toEqual([]); // words are matched from their start (the API's q=)
    expect(await found('tur')).toEqual([alan]);
    expect(await found('ada@')).toEqual([ada]);
    expect(await found('7946')).toEqual([alan, ada]);
    expect(await found('7946 0018')).toEqual([alan]);
    expect(await found('+44 20 7946')).toEqual([alan]);
    expect(await found('(020) 7946-0999')).toEqual([ada]);
    expect(await found('Alan Lovelace')).toEqual([]);
    expect(await found('%')).toEqual([]);

    // Column sorting: the API's sort=, the header says which way.
    const byName = await user.get('/contacts?sort=last_name');
    expect(byName.body.indexOf(`/contacts/${ada}"`)).toBeLessThan(byName.body.indexOf(`/contacts/${alan}"`));
    expect(byName.body).toContain('aria-sort="ascending"');
    expect(byName.body).toContain('href="/contacts?sort=-last_name"');
    const reversed = await user.get('/contacts?sort=-last_name');
    expect(reversed.body.indexOf(`/contacts/${alan}"`)).toBeLessThan(reversed.body.indexOf(`/contacts/${ada}"`));
    expect(reversed.body).toContain('aria-sort="descending"');
    expect((await user.get('/contacts?sort=nonsense')).statusCode).toBe(200);
  });

  it('throttles guesses sent in parallel, per account across addresses, and IPv6 by /64', async () => {
    const o = await h.newOrg();
    const burst = await Promise.all(Array.from({ length: 12 }, () => login(o.adminEmail, 'wrong password', '203.0.113.90')));
    expect(burst.filter((r) => r.statusCode === 429).length).toBeGreaterThanOrEqual(7);
    // Another address in the same IPv6 /64 is the same client.
    const p = await h.newOrg();
    for (let i = 0; i < 5; i++) await login(p.adminEmail, 'wrong password', '2001:db8:1:2::10');
    expect((await login(p.adminEmail, 'correct horse battery', '2001:db8:1:2::99')).statusCode).toBe(429);
    // One account guessed from many addresses is limited too.
    const q = await h.newOrg();
    for (let i = 0; i < 20; i++) await login(q.adminEmail, 'wrong password', `192.0.2.${i + 1}`);
    expect((await login(q.adminEmail, 'correct horse battery', '192.0.2.200')).statusCode).toBe(429);
  });

  it('refuses a sign-in form posted from another site', async () => {
    const res = await h.app.inject({
      method: 'POST',
      url: '/login',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example', 'sec-fetch-site': 'cross-site' },
      payload: formBody({ email: org.adminEmail, password: 'correct horse battery' }),
      remoteAddress: '198.51.100.120',
    });
    expect(res.statusCode).toBe(403);
    expect(res.headers['set-cookie']).toBeUndefined();
  });

  it('never redirects off-site, whatever the next parameter hides', async () => {
    for (const [next, expected] of [
      ['/\t/evil.example', '/'],
      ['/%09/evil.example', '/%09/evil.example'],
      ['/\\evil.example', '/'],
      ['https://evil.example/', '/'],
      ['/\n/x', '/'],
      ['/groups?x=é', '/groups?x=%C3%A9'],
    ]) {
      const res = await postSignIn(
        h.app,
        { email: org.adminEmail, password: 'correct horse battery', next: next! },
        { remoteAddress: '198.51.100.121' },
      );
      expect(res.statusCode, next).toBe(303);
      expect(res.headers.location, next).toBe(expected);
    }
  });

  it('survives long emoji names in messages, malformed uploads, and ends sessions of removed members', async () => {
    const user = await signedIn(h, org.adminEmail);
    const emoji = await user.post('/contacts', { first_name: 'a' + '😀'.repeat(199), email: 'emoji-flash@example.com' });
    expect(emoji.statusCode).toBe(303);
    const broken = await h.app.inject({
      method: 'POST',
      url: '/import',
      headers: { cookie: user.cookie, 'content-type': 'multipart/form-data' },
      payload: 'not multipart at all',
    });
    expect(broken.statusCode).toBe(400);
    const member = await addMember(h, org.orgId, 'member');
    const session = await signedIn(h, member.email);
    await user.post('/settings/members/remove', { email: member.email, confirm: 'yes' });
    await h.db.kysely
      .insertInto('memberships')
      .values({ org_id: org.orgId, user_id: member.id, role: 'member', created_at: new Date().toISOString() })
      .execute();
    expect((await session.get('/contacts')).statusCode).toBe(303);
    const missing = await h.app.inject({ method: 'GET', url: '/no-such-page', headers: { accept: 'text/html' } });
    expect(missing.statusCode).toBe(404);
    expect(missing.headers['x-frame-options']).toBe('DENY');
    expect(missing.headers['content-security-policy']).toContain("default-src 'self'");
  });
});
