import { beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from './helpers/harness.js';
import { CookieJar } from './helpers/oidcProvider.js';
import { cli } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';
import {
  approveSsoDomains,
  consentToLink,
  orgThroughCli,
  passwordSignIn,
  runCli,
  sessionCookieOf,
  ssoSet,
  ssoSignIn,
  startSso,
  userIdOf,
} from './helpers/ssoServer.js';

const PASSWORD = 'correct horse battery';

/**
 * Single sign-on against a real OpenID provider (oidc-provider on localhost) and a real server
 * process over HTTP: the provider's pages are driven as a browser would, with cookies.
 */
describe.each(DIALECTS)('single sign-on on %s', { timeout: 180_000 }, (dialect) => {
  let orgId = '';
  const suite = suiteServer(
    dialect,
    { SSO_ALLOW_PRIVATE_ISSUERS: 'true' },
    { publicUrl: true, idp: true, database: true, stopWith: 'SIGTERM', startTimeout: 180_000 },
  );

  const setSso = (extra: string[] = [], secret = suite.idp.clientSecret) =>
    ssoSet(suite.env, suite.idp, orgId, 'acme.test,ACME-two.test', extra, secret);
  const events = (type: string) =>
    suite.db.kysely
      .selectFrom('events')
      .select(['type', 'data', 'subject_id'])
      .where('org_id', '=', orgId)
      .where('type', '=', type)
      .execute();
  const userId = (email: string) => userIdOf(suite.db, email);

  beforeAll(async () => {
    orgId = await orgThroughCli(suite.env.env, 'Acme', 'boss@acme.test', PASSWORD);
    for (const email of ['alice@acme.test', 'carol@acme.test']) {
      await cli(suite.env.env, ['users', 'add', '--org', orgId, '--email', email, '--password', PASSWORD, '--role', 'member']);
    }
    suite.idp.accounts.set('alice', { email: 'alice@acme.test', email_verified: true });
    suite.idp.accounts.set('carol', { email: 'carol@acme.test', email_verified: false });
    suite.idp.accounts.set('dave', { email: 'dave@elsewhere.test', email_verified: true });
    suite.idp.accounts.set('bob', { email: 'bob@acme.test', email_verified: true });
    suite.idp.accounts.set('boss', { email: 'boss@acme.test', email_verified: true });
  }, 180_000);

  it('sets SSO by the CLI with the secret from standard input, never shows it, and stores it sealed', async () => {
    const empty = await setSso([], '');
    expect(empty.code).toBe(1);
    expect(JSON.parse(empty.stdout).error.code).toBe('invalid_request');
    expect(empty.stdout).toContain('client_secret');

    const set = await setSso();
    expect(set.code, set.stderr + set.stdout).toBe(0);
    const out = JSON.parse(set.stdout);
    expect(out).toMatchObject({
      configured: true,
      issuer: suite.idp.issuer,
      client_id: suite.idp.clientId,
      domains: ['acme-two.test', 'acme.test'],
      verified_domains: [],
      auto_join: 'off',
      required: false,
    });
    // The domains lead nowhere until verified (IDENTITY.md rule 9): the operator approves them here.
    expect((await startSso(suite.url, 'alice@acme.test')).status).toBe(400);
    await approveSsoDomains(suite.env, orgId, ['acme.test', 'acme-two.test']);
    expect(JSON.parse((await runCli(suite.env.env, ['sso', 'show', '--org', orgId, '--json'])).stdout).verified_domains).toEqual([
      'acme-two.test',
      'acme.test',
    ]);
    expect(out.redirect_uri).toBe(`${suite.url}/sso/callback`);
    expect(set.stdout).not.toContain(suite.idp.clientSecret);

    const shown = await runCli(suite.env.env, ['sso', 'show', '--org', orgId]);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`${suite.url}/sso/callback`);
    expect(shown.stdout).toContain(suite.idp.issuer);
    expect(shown.stdout).not.toContain(suite.idp.clientSecret);

    const row = await suite.db.kysely.selectFrom('sso_configs').selectAll().where('org_id', '=', orgId).executeTakeFirstOrThrow();
    expect(row.client_secret_sealed).not.toContain(suite.idp.clientSecret);
    expect(row.client_secret_sealed).not.toContain(Buffer.from(suite.idp.clientSecret).toString('base64').slice(0, 20));
    expect((await events('security.sso_set')).length).toBeGreaterThan(0);
  });

  it('refuses an http or private issuer without SSO_ALLOW_PRIVATE_ISSUERS, and verifying a domain another organisation verified', async () => {
    const strict = { ...suite.env.env, SSO_ALLOW_PRIVATE_ISSUERS: 'false' };
    for (const issuer of [suite.idp.issuer, 'https://127.0.0.1:8443', 'https://localhost']) {
      const r = await runCli(
        strict,
        ['sso', 'set', '--org', orgId, '--issuer', issuer, '--client-id', 'x', '--domains', 'acme.test', '--json'],
        'secret\n',
      );
      expect(r.code, issuer).toBe(1);
      const error = JSON.parse(r.stdout).error;
      expect(error.code).toBe('invalid_request');
      expect(error.message).toMatch(/^issuer: /);
    }
    const other = await orgThroughCli(suite.env.env, 'Other', 'o@other.test', PASSWORD);
    const taken = await runCli(
      suite.env.env,
      ['sso', 'set', '--org', other, '--issuer', suite.idp.issuer, '--client-id', 'x', '--domains', 'other.test, Acme.test', '--json'],
      's\n',
    );
    // Claiming it is no obstacle (an unverified claim blocks nobody, IDENTITY.md rule 9); verifying it is.
    expect(taken.code, taken.stdout).toBe(0);
    const approve = await runCli(suite.env.env, ['sso', 'domains', 'approve', '--org', other, '--domain', 'acme.test', '--json']);
    expect(approve.code).toBe(1);
    expect(JSON.parse(approve.stdout).error.message).toContain('acme.test is already verified for single sign-on by organisation');
    expect((await startSso(suite.url, 'alice@acme.test')).status).toBe(303);
    // The settings of the first organisation are untouched.
    expect(JSON.parse((await runCli(suite.env.env, ['sso', 'show', '--org', orgId, '--json'])).stdout).client_id).toBe(suite.idp.clientId);
  });

  it('signs a member in through the provider once she links it with her own password, and keeps the link when the email changes at the provider', async () => {
    // IDENTITY.md rule 10 (was: the first sign-in linked the member at once): an existing account
    // is linked only after its holder signs in with its own password at /sso/link.
    const { response, jar } = await ssoSignIn(suite.url, 'Alice@ACME.test', 'alice');
    expect(response.status, await response.clone().text()).toBe(303);
    expect(response.headers.get('location')).toBe('/sso/link');
    expect(sessionCookieOf(response)).toBeUndefined();
    const alice = await userId('alice@acme.test');
    expect(await suite.db.kysely.selectFrom('sso_identities').selectAll().where('user_id', '=', alice!).execute()).toEqual([]);
    const linked = await consentToLink(suite.url, jar, PASSWORD);
    expect(linked.status, await linked.clone().text()).toBe(303);
    expect(linked.headers.get('location')).toBe('/');
    expect(sessionCookieOf(linked)).toBeDefined();
    const link = await suite.db.kysely.selectFrom('sso_identities').selectAll().where('user_id', '=', alice!).execute();
    expect(link).toMatchObject([{ issuer: suite.idp.issuer, subject: 'alice' }]);
    const signedIn = (await events('member.signed_in')).filter((e) => e.subject_id === alice);
    expect(signedIn.map((e) => JSON.parse(e.data).method)).toContain('sso');

    suite.idp.accounts.set('alice', { email: 'alice.renamed@acme.test', email_verified: true });
    const again = await ssoSignIn(suite.url, 'alice@acme.test', 'alice');
    expect(again.response.status).toBe(303);
    const page = await again.jar.fetch(`${suite.url}/settings/account`);
    expect(await page.text()).toContain('alice@acme.test');
    expect(await userId('alice.renamed@acme.test')).toBeUndefined();
    suite.idp.accounts.set('alice', { email: 'alice@acme.test', email_verified: true });
  });

  it('refuses an unverified email, another domain and, without auto-join, a person with no membership: no session, in Activity', async () => {
    const carol = await ssoSignIn(suite.url, 'carol@acme.test', 'carol');
    expect(carol.response.status).toBe(403);
    expect(sessionCookieOf(carol.response)).toBeUndefined();
    expect(await carol.response.text()).toContain('not verified');
    const carolId = await userId('carol@acme.test');
    const failures = (await events('member.sign_in_failed')).filter((e) => e.subject_id === carolId).map((e) => JSON.parse(e.data));
    expect(failures).toContainEqual(expect.objectContaining({ method: 'sso', reason: 'unverified_email' }));

    const dave = await ssoSignIn(suite.url, 'someone@acme.test', 'dave');
    expect(dave.response.status).toBe(403);
    expect(sessionCookieOf(dave.response)).toBeUndefined();
    expect(await dave.response.text()).toContain('not in one of the organisation');

    const bob = await ssoSignIn(suite.url, 'bob@acme.test', 'bob');
    expect(bob.response.status).toBe(403);
    expect(await bob.response.text()).toContain('ask an admin for an invitation');
    expect(sessionCookieOf(bob.response)).toBeUndefined();
    expect(await userId('bob@acme.test')).toBeUndefined();
  });

  it('with auto-join, makes a newcomer a member with no usable password', async () => {
    expect((await setSso(['--auto-join', 'member'])).code).toBe(0);
    const bob = await ssoSignIn(suite.url, 'bob@acme.test', 'bob');
    expect(bob.response.status).toBe(303);
    expect(sessionCookieOf(bob.response)).toBeDefined();
    const bobId = await userId('bob@acme.test');
    const membership = await suite.db.kysely.selectFrom('memberships').selectAll().where('user_id', '=', bobId!).execute();
    expect(membership).toMatchObject([{ org_id: orgId, role: 'member' }]);
    for (const guess of ['', 'password', PASSWORD]) {
      expect((await passwordSignIn(suite.url, 'bob@acme.test', guess || 'x')).response.status).not.toBe(303);
    }
    expect((await setSso()).code).toBe(0);
  });

  it("lets an invited newcomer join through SSO with the invitation's role, auto-join off, and uses the invitation up", async () => {
    const { invite_url } = await cli<{ invite_url: string }>(suite.env.env, [
      'users',
      'invite',
      '--org',
      orgId,
      '--email',
      'erin@acme.test',
      '--role',
      'admin',
    ]);
    const offer = await fetch(invite_url);
    expect(await offer.text()).toContain('href="/sso/start?email=erin%40acme.test"');
    suite.idp.accounts.set('erin', { email: 'erin@acme.test', email_verified: true });
    const erin = await ssoSignIn(suite.url, 'erin@acme.test', 'erin');
    expect(erin.response.status).toBe(303);
    const erinId = await userId('erin@acme.test');
    const membership = await suite.db.kysely
      .selectFrom('memberships')
      .select('role')
      .where('user_id', '=', erinId!)
      .where('org_id', '=', orgId)
      .execute();
    expect(membership).toEqual([{ role: 'admin' }]);
    expect((await fetch(invite_url)).status).toBe(410);
  });

  it('refuses a tampered state, a tampered nonce, a replayed callback and a callback from another browser', async () => {
    const aliceId = await userId('alice@acme.test');
    const signIns = async () => (await events('member.signed_in')).filter((e) => e.subject_id === aliceId).length;
    const before = await signIns();
    const state = await ssoSignIn(suite.url, 'alice@acme.test', 'alice', {
      tamper: (url) => url.searchParams.set('state', 'forged-state'),
    });
    expect(state.response.status).toBe(400);
    expect(sessionCookieOf(state.response)).toBeUndefined();

    const nonce = await ssoSignIn(suite.url, 'alice@acme.test', 'alice', {
      tamper: (url) => url.searchParams.set('nonce', 'forged-nonce'),
    });
    expect(nonce.response.status).toBe(400);
    expect(sessionCookieOf(nonce.response)).toBeUndefined();
    expect(await nonce.response.text()).toContain('did not pass its checks');

    const good = await ssoSignIn(suite.url, 'alice@acme.test', 'alice');
    expect(good.response.status).toBe(303);
    // The same callback URL again, in the same browser (its od_sso cookie replayed too) and in another.
    const replayed = await fetch(good.callbackUrl, { redirect: 'manual', headers: { cookie: good.jar.header(suite.url) } });
    expect(replayed.status).toBe(400);
    expect(sessionCookieOf(replayed)).toBeUndefined();

    // A browser that did not start the sign-in cannot finish it, even with a valid code and state.
    const victim = new CookieJar();
    const start = await startSso(suite.url, 'alice@acme.test', victim);
    const { authorizeAt } = await import('./helpers/oidcProvider.js');
    const callback = await authorizeAt(victim, start.headers.get('location')!, 'alice', `${suite.url}/sso/callback`);
    const elsewhere = await fetch(callback, { redirect: 'manual' });
    expect(elsewhere.status).toBe(400);
    expect(sessionCookieOf(elsewhere)).toBeUndefined();
    // Only the good sign-in opened a session (claims that failed their checks name nobody in Activity).
    expect(await signIns()).toBe(before + 1);
  });

  it('answers every email without SSO alike (no enumeration)', async () => {
    const answers = await Promise.all(
      ['nobody@unknown.test', 'not-an-email', '', 'x@acme.test.evil'].map(async (email) => {
        const r = await startSso(suite.url, email);
        return { status: r.status, body: (await r.text()).replace(/nonce-[^"]+/g, '') };
      }),
    );
    expect(new Set(answers.map((a) => a.status))).toEqual(new Set([400]));
    expect(new Set(answers.map((a) => a.body)).size).toBe(1);
  });

  it("with --require, refuses a member's password (sso_required) and an admin's without a second factor, not with one", async () => {
    expect((await setSso(['--require'])).code).toBe(0);
    const alice = await passwordSignIn(suite.url, 'alice@acme.test', PASSWORD);
    expect(alice.response.status).toBe(403);
    expect(sessionCookieOf(alice.response)).toBeUndefined();
    expect(await alice.response.text()).toContain('Sign in with SSO');
    const aliceId = await userId('alice@acme.test');
    const reasons = (await events('member.sign_in_failed')).filter((e) => e.subject_id === aliceId).map((e) => JSON.parse(e.data).reason);
    expect(reasons).toContain('sso_required');

    const boss = await passwordSignIn(suite.url, 'boss@acme.test', PASSWORD);
    expect(boss.response.status).toBe(403);
    expect(await boss.response.text()).toContain('turned on two-factor');
    // The admin can still come in through SSO (linked with her own password the first time), and
    // then, with a second factor, by password.
    const bossSso = await ssoSignIn(suite.url, 'boss@acme.test', 'boss');
    expect(bossSso.response.headers.get('location')).toBe('/sso/link');
    const bossLinked = await consentToLink(suite.url, bossSso.jar, PASSWORD);
    expect(bossLinked.status).toBe(303);
    expect(sessionCookieOf(bossLinked)).toBeDefined();
    const bossId = await userId('boss@acme.test');
    await suite.db.kysely
      .insertInto('totp_factors')
      .values({
        user_id: bossId!,
        secret_sealed: 'sealed-elsewhere',
        created_at: new Date().toISOString(),
        confirmed_at: new Date().toISOString(),
        last_step: null,
      })
      .execute();
    const withFactor = await passwordSignIn(suite.url, 'boss@acme.test', PASSWORD);
    expect(withFactor.response.status).not.toBe(403);
    expect(withFactor.response.status).toBeLessThan(400);
    // SSO still works for the member.
    expect((await ssoSignIn(suite.url, 'alice@acme.test', 'alice')).response.status).toBe(303);
    expect((await setSso()).code).toBe(0);
    expect((await passwordSignIn(suite.url, 'alice@acme.test', PASSWORD)).response.status).toBe(303);
  });

  it('starts a sign-in only from its own form (login CSRF): a link or another site starts nothing', async () => {
    // A link shows the form with the email filled in: no redirect, no pending sign-in.
    const shown = await fetch(`${suite.url}/sso/start?email=alice@acme.test`, { redirect: 'manual' });
    expect(shown.status).toBe(200);
    expect(await shown.text()).toContain('value="alice@acme.test"');
    expect(shown.headers.getSetCookie().some((c) => c.startsWith('od_sso='))).toBe(false);
    const post = (jar: CookieJar, fields: Record<string, string>, headers: Record<string, string> = {}) =>
      jar.fetch(`${suite.url}/sso/start`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams(fields).toString(),
      });
    // Another site's form: no token, or this browser's token sent from elsewhere.
    expect((await post(new CookieJar(), { email: 'alice@acme.test' })).status).toBe(403);
    const jar = new CookieJar();
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await (await jar.fetch(`${suite.url}/sso/start?email=alice@acme.test`)).text())![1]!;
    const crossSite = await post(jar, { _csrf: csrf, email: 'alice@acme.test' }, { origin: 'https://evil.example' });
    expect(crossSite.status).toBe(403);
    expect(crossSite.headers.get('location')).toBeNull();
    expect((await post(new CookieJar(), { _csrf: csrf, email: 'alice@acme.test' })).status).toBe(403);
    // Its own form, in the browser that loaded it: on to the provider.
    const own = await post(jar, { _csrf: csrf, email: 'alice@acme.test' });
    expect(own.status).toBe(303);
    expect(own.headers.get('location')).toMatch(/^http:\/\/localhost:\d+\//);
  });

  it('removes SSO by the CLI: /sso/start then answers as for any other email', async () => {
    const removed = await runCli(suite.env.env, ['sso', 'remove', '--org', orgId, '--json']);
    expect(JSON.parse(removed.stdout)).toEqual({ org_id: orgId, removed: true });
    expect(JSON.parse((await runCli(suite.env.env, ['sso', 'show', '--org', orgId, '--json'])).stdout).configured).toBe(false);
    expect((await startSso(suite.url, 'alice@acme.test')).status).toBe(400);
    expect((await events('security.sso_removed')).length).toBe(1);
    expect((await setSso()).code).toBe(0);
    await approveSsoDomains(suite.env, orgId, ['acme.test', 'acme-two.test']);
  });
});
