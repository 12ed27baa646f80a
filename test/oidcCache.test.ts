import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SsoProvider } from '../src/domain/identity/ssoConfigs.js';
import { openIdClient } from '../src/infra/oidc/openIdClient.js';
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
});
