import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedIn, type DashboardUser } from './helpers/browserSession.js';
import { seedContacts } from './helpers/contactSeed.js';
import { addMember, ALL_SCOPES, DIALECTS, makeHarness, type Harness } from './helpers/harness.js';
import { endpointFor } from './helpers/webhooks.js';
import { postSignIn } from './helpers/signInForm.js';

/** The overview at `/` (issue 32, item 3), through HTTP on both databases. */
describe.each(DIALECTS)('overview on %s', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(() => h.close());

  const overview = async (user: DashboardUser) => {
    const res = await user.get('/');
    expect(res.statusCode).toBe(200);
    return res.body;
  };
  /** The figure of a count tile, as shown: "1,050", "0". */
  const count = (body: string, label: RegExp) => {
    const match = body.match(new RegExp(`<strong class="stat-number">([^<]*)</strong>\\s*<span class="stat-label">${label.source}</span>`));
    return match?.[1] ?? null;
  };
  const stepsDone = (body: string) =>
    body
      .match(/(\d) of (\d) steps done/)
      ?.slice(1)
      .join('/') ?? 'hidden';
  const step = (body: string, title: string) => body.match(new RegExp(`${title}</strong> <span class="sr-only">\\(([^)]*)\\)`))?.[1];
  /** Waits until the request log has written the org's requests (it writes in batches). */
  const logged = (orgId: string, n: number) =>
    expect
      .poll(async () => (await h.db.kysely.selectFrom('request_log').select('request_id').where('org_id', '=', orgId).execute()).length, {
        timeout: 5000,
      })
      .toBe(n);

  it('signs in to the overview (a next is still honoured) and sends people who are not signed in to sign in', async () => {
    const org = await h.newOrg();
    const login = (fields: Record<string, string>) =>
      postSignIn(h.app, { email: org.adminEmail, password: 'correct horse battery', ...fields });
    expect((await login({})).headers.location).toBe('/');
    expect((await login({ next: '/groups?x=1' })).headers.location).toBe('/groups?x=1');
    expect((await login({ next: '//evil.example/' })).headers.location).toBe('/');
    const anonymous = await h.app.inject({ method: 'GET', url: '/' });
    expect(anonymous.statusCode).toBe(303);
    expect(anonymous.headers.location).toMatch(/^\/login/);
    // An API key does not open the dashboard.
    const key = await org.key(ALL_SCOPES);
    expect((await h.app.inject({ method: 'GET', url: '/', headers: { authorization: `Bearer ${key}` } })).statusCode).toBe(401);
  });

  it("counts the organisation's contacts, groups and files, formatted, and no other organisation's", async () => {
    const org = await h.newOrg('Counted');
    const other = await h.newOrg('Other');
    const admin = await signedIn(h, org.adminEmail);
    let body = await overview(admin);
    expect(body).toMatch(/<a href="\/"\s+aria-current="page"\s*>(<svg[^]*?<\/svg>)?<span>Overview<\/span><\/a/);
    expect([count(body, /contacts/), count(body, /groups/), count(body, /files/)]).toEqual(['0', '0', '0']);

    const key = await org.key(ALL_SCOPES);
    const otherKey = await other.key(ALL_SCOPES);
    expect((await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Ada', email: 'ada@example.com' })).statusCode).toBe(201);
    expect((await h.call(key, 'POST', '/api/v1/groups', { name: 'Newsletter' })).statusCode).toBe(201);
    expect((await h.call(key, 'POST', '/api/v1/groups', { name: 'Board' })).statusCode).toBe(201);
    const file = { name: 'notes.txt', content_type: 'text/plain', size: 11 };
    expect((await h.call(key, 'POST', '/api/v1/files', file)).statusCode).toBe(201);
    // The other organisation's records are not counted here.
    for (let i = 0; i < 3; i++) {
      expect((await h.call(otherKey, 'POST', '/api/v1/contacts', { first_name: 'Eve', email: `eve${i}@example.com` })).statusCode).toBe(
        201,
      );
      expect((await h.call(otherKey, 'POST', '/api/v1/groups', { name: `Theirs ${i}` })).statusCode).toBe(201);
      expect((await h.call(otherKey, 'POST', '/api/v1/files', file)).statusCode).toBe(201);
    }
    body = await overview(admin);
    expect(count(body, /contact/)).toBe('1');
    expect(count(body, /groups/)).toBe('2');
    expect(count(body, /file/)).toBe('1');
    expect(body).not.toContain('Theirs');
    expect(body).not.toContain('Eve');

    // Thousands are grouped one way (Intl.NumberFormat('en')).
    await seedContacts(org, 1049, (i) => ({ first_name: `Seeded ${i}`, email: `seeded${i}@example.com` }));
    body = await overview(admin);
    expect(count(body, /contacts/)).toBe('1,050');
    const theirs = await signedIn(h, other.adminEmail);
    expect(count(await overview(theirs), /contacts/)).toBe('3');
  });

  it('shows the last events with the Activity page’s wording and links, newest first', async () => {
    const org = await h.newOrg();
    const key = await org.key(ALL_SCOPES);
    const admin = await signedIn(h, org.adminEmail);
    expect(await overview(admin)).toContain('Nothing has happened yet.');
    const ids: string[] = [];
    for (const name of ['First', 'Second', 'Third', 'Fourth', 'Fifth', 'Sixth']) {
      const res = await h.call(key, 'POST', '/api/v1/contacts', { first_name: name, email: `${name.toLowerCase()}@example.com` });
      ids.push(res.json().id);
    }
    const body = await overview(admin);
    const recent = body.slice(body.indexOf('id="recent"'), body.indexOf('</section>', body.indexOf('id="recent"')));
    expect(recent).toContain('<code>contact.created</code>');
    // The five newest, newest first, each linking to its contact; the oldest is on the Activity page.
    expect(recent).toContain(`<a href="/contacts/${ids[5]}">Sixth</a>`);
    expect(recent.indexOf('Sixth')).toBeLessThan(recent.indexOf('Second'));
    expect(recent).not.toContain(`/contacts/${ids[0]}"`);
    expect(recent).toContain('<a href="/activity">All activity</a>');
    // Who did it, linking to their events as on the Activity page.
    const keyId = (await h.db.kysely.selectFrom('api_keys').select('id').where('org_id', '=', org.orgId).executeTakeFirstOrThrow()).id;
    expect(recent).toContain(`href="/activity?actor=${keyId}"`);
  });

  it('ticks the getting-started steps from real data: a key, a first API call, a webhook; then hides them', async () => {
    const org = await h.newOrg();
    const other = await h.newOrg();
    const admin = await signedIn(h, org.adminEmail);
    let body = await overview(admin);
    expect(stepsDone(body)).toBe('0/3');
    expect(step(body, 'Create an API key')).toBe('not done yet');
    expect(body).toContain('<a href="/settings/developer">Developer → API keys</a>');
    expect(body).toContain('<a href="/settings/developer/webhooks">Developer → Webhooks</a>');

    // Another organisation's key, call and endpoint tick nothing here.
    const otherKey = await other.key(ALL_SCOPES);
    expect((await h.call(otherKey, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    await endpointFor(h.db.kysely, other.orgId, 'http://127.0.0.1:9/hook');
    await logged(other.orgId, 1);
    expect(stepsDone(await overview(admin))).toBe('0/3');

    const key = await org.key(['contacts:read']);
    body = await overview(admin);
    expect(stepsDone(body)).toBe('1/3');
    expect(step(body, 'Create an API key')).toBe('done');
    expect(step(body, 'Make your first API call')).toBe('not done yet');

    // Even a refused call is a call that reached the API with the key.
    expect((await h.call(key, 'GET', '/api/v1/groups')).statusCode).toBe(403);
    await logged(org.orgId, 1);
    body = await overview(admin);
    expect(stepsDone(body)).toBe('2/3');
    expect(step(body, 'Make your first API call')).toBe('done');
    expect(step(body, 'Add a webhook endpoint')).toBe('not done yet');

    await endpointFor(h.db.kysely, org.orgId, 'http://127.0.0.1:9/hook');
    body = await overview(admin);
    expect(stepsDone(body)).toBe('hidden');
    expect(body).not.toContain('Getting started');
  });

  it("shows the last 14 days of the organisation's API usage from real requests", async () => {
    const org = await h.newOrg();
    const other = await h.newOrg();
    const admin = await signedIn(h, org.adminEmail);
    let body = await overview(admin);
    expect(body).toContain('API usage, last 14 days');
    expect(body).toContain('No API requests in the last 14 days.');
    expect(body).not.toContain('usage-bars');

    const key = await org.key(ALL_SCOPES);
    const otherKey = await other.key(ALL_SCOPES);
    expect((await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Ada', email: 'ada@example.com' })).statusCode).toBe(201);
    expect((await h.call(key, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    expect((await h.call(key, 'GET', '/api/v1/contacts/con_00000000000000000000')).statusCode).toBe(404);
    for (let i = 0; i < 4; i++) expect((await h.call(otherKey, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    await logged(org.orgId, 3);
    await logged(other.orgId, 4);
    body = await overview(admin);
    // 14 rows, today's first.
    const rows = [...body.matchAll(/<tr>\s*<th scope="row"><time datetime="([0-9-]+)">/g)].map((m) => m[1]);
    expect(rows).toHaveLength(14);
    expect(rows[0]).toBe(new Date().toISOString().slice(0, 10));
    expect(body).toMatch(/<strong>3<\/strong> requests in the last 14 days, at most\s+3 a day/);
    // Today's row: two succeeded, one refused, none failed, three in all.
    const today = body.match(/<tr>\s*<th scope="row"><time datetime="[0-9-]+">[^<]*<\/time><\/th>((?:\s*<td>[^<]*<\/td>)+)/)![1]!;
    expect([...today.matchAll(/<td>([^<]*)<\/td>/g)].map((m) => m[1])).toEqual(['2', '1', '0', '3']);
    expect(body).toContain('<svg');
    expect(body).toMatch(/aria-label="Requests per day, [A-Z][a-z]{2} \d+ to [A-Z][a-z]{2} \d+: 3 in all"/);
    expect(body).toContain('<a href="/settings/developer/usage">');
  });

  it("shows a member what they can: the counts and activity, their own steps, neither usage nor the admins' links", async () => {
    const org = await h.newOrg();
    const key = await org.key(ALL_SCOPES);
    expect((await h.call(key, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    const member = await signedIn(h, (await addMember(h, org.orgId, 'member')).email);
    let body = await overview(member);
    expect(count(body, /contacts/)).toBe('0');
    expect(body).not.toContain('API usage');
    expect(body).not.toContain('/settings/developer');
    expect(body).not.toContain('Create an API key');
    expect(stepsDone(body)).toBe('0/2');
    expect(step(body, 'Add a contact')).toBe('not done yet');
    expect(body).toContain('<a href="/contacts/new">Add one</a>');
    expect(body).toContain('are set up by its admins');
    // No Settings entries in a member's navigation; Overview is first.
    const nav = body.slice(body.indexOf('<nav aria-label="Main">'), body.indexOf('</nav>'));
    expect(nav.match(/<a href="([^"]*)"/)?.[1]).toBe('/');
    expect(nav).toMatch(/<a href="\/"\s+aria-current="page"\s*>(<svg[^]*?<\/svg>)?<span>Overview<\/span><\/a/);
    expect(nav).not.toContain('Developer');

    expect((await member.post('/contacts', { first_name: 'Made', last_name: 'Bymember', email: 'made@example.com' })).statusCode).toBe(303);
    body = await overview(member);
    expect(count(body, /contact/)).toBe('1');
    expect(stepsDone(body)).toBe('1/2');
    expect(body).toContain('Bymember');
    expect((await h.call(key, 'POST', '/api/v1/groups', { name: 'Team' })).statusCode).toBe(201);
    expect(stepsDone(await overview(member))).toBe('hidden');
  });
});
