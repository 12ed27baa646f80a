import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { visitor } from './helpers/anonymousForms.js';
import { signedIn } from './helpers/browserSession.js';
import { addMember, DIALECTS, makeHarness, type Harness } from './helpers/harness.js';
import { age, browserOf, enrolPasskey, enrolTotp } from './helpers/identityFactors.js';
import { inviteMember } from '../src/domain/identity/invitations.js';
import { openSession } from '../src/domain/sessions/sessions.js';
import { addUser } from '../src/domain/orgs/orgs.js';
import { nowIso } from '../src/domain/ids.js';
import { newDomainToken } from '../src/domain/identity/ssoDomains.js';
import { approveSsoDomains } from './helpers/ssoServer.js';

const PASSWORD = 'correct horse battery';

async function join(h: Harness, orgId: string, userId: string, role: 'admin' | 'member'): Promise<void> {
  await h.db.kysely
    .insertInto('memberships')
    .values({ org_id: orgId, user_id: userId, role, created_at: nowIso(new Date()) })
    .execute();
}

async function requireSso(h: Harness, orgId: string, domain: string): Promise<void> {
  const at = nowIso(new Date());
  await h.db.kysely
    .insertInto('sso_configs')
    .values({
      org_id: orgId,
      issuer: 'https://id.example.com',
      client_id: 'orgdata',
      client_secret_sealed: 'v1.unused',
      auto_join: 'off',
      required: 'yes',
      created_at: at,
      updated_at: at,
    })
    .execute();
  await h.db.kysely
    .insertInto('sso_domains')
    .values({ domain, org_id: orgId, token: newDomainToken(), created_at: at, verified_at: null, verified_method: null })
    .execute();
  await approveSsoDomains(h.db, orgId, [domain]);
}

/**
 * The holes a review found between the identity features, closed: an admin of one organisation
 * cannot weaken a person who also belongs elsewhere; a single sign-on session stays in its
 * organisation and "require SSO" is not skipped by switching or by an invitation; a password
 * change is no re-authentication; a passkey-only account re-authenticates with its passkey; and a
 * new second factor (a passkey, an authenticator app) needs a recent proof of identity.
 */
describe.each(DIALECTS)('identity hardening on %s', (dialect) => {
  let h: Harness;

  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(() => h.close());

  it('an admin of one organisation cannot reset the two-factor of someone who also belongs to another; an admin of all of them can', async () => {
    const a = await h.newOrg('Org A');
    const b = await h.newOrg('Org B');
    const vic = await addMember(h, b.orgId, 'admin');
    await join(h, a.orgId, vic.id, 'member');
    await enrolTotp(h, vic.id);
    const eve = await signedIn(h, a.adminEmail);
    await eve.get('/settings/members');
    const refused = await eve.post(`/settings/members/${vic.id}/reset-two-factor`);
    expect(refused.statusCode).toBe(403);
    expect(refused.body).toContain('also belongs to an organisation you are not an admin of');
    expect(await h.db.kysely.selectFrom('totp_factors').select('user_id').where('user_id', '=', vic.id).executeTakeFirst()).toBeDefined();

    // Made admin of B too, eve may.
    await join(h, b.orgId, a.adminId, 'admin');
    const allowed = await eve.post(`/settings/members/${vic.id}/reset-two-factor`);
    expect(allowed.statusCode).toBe(303);
    expect(await h.db.kysely.selectFrom('totp_factors').select('user_id').where('user_id', '=', vic.id).executeTakeFirst()).toBeUndefined();
  });

  it('a session opened by single sign-on cannot switch to another organisation', async () => {
    const a = await h.newOrg('SSO Org');
    const b = await h.newOrg('Other Org');
    const person = await addMember(h, a.orgId, 'member');
    await join(h, b.orgId, person.id, 'admin');
    const { token } = await openSession(h.db.kysely, person.id, a.orgId, new Date(), { method: 'sso', origin: null });
    const browser = visitor(h.app);
    browser.cookies.set('od_session', token);
    await browser.get('/contacts');
    const res = await browser.post('/orgs/switch', { org_id: b.orgId });
    expect(res.statusCode).toBe(403);
    expect(res.body).toContain('single sign-on');
    const row = await h.db.kysely.selectFrom('sessions').select('org_id').where('user_id', '=', person.id).executeTakeFirstOrThrow();
    expect(row.org_id).toBe(a.orgId);
  });

  it('a member cannot switch into an organisation that requires SSO, nor get a session there through another invitation', async () => {
    const strict = await h.newOrg('Strict Org');
    const open = await h.newOrg('Open Org');
    // Her e-mail is in the domain the strict organisation verifies: SSO can take her there (rule 9).
    const strictDomain = `strict-${strict.orgId.slice(-6).toLowerCase()}.example.com`;
    const miaEmail = `mia-${strict.orgId.slice(-6).toLowerCase()}@${strictDomain}`;
    const miaUser = await addUser(h.db.kysely, { orgId: strict.orgId, email: miaEmail, password: PASSWORD, role: 'member' });
    const mia = { id: miaUser.id, email: miaEmail };
    // An invitation to another organisation, its page opened while SSO was not yet required.
    const invited = await inviteMember(
      open.adminCtx(),
      { mailer: null, publicUrl: 'http://orgdata.test', inviteTtlHours: 1, resetTtlMinutes: 60 },
      { email: mia.email, role: 'member' },
      null,
    );
    const link = new URL(invited.url).pathname;
    const person = visitor(h.app);
    expect((await person.get(link)).body).toContain('name="password"');
    await requireSso(h, strict.orgId, strictDomain);
    // Her password is refused at sign-in…
    const login = await visitor(h.app).post('/login', { email: mia.email, password: PASSWORD });
    expect(login.statusCode).toBe(403);
    // …and by the invitation's form (with its token), and the page no longer offers it.
    const accepted = await person.post(link, { password: PASSWORD });
    expect(accepted.statusCode).toBe(403);
    expect(accepted.body).toContain('single sign-on');
    const offered = await visitor(h.app).get(link);
    expect(offered.statusCode).toBe(200);
    expect(offered.body).toContain('single sign-on');
    expect(offered.body).not.toContain('name="password"');
    expect(person.cookies.get('od_session')).toBeUndefined();

    // A session she has in another organisation does not move into the strict one.
    await join(h, open.orgId, mia.id, 'member');
    const { token } = await openSession(h.db.kysely, mia.id, open.orgId, new Date());
    const browser = visitor(h.app);
    browser.cookies.set('od_session', token);
    await browser.get('/contacts');
    expect((await browser.post('/orgs/switch', { org_id: strict.orgId })).statusCode).toBe(403);
  });

  it('changing the password rotates the session but is no re-authentication', async () => {
    const org = await h.newOrg();
    const admin = await browserOf(h, org.adminEmail);
    await age(h, org.adminId, 30);
    await admin.get('/settings/account');
    const changed = await admin.post('/settings/account/password', { current_password: PASSWORD, password: 'another good passphrase' });
    expect(changed.statusCode).toBe(303);
    await admin.get('/settings/developer');
    const asked = await admin.post('/settings/developer/keys', { name: 'Sync', scopes: 'contacts:read', expires: '30' });
    expect(asked.statusCode).toBe(303);
    expect(asked.headers.location).toMatch(/^\/reauth\?next=/);
  });

  it('an account whose only second factor is a passkey re-authenticates with it, not with the password alone', async () => {
    const org = await h.newOrg();
    await enrolPasskey(h, org.adminId);
    const admin = await browserOf(h, org.adminEmail);
    const page = await admin.get('/reauth?next=%2Fsettings%2Fdeveloper');
    expect(page.body).toContain('data-passkey-reauth');
    expect(page.body).not.toContain('name="password"');
    const refused = await admin.post('/reauth', { password: PASSWORD, next: '/settings/developer' });
    expect(refused.statusCode).toBe(400);
    const events = await h.db.kysely
      .selectFrom('events')
      .select('type')
      .where('type', '=', 'member.reauthenticated')
      .where('subject_id', '=', org.adminId)
      .execute();
    expect(events).toEqual([]);
  });

  it('a new authenticator app or passkey needs a recent proof of identity', async () => {
    const org = await h.newOrg();
    const member = await addMember(h, org.orgId, 'member');
    const browser = await browserOf(h, member.email);
    await age(h, member.id, 30);
    await browser.get('/settings/account/two-factor');
    const setup = await browser.post('/settings/account/two-factor/setup', {});
    expect(setup.statusCode).toBe(303);
    expect(setup.headers.location).toBe('/reauth?next=%2Fsettings%2Faccount%2Ftwo-factor');
    expect(
      await h.db.kysely.selectFrom('totp_factors').select('user_id').where('user_id', '=', member.id).executeTakeFirst(),
    ).toBeUndefined();

    const session = await h.db.kysely
      .selectFrom('sessions')
      .select('csrf_token')
      .where('user_id', '=', member.id)
      .executeTakeFirstOrThrow();
    const options = await h.app.inject({
      method: 'POST',
      url: '/settings/account/passkeys/options',
      headers: { host: 'orgdata.test', cookie: browser.cookieHeader(), origin: 'http://orgdata.test', 'content-type': 'application/json' },
      payload: JSON.stringify({ _csrf: session.csrf_token, name: 'Laptop' }),
    });
    expect(options.statusCode).toBe(401);
    expect(options.json()).toMatchObject({ redirect: expect.stringMatching(/^\/reauth\?next=/) });
  });
});
