import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findSession } from '../src/domain/sessions/sessions.js';
import { csrfIn } from './helpers/anonymousForms.js';
import { formBody, signedIn, type DashboardUser } from './helpers/browserSession.js';
import { addMember, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { SoftAuthenticator } from './helpers/softAuthenticator.js';
import { postSignIn } from './helpers/signInForm.js';

const ORIGIN = 'http://orgdata.test'; // PUBLIC_URL in the harness: RP ID orgdata.test
const shownLink = (body: string) =>
  /<code id="invite-link">\s*http:\/\/orgdata\.test(\/invite\/[A-Za-z0-9_-]{43})\s*<\/code>/.exec(body)?.[1];
type Json = Record<string, unknown>;

/**
 * "Join with a passkey" on the invitation page (IDENTITY.md, "Invitations"), over HTTP with a
 * software authenticator making real credentials: the account is made with its passkey, joins,
 * is signed in, and signs in again with the passkey alone; the link is used up once, also by two
 * racing joins; and each refusal: a dead link, an existing account's link, another site, no form
 * token, a replayed or another link's ceremony, another origin or RP ID, no user verification.
 */
describe.each(DIALECTS)('joining with a passkey on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let admin: DashboardUser;
  const fresh = (name: string) => `${name}-${Math.random().toString(36).slice(2, 10)}@example.com`;

  beforeAll(async () => {
    h = await makeHarness(dialect); // no SMTP_URL: the link is shown to the admin
    org = await h.newOrg('Passkey Join Org');
    admin = await signedIn(h, org.adminEmail);
  });
  afterAll(async () => h.close());

  async function invite(email: string, role = 'member'): Promise<string> {
    const res = await admin.post('/settings/members', { email, role });
    expect(res.statusCode, res.body).toBe(200);
    return shownLink(res.body)!;
  }

  /** A browser on the invitation page: its cookies, the page's form token, JSON posts from this site. */
  function browser(remoteAddress = '198.51.100.60') {
    const cookies = new Map<string, string>();
    const keep = (res: LightMyRequestResponse) => {
      for (const c of res.cookies as { name: string; value: string; expires?: Date }[]) {
        if (c.value === '' || (c.expires && c.expires.getTime() < Date.now())) cookies.delete(c.name);
        else cookies.set(c.name, c.value);
      }
      return res;
    };
    const cookie = () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const b = {
      cookies,
      csrf: '',
      get: async (url: string) => {
        const res = keep(await h.app.inject({ method: 'GET', url, remoteAddress, headers: { host: 'orgdata.test', cookie: cookie() } }));
        b.csrf = csrfIn(res.body) ?? b.csrf;
        return res;
      },
      json: async (url: string, body: Json, headers: Record<string, string> = {}) =>
        keep(
          await h.app.inject({
            method: 'POST',
            url,
            remoteAddress,
            headers: { host: 'orgdata.test', origin: ORIGIN, 'content-type': 'application/json', cookie: cookie(), ...headers },
            payload: JSON.stringify({ _csrf: b.csrf, ...body }),
          }),
        ),
      form: async (url: string, fields: Record<string, string>) =>
        keep(
          await h.app.inject({
            method: 'POST',
            url,
            remoteAddress,
            headers: { host: 'orgdata.test', 'content-type': 'application/x-www-form-urlencoded', cookie: cookie() },
            payload: formBody({ _csrf: b.csrf, ...fields }),
          }),
        ),
    };
    return b;
  }
  type Browser = ReturnType<typeof browser>;

  async function join(b: Browser, link: string, key: SoftAuthenticator, bad = {}, name?: string) {
    const options = await b.json(`${link}/passkey/options`, {});
    expect(options.statusCode, options.body).toBe(200);
    return b.json(`${link}/passkey`, { response: key.register(options.json(), bad), ...(name ? { name } : {}) });
  }

  async function eventsOf(userId: string): Promise<{ type: string; data: Json; actor_id: string | null }[]> {
    const rows = await h.db.kysely
      .selectFrom('events')
      .select(['type', 'data', 'actor_id'])
      .where('subject_id', '=', userId)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
    return rows.map((r) => ({ type: r.type, data: JSON.parse(r.data) as Json, actor_id: r.actor_id }));
  }

  const userOf = (email: string) =>
    h.db.kysely.selectFrom('users').select(['id', 'password_hash']).where('email_lower', '=', email.toLowerCase()).executeTakeFirst();
  const invitationOf = (email: string) =>
    h.db.kysely
      .selectFrom('invitations')
      .select(['id', 'accepted_at', 'accepted_by'])
      .where('email', '=', email)
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();

  it('offers the passkey only to an email without an account, with the passkeys script', async () => {
    const page = await browser().get(await invite(fresh('offer')));
    expect(page.statusCode).toBe(200);
    expect(page.body).toMatch(/<button type="button"[^>]*data-passkey-join[^>]*>Join with a passkey<\/button>/);
    expect(page.body).toContain('<script src="/assets/passkeys.js" defer></script>');
    const script = await h.app.inject({ method: 'GET', url: '/assets/passkeys.js' });
    expect(script.body).toContain('data-passkey-join');

    const existing = await addMember(h, (await h.newOrg('Other Org')).orgId, 'member');
    const theirs = await browser().get(await invite(existing.email));
    expect(theirs.statusCode).toBe(200);
    expect(theirs.body).toContain('Sign in and join');
    expect(theirs.body).not.toContain('data-passkey-join');
  });

  it('offers no passkey to a plain member of an organisation that requires SSO (an admin keeps it)', async () => {
    const ssoOrg = await h.newOrg('SSO Only Org');
    const at = new Date().toISOString();
    await h.db.kysely
      .insertInto('sso_configs')
      .values({
        org_id: ssoOrg.orgId,
        issuer: 'https://idp.example',
        client_id: 'orgdata',
        client_secret_sealed: 'x',
        auto_join: 'off',
        required: 'yes',
        created_at: at,
        updated_at: at,
      })
      .execute();
    const ssoAdmin = await signedIn(h, ssoOrg.adminEmail);
    // Required SSO holds where SSO can take the invitee: their domain verified (IDENTITY.md rule 9).
    await h.db.kysely
      .insertInto('sso_domains')
      .values({
        org_id: ssoOrg.orgId,
        domain: 'example.com',
        token: `t-${ssoOrg.orgId}`,
        created_at: at,
        verified_at: at,
        verified_method: 'operator',
      })
      .execute();
    const linkFor = async (email: string, role: string) => shownLink((await ssoAdmin.post('/settings/members', { email, role })).body)!;
    const member = await linkFor(fresh('sso-member'), 'member');
    const b = browser();
    const page = await b.get(member);
    expect(page.statusCode).toBe(200);
    expect(page.body).not.toContain('data-passkey-join');
    // This page offers no form (SSO takes this invitee): a form token from the sign-in page, so
    // that the refusal below is the SSO one, not the form guard's.
    await b.get('/login');
    const refused = await b.json(`${member}/passkey/options`, {});
    expect(refused.statusCode).toBe(403);
    expect(refused.json().message).toContain('single sign-on');
    const adminLink = await linkFor(fresh('sso-admin'), 'admin');
    const a = browser();
    expect((await a.get(adminLink)).body).toContain('data-passkey-join');
    expect((await join(a, adminLink, new SoftAuthenticator(ORIGIN))).statusCode).toBe(200);
  });

  it('makes the account with its passkey, joins with the role, signs in by passkey, and the link works once', async () => {
    const email = fresh('ada');
    const link = await invite(email, 'admin');
    const b = browser();
    await b.get(link);
    const key = new SoftAuthenticator(ORIGIN);
    const options = await b.json(`${link}/passkey/options`, {});
    expect(options.statusCode).toBe(200);
    expect(options.headers['cache-control']).toBe('no-store');
    const creation = options.json();
    expect(creation.authenticatorSelection).toMatchObject({ residentKey: 'required', userVerification: 'required' });
    expect(creation.user).toMatchObject({ name: email });
    expect(creation.excludeCredentials).toEqual([]);
    // The user handle is the account's id to be, random, and not yet an account.
    const handle = Buffer.from(String((creation.user as Json).id), 'base64url').toString('utf8');
    expect(handle).toMatch(/^usr_/);
    expect(await userOf(email)).toBeUndefined();

    // A second tab with the same link open, for after it has been used.
    const other = browser();
    await other.get(link);
    const joined = await b.json(`${link}/passkey`, { response: key.register(creation) });
    expect(joined.statusCode, joined.body).toBe(200);
    expect(joined.json()).toEqual({ redirect: '/contacts' });
    expect(b.cookies.has('od_passkey_join')).toBe(false);

    const user = (await userOf(email))!;
    expect(user.id).toBe(handle);
    const membership = await h.db.kysely
      .selectFrom('memberships')
      .select('role')
      .where('org_id', '=', org.orgId)
      .where('user_id', '=', user.id)
      .executeTakeFirst();
    expect(membership).toEqual({ role: 'admin' });
    expect(await invitationOf(email)).toMatchObject({ accepted_by: user.id });
    expect((await invitationOf(email)).accepted_at).not.toBeNull();
    const passkeys = await h.db.kysely.selectFrom('passkeys').select(['name', 'credential_id']).where('user_id', '=', user.id).execute();
    expect(passkeys).toEqual([{ name: 'Passkey', credential_id: key.credentials[0]!.id }]);
    // No password signs in to it: the password form of the sign-in page is refused.
    const login = await postSignIn(h.app, { email, password: '' });
    expect(login.statusCode).toBe(400);
    expect(user.password_hash).toMatch(/^\$argon2id\$/);

    const session = await findSession(h.db.kysely, b.cookies.get('od_session')!, new Date());
    expect(session).toMatchObject({ userId: user.id, orgId: org.orgId, method: 'passkey' });
    const home = await b.get('/contacts');
    expect(home.statusCode).toBe(200);
    expect(home.body).toContain('Welcome to Passkey Join Org');
    expect((await b.get('/settings/members')).statusCode).toBe(200); // an admin, as invited

    const events = await eventsOf(user.id);
    expect(events.map((e) => e.type)).toEqual(['member.joined', 'member.passkey_added', 'member.signed_in']);
    expect(events[0]).toMatchObject({ actor_id: user.id, data: { method: 'passkey', object: { role: 'admin', email } } });
    expect(events[2]).toMatchObject({ data: { method: 'passkey', origin: expect.stringContaining('198.51.100.0/24') } });

    // Used up: the page, the password form and another passkey join all get 410.
    expect((await browser().get(link)).statusCode).toBe(410);
    expect((await other.form(link, { password: 'correct horse battery' })).statusCode).toBe(410);
    const again = await other.json(`${link}/passkey/options`, {});
    expect(again.statusCode).toBe(410);
    expect(again.json()).toMatchObject({ redirect: link });

    // Signing in again: usernameless, with the passkey alone.
    const later = browser();
    const signIn = await later.json('/login/passkey/options', {});
    const signedInAgain = await later.json('/login/passkey', { response: key.authenticate(signIn.json()) });
    expect(signedInAgain.statusCode, signedInAgain.body).toBe(200);
    expect(await findSession(h.db.kysely, later.cookies.get('od_session')!, new Date())).toMatchObject({
      userId: user.id,
      method: 'passkey',
    });
  });

  it('keeps a name the page sends, and refuses a bad one before the prompt is answered', async () => {
    const email = fresh('named');
    const link = await invite(email);
    const b = browser();
    await b.get(link);
    const key = new SoftAuthenticator(ORIGIN);
    const options = await b.json(`${link}/passkey/options`, {});
    const tooLong = await b.json(`${link}/passkey`, { response: key.register(options.json()), name: 'x'.repeat(65) });
    expect(tooLong.statusCode).toBe(400);
    expect(tooLong.json().message).toContain('Name:');
    expect(await userOf(email)).toBeUndefined();
    expect((await join(b, link, key, {}, 'Work phone')).statusCode).toBe(200);
    const user = (await userOf(email))!;
    expect((await h.db.kysely.selectFrom('passkeys').select('name').where('user_id', '=', user.id).execute()).map((r) => r.name)).toEqual([
      'Work phone',
    ]);
  });

  it('answers 410 with the link for an expired or revoked invitation, also when it dies during the ceremony', async () => {
    const late = fresh('late');
    const lateLink = await invite(late);
    const b = browser();
    await b.get(lateLink);
    await h.db.kysely.updateTable('invitations').set({ expires_at: '2020-01-01T00:00:00.000Z' }).where('email', '=', late).execute();
    const expired = await b.json(`${lateLink}/passkey/options`, {});
    expect(expired.statusCode).toBe(410);
    expect(expired.json()).toMatchObject({ redirect: lateLink });

    const revoked = fresh('revoked');
    const link = await invite(revoked);
    const r = browser();
    await r.get(link);
    const options = await r.json(`${link}/passkey/options`, {});
    expect(options.statusCode).toBe(200);
    const { id } = await invitationOf(revoked);
    expect((await admin.post(`/settings/members/invitations/${id}/revoke`)).statusCode).toBe(303);
    const gone = await r.json(`${link}/passkey`, { response: new SoftAuthenticator(ORIGIN).register(options.json()) });
    expect(gone.statusCode).toBe(410);
    expect(gone.json()).toMatchObject({ redirect: link, message: expect.stringContaining('no longer works') });
    expect(await userOf(revoked)).toBeUndefined();
    expect(await userOf(late)).toBeUndefined();
    // An unknown link: the same answer.
    const unknown = await r.json(`/invite/${'A'.repeat(43)}/passkey/options`, {});
    expect(unknown.statusCode).toBe(410);
    expect((await r.json('/invite/short/passkey', { response: {} })).statusCode).toBe(410);
  });

  it("refuses an existing account's invitation: its owner signs in with the password to join", async () => {
    const existing = await addMember(h, (await h.newOrg('Elsewhere')).orgId, 'member');
    const link = await invite(existing.email);
    const b = browser();
    await b.get(link);
    const options = await b.json(`${link}/passkey/options`, {});
    expect(options.statusCode).toBe(403);
    expect(options.json().message).toContain('sign in with its password');
    expect(b.cookies.has('od_passkey_join')).toBe(false);

    // An account made for the email while the ceremony was under way: refused, nothing stored.
    const email = fresh('overtaken');
    const overtaken = await invite(email);
    const o = browser();
    await o.get(overtaken);
    const started = await o.json(`${overtaken}/passkey/options`, {});
    await addMember(h, org.orgId, 'member').then(async (m) =>
      h.db.kysely.updateTable('users').set({ email, email_lower: email.toLowerCase() }).where('id', '=', m.id).execute(),
    );
    const refused = await o.json(`${overtaken}/passkey`, { response: new SoftAuthenticator(ORIGIN).register(started.json()) });
    expect(refused.statusCode).toBe(403);
    expect((await invitationOf(email)).accepted_at).toBeNull();
    const holder = (await userOf(email))!;
    expect(await h.db.kysely.selectFrom('passkeys').select('id').where('user_id', '=', holder.id).execute()).toEqual([]);
  });

  it('refuses another site, a missing form token, a replayed or foreign ceremony, another origin or RP ID, no user verification', async () => {
    const email = fresh('careful');
    const link = await invite(email);
    const b = browser();
    await b.get(link);
    const key = new SoftAuthenticator(ORIGIN);

    // Another site, or no page of ours (no form token): refused before anything is read.
    expect((await b.json(`${link}/passkey/options`, {}, { origin: 'https://evil.example' })).statusCode).toBe(403);
    expect((await b.json(`${link}/passkey/options`, {}, { 'sec-fetch-site': 'cross-site' })).statusCode).toBe(403);
    expect((await b.json(`${link}/passkey/options`, { _csrf: '' })).statusCode).toBe(403);
    expect((await browser().json(`${link}/passkey/options`, { _csrf: b.csrf })).statusCode).toBe(403); // not this browser's token
    expect((await b.form(`${link}/passkey`, { response: '{}' })).statusCode).toBe(403);
    expect(b.cookies.has('od_passkey_join')).toBe(false);
    const garbled = await h.app.inject({
      method: 'POST',
      url: `${link}/passkey`,
      headers: { host: 'orgdata.test', origin: ORIGIN, 'content-type': 'application/json' },
      payload: '{"response": ',
    });
    expect(garbled.statusCode).toBe(400);

    // Another origin, another RP ID, no user verification, another challenge, junk: 400, nothing made.
    for (const bad of [{ origin: 'https://evil.example' }, { rpId: 'evil.example' }, { uv: false }, { challenge: 'AAAA' }]) {
      const refused = await join(b, link, key, bad);
      expect(refused.statusCode, JSON.stringify(bad)).toBe(400);
      expect(refused.json().message).toContain('Passkey:');
    }
    await b.json(`${link}/passkey/options`, {});
    expect((await b.json(`${link}/passkey`, { response: 'nonsense' })).statusCode).toBe(400);
    expect((await b.json(`${link}/passkey`, { response: {} })).statusCode).toBe(400); // no ceremony left
    expect(await userOf(email)).toBeUndefined();

    // A replayed ceremony: its challenge was answered once (wrongly), and never again.
    const options = await b.json(`${link}/passkey/options`, {});
    const ceremony = b.cookies.get('od_passkey_join')!;
    const good = key.register(options.json());
    expect((await b.json(`${link}/passkey`, { response: key.register(options.json(), { uv: false }) })).statusCode).toBe(400);
    b.cookies.set('od_passkey_join', ceremony);
    const replayed = await b.json(`${link}/passkey`, { response: good });
    expect(replayed.statusCode).toBe(400);
    expect(replayed.json().message).toContain('expired');

    // A ceremony begun for another invitation does not join this one.
    const otherLink = await invite(fresh('other'));
    await b.get(otherLink);
    const foreign = await b.json(`${otherLink}/passkey/options`, {});
    const crossed = await b.json(`${link}/passkey`, { response: key.register(foreign.json()) });
    expect(crossed.statusCode).toBe(400);
    expect(await userOf(email)).toBeUndefined();
    expect((await invitationOf(email)).accepted_at).toBeNull();

    // The link still works after all that.
    expect((await join(b, link, key)).statusCode).toBe(200);
  });

  it('joins once when two browsers race with the same link', async () => {
    const email = fresh('race');
    const link = await invite(email);
    const browsers = [browser('198.51.100.61'), browser('198.51.100.62')];
    const keys = [new SoftAuthenticator(ORIGIN), new SoftAuthenticator(ORIGIN)];
    const answers: Record<string, unknown>[] = [];
    for (const [i, b] of browsers.entries()) {
      await b.get(link);
      const options = await b.json(`${link}/passkey/options`, {});
      answers.push(keys[i]!.register(options.json()));
    }
    const results = await Promise.all(browsers.map((b, i) => b.json(`${link}/passkey`, { response: answers[i] })));
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 410]);
    const users = await h.db.kysely.selectFrom('users').select('id').where('email_lower', '=', email).execute();
    expect(users).toHaveLength(1);
    expect(await h.db.kysely.selectFrom('passkeys').select('id').where('user_id', '=', users[0]!.id).execute()).toHaveLength(1);
    const joinedEvents = await h.db.kysely
      .selectFrom('events')
      .select('id')
      .where('type', '=', 'member.joined')
      .where('subject_id', '=', users[0]!.id)
      .execute();
    expect(joinedEvents).toHaveLength(1);
  });
});
