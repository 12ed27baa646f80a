import { approveSsoDomains } from './helpers/ssoServer.js';
import { createServer, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setSso, type SsoProvider } from '../src/domain/identity/ssoConfigs.js';
import { SsoRefused } from '../src/domain/identity/ssoSignIn.js';
import { openIdClient } from '../src/infra/oidc/openIdClient.js';
import { makeHarness, SECRET, type Harness } from './helpers/harness.js';
import { CookieJar, authorizeAt, startProvider, type TestProvider } from './helpers/oidcProvider.js';

/**
 * IDENTITY.md rule 15: the server calls a provider no more than its cache needs. Discovery is
 * fetched once per provider (issuer, client, saved configuration), however many sign-ins start,
 * at once or one after another; the JWKS once for many sign-ins; a saved change is discovered
 * afresh. Counted at a real provider (oidc-provider).
 */
const CALLBACK = 'http://orgdata.test/sso/callback';
const DISCOVERY = '/.well-known/openid-configuration';

describe('the OpenID provider is asked no more than the cache needs', { timeout: 60_000 }, () => {
  let idp: TestProvider;
  let provider: SsoProvider;
  beforeAll(async () => {
    idp = await startProvider(CALLBACK);
    idp.accounts.set('alice', { email: 'alice@acme.test', email_verified: true });
    provider = {
      orgId: 'org_cache',
      issuer: idp.issuer,
      clientId: idp.clientId,
      clientSecret: idp.clientSecret,
      autoJoin: 'off',
      domains: ['acme.test'],
      updatedAt: '2026-01-01T00:00:00.000Z',
    };
  });
  afterAll(() => idp?.close());

  it('discovers once for 50 sign-ins started at once and 50 one after another; again once the configuration is saved', async () => {
    const oidc = openIdClient({ allowPrivate: true });
    await Promise.all(Array.from({ length: 50 }, () => oidc.begin(provider, CALLBACK)));
    for (let i = 0; i < 50; i++) await oidc.begin(provider, CALLBACK);
    expect(idp.hits.get(DISCOVERY)).toBe(1);

    await oidc.begin({ ...provider, updatedAt: '2026-01-02T00:00:00.000Z' }, CALLBACK);
    expect(idp.hits.get(DISCOVERY)).toBe(2);
    await oidc.begin({ ...provider, clientSecret: 'another-secret' }, CALLBACK);
    expect(idp.hits.get(DISCOVERY)).toBe(3);
  });

  it('fetches the JWKS once for three sign-ins finished one after another', async () => {
    const oidc = openIdClient({ allowPrivate: true });
    const jwksBefore = idp.hits.get('/jwks') ?? 0;
    const discoveryBefore = idp.hits.get(DISCOVERY) ?? 0;
    for (let i = 0; i < 3; i++) {
      const started = await oidc.begin(provider, CALLBACK);
      const callback = await authorizeAt(new CookieJar(), started.url, 'alice', CALLBACK);
      const claims = await oidc.finish(provider, new URL(callback), started);
      expect(claims).toMatchObject({ email: 'alice@acme.test', emailVerified: true });
    }
    expect((idp.hits.get('/jwks') ?? 0) - jwksBefore).toBe(1);
    expect((idp.hits.get(DISCOVERY) ?? 0) - discoveryBefore).toBe(1);
  });

  it('asks a provider that does not answer once for sign-ins started together, and holds none past the deadline', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const hung = { ...provider, issuer: `http://127.0.0.1:${(silent.address() as { port: number }).port}` };
      const oidc = openIdClient({ allowPrivate: true });
      const started = Date.now();
      const outcomes = await Promise.all(Array.from({ length: 10 }, () => oidc.begin(hung, CALLBACK).catch((e: unknown) => e)));
      expect(Date.now() - started).toBeLessThan(15_000);
      for (const outcome of outcomes) expect((outcome as SsoRefused).reason).toBe('provider_unreachable');
      // Right after the failure, a new sign-in is told at once, without asking again.
      const again = Date.now();
      expect(await oidc.begin(hung, CALLBACK).catch((e: unknown) => (e as SsoRefused).reason)).toBe('provider_unreachable');
      expect(Date.now() - again).toBeLessThan(1_000);
      expect(sockets).toHaveLength(1);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});

describe('/sso/start asks the provider for its discovery once, until the configuration is saved', { timeout: 60_000 }, () => {
  let h: Harness;
  let idp: TestProvider;
  beforeAll(async () => {
    idp = await startProvider('http://orgdata.test/sso/callback');
    h = await makeHarness('sqlite', { env: { SSO_ALLOW_PRIVATE_ISSUERS: 'true' } });
  });
  afterAll(async () => {
    await h?.close();
    await idp?.close();
  });

  it('30 starts from 30 addresses: one discovery; a saved configuration: one more', async () => {
    const org = await h.newOrg();
    const domain = `cache-${org.orgId.slice(-6).toLowerCase()}.test`;
    const save = (at: Date) =>
      setSso(
        h.db.kysely,
        SECRET,
        { allowPrivate: true },
        org.orgId,
        { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, domains: domain, autoJoin: 'off', required: false },
        { actor_type: 'system', actor_id: null, request_id: null, origin: null },
        at,
      );
    await save(new Date(Date.now() - 60_000));
    // Rule 9: the domain routes /sso/start only once verified (here, approved as the operator does).
    await approveSsoDomains(h.db, org.orgId, [domain]);
    // The sign-in form's POST, with its token (GET /sso/start only shows the form).
    const start = async (i: number) => {
      const remoteAddress = `192.0.2.${i + 1}`;
      const form = await h.app.inject({ method: 'GET', url: `/sso/start?email=someone${i}%40${domain}`, remoteAddress });
      const csrf = /name="_csrf" value="([^"]+)"/.exec(form.body)?.[1] ?? '';
      const cookie = form.headers['set-cookie'];
      const cookies = (Array.isArray(cookie) ? cookie : [cookie ?? '']).map((c) => c.split(';')[0]).join('; ');
      return h.app.inject({
        method: 'POST',
        url: '/sso/start',
        remoteAddress,
        headers: { cookie: cookies, 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ _csrf: csrf, email: `someone${i}@${domain}` }).toString(),
      });
    };
    for (let i = 0; i < 30; i++) expect((await start(i)).statusCode).toBe(303);
    expect(idp.hits.get(DISCOVERY)).toBe(1);
    await save(new Date());
    for (let i = 0; i < 5; i++) expect((await start(i)).statusCode).toBe(303);
    expect(idp.hits.get(DISCOVERY)).toBe(2);
  });
});
