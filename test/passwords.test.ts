import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedIn, type DashboardUser } from './helpers/browserSession.js';
import { visitor } from './helpers/anonymousForms.js';
import { startMailCatcher, type MailCatcher } from './helpers/mailCatcher.js';
import { addMember, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { postSignIn } from './helpers/signInForm.js';

const PASSWORD = 'correct horse battery';
const NEW_PASSWORD = 'a brand new passphrase';
const LINK = /http:\/\/orgdata\.test\/reset-password\/([A-Za-z0-9_-]{43})/;
const pathOf = (url: string) => new URL(url).pathname;

/**
 * Forgotten and changed passwords (IDENTITY.md): the same answer whatever the email, a mailed
 * link that works once and ends every session, and a change of one's own password that ends the
 * other sessions and rotates this one.
 */
describe.each(DIALECTS)('passwords on %s', (dialect) => {
  let mail: MailCatcher;
  let h: Harness;
  let org: Org;

  beforeAll(async () => {
    mail = await startMailCatcher();
    h = await makeHarness(dialect, { env: { SMTP_URL: mail.url } });
    org = await h.newOrg('Reset Org');
  });
  afterAll(async () => {
    await h.close();
    await mail.close();
  });

  async function ask(email: string, remoteAddress = '198.51.100.30') {
    const person = visitor(h.app, remoteAddress);
    const form = await person.get('/forgot-password');
    expect(form.statusCode).toBe(200);
    return person.post('/forgot-password', { email });
  }

  it('answers a known and an unknown email alike, and mails only the known one', async () => {
    const user = await addMember(h, org.orgId, 'member');
    const known = await ask(user.email);
    const unknown = await ask('nobody-here@example.com');
    expect(known.statusCode).toBe(200);
    expect(unknown.statusCode).toBe(known.statusCode);
    expect(unknown.body).toBe(known.body);
    expect(known.body).toContain('If an orgdata account uses that address');
    const sent = await mail.waitFor(user.email);
    expect(sent.html).toBe(false);
    expect(sent.text).toContain('Reset Org');
    expect(sent.text).toMatch(LINK);
    expect(sent.text).toContain('1 hour');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(mail.to('nobody-here@example.com')).toEqual([]);
  });

  it('sets the new password through the link, ends every session, and the link works once', async () => {
    const user = await addMember(h, org.orgId, 'member');
    const before = await signedIn(h, user.email);
    expect((await before.get('/contacts')).statusCode).toBe(200);
    await ask(user.email);
    const link = pathOf(LINK.exec((await mail.waitFor(user.email)).text)![0]);

    const person = visitor(h.app);
    const form = await person.get(link);
    expect(form.statusCode).toBe(200);
    expect(form.body).toContain(user.email);
    expect((await person.post(link, { password: 'short' })).statusCode).toBe(400);
    const done = await person.post(link, { password: NEW_PASSWORD });
    expect(done.statusCode).toBe(200);
    expect(done.body).toContain('You have been signed out everywhere');

    // The old session is over: the dashboard sends it to sign in.
    const after = await before.get('/contacts');
    expect(after.statusCode).toBe(303);
    expect(after.headers.location).toMatch(/^\/login/);
    await expect(signedIn(h, user.email, PASSWORD)).rejects.toThrow();
    expect((await signedIn(h, user.email, NEW_PASSWORD)).cookie).toMatch(/^od_session=/);

    const reused = await visitor(h.app).get(link);
    expect(reused.statusCode).toBe(410);
    expect(reused.body).toContain('This password reset link no longer works');
    expect((await person.post(link, { password: 'yet another passphrase' })).statusCode).toBe(410);

    const admin = await signedIn(h, org.adminEmail);
    const activity = await admin.get('/activity?type=member.*');
    expect(activity.body).toContain('member.password_reset_requested');
    expect(activity.body).toContain('member.password_reset');
    // Members do not see identity changes.
    const member = await signedIn(h, (await addMember(h, org.orgId, 'member')).email);
    expect((await member.get('/activity')).body).not.toContain('member.password_reset');
  });

  it('answers 410 to an expired or unknown reset link', async () => {
    const user = await addMember(h, org.orgId, 'member');
    await ask(user.email);
    const link = pathOf(LINK.exec((await mail.waitFor(user.email)).text)![0]);
    await h.db.kysely
      .updateTable('password_resets')
      .set({ expires_at: '2020-01-01T00:00:00.000Z' })
      .where('user_id', '=', user.id)
      .execute();
    const expired = await visitor(h.app).get(link);
    const unknown = await visitor(h.app).get(`/reset-password/${'B'.repeat(43)}`);
    expect(expired.statusCode).toBe(410);
    expect(unknown.statusCode).toBe(410);
    expect(expired.body).toBe(unknown.body);
  });

  it('throttles requests per email like sign-in, without locking the account out of signing in', async () => {
    const user = await addMember(h, org.orgId, 'member');
    for (let i = 0; i < 5; i++) expect((await ask(user.email, '203.0.113.90')).statusCode).toBe(200);
    const limited = await ask(user.email, '203.0.113.90');
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    const unknownLimited = await (async () => {
      for (let i = 0; i < 5; i++) await ask('ghost@example.com', '203.0.113.91');
      return ask('ghost@example.com', '203.0.113.91');
    })();
    expect(unknownLimited.statusCode).toBe(429);
    const signIn = await postSignIn(h.app, { email: user.email, password: PASSWORD }, { remoteAddress: '203.0.113.90' });
    expect(signIn.statusCode).toBe(303);
  });

  it('changes your own password: the current one is required, other sessions end, this one is rotated', async () => {
    const user = await addMember(h, org.orgId, 'member');
    const here: DashboardUser = await signedIn(h, user.email);
    const elsewhere = await signedIn(h, user.email);
    const page = await here.get('/settings/account');
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('name="current_password"');

    const wrong = await here.post('/settings/account/password', { current_password: 'not it at all', password: NEW_PASSWORD });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.body).toContain('is not your current password');
    expect((await elsewhere.get('/contacts')).statusCode).toBe(200);

    const changed = await here.post('/settings/account/password', { current_password: PASSWORD, password: NEW_PASSWORD });
    expect(changed.statusCode).toBe(303);
    const cookie = (changed.cookies as { name: string; value: string }[]).find((c) => c.name === 'od_session')!;
    expect(`od_session=${cookie.value}`).not.toBe(here.cookie);
    expect((await elsewhere.get('/contacts')).statusCode).toBe(303);
    expect((await here.get('/contacts')).statusCode).toBe(303); // the old cookie of this browser too
    const rotated = await h.app.inject({ method: 'GET', url: '/settings/account', headers: { cookie: `od_session=${cookie.value}` } });
    expect(rotated.statusCode).toBe(200);
    expect((await signedIn(h, user.email, NEW_PASSWORD)).cookie).toMatch(/^od_session=/);
    const types = await h.db.kysely.selectFrom('events').select('type').where('actor_id', '=', user.id).execute();
    expect(types.map((t) => t.type)).toContain('member.password_changed');
  });

  it('refuses the new forms without their CSRF token', async () => {
    const user = await addMember(h, org.orgId, 'member');
    const person = visitor(h.app);
    await person.get('/forgot-password');
    expect((await person.post('/forgot-password', { email: user.email }, { csrf: null })).statusCode).toBe(403);
    await ask(user.email);
    const link = pathOf(LINK.exec((await mail.waitFor(user.email)).text)![0]);
    await person.get(link);
    expect((await person.post(link, { password: NEW_PASSWORD }, { csrf: null })).statusCode).toBe(403);
    expect((await visitor(h.app).get(link)).statusCode).toBe(200); // unused
    // A form posted from another site is refused even with a token.
    const crossSite = await h.app.inject({
      method: 'POST',
      url: link,
      headers: {
        cookie: person.cookieHeader(),
        'content-type': 'application/x-www-form-urlencoded',
        'sec-fetch-site': 'cross-site',
      },
      payload: new URLSearchParams({
        _csrf: /name="_csrf" value="([^"]+)"/.exec((await person.get(link)).body)![1]!,
        password: NEW_PASSWORD,
      }).toString(),
    });
    expect(crossSite.statusCode).toBe(403);
    const account = await signedIn(h, user.email);
    expect(
      (await account.post('/settings/account/password', { current_password: PASSWORD, password: NEW_PASSWORD }, { csrf: null })).statusCode,
    ).toBe(403);
  });
});

describe.each(DIALECTS)('forgot password without mail on %s', (dialect) => {
  it('says to ask an admin, and makes no link', async () => {
    const h = await makeHarness(dialect);
    try {
      const org = await h.newOrg('Quiet Org');
      const page = await h.app.inject({ method: 'GET', url: '/forgot-password' });
      expect(page.statusCode).toBe(200);
      expect(page.body).toContain('Ask an admin of your organisation');
      expect(page.body).not.toContain('<form');
      const posted = await h.app.inject({
        method: 'POST',
        url: '/forgot-password',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: `email=${encodeURIComponent(org.adminEmail)}`,
      });
      expect(posted.statusCode).toBe(200);
      expect(posted.body).toBe(page.body);
      expect(await h.db.kysely.selectFrom('password_resets').selectAll().execute()).toEqual([]);
      const login = await h.app.inject({ method: 'GET', url: '/login' });
      expect(login.body).toContain('href="/forgot-password"');
    } finally {
      await h.close();
    }
  });
});
