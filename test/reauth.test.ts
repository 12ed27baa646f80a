import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedIn } from './helpers/browserSession.js';
import { addMember, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { age, browserOf, enrolPasskey, enrolTotp, eventsOf, totpCode } from './helpers/identityFactors.js';
import { nowIso } from '../src/domain/ids.js';

const PASSWORD = 'correct horse battery';
const KEYS = '/settings/developer/keys';
const KEY_FORM = { name: 'Sync', scopes: 'contacts:read', expires: '30' };

const keyCount = async (h: Harness, orgId: string) =>
  (await h.db.kysely.selectFrom('api_keys').select('id').where('org_id', '=', orgId).execute()).length;

/**
 * Re-authentication before sensitive actions (IDENTITY.md, Sessions and re-authentication): after
 * REAUTH_MINUTES the action is not done and the person is sent to /reauth, which checks the
 * password (and code), rotates the session and sends them back to the page the form was on.
 */
describe.each(DIALECTS)('re-authentication on %s', (dialect) => {
  let h: Harness;

  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(async () => {
    await h.close();
  });

  it('a fresh sign-in creates an API key; after REAUTH_MINUTES the key is not created and the person is asked again, then taken back', async () => {
    const org = await h.newOrg();
    const admin = await browserOf(h, org.adminEmail);
    await admin.get('/settings/developer');
    expect((await admin.post(KEYS, KEY_FORM)).statusCode).toBe(200);
    expect(await keyCount(h, org.orgId)).toBe(1);

    await age(h, org.adminId, 11);
    await admin.get('/settings/developer');
    const asked = await admin.post(KEYS, KEY_FORM);
    expect(asked.statusCode).toBe(303);
    expect(asked.headers.location).toBe('/reauth?next=%2Fsettings%2Fdeveloper');
    expect(await keyCount(h, org.orgId)).toBe(1);

    const form = await admin.get(asked.headers.location as string);
    expect(form.statusCode).toBe(200);
    expect(form.body).toContain('name="password"');
    expect(form.body).not.toContain('name="code"');
    expect(form.body).not.toContain('data-passkey-reauth');
    expect(form.body).toContain('name="next" value="/settings/developer"');
    const oldCookie = admin.cookies.get('od_session')!;

    const wrong = await admin.post('/reauth', { password: 'not my password', next: '/settings/developer' });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.body).toContain('That is not your password.');
    expect(admin.cookies.get('od_session')).toBe(oldCookie);
    const failures = await eventsOf(h, org.orgId, 'member.sign_in_failed');
    expect(failures.at(-1)!.data).toMatchObject({ reason: 'reauthentication_wrong_password' });
    expect((await admin.post('/reauth', { password: PASSWORD, next: '/settings/developer' }, { csrf: null })).statusCode).toBe(403);

    const done = await admin.post('/reauth', { password: PASSWORD, next: '/settings/developer' });
    expect(done.statusCode).toBe(303);
    expect(done.headers.location).toBe('/settings/developer');
    // Rotated: a new cookie; the old one is over.
    expect(admin.cookies.get('od_session')).not.toBe(oldCookie);
    const stale = await h.app.inject({ method: 'GET', url: '/contacts', headers: { cookie: `od_session=${oldCookie}` } });
    expect(stale.statusCode).toBe(303);
    const events = await eventsOf(h, org.orgId, 'member.reauthenticated');
    expect(events.at(-1)).toMatchObject({ actor_id: org.adminId, data: { method: 'password' } });

    await admin.get('/settings/developer');
    expect((await admin.post(KEYS, KEY_FORM)).statusCode).toBe(200);
    expect(await keyCount(h, org.orgId)).toBe(2);
  });

  it("goes back to the Referer's page when it is this site's, else to the route's page; an outside next is refused", async () => {
    const org = await h.newOrg();
    const admin = await signedIn(h, org.adminEmail);
    await age(h, org.adminId, 30);
    const post = (url: string, referer?: string) =>
      h.app.inject({
        method: 'POST',
        url,
        headers: {
          cookie: admin.cookie,
          'content-type': 'application/x-www-form-urlencoded',
          host: 'orgdata.test',
          ...(referer ? { referer } : {}),
        },
        payload: new URLSearchParams({ _csrf: admin.csrf, ...KEY_FORM }).toString(),
      });
    expect((await post(KEYS, 'http://orgdata.test/settings/developer?tab=keys')).headers.location).toBe(
      `/reauth?next=${encodeURIComponent('/settings/developer?tab=keys')}`,
    );
    expect((await post(KEYS, 'https://evil.example/settings/developer')).headers.location).toBe('/reauth?next=%2Fsettings%2Fdeveloper');
    expect((await post('/settings/developer/webhooks')).headers.location).toBe(
      `/reauth?next=${encodeURIComponent('/settings/developer/webhooks')}`,
    );
    expect(await keyCount(h, org.orgId)).toBe(0);
    expect(await h.db.kysely.selectFrom('webhook_endpoints').select('id').where('org_id', '=', org.orgId).execute()).toEqual([]);

    const person = await browserOf(h, org.adminEmail);
    await age(h, org.adminId, 30);
    await person.get('/reauth?next=//evil.example/x');
    const done = await person.post('/reauth', { password: PASSWORD, next: '//evil.example/x' });
    expect(done.statusCode).toBe(303);
    expect(done.headers.location).toBe('/');
    await age(h, org.adminId, 30);
    await person.get('/reauth?next=/reauth');
    const self = await person.post('/reauth', { password: PASSWORD, next: '/reauth?next=/reauth' });
    expect(self.headers.location).toBe('/');
  });

  it('asks for a code too when the person has an authenticator app; a wrong or replayed code is refused', async () => {
    const org = await h.newOrg();
    const secret = await enrolTotp(h, org.adminId);
    const admin = await browserOf(h, org.adminEmail);
    await age(h, org.adminId, 11);
    const form = await admin.get('/reauth?next=/settings/security');
    expect(form.body).toContain('name="code"');
    expect((await admin.post('/reauth', { password: PASSWORD, next: '/settings/security' })).statusCode).toBe(400);
    const wrong = await admin.post('/reauth', {
      password: PASSWORD,
      code: '000000' === totpCode(secret) ? '111111' : '000000',
      next: '/x',
    });
    expect(wrong.statusCode).toBe(401);
    const code = totpCode(secret);
    const done = await admin.post('/reauth', { password: PASSWORD, code, next: '/settings/security' });
    expect(done.statusCode).toBe(303);
    expect(done.headers.location).toBe('/settings/security');
    expect((await eventsOf(h, org.orgId, 'member.reauthenticated')).at(-1)!.data).toMatchObject({ method: 'password+totp' });
    // The same code once more: a replay.
    await age(h, org.adminId, 11);
    await admin.get('/reauth?next=/settings/security');
    expect((await admin.post('/reauth', { password: PASSWORD, code, next: '/settings/security' })).statusCode).toBe(401);
    // Changing the policy is a sensitive action: still asked.
    await admin.get('/settings/security');
    const policy = await admin.post('/settings/security/policy', { require_two_factor: 'admins' });
    expect(policy.statusCode).toBe(303);
    expect(policy.headers.location).toBe('/reauth?next=%2Fsettings%2Fsecurity');
    const row = await h.db.kysely.selectFrom('orgs').select('require_two_factor').where('id', '=', org.orgId).executeTakeFirstOrThrow();
    expect(row.require_two_factor).toBe('nobody');
  });

  it('counts wrong passwords against the sign-in limits: guessing ends in 429, even with the right password', async () => {
    const org = await h.newOrg();
    const admin = await browserOf(h, org.adminEmail, '192.0.2.200');
    await admin.get('/reauth?next=/settings/developer');
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++)
      statuses.push((await admin.post('/reauth', { password: `guess ${i}`, next: '/settings/developer' })).statusCode);
    expect(statuses.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(statuses[5]).toBe(429);
    const right = await admin.post('/reauth', { password: PASSWORD, next: '/settings/developer' });
    expect(right.statusCode).toBe(429);
    expect(right.headers['retry-after']).toMatch(/^\d+$/);
    expect(await eventsOf(h, org.orgId, 'member.reauthenticated')).toEqual([]);
  });

  it('offers a passkey when the person has one', async () => {
    const org = await h.newOrg();
    await enrolPasskey(h, org.adminId);
    const admin = await signedIn(h, org.adminEmail);
    const form = await admin.get('/reauth?next=/settings/developer');
    expect(form.body).toContain('<button type="button" data-passkey-reauth>Use a passkey</button>');
    expect(form.body).toContain('<script src="/assets/passkeys.js" defer></script>');
  });

  it("asks again before resetting someone's two-factor, and a member is refused rather than asked", async () => {
    const org = await h.newOrg();
    const target = await addMember(h, org.orgId, 'member');
    await enrolTotp(h, target.id);
    const admin = await signedIn(h, org.adminEmail);
    await age(h, org.adminId, 11);
    const res = await admin.post(`/settings/members/${target.id}/reset-two-factor`);
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/reauth?next=%2Fsettings%2Fmembers');
    expect(await h.db.kysely.selectFrom('totp_factors').select('user_id').where('user_id', '=', target.id).execute()).toHaveLength(1);
    const member = await signedIn(h, (await addMember(h, org.orgId, 'member')).email);
    await h.db.kysely
      .updateTable('sessions')
      .set({ authenticated_at: nowIso(new Date(0)) })
      .execute();
    expect((await member.post(KEYS, KEY_FORM)).statusCode).toBe(403);
    expect((await member.post(`/settings/members/${target.id}/reset-two-factor`)).statusCode).toBe(403);
  });
});

describe.each(DIALECTS)('REAUTH_MINUTES=0 on %s', (dialect) => {
  let h: Harness;
  let org: Org;

  beforeAll(async () => {
    h = await makeHarness(dialect, { env: { REAUTH_MINUTES: '0' } });
    org = await h.newOrg();
  });
  afterAll(async () => {
    await h.close();
  });

  it('asks every time, even right after signing in; one re-authentication lets one action through, without a loop', async () => {
    const admin = await browserOf(h, org.adminEmail);
    await admin.get('/settings/developer');
    const asked = await admin.post(KEYS, KEY_FORM);
    expect(asked.statusCode).toBe(303);
    expect(asked.headers.location).toBe('/reauth?next=%2Fsettings%2Fdeveloper');
    await admin.get(asked.headers.location as string);
    expect((await admin.post('/reauth', { password: PASSWORD, next: '/settings/developer' })).statusCode).toBe(303);
    expect(admin.cookies.get('od_reauth')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    await admin.get('/settings/developer');
    expect((await admin.post(KEYS, KEY_FORM)).statusCode).toBe(200);
    expect(await keyCount(h, org.orgId)).toBe(1);
    // The pass is used up: the next sensitive action asks again.
    await admin.get('/settings/developer');
    expect((await admin.post(KEYS, KEY_FORM)).statusCode).toBe(303);
    expect(await keyCount(h, org.orgId)).toBe(1);
  });

  it('a removal spends the pass on the change, not on its confirmation page (no loop)', async () => {
    const leaver = await addMember(h, org.orgId, 'member');
    const admin = await browserOf(h, org.adminEmail);
    await admin.get('/settings/members');
    const asked = await admin.post('/settings/members/remove', { email: leaver.email, confirm: 'yes' });
    expect(asked.headers.location).toBe('/reauth?next=%2Fsettings%2Fmembers');
    await admin.get(asked.headers.location as string);
    expect((await admin.post('/reauth', { password: PASSWORD, next: '/settings/members' })).statusCode).toBe(303);
    await admin.get('/settings/members');
    const confirm = await admin.post('/settings/members/remove', { email: leaver.email });
    expect(confirm.statusCode).toBe(200);
    expect(confirm.body).toContain(`Remove ${leaver.email}?`);
    const done = await admin.post('/settings/members/remove', { email: leaver.email, confirm: 'yes' });
    expect(done.statusCode).toBe(303);
    expect(done.headers.location).toBe('/settings/members');
    const left = await h.db.kysely.selectFrom('memberships').select('user_id').where('user_id', '=', leaver.id).execute();
    expect(left).toEqual([]);
  });

  it('the pass lasts a minute, and only for the person it was made for', async () => {
    const before = await keyCount(h, org.orgId);
    const admin = await browserOf(h, org.adminEmail);
    await admin.get('/reauth?next=/settings/developer');
    await admin.post('/reauth', { password: PASSWORD, next: '/settings/developer' });
    const pass = admin.cookies.get('od_reauth')!;
    // Someone else's session with this pass: refused (and the pass is spent).
    const other = await browserOf(h, (await addMember(h, org.orgId, 'admin')).email);
    other.cookies.set('od_reauth', pass);
    await other.get('/settings/developer');
    expect((await other.post(KEYS, KEY_FORM)).statusCode).toBe(303);

    await admin.get('/reauth?next=/settings/developer');
    await admin.post('/reauth', { password: PASSWORD, next: '/settings/developer' });
    await h.db.kysely
      .updateTable('auth_challenges')
      .set({ expires_at: nowIso(new Date(Date.now() - 1000)) })
      .where('purpose', '=', 'reauth_grant')
      .execute();
    await admin.get('/settings/developer');
    expect((await admin.post(KEYS, KEY_FORM)).statusCode).toBe(303);
    expect(await keyCount(h, org.orgId)).toBe(before);
  });
});
