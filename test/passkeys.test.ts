import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChallenge } from '../src/domain/identity/challenges.js';
import { findSession } from '../src/domain/sessions/sessions.js';
import { formBody, signedIn } from './helpers/browserSession.js';
import { addMember, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { SoftAuthenticator } from './helpers/softAuthenticator.js';

const ORIGIN = 'http://orgdata.test'; // PUBLIC_URL in the harness: RP ID orgdata.test
type Json = Record<string, unknown>;

/**
 * Passkeys over HTTP (IDENTITY.md, "Passkeys") with a software authenticator making real
 * credentials and signatures: adding one, the usernameless sign-in, the second step of a password
 * sign-in and re-authentication, and each refusal: no or another ceremony's challenge, a replay,
 * another person's passkey, another origin or RP ID, no user verification, a counter going back,
 * a request from another site or without the CSRF token.
 */
describe.each(DIALECTS)('passkeys on %s', (dialect) => {
  let h: Harness;
  let org: Org;

  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg('Passkey Org');
  });
  afterAll(async () => h.close());

  /** A browser: its cookies, JSON posts from this site's pages (Origin), forms, pages. */
  function browser(remoteAddress = '198.51.100.40') {
    const cookies = new Map<string, string>();
    const keep = (res: LightMyRequestResponse) => {
      for (const c of res.cookies as { name: string; value: string; expires?: Date }[]) {
        if (c.value === '' || (c.expires && c.expires.getTime() < Date.now())) cookies.delete(c.name);
        else cookies.set(c.name, c.value);
      }
      return res;
    };
    const cookie = () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    return {
      cookies,
      csrf: '',
      json: async (url: string, body: Json, headers: Record<string, string> = {}) =>
        keep(
          await h.app.inject({
            method: 'POST',
            url,
            remoteAddress,
            headers: { host: 'orgdata.test', origin: ORIGIN, 'content-type': 'application/json', cookie: cookie(), ...headers },
            payload: JSON.stringify(body),
          }),
        ),
      form: async (url: string, fields: Record<string, string>) =>
        keep(
          await h.app.inject({
            method: 'POST',
            url,
            remoteAddress,
            headers: { host: 'orgdata.test', 'content-type': 'application/x-www-form-urlencoded', cookie: cookie() },
            payload: formBody(fields),
          }),
        ),
      get: async (url: string) => keep(await h.app.inject({ method: 'GET', url, remoteAddress, headers: { cookie: cookie() } })),
    };
  }
  type Browser = ReturnType<typeof browser>;

  async function signedInBrowser(email: string): Promise<Browser> {
    const user = await signedIn(h, email);
    const b = browser();
    b.cookies.set('od_session', user.cookie.slice('od_session='.length));
    b.csrf = user.csrf;
    return b;
  }

  async function person(): Promise<{ id: string; email: string; b: Browser; key: SoftAuthenticator }> {
    const user = await addMember(h, org.orgId, 'member');
    return { ...user, b: await signedInBrowser(user.email), key: new SoftAuthenticator(ORIGIN) };
  }

  async function addPasskey(p: { b: Browser; key: SoftAuthenticator }, name = 'Work laptop'): Promise<LightMyRequestResponse> {
    const options = await p.b.json('/settings/account/passkeys/options', { _csrf: p.b.csrf, name });
    expect(options.statusCode).toBe(200);
    return p.b.json('/settings/account/passkeys', { _csrf: p.b.csrf, name, response: p.key.register(options.json()) });
  }

  async function memberEvents(userId: string, type: string): Promise<Record<string, unknown>[]> {
    const rows = await h.db.kysely
      .selectFrom('events')
      .select(['data', 'actor_type'])
      .where('subject_id', '=', userId)
      .where('type', '=', type)
      .orderBy('created_at')
      .execute();
    return rows.map((r) => ({ ...(JSON.parse(r.data) as Record<string, string>), actor_type: r.actor_type }));
  }

  async function passkeySignIn(b: Browser, key: SoftAuthenticator, next = '', bad = {}) {
    const options = await b.json('/login/passkey/options', {});
    expect(options.statusCode).toBe(200);
    return b.json('/login/passkey', { next, response: key.authenticate(options.json(), undefined, bad) });
  }

  it('serves @simplewebauthn/browser and the wiring from this site', async () => {
    const bundle = await h.app.inject({ method: 'GET', url: '/assets/webauthn.js' });
    expect(bundle.statusCode).toBe(200);
    expect(bundle.headers['content-type']).toMatch(/^text\/javascript/);
    expect(bundle.body).toContain('SimpleWebAuthnBrowser');
    const script = await h.app.inject({ method: 'GET', url: '/assets/passkeys.js' });
    expect(script.body).toContain('SimpleWebAuthnBrowser');
    expect(script.body).toContain('data-passkey-second-factor');
    const login = await h.app.inject({ method: 'GET', url: '/login' });
    expect(login.body).toContain('data-passkey-sign-in');
    expect(login.body).toContain('<script src="/assets/passkeys.js" defer></script>');
  });

  it('adds a named passkey, lists it, and records member.passkey_added', async () => {
    const p = await person();
    const added = await addPasskey(p, 'Work laptop');
    expect(added.statusCode).toBe(201);
    expect(added.json()).toMatchObject({ name: 'Work laptop', redirect: '/settings/account#passkeys' });
    const page = await p.b.get('/settings/account');
    expect(page.body).toContain('Work laptop');
    expect(page.body).toContain('Never'); // not used yet
    const row = await h.db.kysely.selectFrom('passkeys').selectAll().where('user_id', '=', p.id).executeTakeFirstOrThrow();
    expect(row.credential_id).toBe(p.key.credentials[0]!.id);
    expect(Number(row.sign_count)).toBe(0);
    expect(JSON.parse(row.transports)).toEqual(['internal']);
    expect(await memberEvents(p.id, 'member.passkey_added')).toMatchObject([{ name: 'Work laptop', actor_type: 'user' }]);
  });

  it('refuses to add a passkey without the CSRF token, from another site, without a name, or with a bad answer', async () => {
    const p = await person();
    expect((await p.b.json('/settings/account/passkeys/options', { name: 'x' })).statusCode).toBe(403);
    expect((await p.b.json('/settings/account/passkeys/options', { name: 'x' }, { 'x-csrf-token': 'wrong' })).statusCode).toBe(403);
    expect((await p.b.json('/settings/account/passkeys/options', { name: 'x' }, { 'x-csrf-token': p.b.csrf })).statusCode).toBe(200);
    const crossSite = await p.b.json(
      '/settings/account/passkeys/options',
      { _csrf: p.b.csrf, name: 'x' },
      { origin: 'https://evil.example' },
    );
    expect(crossSite.statusCode).toBe(403);
    const noName = await p.b.json('/settings/account/passkeys/options', { _csrf: p.b.csrf, name: '  ' });
    expect(noName.statusCode).toBe(400);
    expect(noName.json().message).toContain('name');

    // Another origin, another RP ID, no user verification, another challenge: nothing is stored.
    for (const bad of [{ origin: 'https://evil.example' }, { rpId: 'evil.example' }, { uv: false }, { challenge: 'AAAA' }]) {
      const options = await p.b.json('/settings/account/passkeys/options', { _csrf: p.b.csrf, name: 'Bad' });
      const refused = await p.b.json('/settings/account/passkeys', {
        _csrf: p.b.csrf,
        name: 'Bad',
        response: p.key.register(options.json(), bad),
      });
      expect(refused.statusCode, JSON.stringify(bad)).toBe(400);
    }
    // No ceremony at all, and junk for an answer.
    expect((await p.b.json('/settings/account/passkeys', { _csrf: p.b.csrf, name: 'X', response: {} })).statusCode).toBe(400);
    await p.b.json('/settings/account/passkeys/options', { _csrf: p.b.csrf, name: 'X' });
    expect((await p.b.json('/settings/account/passkeys', { _csrf: p.b.csrf, name: 'X', response: 'nonsense' })).statusCode).toBe(400);
    expect(await h.db.kysely.selectFrom('passkeys').select('id').where('user_id', '=', p.id).execute()).toEqual([]);

    // An answer replayed after it was accepted: the challenge is gone.
    const options = await p.b.json('/settings/account/passkeys/options', { _csrf: p.b.csrf, name: 'Once' });
    const challengeCookie = p.b.cookies.get('od_passkey_register')!;
    const answer = p.key.register(options.json());
    expect((await p.b.json('/settings/account/passkeys', { _csrf: p.b.csrf, name: 'Once', response: answer })).statusCode).toBe(201);
    p.b.cookies.set('od_passkey_register', challengeCookie);
    expect((await p.b.json('/settings/account/passkeys', { _csrf: p.b.csrf, name: 'Twice', response: answer })).statusCode).toBe(400);

    // Someone else's ceremony cookie does not register a passkey to this account.
    const other = await person();
    await other.b.json('/settings/account/passkeys/options', { _csrf: other.b.csrf, name: 'Mine' });
    const stolen = await other.b.json('/settings/account/passkeys/options', { _csrf: other.b.csrf, name: 'Mine' });
    p.b.cookies.set('od_passkey_register', other.b.cookies.get('od_passkey_register')!);
    const crossed = await p.b.json('/settings/account/passkeys', {
      _csrf: p.b.csrf,
      name: 'Mine',
      response: p.key.register(stolen.json()),
    });
    expect(crossed.statusCode).toBe(400);
    expect((await h.db.kysely.selectFrom('passkeys').select('name').where('user_id', '=', p.id).execute()).map((r) => r.name)).toEqual([
      'Once',
    ]);
  });

  it('signs in with a passkey, no email typed: a session opened by passkey, recorded with its method', async () => {
    const p = await person();
    await addPasskey(p);
    const b = browser();
    const res = await passkeySignIn(b, p.key, '/labels?x=1');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ redirect: '/labels?x=1' });
    const session = await findSession(h.db.kysely, b.cookies.get('od_session')!, new Date());
    expect(session).toMatchObject({ userId: p.id, method: 'passkey' });
    expect((await b.get('/contacts')).statusCode).toBe(200);
    expect(await memberEvents(p.id, 'member.signed_in')).toMatchObject([{ method: 'passkey' }]);
    const stored = await h.db.kysely.selectFrom('passkeys').selectAll().where('user_id', '=', p.id).executeTakeFirstOrThrow();
    expect(Number(stored.sign_count)).toBe(1);
    expect(stored.last_used_at).not.toBeNull();
    // Only a path on this site.
    expect((await passkeySignIn(browser(), p.key, '//evil.example/x')).json()).toEqual({ redirect: '/' });
  });

  it('refuses a passkey sign-in that is replayed, from another site, with a bad signature or origin, or a counter gone back', async () => {
    const p = await person();
    await addPasskey(p);
    const b = browser();
    const options = await b.json('/login/passkey/options', {});
    const ceremony = b.cookies.get('od_passkey_sign_in')!;
    const answer = p.key.authenticate(options.json());
    expect((await b.json('/login/passkey', { response: answer })).statusCode).toBe(200);
    const replay = browser();
    replay.cookies.set('od_passkey_sign_in', ceremony);
    expect((await replay.json('/login/passkey', { response: answer })).statusCode).toBe(401);
    // No ceremony cookie (a sign-in begun in another browser): refused.
    const elsewhere = await b.json('/login/passkey/options', {});
    expect((await browser().json('/login/passkey', { response: p.key.authenticate(elsewhere.json()) })).statusCode).toBe(401);

    // Cross-site requests never reach the ceremony.
    const anon = browser();
    expect((await anon.json('/login/passkey/options', {}, { origin: 'https://evil.example' })).statusCode).toBe(403);
    expect((await anon.json('/login/passkey', {}, { origin: '' })).statusCode).toBe(403);
    expect((await anon.json('/login/passkey/options', {}, { 'sec-fetch-site': 'cross-site' })).statusCode).toBe(403);
    expect((await anon.form('/login/passkey', { response: '{}' })).statusCode).toBe(403);
    const garbled = await h.app.inject({
      method: 'POST',
      url: '/login/passkey',
      headers: { host: 'orgdata.test', origin: ORIGIN, 'content-type': 'application/json' },
      payload: '{"response": ',
    });
    expect(garbled.statusCode).toBe(400);

    for (const bad of [{ origin: 'https://evil.example' }, { rpId: 'evil.example' }, { uv: false }]) {
      expect((await passkeySignIn(browser(), p.key, '', bad)).statusCode, JSON.stringify(bad)).toBe(401);
    }
    // Another key's signature under this credential's id.
    const forger = new SoftAuthenticator(ORIGIN);
    forger.register({ rp: { id: 'orgdata.test' }, user: { id: p.key.credentials[0]!.userHandle }, challenge: 'AAAA' });
    const forged = browser();
    const forgedOptions = await forged.json('/login/passkey/options', {});
    const forgedAnswer = forger.authenticate(forgedOptions.json());
    expect(
      (
        await forged.json('/login/passkey', {
          response: { ...forgedAnswer, id: p.key.credentials[0]!.id, rawId: p.key.credentials[0]!.id },
        })
      ).statusCode,
    ).toBe(401);
    // A cloned authenticator: its counter is behind the stored one.
    expect((await passkeySignIn(browser(), p.key, '', { counter: 1 })).statusCode).toBe(401);
    const reasons = (await memberEvents(p.id, 'member.sign_in_failed')).map((e) => e.reason);
    expect(reasons).toContain('counter_went_back');
    expect(reasons).toContain('invalid_passkey');
    expect(reasons).toContain('no_challenge');
    // An unknown credential: refused, recorded nowhere.
    const stranger = new SoftAuthenticator(ORIGIN);
    stranger.register({ rp: { id: 'orgdata.test' }, user: { id: 'dXNy' }, challenge: 'AAAA' });
    expect((await passkeySignIn(browser(), stranger)).statusCode).toBe(401);
  });

  it('refuses a deactivated account its passkey', async () => {
    const p = await person();
    await addPasskey(p);
    await h.db.kysely.updateTable('users').set({ deactivated_at: new Date().toISOString() }).where('id', '=', p.id).execute();
    const b = browser();
    expect((await passkeySignIn(b, p.key)).statusCode).toBe(401);
    expect(b.cookies.has('od_session')).toBe(false);
    expect((await memberEvents(p.id, 'member.sign_in_failed')).map((e) => e.reason)).toEqual(['deactivated']);
  });

  async function pendingSignIn(userId: string, email: string, next = '/groups') {
    const token = await createChallenge(h.db.kysely, 'two_factor', userId, { orgId: org.orgId, next, email }, 5 * 60_000, new Date());
    const b = browser();
    b.cookies.set('od_pending', token);
    return b;
  }

  it('takes a passkey as the second step of a password sign-in, once, and only the pending person\u2019s', async () => {
    const p = await person();
    await addPasskey(p);
    const other = await person();
    await addPasskey(other);

    const b = await pendingSignIn(p.id, p.email);
    const options = await b.json('/login/two-factor/passkey/options', {});
    expect(options.statusCode).toBe(200);
    expect((options.json().allowCredentials as { id: string }[]).map((c) => c.id)).toEqual([p.key.credentials[0]!.id]);
    // Another person's passkey is refused and counts against the pending sign-in.
    const wrong = await b.json('/login/two-factor/passkey', { response: other.key.authenticate(options.json()) });
    expect(wrong.statusCode).toBe(401);
    expect(b.cookies.has('od_session')).toBe(false);
    expect((await memberEvents(p.id, 'member.sign_in_failed')).map((e) => e.reason)).toEqual(['not_this_account']);

    const again = await b.json('/login/two-factor/passkey/options', {});
    const done = await b.json('/login/two-factor/passkey', { response: p.key.authenticate(again.json()) });
    expect(done.statusCode).toBe(200);
    expect(done.json()).toEqual({ redirect: '/groups' });
    expect(b.cookies.has('od_pending')).toBe(false);
    const session = await findSession(h.db.kysely, b.cookies.get('od_session')!, new Date());
    expect(session).toMatchObject({ userId: p.id, method: 'password+passkey', orgId: org.orgId });
    expect(await memberEvents(p.id, 'member.signed_in')).toMatchObject([{ method: 'password+passkey' }]);

    // The pending sign-in is over: the same cookie opens nothing more.
    const token = await pendingSignIn(p.id, p.email);
    const used = browser();
    used.cookies.set('od_pending', b.cookies.get('od_pending') ?? 'gone');
    expect((await used.json('/login/two-factor/passkey/options', {})).statusCode).toBe(401);
    // A pending sign-in of someone with no passkey: nothing to offer.
    const without = await person();
    const none = await (await pendingSignIn(without.id, without.email)).json('/login/two-factor/passkey/options', {});
    expect(none.statusCode).toBe(400);
    expect(none.json().message).toContain('no passkey');
    // Without a pending sign-in: nothing to answer.
    expect((await browser().json('/login/two-factor/passkey/options', {})).statusCode).toBe(401);
    expect((await browser().json('/login/two-factor/passkey', { response: {} })).statusCode).toBe(401);
    expect((await token.json('/login/two-factor/passkey/options', {}, { origin: 'https://evil.example' })).statusCode).toBe(403);
  });

  it('ends a pending sign-in after five refused passkeys', async () => {
    const p = await person();
    await addPasskey(p);
    const b = await pendingSignIn(p.id, p.email);
    for (let i = 0; i < 5; i++) {
      const options = await b.json('/login/two-factor/passkey/options', {});
      expect(options.statusCode).toBe(200);
      expect(
        (await b.json('/login/two-factor/passkey', { response: p.key.authenticate(options.json(), undefined, { uv: false }) })).statusCode,
      ).toBe(401);
    }
    expect((await b.json('/login/two-factor/passkey/options', {})).statusCode).toBe(401);
  });

  it('re-authenticates with one of the person\u2019s own passkeys and rotates the session', async () => {
    const p = await person();
    await addPasskey(p);
    const other = await person();
    await addPasskey(other);
    const oldSession = p.b.cookies.get('od_session')!;

    expect((await p.b.json('/reauth/passkey/options', {})).statusCode).toBe(403); // no CSRF token
    const wrongOptions = await p.b.json('/reauth/passkey/options', { _csrf: p.b.csrf });
    const wrong = await p.b.json('/reauth/passkey', { _csrf: p.b.csrf, response: other.key.authenticate(wrongOptions.json()) });
    expect(wrong.statusCode).toBe(401);

    const options = await p.b.json('/reauth/passkey/options', { _csrf: p.b.csrf });
    expect((options.json().allowCredentials as { id: string }[]).map((c) => c.id)).toEqual([p.key.credentials[0]!.id]);
    const done = await p.b.json('/reauth/passkey', {
      _csrf: p.b.csrf,
      next: '/settings/developer',
      response: p.key.authenticate(options.json()),
    });
    expect(done.statusCode).toBe(200);
    expect(done.json()).toEqual({ redirect: '/settings/developer' });
    expect(p.b.cookies.get('od_session')).not.toBe(oldSession);
    expect(await findSession(h.db.kysely, oldSession, new Date())).toBeNull();
    expect(await memberEvents(p.id, 'member.reauthenticated')).toMatchObject([{ method: 'passkey' }]);

    // A challenge made for another session of the same person does not re-authenticate this one.
    const second = await signedInBrowser(p.email);
    const foreign = await second.json('/reauth/passkey/options', { _csrf: second.csrf });
    const session = await findSession(h.db.kysely, p.b.cookies.get('od_session')!, new Date());
    p.b.cookies.set('od_passkey_reauth', second.cookies.get('od_passkey_reauth')!);
    const crossed = await p.b.json('/reauth/passkey', { _csrf: session!.csrfToken, response: p.key.authenticate(foreign.json()) });
    expect(crossed.statusCode).toBe(401);
  });

  it('renames and removes only one\u2019s own passkeys; a removed passkey signs no one in', async () => {
    const p = await person();
    await addPasskey(p, 'Phone');
    const other = await person();
    await addPasskey(other, 'Theirs');
    const mine = await h.db.kysely.selectFrom('passkeys').select('id').where('user_id', '=', p.id).executeTakeFirstOrThrow();
    const theirs = await h.db.kysely.selectFrom('passkeys').select('id').where('user_id', '=', other.id).executeTakeFirstOrThrow();

    expect((await p.b.form(`/settings/account/passkeys/${theirs.id}/remove`, { _csrf: p.b.csrf })).statusCode).toBe(404);
    expect((await p.b.form(`/settings/account/passkeys/${theirs.id}/rename`, { _csrf: p.b.csrf, name: 'Mine now' })).statusCode).toBe(404);
    expect((await p.b.form(`/settings/account/passkeys/${mine.id}/remove`, {})).statusCode).toBe(403); // no CSRF token
    expect((await h.db.kysely.selectFrom('passkeys').select('name').where('id', '=', theirs.id).executeTakeFirstOrThrow()).name).toBe(
      'Theirs',
    );

    const renamed = await p.b.form(`/settings/account/passkeys/${mine.id}/rename`, { _csrf: p.b.csrf, name: 'Old phone' });
    expect(renamed.statusCode).toBe(303);
    expect((await p.b.form(`/settings/account/passkeys/${mine.id}/rename`, { _csrf: p.b.csrf, name: '' })).statusCode).toBe(400);
    expect((await p.b.get('/settings/account')).body).toContain('Old phone');

    const removed = await p.b.form(`/settings/account/passkeys/${mine.id}/remove`, { _csrf: p.b.csrf });
    expect(removed.statusCode).toBe(303);
    expect(removed.headers.location).toBe('/settings/account#passkeys');
    expect(await memberEvents(p.id, 'member.passkey_removed')).toMatchObject([{ name: 'Old phone' }]);
    expect((await p.b.get('/settings/account')).body).toContain('You have no passkeys yet.');
    expect((await passkeySignIn(browser(), p.key)).statusCode).toBe(401);
    expect((await p.b.form(`/settings/account/passkeys/${mine.id}/remove`, { _csrf: p.b.csrf })).statusCode).toBe(404);
  });
});
