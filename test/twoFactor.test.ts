import { createHash, createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resetLinkFor } from '../src/domain/identity/passwordResets.js';
import { visitor, type Visitor } from './helpers/anonymousForms.js';
import { followRotation, signedIn } from './helpers/browserSession.js';
import { addMember, DIALECTS, SECRET, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { scrape, TOKEN, valueOf } from './helpers/metrics.js';
import { enrol, recoveryCodesIn, setupOf, totpCode } from './helpers/twoFactor.js';
import { postSignIn } from './helpers/signInForm.js';

const PASSWORD = 'correct horse battery';
const TWO_FACTOR = '/settings/account/two-factor';

/**
 * TOTP two-factor (IDENTITY.md): set-up, confirmation and recovery codes on the account page, the
 * pending sign-in at /login/two-factor (no session before the code, replay refused, five wrong
 * codes end it, 5 minutes), turning it off and renewing codes on a current code, and the other
 * doors in (an invitation for an existing account, a password reset) that must not skip it.
 */
describe.each(DIALECTS)('two-factor authentication on %s', (dialect) => {
  let h: Harness;
  let org: Org;

  beforeAll(async () => {
    h = await makeHarness(dialect, { env: { METRICS_TOKEN: TOKEN } });
    org = await h.newOrg('Two Factor Org');
  });
  afterAll(() => h?.close());

  /** A fresh member with two-factor on (each test its own, so TOTP steps never collide). */
  async function enrolled() {
    const member = await addMember(h, org.orgId, 'member');
    const user = await signedIn(h, member.email);
    return { ...member, user, ...(await enrol(user)) };
  }

  /** Signs in with the password: the browser is sent to the code, with no session. */
  async function passwordStep(email: string, password = PASSWORD, next = '/groups'): Promise<Visitor> {
    const person = visitor(h.app);
    const res = await person.post('/login', { email, password, next });
    expect(res.statusCode, res.body).toBe(303);
    expect(res.headers.location).toBe('/login/two-factor');
    expect(person.cookies.has('od_session')).toBe(false);
    expect(person.cookies.get('od_pending')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const form = await person.get('/login/two-factor');
    expect(form.statusCode).toBe(200);
    return person;
  }

  const eventsOf = async (userId: string, type: string) =>
    (
      await h.db.kysely.selectFrom('events').select(['data', 'org_id']).where('subject_id', '=', userId).where('type', '=', type).execute()
    ).map((row) => JSON.parse(row.data) as Record<string, unknown>);

  it('sets up with an inline SVG QR code and the otpauth URI, confirms with a code, and shows 10 recovery codes once', async () => {
    const member = await addMember(h, org.orgId, 'member');
    const user = await signedIn(h, member.email);
    const account = await user.get('/settings/account');
    expect(account.body).toContain(`href="${TWO_FACTOR}"`);
    expect((await user.get(TWO_FACTOR)).body).toContain('Two-factor authentication is off');

    expect((await user.post(`${TWO_FACTOR}/setup`)).statusCode).toBe(303);
    const page = await user.get(TWO_FACTOR);
    expect(page.statusCode).toBe(200);
    expect(page.body).toMatch(/<svg role="img" aria-label="QR code[^"]*"[^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
    expect(page.body).not.toMatch(/<img|<script(?! src="\/assets\/(dashboard|passkeys)\.js")/);
    const { uri, secret } = setupOf(page.body);
    expect(uri).toMatch(new RegExp(`^otpauth://totp/orgdata:${encodeURIComponent(member.email)}\\?`));
    expect(new URL(uri).searchParams.get('issuer')).toBe('orgdata');
    // As text in the page, readable as is (bare ampersands).
    expect(page.body).toContain(`secret=${secret}&issuer=orgdata`);
    expect(page.body).toContain(secret.match(/.{4}/g)!.join(' '));

    // Stored sealed (AES-256-GCM under a key from SECRET_KEY), not in clear.
    const row = await h.db.kysely.selectFrom('totp_factors').selectAll().where('user_id', '=', member.id).executeTakeFirstOrThrow();
    expect(row.secret_sealed).not.toContain(secret);
    expect(row.confirmed_at).toBeNull();

    // A fresh set-up replaces an unconfirmed one.
    await user.post(`${TWO_FACTOR}/setup`);
    const second = setupOf((await user.get(TWO_FACTOR)).body).secret;
    expect(second).not.toBe(secret);
    // The first secret's codes no longer confirm; a wrong code neither.
    const stale = await user.post(`${TWO_FACTOR}/confirm`, { code: totpCode(secret) });
    expect(stale.statusCode).toBe(400);
    expect(stale.body).toContain('That code is not right');
    expect((await user.post(`${TWO_FACTOR}/confirm`, { code: 'abcdef' })).statusCode).toBe(400);
    expect((await user.post(`${TWO_FACTOR}/confirm`, { code: '' })).statusCode).toBe(400);

    const confirmed = await user.post(`${TWO_FACTOR}/confirm`, { code: totpCode(second) });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    expect(confirmed.headers['cache-control']).toBe('no-store');
    // A privilege change: the session is rotated (IDENTITY.md rule 13), the old cookie opens nothing.
    const oldCookie = user.cookie;
    expect(followRotation(user, confirmed)).toBe(true);
    expect((await h.app.inject({ method: 'GET', url: TWO_FACTOR, headers: { cookie: oldCookie } })).statusCode).toBe(303);
    expect(confirmed.body).toContain('This is the only time they are shown');
    const codes = recoveryCodesIn(confirmed.body);
    expect(codes).toHaveLength(10);
    expect(new Set(codes).size).toBe(10);

    // Shown once: the page afterwards says it is on, with 10 left, and shows no code.
    const after = await user.get(TWO_FACTOR);
    expect(after.body).toContain('Two-factor authentication is on');
    expect(after.body).toContain('10 recovery codes left');
    for (const code of codes) expect(after.body).not.toContain(code);
    const stored = await h.db.kysely.selectFrom('recovery_codes').select('code_hash').where('user_id', '=', member.id).execute();
    expect(stored).toHaveLength(10);
    for (const code of codes) expect(stored.map((s) => s.code_hash).join()).not.toContain(code.replace('-', ''));

    // A confirmed factor is never replaced by a new set-up.
    expect((await user.post(`${TWO_FACTOR}/setup`)).statusCode).toBe(409);
    const kept = await h.db.kysely.selectFrom('totp_factors').selectAll().where('user_id', '=', member.id).executeTakeFirstOrThrow();
    expect(kept.confirmed_at).not.toBeNull();
    expect(await eventsOf(member.id, 'member.two_factor_enabled')).toHaveLength(1);
  });

  it('asks for the code after the password, with no session before it; the sign-in is in Activity and /metrics', async () => {
    const { email, id, secret } = await enrolled();
    const before = valueOf(await scrape(h), 'orgdata_sign_ins_total', { method: 'totp', result: 'succeeded' }) ?? 0;
    const person = await passwordStep(email);
    const pendingCookie = (await postSignIn(h.app, { email, password: PASSWORD })).cookies.find((c) => c.name === 'od_pending')!;
    expect(pendingCookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/', maxAge: 300 });
    const form = await person.get('/login/two-factor');
    expect(form.body).toMatch(/<input type="text"\s+name="code"[^>]*autocomplete="one-time-code"/);
    expect(form.body).not.toContain('data-passkey-second-factor');
    // The pending sign-in opens nothing.
    const blocked = await h.app.inject({ method: 'GET', url: '/contacts', headers: { cookie: person.cookieHeader() } });
    expect(blocked.statusCode).toBe(303);
    expect(blocked.headers.location).toContain('/login');

    const pendingToken = person.cookies.get('od_pending')!;
    const done = await person.post('/login/two-factor', { code: totpCode(secret) });
    expect(done.statusCode, done.body).toBe(303);
    expect(done.headers.location).toBe('/groups');
    expect(person.cookies.has('od_session')).toBe(true);
    expect(person.cookies.has('od_pending')).toBe(false);
    expect((await person.get('/contacts')).statusCode).toBe(200);
    const session = await h.db.kysely
      .selectFrom('sessions')
      .select('method')
      .where('user_id', '=', id)
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();
    expect(session.method).toBe('password+totp');
    expect((await eventsOf(id, 'member.signed_in')).map((e) => e.method)).toContain('password+totp');
    const after = valueOf(await scrape(h), 'orgdata_sign_ins_total', { method: 'totp', result: 'succeeded' });
    expect(after).toBe(before + 1);
    // The pending sign-in is used up.
    const hash = createHash('sha256').update(pendingToken).digest('hex');
    expect(await h.db.kysely.selectFrom('auth_challenges').select('id_hash').where('id_hash', '=', hash).execute()).toEqual([]);
    expect(await h.db.kysely.selectFrom('auth_challenges').select('id_hash').where('user_id', '=', id).execute()).toHaveLength(1);
  });

  it('refuses a code used already (replay), recording the reason', async () => {
    const { email, id, secret } = await enrolled();
    const code = totpCode(secret);
    expect((await (await passwordStep(email)).post('/login/two-factor', { code })).statusCode).toBe(303);
    const again = await passwordStep(email);
    const replayed = await again.post('/login/two-factor', { code });
    expect(replayed.statusCode).toBe(401);
    expect(replayed.body).toContain('That code was used already');
    expect(again.cookies.has('od_session')).toBe(false);
    const failures = await eventsOf(id, 'member.sign_in_failed');
    expect(failures).toContainEqual(expect.objectContaining({ method: 'password+totp', reason: 'replayed_code' }));
    // The next step's code works.
    expect((await again.post('/login/two-factor', { code: totpCode(secret, 1) })).statusCode).toBe(303);
  });

  it('ends the pending sign-in after five wrong codes, each recorded and counted', async () => {
    const { email, id, secret } = await enrolled();
    const failedBefore = valueOf(await scrape(h), 'orgdata_sign_ins_total', { method: 'totp', result: 'failed' }) ?? 0;
    const person = await passwordStep(email);
    const wrong = totpCode(secret) === '000000' ? '111111' : '000000';
    for (let i = 0; i < 4; i++) {
      const res = await person.post('/login/two-factor', { code: wrong });
      expect(res.statusCode).toBe(401);
      expect(res.body).toContain('That code is not right');
    }
    const fifth = await person.post('/login/two-factor', { code: wrong });
    expect(fifth.statusCode).toBe(303);
    expect(fifth.headers.location).toBe('/login');
    expect(person.cookies.has('od_pending')).toBe(false);
    expect((await person.get('/login')).body).toContain('Too many wrong codes');
    // Even the right code cannot finish it now.
    const late = await person.post('/login/two-factor', { code: totpCode(secret) });
    expect(late.statusCode).toBe(303);
    expect(late.headers.location).toBe('/login');
    expect(person.cookies.has('od_session')).toBe(false);
    const failures = await eventsOf(id, 'member.sign_in_failed');
    expect(failures.filter((f) => f.reason === 'wrong_code')).toHaveLength(5);
    const failedAfter = valueOf(await scrape(h), 'orgdata_sign_ins_total', { method: 'totp', result: 'failed' });
    expect(failedAfter).toBe(failedBefore + 5);
    // The sign-in throttle counted them: this account, from this network, must now wait.
    const throttled = await visitor(h.app).post('/login', { email, password: PASSWORD });
    expect(throttled.statusCode).toBe(429);
    expect(Number(throttled.headers['retry-after'])).toBeGreaterThan(0);
    // From elsewhere, the right password and code still get in.
    const elsewhere = visitor(h.app, '203.0.113.77');
    expect((await elsewhere.post('/login', { email, password: PASSWORD })).headers.location).toBe('/login/two-factor');
    await elsewhere.get('/login/two-factor');
    expect((await elsewhere.post('/login/two-factor', { code: totpCode(secret, 1) })).statusCode).toBe(303);
  });

  it('offers a passkey as the second factor to someone who has one (and no code form without TOTP)', async () => {
    const member = await addMember(h, org.orgId, 'member');
    await h.db.kysely
      .insertInto('passkeys')
      .values({
        id: `pk_${member.id}`,
        user_id: member.id,
        credential_id: `cred-${member.id}`,
        public_key: 'AAAA',
        sign_count: 0,
        transports: '[]',
        name: 'Laptop',
        created_at: new Date().toISOString(),
        last_used_at: null,
      })
      .execute();
    const person = await passwordStep(member.email);
    const page = (await person.get('/login/two-factor')).body;
    expect(page).toContain('<button type="button" data-passkey-second-factor>Use a passkey</button>');
    expect(page).toContain('<script src="/assets/passkeys.js" defer></script>');
    expect(page).not.toContain('name="code"');
    // A code cannot stand in for the passkey.
    const nonce = person.cookies.get('od_form')!;
    const csrf = createHmac('sha256', SECRET).update(`form:${nonce}`).digest('base64url');
    expect((await person.post('/login/two-factor', { code: '123456' }, { csrf })).statusCode).toBe(401);
    expect(person.cookies.has('od_session')).toBe(false);
  });

  it('lets the pending sign-in last 5 minutes only, and sends a browser without one back to /login', async () => {
    const { email, id, secret } = await enrolled();
    const challenge = await h.db.kysely
      .selectFrom('auth_challenges')
      .select(['created_at', 'expires_at'])
      .where('user_id', '=', id)
      .execute();
    expect(challenge).toEqual([]);
    const person = await passwordStep(email);
    const row = await h.db.kysely
      .selectFrom('auth_challenges')
      .select(['created_at', 'expires_at', 'purpose'])
      .where('user_id', '=', id)
      .executeTakeFirstOrThrow();
    expect(row.purpose).toBe('two_factor');
    expect(Date.parse(row.expires_at) - Date.parse(row.created_at)).toBe(5 * 60_000);
    await h.db.kysely
      .updateTable('auth_challenges')
      .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
      .where('user_id', '=', id)
      .execute();
    const gone = await person.get('/login/two-factor');
    expect(gone.statusCode).toBe(303);
    expect(gone.headers.location).toBe('/login');
    expect((await person.get('/login')).body).toContain('Your sign-in expired');
    const posted = await person.post('/login/two-factor', { code: totpCode(secret) });
    expect(posted.statusCode).toBe(303);
    expect(posted.headers.location).toBe('/login');
    expect(person.cookies.has('od_session')).toBe(false);

    const nobody = visitor(h.app);
    const none = await nobody.get('/login/two-factor');
    expect(none.statusCode).toBe(303);
    expect(none.headers.location).toBe('/login');
    // A made-up token is no pending sign-in either.
    nobody.cookies.set('od_pending', 'A'.repeat(43));
    expect((await nobody.get('/login/two-factor')).headers.location).toBe('/login');
  });

  it('opens one session when two right codes race for one pending sign-in', async () => {
    const { email, id, secret, codes } = await enrolled();
    const person = await passwordStep(email);
    const before = (await h.db.kysely.selectFrom('sessions').select('id_hash').where('user_id', '=', id).execute()).length;
    const answers = await Promise.all([
      person.post('/login/two-factor', { code: totpCode(secret) }),
      person.post('/login/two-factor', { code: codes[0]! }),
    ]);
    expect(answers.map((a) => a.statusCode)).toEqual([303, 303]);
    expect(answers.filter((a) => a.headers.location === '/groups')).toHaveLength(1);
    const after = (await h.db.kysely.selectFrom('sessions').select('id_hash').where('user_id', '=', id).execute()).length;
    expect(after - before).toBe(1);
  });

  it('takes each recovery code once in place of a TOTP code', async () => {
    const { email, id, codes } = await enrolled();
    const person = await passwordStep(email);
    const done = await person.post('/login/two-factor', { code: codes[3]!.toUpperCase() });
    expect(done.statusCode, done.body).toBe(303);
    const session = await h.db.kysely
      .selectFrom('sessions')
      .select('method')
      .where('user_id', '=', id)
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();
    expect(session.method).toBe('password+recovery_code');
    const again = await passwordStep(email);
    expect((await again.post('/login/two-factor', { code: codes[3]! })).statusCode).toBe(401);
    expect((await again.post('/login/two-factor', { code: codes[4]! })).statusCode).toBe(303);
    const user = await signedIn(h, email);
    expect((await user.get(TWO_FACTOR)).body).toContain('8 recovery codes left');
  });

  it('refuses every new form without its CSRF token', async () => {
    const { email, user, secret } = await enrolled();
    for (const action of ['setup', 'confirm', 'disable', 'recovery-codes']) {
      const res = await user.post(`${TWO_FACTOR}/${action}`, { code: totpCode(secret, 1) }, { csrf: null });
      expect(res.statusCode, action).toBe(403);
      expect((await user.post(`${TWO_FACTOR}/${action}`, { code: totpCode(secret, 1) }, { csrf: 'x'.repeat(43) })).statusCode).toBe(403);
    }
    expect((await user.get(TWO_FACTOR)).body).toContain('Two-factor authentication is on');
    const person = await passwordStep(email);
    expect((await person.post('/login/two-factor', { code: totpCode(secret, 1) }, { csrf: null })).statusCode).toBe(403);
    expect((await person.post('/login/two-factor', { code: totpCode(secret, 1) }, { csrf: 'forged' })).statusCode).toBe(403);
    // From another site, even with the token: refused.
    const cross = await h.app.inject({
      method: 'POST',
      url: '/login/two-factor',
      headers: { cookie: person.cookieHeader(), 'content-type': 'application/x-www-form-urlencoded', origin: 'https://evil.example' },
      payload: new URLSearchParams({
        _csrf: /name="_csrf" value="([^"]+)"/.exec((await person.get('/login/two-factor')).body)![1]!,
        code: totpCode(secret, 1),
      }).toString(),
    });
    expect(cross.statusCode).toBe(403);
    expect(person.cookies.has('od_session')).toBe(false);
  });

  it('renews recovery codes and turns two-factor off only with a current code', async () => {
    const { email, id, user, secret, codes } = await enrolled();
    expect(
      (await user.post(`${TWO_FACTOR}/recovery-codes`, { code: '123456' === totpCode(secret) ? '654321' : '123456' })).statusCode,
    ).toBe(401);
    expect((await user.post(`${TWO_FACTOR}/recovery-codes`, { code: '' })).statusCode).toBe(400);
    const renewed = await user.post(`${TWO_FACTOR}/recovery-codes`, { code: totpCode(secret) });
    expect(renewed.statusCode, renewed.body).toBe(200);
    const fresh = recoveryCodesIn(renewed.body);
    expect(fresh).toHaveLength(10);
    // The old codes died with the renewal.
    const person = await passwordStep(email);
    expect((await person.post('/login/two-factor', { code: codes[0]! })).statusCode).toBe(401);
    expect(await eventsOf(id, 'member.recovery_codes_replaced')).toHaveLength(1);

    // Off: a wrong code or an old recovery code is refused, the factor stays.
    const wrongOff = await user.post(`${TWO_FACTOR}/disable`, { code: codes[1]! });
    expect(wrongOff.statusCode).toBe(401);
    expect(wrongOff.body).toContain('That code is not right');
    expect((await user.post(`${TWO_FACTOR}/disable`, { code: '' })).statusCode).toBe(400);
    expect((await user.get(TWO_FACTOR)).body).toContain('Two-factor authentication is on');
    const off = await user.post(`${TWO_FACTOR}/disable`, { code: fresh[0]! });
    expect(off.statusCode).toBe(303);
    expect(await h.db.kysely.selectFrom('totp_factors').select('user_id').where('user_id', '=', id).execute()).toEqual([]);
    expect(await h.db.kysely.selectFrom('recovery_codes').select('id').where('user_id', '=', id).execute()).toEqual([]);
    expect(await eventsOf(id, 'member.two_factor_disabled')).toHaveLength(1);
    expect((await user.post(`${TWO_FACTOR}/disable`, { code: totpCode(secret, 1) })).statusCode).toBe(409);
    // The password alone signs in again.
    const plain = visitor(h.app);
    const res = await plain.post('/login', { email, password: PASSWORD });
    expect(res.statusCode).toBe(303);
    expect(plain.cookies.has('od_session')).toBe(true);

    // Activity, for the organisation's admin, lists the changes.
    const admin = await signedIn(h, org.adminEmail);
    const activity = (await admin.get('/activity?type=member.*')).body;
    for (const type of [
      'member.two_factor_enabled',
      'member.two_factor_disabled',
      'member.recovery_codes_replaced',
      'member.signed_in',
      'member.sign_in_failed',
    ]) {
      expect(activity, type).toContain(type);
    }
  });

  it("asks an existing account's second factor before an invitation signs it in, then adds the membership", async () => {
    const { email, id, secret } = await enrolled();
    const other = await h.newOrg('Second Org');
    const admin = await signedIn(h, other.adminEmail);
    const invited = await admin.post('/settings/members', { email, role: 'member' });
    expect(invited.statusCode, invited.body).toBe(200);
    const link = /<code id="invite-link">\s*http:\/\/orgdata\.test(\/invite\/[A-Za-z0-9_-]{43})\s*<\/code>/.exec(invited.body)![1]!;
    const person = visitor(h.app);
    expect((await person.get(link)).body).toContain('You already have an orgdata account');
    const accepted = await person.post(link, { password: PASSWORD });
    expect(accepted.statusCode, accepted.body).toBe(303);
    expect(accepted.headers.location).toBe('/login/two-factor');
    expect(person.cookies.has('od_session')).toBe(false);
    const membership = () =>
      h.db.kysely.selectFrom('memberships').select('role').where('org_id', '=', other.orgId).where('user_id', '=', id).executeTakeFirst();
    expect(await membership()).toBeUndefined();
    // The link still works until the second factor is in (a wrong code does not use it up).
    expect((await person.get('/login/two-factor')).statusCode).toBe(200);
    expect((await person.post('/login/two-factor', { code: 'wrong-code1' })).statusCode).toBe(401);
    expect(await membership()).toBeUndefined();
    const done = await person.post('/login/two-factor', { code: totpCode(secret) });
    expect(done.statusCode, done.body).toBe(303);
    expect(done.headers.location).toBe('/contacts');
    expect(await membership()).toEqual({ role: 'member' });
    const session = await h.db.kysely
      .selectFrom('sessions')
      .select(['method', 'org_id'])
      .where('user_id', '=', id)
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();
    expect(session).toEqual({ method: 'password+totp', org_id: other.orgId });
    expect((await visitor(h.app).get(link)).statusCode).toBe(410);
  });

  it('does not sign in past the second factor after a password reset', async () => {
    const { email, secret } = await enrolled();
    const identity = { mailer: null, publicUrl: 'http://orgdata.test', inviteTtlHours: 168, resetTtlMinutes: 60 };
    const { reset_url } = await resetLinkFor(h.db.kysely, identity, { orgId: org.orgId, email }, new Date());
    const path = new URL(reset_url).pathname;
    const person = visitor(h.app);
    await person.get(path);
    const reset = await person.post(path, { password: 'a brand new password' });
    expect(reset.statusCode, reset.body).toBe(200);
    expect(person.cookies.has('od_session')).toBe(false);
    const next = await passwordStep(email, 'a brand new password');
    expect((await next.post('/login/two-factor', { code: totpCode(secret) })).statusCode).toBe(303);
  });
});
