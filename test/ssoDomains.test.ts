import { tmpdir } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../src/config.js';
import { loadConfig } from '../src/config/load.js';
import type { SsoDomainClaim } from '../src/domain/identity/ssoDomains.js';
import { startDnsServer, type TestDnsServer } from './helpers/dnsServer.js';
import { DIALECTS } from './helpers/harness.js';
import { CookieJar } from './helpers/oidcProvider.js';
import { cli } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';
import {
  approveSsoDomains,
  orgThroughCli,
  passwordSignIn,
  runCli,
  sessionCookieOf,
  ssoSet,
  ssoSignIn,
  startSso,
  userIdOf,
  userThroughCli,
} from './helpers/ssoServer.js';

const PASSWORD = 'correct horse battery';

/**
 * IDENTITY.md rule 9: an SSO domain routes `/sso/start`, links or auto-joins only once verified
 * (a DNS TXT record, looked up by the Verify button, or the operator's approval). Against a real
 * server process, a real OpenID provider and a DNS server of the test's own.
 */
describe.each(DIALECTS)('SSO domain verification on %s', { timeout: 180_000 }, (dialect) => {
  let dns: TestDnsServer;
  let attacker = '';
  let victim = '';
  beforeAll(async () => {
    dns = await startDnsServer();
  }, 180_000);
  // Registered before the server, so closed once it has stopped (vitest runs afterAll hooks last first).
  afterAll(async () => {
    await dns?.close();
  });
  const suite = suiteServer(dialect, () => ({ SSO_ALLOW_PRIVATE_ISSUERS: 'true', DNS_SERVERS: dns.address }), {
    publicUrl: true,
    idp: true,
    database: true,
    stopWith: 'SIGTERM',
    startTimeout: 180_000,
  });

  const newOrg = (name: string, adminEmail: string) => orgThroughCli(suite.env.env, name, adminEmail, PASSWORD);
  const setSso = (orgId: string, domains: string, extra: string[] = []) => ssoSet(suite.env, suite.idp, orgId, domains, extra);
  const userId = (email: string) => userIdOf(suite.db, email);
  const claimOf = async (orgId: string, domain: string) => {
    const listed = await runCli(suite.env.env, ['sso', 'domains', 'list', '--org', orgId, '--json']);
    expect(listed.code, listed.stdout + listed.stderr).toBe(0);
    const claim = (JSON.parse(listed.stdout) as { domains: SsoDomainClaim[] }).domains.find((d) => d.domain === domain);
    if (!claim) throw new Error(`${orgId} does not claim ${domain}: ${listed.stdout}`);
    return claim;
  };
  const events = (orgId: string, type: string) =>
    suite.db.kysely
      .selectFrom('events')
      .select(['data', 'actor_type', 'actor_id'])
      .where('org_id', '=', orgId)
      .where('type', '=', type)
      .execute();
  /** Presses Verify for `domain` on /settings/security, as the signed-in browser `jar`. */
  const verify = async (jar: CookieJar, domain: string) => {
    const page = await (await jar.fetch(`${suite.url}/settings/security`)).text();
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1] ?? '';
    const res = await jar.fetch(`${suite.url}/settings/security/sso/domains/verify`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrf, domain }).toString(),
    });
    return { status: res.status, body: await res.text() };
  };
  const startAnswer = async (email: string) => {
    const r = await startSso(suite.url, email);
    return { status: r.status, body: (await r.text()).replace(/nonce-[^"]+/g, '') };
  };

  beforeAll(async () => {
    attacker = await newOrg('Attacker', 'eve@attacker.test');
    victim = await newOrg('Victim', 'boss@victim.test');
    // Someone of the victim's who also works with the attacker's organisation (a contractor).
    await cli(suite.env.env, ['users', 'add', '--org', victim, '--email', 'vic@victim.test', '--password', PASSWORD, '--role', 'admin']);
    await cli(suite.env.env, ['users', 'add', '--org', attacker, '--email', 'vic@victim.test', '--password', PASSWORD, '--role', 'member']);
    suite.idp.accounts.set('eve', { email: 'eve@attacker.test', email_verified: true });
    suite.idp.accounts.set('vic', { email: 'vic@victim.test', email_verified: true });
    suite.idp.accounts.set('newbie', { email: 'newbie@victim.test', email_verified: true });
    // The attacker claims the victim's domain beside its own, first, and lets newcomers join.
    const set = await setSso(attacker, 'attacker.test, victim.test', ['--auto-join', 'member']);
    expect(set.code, set.stdout + set.stderr).toBe(0);
    await approveSsoDomains(suite.env, attacker, ['attacker.test']);
  }, 180_000);

  describe('attack: an organisation claims another organisation’s e-mail domain', () => {
    it('/sso/start does not send the victim’s people to the attacker’s provider: the answer for an unknown domain', async () => {
      const answer = await startAnswer('ceo@victim.test');
      expect(answer.status).toBe(400);
      expect(answer).toEqual(await startAnswer('ceo@nobody-has-this.test'));
      // The attacker's verified domain does route (the attack below goes through it).
      expect((await startAnswer('eve@attacker.test')).status).toBe(303);
    });

    it('the callback does not link a victim’s account through the attacker’s provider', async () => {
      const vic = await userId('vic@victim.test');
      const signIn = await ssoSignIn(suite.url, 'eve@attacker.test', 'vic');
      expect(signIn.response.status).toBe(403);
      expect(sessionCookieOf(signIn.response)).toBeUndefined();
      expect(await signIn.response.text()).toContain('not in one of the organisation');
      expect(await suite.db.kysely.selectFrom('sso_identities').selectAll().where('user_id', '=', vic!).execute()).toEqual([]);
    });

    it('auto-join does not make an account for an e-mail of the victim’s domain', async () => {
      const signIn = await ssoSignIn(suite.url, 'eve@attacker.test', 'newbie');
      expect(signIn.response.status).toBe(403);
      expect(sessionCookieOf(signIn.response)).toBeUndefined();
      expect(await userId('newbie@victim.test')).toBeUndefined();
    });

    it('the claim blocks nobody: the victim can claim its own domain too, each organisation with its own token', async () => {
      const set = await setSso(victim, 'victim.test');
      expect(set.code, set.stdout + set.stderr).toBe(0);
      expect(JSON.parse(set.stdout)).toMatchObject({ domains: ['victim.test'], verified_domains: [] });
      const [mine, theirs] = [await claimOf(victim, 'victim.test'), await claimOf(attacker, 'victim.test')];
      expect(mine).toMatchObject({ status: 'unverified', record_name: '_orgdata-challenge.victim.test' });
      expect(theirs).toMatchObject({ status: 'unverified', record_name: '_orgdata-challenge.victim.test' });
      expect(mine.token).toMatch(/^[A-Za-z0-9_-]{32}$/); // 192 bits
      expect(mine.token).not.toBe(theirs.token);
      expect(mine.record_value).toBe(`orgdata-verification=${mine.token}`);
      // Still nobody is routed: both claims are unverified.
      expect((await startAnswer('ceo@victim.test')).status).toBe(400);
    });
  });

  describe('the Verify button (a real DNS lookup through DNS_SERVERS)', () => {
    let jar: CookieJar;
    const name = '_orgdata-challenge.victim.test';

    beforeAll(async () => {
      ({ jar } = await passwordSignIn(suite.url, 'boss@victim.test', PASSWORD));
    });

    it('shows each unverified domain with the exact record to create and a Verify button', async () => {
      const page = await (await jar.fetch(`${suite.url}/settings/security`)).text();
      const mine = await claimOf(victim, 'victim.test');
      expect(page).toContain(`<code>${name}</code>`);
      expect(page).toContain(`<code>orgdata-verification=${mine.token}</code>`);
      expect(page).toContain(`${name}. 3600 IN TXT "orgdata-verification=${mine.token}"`);
      expect(page).toMatch(/<form method="post" action="\/settings\/security\/sso\/domains\/verify"/);
      expect(page).toContain('Not verified');
      expect(page).not.toContain((await claimOf(attacker, 'victim.test')).token);
    });

    it('says when there is no record, when the record holds another value, and when DNS does not answer in time', async () => {
      dns.txt.clear();
      const none = await verify(jar, 'victim.test');
      expect(none.status).toBe(400);
      expect(none.body).toContain(`No TXT record was found at ${name}`);
      expect(dns.asked).toContain(name);

      dns.txt.set(name, [['orgdata-verification=not-the-token'], [(await claimOf(attacker, 'victim.test')).record_value]]);
      const wrong = await verify(jar, 'victim.test');
      expect(wrong.status).toBe(400);
      expect(wrong.body).toContain(`A TXT record was found at ${name}, but it does not hold this organisation&#39;s value`);
      expect(wrong.body).toContain('orgdata-verification=not-the-token');

      dns.mode = 'silent';
      const started = Date.now();
      const silent = await verify(jar, 'victim.test');
      const took = Date.now() - started;
      dns.mode = 'answer';
      expect(silent.status).toBe(504);
      expect(silent.body).toContain(`The DNS lookup of ${name} timed out`);
      expect(took).toBeLessThan(9000);

      dns.mode = 'servfail';
      const failed = await verify(jar, 'victim.test');
      dns.mode = 'answer';
      expect(failed.status).toBe(502);
      expect(failed.body).toContain(`The DNS lookup of ${name} failed`);

      expect((await claimOf(victim, 'victim.test')).status).toBe('unverified');
      expect((await startAnswer('ceo@victim.test')).status).toBe(400);
      expect(await events(victim, 'security.sso_domain_verified')).toEqual([]);
    });

    it('verifies the domain with the right record (among others, split in strings); it then routes, links and is in Activity', async () => {
      const mine = await claimOf(victim, 'victim.test');
      dns.txt.set(name, [['v=spf1 -all'], ['orgdata-verification=', mine.token]]);
      const ok = await verify(jar, 'victim.test');
      expect(ok.status, ok.body).toBe(303);
      const page = await (await jar.fetch(`${suite.url}/settings/security`)).text();
      expect(page).toContain('victim.test is verified: people with an email at victim.test can now sign in with single sign-on.');
      expect(page).toMatch(/Verified \d{4}-\d{2}-\d{2} \(DNS record\)/);
      expect(await claimOf(victim, 'victim.test')).toMatchObject({ status: 'verified', verified_method: 'dns' });
      const [event] = await events(victim, 'security.sso_domain_verified');
      expect(JSON.parse(event!.data)).toMatchObject({ domain: 'victim.test', method: 'dns', object: { object: 'org', id: victim } });
      expect(event!.actor_id).toBe(await userId('boss@victim.test'));

      expect((await startAnswer('ceo@victim.test')).status).toBe(303);
      const vic = await ssoSignIn(suite.url, 'vic@victim.test', 'vic');
      expect(vic.response.status).toBe(303);
      const again = await verify(jar, 'victim.test');
      expect(again.status).toBe(303);
    });

    it('refuses a domain another organisation verified, even with the right record: by the button and by the operator', async () => {
      const theirs = await claimOf(attacker, 'victim.test');
      dns.txt.set(name, [[theirs.record_value]]);
      const { jar: eve } = await passwordSignIn(suite.url, 'eve@attacker.test', PASSWORD);
      const refused = await verify(eve, 'victim.test');
      expect(refused.status).toBe(409);
      expect(refused.body).toContain('victim.test is already verified for single sign-on by another organisation');
      const approve = await runCli(suite.env.env, ['sso', 'domains', 'approve', '--org', attacker, '--domain', 'victim.test', '--json']);
      expect(approve.code).toBe(1);
      expect(JSON.parse(approve.stdout).error).toMatchObject({ code: 'verified_elsewhere' });
      expect(JSON.parse(approve.stdout).error.message).toContain(`already verified for single sign-on by organisation ${victim}`);
      expect((await claimOf(attacker, 'victim.test')).status).toBe('unverified');
      // The victim's people still go to the victim's provider only.
      const signIn = await ssoSignIn(suite.url, 'eve@attacker.test', 'newbie');
      expect(signIn.response.status).toBe(403);
    });

    it('refuses Verify without the CSRF token, from a member, and for a domain the organisation has not claimed', async () => {
      const noCsrf = await jar.fetch(`${suite.url}/settings/security/sso/domains/verify`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ domain: 'victim.test' }).toString(),
      });
      expect(noCsrf.status).toBe(403);
      await userThroughCli(suite.env.env, victim, 'member@victim.test', PASSWORD, 'member');
      const { jar: member } = await passwordSignIn(suite.url, 'member@victim.test', PASSWORD);
      const fromMember = await member.fetch(`${suite.url}/settings/security/sso/domains/verify`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ domain: 'victim.test', _csrf: 'x'.repeat(43) }).toString(),
      });
      expect(fromMember.status).toBe(403);
      const unclaimed = await verify(jar, 'attacker.test');
      expect(unclaimed.status).toBe(400);
      expect(unclaimed.body).toContain('attacker.test is not one of this organisation&#39;s single sign-on domains');
    });
  });

  describe('the operator', () => {
    it('lists domains with status and token, and approves one without DNS (in Activity as method operator)', async () => {
      const third = await newOrg('Third', 'admin@third.test');
      expect((await setSso(third, 'third.test, victim.test')).code).toBe(0);
      const listed = await runCli(suite.env.env, ['sso', 'domains', 'list', '--org', third]);
      expect(listed.code).toBe(0);
      expect(listed.stdout).toContain('third.test  NOT verified  token ');
      expect(listed.stdout).toContain('_orgdata-challenge.third.test TXT "orgdata-verification=');
      expect((await startAnswer('someone@third.test')).status).toBe(400);

      const approved = await runCli(suite.env.env, ['sso', 'domains', 'approve', '--org', third, '--domain', 'Third.test', '--json']);
      expect(approved.code, approved.stdout + approved.stderr).toBe(0);
      expect(JSON.parse(approved.stdout)).toMatchObject({
        org_id: third,
        approved: true,
        domain: { domain: 'third.test', status: 'verified', verified_method: 'operator' },
      });
      const twice = await runCli(suite.env.env, ['sso', 'domains', 'approve', '--org', third, '--domain', 'third.test', '--json']);
      expect(JSON.parse(twice.stdout).approved).toBe(false);
      const [event] = await events(third, 'security.sso_domain_verified');
      expect(JSON.parse(event!.data)).toMatchObject({ domain: 'third.test', method: 'operator' });
      expect(event!.actor_type).toBe('system');
      expect((await startAnswer('someone@third.test')).status).toBe(303);
      const shown = await runCli(suite.env.env, ['sso', 'show', '--org', third]);
      expect(shown.stdout).toContain('third.test (verified), victim.test (NOT verified)');

      const unclaimed = await runCli(suite.env.env, ['sso', 'domains', 'approve', '--org', third, '--domain', 'nobody.test', '--json']);
      expect(unclaimed.code).toBe(1);
      expect(JSON.parse(unclaimed.stdout).error.code).toBe('not_claimed');
      const usage = await runCli(suite.env.env, ['sso', 'domains', 'approve', '--org', third]);
      expect(usage.code).toBe(2);
    });

    it('keeps a domain verified when SSO is saved again with it, and lets it go when SSO is removed', async () => {
      const fourth = await newOrg('Fourth', 'admin@fourth.test');
      expect((await setSso(fourth, 'fourth.test')).code).toBe(0);
      await approveSsoDomains(suite.env, fourth, ['fourth.test']);
      const before = await claimOf(fourth, 'fourth.test');
      expect((await setSso(fourth, 'fourth.test, more-fourth.test', ['--auto-join', 'member'])).code).toBe(0);
      expect(await claimOf(fourth, 'fourth.test')).toEqual(before);
      expect((await claimOf(fourth, 'more-fourth.test')).status).toBe('unverified');
      expect((await runCli(suite.env.env, ['sso', 'remove', '--org', fourth])).code).toBe(0);
      expect((await setSso(fourth, 'fourth.test')).code).toBe(0);
      expect((await claimOf(fourth, 'fourth.test')).status).toBe('unverified');
    });
  });
});

describe('DNS_SERVERS', () => {
  const load = (value: string) => () => loadConfig({ DATA_DIR: tmpdir(), SECRET_KEY: 'x'.repeat(40), DNS_SERVERS: value });
  it('takes IP:port lists and refuses anything else at start', () => {
    expect(load('127.0.0.1:5353')().dnsServers).toEqual(['127.0.0.1:5353']);
    expect(load('127.0.0.1:53, [::1]:5353')().dnsServers).toEqual(['127.0.0.1:53', '[::1]:5353']);
    expect(load('')().dnsServers).toBeNull();
    for (const bad of ['dns.example.com:53', '127.0.0.1', '127.0.0.1:0', '127.0.0.1:70000', '::1:53', '[127.0.0.1]:53', '300.1.1.1:53']) {
      expect(load(bad), bad).toThrow(ConfigError);
      expect(load(bad), bad).toThrow(/^DNS_SERVERS: must be a comma-separated list of IP address:port/);
    }
  });
});
