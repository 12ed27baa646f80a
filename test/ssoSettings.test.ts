import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openSecret } from '../src/domain/identity/secretBox.js';
import { SECRET_PURPOSE, vetIssuer, type SsoProvider } from '../src/domain/identity/ssoConfigs.js';
import { SsoRefused } from '../src/domain/identity/ssoSignIn.js';
import { openIdClient } from '../src/infra/oidc/openIdClient.js';
import { signedIn, type DashboardUser } from './helpers/browserSession.js';
import { addMember, DIALECTS, makeHarness, SECRET, type Harness, type Org } from './helpers/harness.js';
import { approveSsoDomains } from './helpers/ssoServer.js';

// A public address literal: passes the issuer guard without DNS (nothing is fetched when saving).
const ISSUER = 'https://93.184.216.34';

/** The /settings/security SSO section (admins, CSRF), the invitation page's SSO offer, the issuer guard at fetch time. */
describe.each(DIALECTS)('SSO settings on %s', { timeout: 60_000 }, (dialect) => {
  let h: Harness;
  let org: Org;
  let admin: DashboardUser;
  const fields = (extra: Record<string, string> = {}) => ({
    issuer: ISSUER,
    client_id: 'orgdata-app',
    client_secret: 'the-dashboard-secret',
    domains: 'Settings.test, settings-two.test',
    auto_join: 'off',
    ...extra,
  });
  const configRow = () => h.db.kysely.selectFrom('sso_configs').selectAll().where('org_id', '=', org.orgId).executeTakeFirst();

  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg('Settings Org');
    admin = await signedIn(h, org.adminEmail);
  });
  afterAll(async () => h.close());

  it('shows admins the form with the redirect URI; members are refused', async () => {
    const res = await admin.get('/settings/security');
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('<code id="sso-redirect-uri">http://orgdata.test/sso/callback</code>');
    expect(res.body).toContain('name="client_secret"');
    const member = await addMember(h, org.orgId, 'member');
    const asMember = await signedIn(h, member.email);
    expect((await asMember.get('/settings/security')).statusCode).toBe(403);
    expect((await asMember.post('/settings/security/sso', fields())).statusCode).toBe(403);
    expect(await configRow()).toBeUndefined();
  });

  it('refuses both forms without the CSRF token', async () => {
    expect((await admin.post('/settings/security/sso', fields(), { csrf: null })).statusCode).toBe(403);
    expect((await admin.post('/settings/security/sso', fields(), { csrf: 'x'.repeat(43) })).statusCode).toBe(403);
    expect(await configRow()).toBeUndefined();
    expect((await admin.post('/settings/security/sso/remove', {}, { csrf: null })).statusCode).toBe(403);
  });

  it('saves the settings with the secret sealed, keeps it when left blank, shows errors, and removes', async () => {
    const saved = await admin.post('/settings/security/sso', fields({ require: 'yes' }));
    expect(saved.statusCode, saved.body).toBe(303);
    const row = (await configRow())!;
    expect(row).toMatchObject({ issuer: ISSUER, client_id: 'orgdata-app', required: 'yes', auto_join: 'off' });
    expect(row.client_secret_sealed).not.toContain('the-dashboard-secret');
    expect(openSecret(SECRET, SECRET_PURPOSE, row.client_secret_sealed)).toBe('the-dashboard-secret');
    const page = await admin.get('/settings/security');
    expect(page.body).toContain('settings-two.test, settings.test');
    expect(page.body).not.toContain('the-dashboard-secret');

    expect((await admin.post('/settings/security/sso', fields({ client_secret: '', client_id: 'renamed' }))).statusCode).toBe(303);
    const kept = (await configRow())!;
    expect(kept.client_id).toBe('renamed');
    expect(kept.required).toBe('no');
    expect(openSecret(SECRET, SECRET_PURPOSE, kept.client_secret_sealed)).toBe('the-dashboard-secret');

    for (const [bad, message] of [
      [{ issuer: 'http://93.184.216.34' }, 'must use https'],
      [{ issuer: 'https://10.0.0.1' }, 'private address'],
      [{ domains: 'not a domain!' }, 'is not an e-mail domain'],
      [{ auto_join: 'admin' }, 'must be member or off'],
    ] as const) {
      const res = await admin.post('/settings/security/sso', fields(bad));
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.body).toContain(message);
    }
    const other = await h.newOrg('Other');
    const otherAdmin = await signedIn(h, other.adminEmail);
    // Another organisation may claim the same domain (an unverified claim blocks nobody, IDENTITY.md
    // rule 9); once this one holds it verified, the other cannot verify it.
    const claimed = await otherAdmin.post('/settings/security/sso', fields({ domains: 'settings.test' }));
    expect(claimed.statusCode).toBe(303);
    await approveSsoDomains(h.db, org.orgId, ['settings.test']);
    await expect(approveSsoDomains(h.db, other.orgId, ['settings.test'])).rejects.toThrow(
      'settings.test is already verified for single sign-on by organisation',
    );
    const verify = await otherAdmin.post('/settings/security/sso/domains/verify', { domain: 'settings.test' });
    expect(verify.statusCode).toBe(409);
    expect(verify.body).toContain('settings.test is already verified for single sign-on by another organisation');

    const events = await h.db.kysely
      .selectFrom('events')
      .select(['type', 'data'])
      .where('org_id', '=', org.orgId)
      .where('type', 'like', 'security.%')
      .execute();
    expect(events.filter((e) => e.type === 'security.sso_set')).toHaveLength(2);
    expect(JSON.parse(events[0]!.data).object).toEqual({ object: 'org', id: org.orgId, name: 'Settings Org' });

    const removed = await admin.post('/settings/security/sso/remove', {});
    expect(removed.statusCode).toBe(303);
    expect(await configRow()).toBeUndefined();
    expect(await h.db.kysely.selectFrom('sso_domains').selectAll().where('org_id', '=', org.orgId).execute()).toEqual([]);
    const types = (await h.db.kysely.selectFrom('events').select('type').where('org_id', '=', org.orgId).execute()).map((e) => e.type);
    expect(types).toContain('security.sso_removed');
  });

  it('offers "Join with SSO" on an invitation whose email is in the organisation\'s verified SSO domains', async () => {
    expect((await admin.post('/settings/security/sso', fields())).statusCode).toBe(303);
    const unverified = await admin.post('/settings/members', { email: 'early@settings-two.test', role: 'member' });
    const earlyLink = /<code id="invite-link">\s*http:\/\/orgdata\.test(\/invite\/[A-Za-z0-9_-]{43})/.exec(
      unverified.headers.location ? (await admin.get(unverified.headers.location as string)).body : unverified.body,
    )![1]!;
    expect((await h.app.inject({ method: 'GET', url: earlyLink })).body).not.toContain('Join with SSO');
    await approveSsoDomains(h.db, org.orgId, ['settings.test', 'settings-two.test']);
    const linkOf = async (email: string) => {
      const res = await admin.post('/settings/members', { email, role: 'member' });
      const body = res.headers.location ? (await admin.get(res.headers.location as string)).body : res.body;
      return /<code id="invite-link">\s*http:\/\/orgdata\.test(\/invite\/[A-Za-z0-9_-]{43})/.exec(body)![1]!;
    };
    const inDomain = await h.app.inject({ method: 'GET', url: await linkOf('newcomer@settings.test') });
    expect(inDomain.body).toContain('href="/sso/start?email=newcomer%40settings.test"');
    expect(inDomain.body).toContain('Join with SSO');
    const outside = await h.app.inject({ method: 'GET', url: await linkOf('newcomer@example.com') });
    expect(outside.statusCode).toBe(200);
    expect(outside.body).not.toContain('Join with SSO');
    const login = await h.app.inject({ method: 'GET', url: '/login' });
    // The SSO form posts with the form token (login CSRF, IDENTITY.md rule 18).
    expect(login.body).toMatch(/<form method="post" action="\/sso\/start"[^>]*>/);
    expect(login.body).toContain('name="email"');
  });
});

describe('the issuer guard when fetching (DNS rebinding) and the deadline', { timeout: 30_000 }, () => {
  const provider = (issuer: string): SsoProvider => ({
    orgId: 'org_x',
    issuer,
    clientId: 'c',
    clientSecret: 's',
    autoJoin: 'off',
    domains: [],
  });
  let silent: Server;
  const sockets = new Set<Socket>();
  let port = 0;
  beforeAll(async () => {
    // Accepts connections and never answers.
    silent = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    port = (silent.address() as { port: number }).port;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });

  it('accepts a name that resolves to a public address when set, and refuses it when it resolves to a private one at sign-in', async () => {
    const publicNow = { allowPrivate: false, resolve: async () => [{ address: '93.184.216.34', family: 4 }] };
    await expect(vetIssuer('https://idp.example.com', publicNow)).resolves.toBeInstanceOf(URL);
    const rebound = openIdClient({ allowPrivate: false, resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
    const refused = await rebound.begin(provider('https://idp.example.com'), 'http://orgdata.test/sso/callback').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SsoRefused);
    expect((refused as SsoRefused).reason).toBe('issuer_refused');
  });

  it('gives up on a provider that does not answer, within the deadline', async () => {
    const started = Date.now();
    const client = openIdClient({ allowPrivate: true });
    const refused = await client.begin(provider(`http://127.0.0.1:${port}`), 'http://orgdata.test/sso/callback').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(SsoRefused);
    expect((refused as SsoRefused).reason).toBe('provider_unreachable');
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});
