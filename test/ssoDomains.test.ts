import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../src/db/database.js';
import { startDnsServer, type TestDnsServer } from './helpers/dnsServer.js';
import { DIALECTS } from './helpers/harness.js';
import { startProvider, type TestProvider } from './helpers/oidcProvider.js';
import { cli, serverEnv, startServerProcess, type ServerEnv, type ServerProcess } from './helpers/serverProcess.js';
import { approveSsoDomains, databaseOf, runCli, sessionCookieOf, ssoSignIn } from './helpers/ssoServer.js';

const PASSWORD = 'correct horse battery';

/**
 * IDENTITY.md rule 9: an SSO domain routes `/sso/start`, links or auto-joins only once verified
 * (a DNS TXT record, looked up by the Verify button, or the operator's approval). Against a real
 * server process, a real OpenID provider and a DNS server of the test's own.
 */
describe.each(DIALECTS)('SSO domain verification on %s', { timeout: 180_000 }, (dialect) => {
  let env: ServerEnv;
  let server: ServerProcess;
  let idp: TestProvider;
  let dns: TestDnsServer;
  let db: Db;
  let base = '';
  let attacker = '';
  let victim = '';

  const newOrg = async (name: string, adminEmail: string) =>
    (
      await cli<{ org: { id: string } }>(env.env, [
        'org',
        'create',
        '--name',
        name,
        '--admin-email',
        adminEmail,
        '--admin-password',
        PASSWORD,
      ])
    ).org.id;
  const setSso = (orgId: string, domains: string, extra: string[] = []) =>
    runCli(
      env.env,
      ['sso', 'set', '--org', orgId, '--issuer', idp.issuer, '--client-id', idp.clientId, '--domains', domains, ...extra, '--json'],
      `${idp.clientSecret}\n`,
    );
  const userId = async (email: string) =>
    (await db.kysely.selectFrom('users').select('id').where('email_lower', '=', email).executeTakeFirst())?.id;
  const startAnswer = async (email: string) => {
    const r = await fetch(`${base}/sso/start?email=${encodeURIComponent(email)}`, { redirect: 'manual' });
    return { status: r.status, body: (await r.text()).replace(/nonce-[^"]+/g, '') };
  };

  beforeAll(async () => {
    dns = await startDnsServer();
    env = await serverEnv(dialect, { SSO_ALLOW_PRIVATE_ISSUERS: 'true', DNS_SERVERS: dns.address });
    env.env.PUBLIC_URL = env.url;
    base = env.url;
    idp = await startProvider(`${base}/sso/callback`);
    server = await startServerProcess(env);
    db = databaseOf(env);
    attacker = await newOrg('Attacker', 'eve@attacker.test');
    victim = await newOrg('Victim', 'boss@victim.test');
    // Someone of the victim's who also works with the attacker's organisation (a contractor).
    await cli(env.env, ['users', 'add', '--org', victim, '--email', 'vic@victim.test', '--password', PASSWORD, '--role', 'admin']);
    await cli(env.env, ['users', 'add', '--org', attacker, '--email', 'vic@victim.test', '--password', PASSWORD, '--role', 'member']);
    idp.accounts.set('eve', { email: 'eve@attacker.test', email_verified: true });
    idp.accounts.set('vic', { email: 'vic@victim.test', email_verified: true });
    idp.accounts.set('newbie', { email: 'newbie@victim.test', email_verified: true });
    // The attacker claims the victim's domain beside its own, first, and lets newcomers join.
    const set = await setSso(attacker, 'attacker.test, victim.test', ['--auto-join', 'member']);
    expect(set.code, set.stdout + set.stderr).toBe(0);
    await approveSsoDomains(env, attacker, ['attacker.test']);
  }, 180_000);
  afterAll(async () => {
    await db?.close();
    server?.child.kill('SIGTERM');
    await server?.exited;
    await idp?.close();
    await dns?.close();
    await env?.dispose();
  });

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
      const signIn = await ssoSignIn(base, 'eve@attacker.test', 'vic');
      expect(signIn.response.status).toBe(403);
      expect(sessionCookieOf(signIn.response)).toBeUndefined();
      expect(await signIn.response.text()).toContain('not in one of the organisation');
      expect(await db.kysely.selectFrom('sso_identities').selectAll().where('user_id', '=', vic!).execute()).toEqual([]);
    });

    it('auto-join does not make an account for an e-mail of the victim’s domain', async () => {
      const signIn = await ssoSignIn(base, 'eve@attacker.test', 'newbie');
      expect(signIn.response.status).toBe(403);
      expect(sessionCookieOf(signIn.response)).toBeUndefined();
      expect(await userId('newbie@victim.test')).toBeUndefined();
    });

    it('the claim blocks nobody: the victim can claim its own domain too', async () => {
      const set = await setSso(victim, 'victim.test');
      expect(set.code, set.stdout + set.stderr).toBe(0);
      expect(JSON.parse(set.stdout).domains).toEqual(['victim.test']);
    });
  });
});
