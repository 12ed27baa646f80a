import { generateSync } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nowIso, randomBase62 } from '../src/domain/ids.js';
import { newTotpSecret, sealTotpSecret } from '../src/domain/identity/totp.js';
import { DIALECTS, SECRET } from './helpers/harness.js';
import { startMailCatcher, type MailCatcher } from './helpers/mailCatcher.js';
import { CookieJar } from './helpers/oidcProvider.js';
import { cli } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';
import { SoftAuthenticator } from './helpers/softAuthenticator.js';
import { configureSso, orgThroughCli, runCli, sessionCookieOf, ssoSignIn, userIdOf, userThroughCli } from './helpers/ssoServer.js';

const PASSWORD = 'correct horse battery';
const csrfIn = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

/**
 * IDENTITY.md rules 8 and 10 (issue 41): the admin of organisation A, with an OpenID provider of
 * their own that vouches for any e-mail, must never get a session in another organisation B, nor
 * an API key of B, for anybody — whatever the order of events. Each test builds its own
 * organisations, domain and provider accounts; everything goes over HTTP to a real server process,
 * with a real provider (oidc-provider), a real SMTP catcher, and a software WebAuthn authenticator.
 */
describe.each(DIALECTS)('SSO trust boundaries on %s', { timeout: 240_000 }, (dialect) => {
  let mail: MailCatcher;
  beforeAll(async () => {
    mail = await startMailCatcher();
  }, 240_000);
  // Registered before the server, so closed once it has stopped (vitest runs afterAll hooks last first).
  afterAll(async () => {
    await mail?.close();
  });
  const suite = suiteServer(dialect, () => ({ SSO_ALLOW_PRIVATE_ISSUERS: 'true', SMTP_URL: mail.url }), {
    publicUrl: true,
    idp: true,
    migrate: true,
    database: true,
    stopWith: 'SIGTERM',
    startTimeout: 240_000,
  });

  const unique = () => randomBase62(8).toLowerCase();
  const makeOrg = (name: string, adminEmail: string) => orgThroughCli(suite.env.env, name, adminEmail, PASSWORD);
  const userId = (email: string) => userIdOf(suite.db, email);
  const enrolTotp = async (id: string) => {
    const secret = newTotpSecret();
    const at = nowIso(new Date());
    await suite.db.kysely
      .insertInto('totp_factors')
      .values({ user_id: id, secret_sealed: sealTotpSecret(SECRET, secret), created_at: at, confirmed_at: at, last_step: null })
      .execute();
    return secret;
  };
  const code = (secret: string) => generateSync({ secret, epoch: Math.floor(Date.now() / 1000) });
  /** The attacker's organisation A with their provider on the victim's domain. */
  const attackerOrg = async (domain: string, autoJoin: 'member' | 'off' = 'off') => {
    const orgA = await makeOrg('Attacker A', `attacker-${unique()}@evil.test`);
    await configureSso(suite.env, { orgId: orgA, provider: suite.idp, domains: [domain], autoJoin });
    return orgA;
  };
  const failures = async (id: string) =>
    (
      await suite.db.kysely
        .selectFrom('events')
        .select('data')
        .where('subject_id', '=', id)
        .where('type', '=', 'member.sign_in_failed')
        .execute()
    ).map((e) => JSON.parse(e.data) as { method: string; reason: string });
  const keysOf = async (orgId: string) => suite.db.kysely.selectFrom('api_keys').select('id').where('org_id', '=', orgId).execute();

  const json = (jar: CookieJar, url: string, body: Record<string, unknown>) =>
    jar.fetch(`${suite.url}${url}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: suite.url },
      body: JSON.stringify(body),
    });
  const form = (jar: CookieJar, url: string, fields: Record<string, string>) =>
    jar.fetch(`${suite.url}${url}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: suite.url },
      body: new URLSearchParams(fields).toString(),
    });
  const sessionCsrf = async (jar: CookieJar) => csrfIn(await (await jar.fetch(`${suite.url}/settings/account`)).text());
  /** Adds a passkey from a signed-in browser; the statuses of both steps. */
  const addPasskey = async (jar: CookieJar, key: SoftAuthenticator) => {
    const csrf = await sessionCsrf(jar);
    const options = await json(jar, '/settings/account/passkeys/options', { _csrf: csrf, name: 'Mine' });
    if (options.status !== 200) return { options: options.status, body: (await options.json()) as Record<string, unknown> };
    const added = await json(jar, '/settings/account/passkeys', {
      _csrf: csrf,
      name: 'Mine',
      response: key.register((await options.json()) as Record<string, unknown>),
    });
    return { options: 200, added: added.status, body: (await added.json()) as Record<string, unknown> };
  };
  /** A passkey sign-in in a new browser: the browser, signed in when status is 200. */
  const passkeySignIn = async (key: SoftAuthenticator) => {
    const jar = new CookieJar();
    const options = await json(jar, '/login/passkey/options', {});
    const done = await json(jar, '/login/passkey', {
      next: '/',
      response: key.authenticate((await options.json()) as Record<string, unknown>),
    });
    return { jar, status: done.status };
  };
  /** From a signed-in browser: switch to `orgId` and ask for an API key there. The key, if one was given. */
  const keyOf = async (jar: CookieJar, orgId: string) => {
    const switched = await form(jar, '/orgs/switch', { _csrf: await sessionCsrf(jar), org_id: orgId });
    if (switched.status !== 303) return { switched: switched.status, key: null };
    const made = await form(jar, '/settings/developer/keys', {
      _csrf: await sessionCsrf(jar),
      name: 'exfiltration',
      scopes: 'contacts:read',
      expires: '',
    });
    const key = /od_live_[A-Za-z0-9_]+/.exec(await made.text())?.[0] ?? null;
    return { switched: 303, made: made.status, key };
  };

  /**
   * Chain 1 after the SSO step: from the attacker's SSO session as the victim, a passkey (no proof
   * asked), then that passkey in a new browser, the switch to B and a key of B. Records how far it got.
   */
  const escalate = async (sso: { response: Response; jar: CookieJar }, orgB: string) => {
    const reached: string[] = [];
    if (sso.response.status !== 303 || !sessionCookieOf(sso.response)) return { reached, key: null, sso: sso.response };
    reached.push('sso_session');
    // The SSO session cannot switch to B itself (kept from before).
    const direct = await keyOf(sso.jar, orgB);
    expect(direct.key).toBeNull();
    const key = new SoftAuthenticator(suite.url);
    const added = await addPasskey(sso.jar, key);
    if (added.added !== 201) return { reached, key: null, added, sso: sso.response };
    reached.push('passkey_added');
    const browser = await passkeySignIn(key);
    if (browser.status !== 200) return { reached, key: null, sso: sso.response };
    reached.push('passkey_session');
    const stolen = await keyOf(browser.jar, orgB);
    if (stolen.switched === 303) reached.push('switched_to_b');
    if (stolen.key) reached.push('key_of_b');
    return { reached, key: stolen.key, sso: sso.response };
  };

  /** The victim: admin of B (2FA for everyone, TOTP on, a password), and a plain member of A. */
  const victimInB = async (domain: string) => {
    const email = `victim@${domain}`;
    const orgB = await makeOrg('Victim B', email);
    await cli(suite.env.env, ['org', 'policy', '--org', orgB, '--require-2fa', 'everyone']);
    const id = (await userId(email))!;
    const totp = await enrolTotp(id);
    return { email, orgB, id, totp };
  };

  /** The anonymous form on `page` (its token taken from it), posted to `action`. */
  const anonymousForm = async (jar: CookieJar, page: string, action: string, fields: Record<string, string>) => {
    const shown = await jar.fetch(page.startsWith('http') ? page : `${suite.url}${page}`);
    const body = await shown.text();
    const posted = await form(jar, action.startsWith('http') ? new URL(action).pathname : action, { _csrf: csrfIn(body), ...fields });
    return { shown: { status: shown.status, body }, posted };
  };
  /** forgot-password → the mailed link → a new password: the holder proves the mailbox. */
  const resetByMail = async (email: string, password: string) => {
    const before = mail.to(email).length;
    const asked = await anonymousForm(new CookieJar(), '/forgot-password', '/forgot-password', { email });
    expect(asked.posted.status).toBe(200);
    const sent = await mail.waitFor(email, { skip: before });
    const link = /https?:\/\/\S+\/reset-password\/[A-Za-z0-9_-]+/.exec(sent.text)![0];
    const done = await anonymousForm(new CookieJar(), link, new URL(link).pathname, { password });
    expect(await done.posted.text()).toContain('Your password is set');
  };
  /** The invited person opens the invitation and signs in to their existing account there to join. */
  const joinWithPassword = async (inviteUrl: string, email: string, password: string) => {
    const jar = new CookieJar();
    const joined = await anonymousForm(jar, inviteUrl, new URL(inviteUrl).pathname, { email, password });
    return { page: joined.shown, status: joined.posted.status };
  };

  it('chain 1: A’s provider signing in as B’s admin (a member of A) links nothing, opens no session, and so gives no key of B', async () => {
    const domain = `v${unique()}.test`;
    const victim = await victimInB(domain);
    const orgA = await attackerOrg(domain);
    await userThroughCli(suite.env.env, orgA, victim.email, 'any other password', 'member');
    const sub = `evil-${unique()}`;
    suite.idp.accounts.set(sub, { email: victim.email, email_verified: true });

    const sso = await ssoSignIn(suite.url, victim.email, sub);
    const result = await escalate(sso, victim.orgB);
    expect(result.reached).toEqual([]);
    expect(result.key).toBeNull();
    expect(await keysOf(victim.orgB)).toHaveLength(0);
    // No session: the account holder is asked to sign in with the account's own factors to link.
    expect(sessionCookieOf(sso.response)).toBeUndefined();
    expect(sso.response.headers.get('location')).toBe('/sso/link');
    const linkPage = await sso.jar.fetch(`${suite.url}/sso/link`);
    expect(linkPage.status).toBe(200);
    expect(await linkPage.text()).toContain('An account with this email exists');
    // The attacker guesses: refused, no link, no session, in Activity with its reason.
    const guess = await form(sso.jar, '/sso/link', {
      _csrf: csrfIn(await (await sso.jar.fetch(`${suite.url}/sso/link`)).text()),
      password: 'guess',
      code: '000000',
    });
    expect(guess.status).toBe(401);
    expect(sessionCookieOf(guess)).toBeUndefined();
    expect(await suite.db.kysely.selectFrom('sso_identities').select('subject').where('user_id', '=', victim.id).execute()).toEqual([]);
    expect(await failures(victim.id)).toContainEqual(expect.objectContaining({ method: 'sso', reason: 'link_wrong_password' }));
  });

  it('chain 1 after the victim linked A’s provider herself: the SSO session adds no passkey, TOTP or codes without her own factors', async () => {
    const domain = `v${unique()}.test`;
    const victim = await victimInB(domain);
    const orgA = await attackerOrg(domain);
    await userThroughCli(suite.env.env, orgA, victim.email, 'any other password', 'member');
    const sub = `shared-${unique()}`;
    suite.idp.accounts.set(sub, { email: victim.email, email_verified: true });
    // The victim's own first SSO sign-in: she proves the account (password + code) and it links.
    const own = await ssoSignIn(suite.url, victim.email, sub);
    if (own.response.headers.get('location') === '/sso/link') {
      const page = await (await own.jar.fetch(`${suite.url}/sso/link`)).text();
      const consent = await form(own.jar, '/sso/link', { _csrf: csrfIn(page), password: PASSWORD, code: code(victim.totp) });
      expect(consent.status, await consent.clone().text()).toBe(303);
      expect(sessionCookieOf(consent)).toBeDefined();
    } else {
      expect(own.response.status).toBe(303);
    }
    expect(await suite.db.kysely.selectFrom('sso_identities').select('subject').where('user_id', '=', victim.id).execute()).toEqual([
      { subject: sub },
    ]);

    // The attacker, as A's admin, now signs in through the same (linked) provider account.
    const sso = await ssoSignIn(suite.url, victim.email, sub);
    expect(sso.response.status).toBe(303);
    const result = await escalate(sso, victim.orgB);
    expect(result.reached).toEqual(['sso_session']);
    expect(result.key).toBeNull();
    expect(await keysOf(victim.orgB)).toHaveLength(0);
    expect(result.added).toMatchObject({ options: 401, body: { redirect: expect.stringMatching(/^\/reauth\?next=/) } });
    // TOTP set-up, new recovery codes and a password change all ask for the account's own proof too.
    const csrf = await sessionCsrf(sso.jar);
    for (const url of [
      '/settings/account/two-factor/setup',
      '/settings/account/two-factor/recovery-codes',
      '/settings/account/two-factor/disable',
    ]) {
      const attempt = await form(sso.jar, url, { _csrf: csrf, code: '123456' });
      expect(attempt.status, url).toBe(303);
      expect(attempt.headers.get('location'), url).toMatch(/^\/reauth\?next=/);
    }
    const password = await form(sso.jar, '/settings/account/password', {
      _csrf: csrf,
      current_password: 'x',
      password: 'a new password 123',
    });
    expect(password.status).toBe(303);
    expect(password.headers.get('location')).toMatch(/^\/reauth\?next=/);

    // With the account's own factors (password + code at /reauth), the same SSO session may add a
    // passkey; it still stays in A.
    // (Her consent above used this 30-second step's code: let the test's next code be a fresh one.)
    await suite.db.kysely.updateTable('totp_factors').set({ last_step: null }).where('user_id', '=', victim.id).execute();
    const reauthPage = await (await sso.jar.fetch(`${suite.url}/reauth?next=/settings/account`)).text();
    const reauth = await form(sso.jar, '/reauth', {
      _csrf: csrfIn(reauthPage),
      next: '/settings/account',
      password: PASSWORD,
      code: code(victim.totp),
    });
    expect(reauth.status).toBe(303);
    const added = await addPasskey(sso.jar, new SoftAuthenticator(suite.url));
    expect(added.added).toBe(201);
    expect((await keyOf(sso.jar, victim.orgB)).key).toBeNull();
  });

  /**
   * Chain 2: A's auto-join (on a domain A's admin claims) makes the victim's account through A's
   * provider; B invites her; she resets her password by mail and joins B. `order` says whether
   * B's invitation exists before A's provider makes the account.
   */
  async function chain2(order: 'attacker_first' | 'invitation_first') {
    const domain = `v${unique()}.test`;
    const email = `victim@${domain}`;
    const orgB = await makeOrg('Victim B', `boss-${unique()}@b.test`);
    await attackerOrg(domain, 'member');
    const sub = `evil-${unique()}`;
    suite.idp.accounts.set(sub, { email, email_verified: true });
    let inviteUrl = '';
    const invite = async () => {
      inviteUrl = (
        await cli<{ invite_url: string }>(suite.env.env, ['users', 'invite', '--org', orgB, '--email', email, '--role', 'admin'])
      ).invite_url;
    };
    if (order === 'invitation_first') await invite();

    // A's provider makes the account, and the attacker tries to plant a passkey at once.
    const made = await ssoSignIn(suite.url, email, sub);
    expect(made.response.status).toBe(303);
    const victimId = (await userId(email))!;
    const planted = new SoftAuthenticator(suite.url);
    const plantedAdd = await addPasskey(made.jar, planted);
    if (order === 'attacker_first') await invite();

    // The invitation to B (checked at the end) should say how to join: prove the mailbox first.
    const offer = await (await fetch(inviteUrl)).text();
    // Joining B is refused while the account is A's alone (it has no usable password anyway).
    const early = await joinWithPassword(inviteUrl, email, PASSWORD);
    expect(early.status).not.toBe(303);

    // The victim proves the mailbox, then joins B with her new password.
    await resetByMail(email, PASSWORD);
    const joined = await joinWithPassword(inviteUrl, email, PASSWORD);
    expect(joined.status).toBe(303);
    // The reset removed A's provider link (and whatever an SSO session added): checked at the end.
    const linksAfterReset = await suite.db.kysely.selectFrom('sso_identities').select('subject').where('user_id', '=', victimId).execute();
    const passkeysAfterReset = await suite.db.kysely.selectFrom('passkeys').select('id').where('user_id', '=', victimId).execute();

    // The attacker's way 1: the passkey planted before the reset.
    const reached: string[] = [];
    if (plantedAdd.added === 201) {
      const browser = await passkeySignIn(planted);
      if (browser.status === 200) {
        reached.push('planted_passkey_session');
        if ((await keyOf(browser.jar, orgB)).key) reached.push('key_of_b');
      }
    }
    // Way 2: A's provider again, after she joined B.
    const again = await ssoSignIn(suite.url, email, sub);
    const result = await escalate(again, orgB);
    reached.push(...result.reached);
    expect(reached).toEqual([]);
    expect(linksAfterReset).toEqual([]);
    expect(passkeysAfterReset).toEqual([]);
    expect(plantedAdd.options).toBe(401);
    expect(offer).toContain('prove that this mailbox is yours');
    expect(again.response.headers.get('location')).toBe('/sso/link');
    expect(await keysOf(orgB)).toHaveLength(0);
  }

  it('chain 2, A’s provider makes the account before B invites her: no session or key of B after she joins B', async () => {
    await chain2('attacker_first');
  });

  it('chain 2, B invites her before A’s provider makes the account: no session or key of B after she joins B', async () => {
    await chain2('invitation_first');
  });

  it('chain 2, she is already in B: A’s auto-join neither links nor joins her existing account', async () => {
    const domain = `v${unique()}.test`;
    const victim = await victimInB(domain);
    await attackerOrg(domain, 'member');
    const sub = `evil-${unique()}`;
    suite.idp.accounts.set(sub, { email: victim.email, email_verified: true });
    const sso = await ssoSignIn(suite.url, victim.email, sub);
    expect(sso.response.status).toBe(403);
    expect(sessionCookieOf(sso.response)).toBeUndefined();
    expect(await suite.db.kysely.selectFrom('sso_identities').select('subject').where('user_id', '=', victim.id).execute()).toEqual([]);
  });

  it('the operator CLI does not add an account SSO made to another organisation until its mailbox is proven', async () => {
    const domain = `v${unique()}.test`;
    const email = `victim@${domain}`;
    await attackerOrg(domain, 'member');
    const sub = `evil-${unique()}`;
    suite.idp.accounts.set(sub, { email, email_verified: true });
    expect((await ssoSignIn(suite.url, email, sub)).response.status).toBe(303);
    const orgC = await makeOrg('Other C', `boss-${unique()}@c.test`);
    const added = await runCli(suite.env.env, [
      'users',
      'add',
      '--org',
      orgC,
      '--email',
      email,
      '--password',
      PASSWORD,
      '--role',
      'admin',
      '--json',
    ]);
    expect(added.code).not.toBe(0);
    expect(added.stdout).toContain('reset');
    const id = (await userId(email))!;
    expect(
      await suite.db.kysely.selectFrom('memberships').select('org_id').where('user_id', '=', id).where('org_id', '=', orgC).execute(),
    ).toEqual([]);
    // After the mailbox proof, it may.
    await resetByMail(email, PASSWORD);
    const later = await runCli(suite.env.env, [
      'users',
      'add',
      '--org',
      orgC,
      '--email',
      email,
      '--password',
      PASSWORD,
      '--role',
      'member',
      '--json',
    ]);
    expect(later.code, later.stdout).toBe(0);
  });

  it('the operator CLI does not make an account SSO made the admin of a new organisation until its mailbox is proven', async () => {
    const domain = `v${unique()}.test`;
    const email = `victim@${domain}`;
    await attackerOrg(domain, 'member');
    const sub = `evil-${unique()}`;
    suite.idp.accounts.set(sub, { email, email_verified: true });
    expect((await ssoSignIn(suite.url, email, sub)).response.status).toBe(303);
    const id = (await userId(email))!;
    const orgsBefore = await suite.db.kysely.selectFrom('orgs').select('id').execute();
    const made = await runCli(suite.env.env, [
      'org',
      'create',
      '--name',
      'New C',
      '--admin-email',
      email,
      '--admin-password',
      PASSWORD,
      '--json',
    ]);
    expect(made.code).not.toBe(0);
    expect(made.stdout + made.stderr).toContain('single sign-on');
    expect(made.stdout + made.stderr).toContain('reset');
    // Nothing was made: no organisation, no membership.
    expect(await suite.db.kysely.selectFrom('orgs').select('id').execute()).toHaveLength(orgsBefore.length);
    expect(await suite.db.kysely.selectFrom('memberships').select('org_id').where('user_id', '=', id).execute()).toHaveLength(1);
    // After the mailbox proof, it may.
    await resetByMail(email, PASSWORD);
    const later = await runCli(suite.env.env, [
      'org',
      'create',
      '--name',
      'New C',
      '--admin-email',
      email,
      '--admin-password',
      PASSWORD,
      '--json',
    ]);
    expect(later.code, later.stdout + later.stderr).toBe(0);
  });

  it('refuses another sub for an email already linked at the same issuer (subject_mismatch)', async () => {
    const domain = `v${unique()}.test`;
    const email = `member@${domain}`;
    const orgA = await attackerOrg(domain, 'member');
    const first = `first-${unique()}`;
    const second = `second-${unique()}`;
    suite.idp.accounts.set(first, { email, email_verified: true });
    suite.idp.accounts.set(second, { email, email_verified: true });
    expect((await ssoSignIn(suite.url, email, first)).response.status).toBe(303);
    const other = await ssoSignIn(suite.url, email, second);
    expect(other.response.status).toBe(403);
    expect(sessionCookieOf(other.response)).toBeUndefined();
    const id = (await userId(email))!;
    expect(await suite.db.kysely.selectFrom('sso_identities').select('subject').where('user_id', '=', id).execute()).toEqual([
      { subject: first },
    ]);
    expect(await failures(id)).toContainEqual(expect.objectContaining({ method: 'sso', reason: 'subject_mismatch' }));
    expect(orgA).toBeTruthy();
  });
});
