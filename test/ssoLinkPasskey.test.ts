import { describe, expect, it } from 'vitest';
import { randomBase62 } from '../src/domain/ids.js';
import { DIALECTS } from './helpers/harness.js';
import { CookieJar } from './helpers/oidcProvider.js';
import { cli } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';
import { SoftAuthenticator } from './helpers/softAuthenticator.js';
import { configureSso, orgThroughCli, passwordSignIn, sessionCookieOf, ssoSignIn, userIdOf, userThroughCli } from './helpers/ssoServer.js';

const PASSWORD = 'correct horse battery';
const csrfIn = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';
type Json = Record<string, unknown>;

/**
 * A passkey as the account holder's consent at `/sso/link` (IDENTITY.md rule 10: "password and
 * code, or a passkey"): an account protected by passkeys only can link its organisation's SSO, and
 * the ceremony is bound to the pending link — only that account's passkeys, the pending link's own
 * challenge, the browser that holds the pending link, five failures end it, same-site JSON only.
 * A real server process, a real provider (oidc-provider) and a software WebAuthn authenticator.
 */
describe.each(DIALECTS)('a passkey as consent to link SSO on %s', { timeout: 240_000 }, (dialect) => {
  const suite = suiteServer(
    dialect,
    { SSO_ALLOW_PRIVATE_ISSUERS: 'true' },
    { publicUrl: true, idp: true, migrate: true, database: true, stopWith: 'SIGTERM', startTimeout: 240_000 },
  );

  const unique = () => randomBase62(8).toLowerCase();
  const makeOrg = (name: string, adminEmail: string) => orgThroughCli(suite.env.env, name, adminEmail, PASSWORD);
  const userId = async (email: string) => (await userIdOf(suite.db, email))!;
  const json = (jar: CookieJar, url: string, body: Json, headers: Record<string, string> = {}) =>
    jar.fetch(`${suite.url}${url}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: suite.url, ...headers },
      body: JSON.stringify(body),
    });
  const linksOf = async (id: string) =>
    (await suite.db.kysely.selectFrom('sso_identities').select('subject').where('user_id', '=', id).execute()).map((r) => r.subject);
  /** Failed sign-ins in Activity for the person `id` (in `orgId`, else in every organisation of hers). */
  const failures = async (id: string, orgId?: string) => {
    let query = suite.db.kysely
      .selectFrom('events')
      .select('data')
      .where('subject_id', '=', id)
      .where('type', '=', 'member.sign_in_failed');
    if (orgId) query = query.where('org_id', '=', orgId);
    return (await query.execute()).map((e) => JSON.parse(e.data) as { method: string; reason: string });
  };

  /** Signs in with the password in a new browser and adds a passkey there: the authenticator holding it. */
  async function withPasskey(email: string): Promise<SoftAuthenticator> {
    const { jar } = await passwordSignIn(suite.url, email, PASSWORD);
    const csrf = csrfIn(await (await jar.fetch(`${suite.url}/settings/account`)).text());
    const key = new SoftAuthenticator(suite.url);
    const options = await json(jar, '/settings/account/passkeys/options', { _csrf: csrf, name: 'Mine' });
    expect(options.status).toBe(200);
    const added = await json(jar, '/settings/account/passkeys', {
      _csrf: csrf,
      name: 'Mine',
      response: key.register((await options.json()) as Json),
    });
    expect(added.status).toBe(201);
    return key;
  }

  /**
   * The holder (admin of B, a password and a passkey, no authenticator app) is also a member of A,
   * whose SSO covers her domain; `others` more people of A, each with a passkey of their own.
   */
  async function setUp() {
    const domain = `p${unique()}.test`;
    const email = `holder@${domain}`;
    await makeOrg('Holder B', email);
    const id = await userId(email);
    const key = await withPasskey(email);
    const orgA = await makeOrg('SSO A', `admin-${unique()}@a.test`);
    await configureSso(suite.env, { orgId: orgA, provider: suite.idp, domains: [domain] });
    await userThroughCli(suite.env.env, orgA, email, 'another password 1', 'member');
    const sub = `holder-${unique()}`;
    suite.idp.accounts.set(sub, { email, email_verified: true });
    return { email, id, key, orgA, sub };
  }
  /** An SSO sign-in for the holder, left pending at /sso/link: the browser holding it. */
  async function pendingLink(holder: { email: string; sub: string }): Promise<CookieJar> {
    const sso = await ssoSignIn(suite.url, holder.email, holder.sub);
    expect(sso.response.headers.get('location')).toBe('/sso/link');
    expect(sessionCookieOf(sso.response)).toBeUndefined();
    return sso.jar;
  }
  const options = async (jar: CookieJar) => {
    const answer = await json(jar, '/sso/link/passkey/options', {});
    return { status: answer.status, body: (await answer.json()) as Json };
  };
  const consent = (jar: CookieJar, response: Json) => json(jar, '/sso/link/passkey', { response });

  it('an account protected by passkeys only links with its passkey, and the session opens in the organisation', async () => {
    const holder = await setUp();
    const jar = await pendingLink(holder);
    const page = await (await jar.fetch(`${suite.url}/sso/link`)).text();
    expect(page).toContain('data-passkey-link');
    expect(page).toContain('/assets/passkeys.js');
    const offered = await options(jar);
    expect(offered.status).toBe(200);
    // Only her own credentials are offered.
    expect((offered.body.allowCredentials as { id: string }[]).map((c) => c.id)).toEqual([holder.key.credentials[0]!.id]);
    const done = await consent(jar, holder.key.authenticate(offered.body));
    expect(done.status, await done.clone().text()).toBe(200);
    expect(((await done.json()) as Json).redirect).toBe('/');
    expect(sessionCookieOf(done)).toBeDefined();
    expect(await linksOf(holder.id)).toEqual([holder.sub]);
    const session = await suite.db.kysely
      .selectFrom('sessions')
      .select(['org_id', 'account_proof_at'])
      .where('user_id', '=', holder.id)
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();
    expect(session.org_id).toBe(holder.orgA);
    // An SSO session: no proof for the account (rule 8), even though a passkey consented to the link.
    expect(session.account_proof_at).toBeNull();
    // The next SSO sign-in goes straight in.
    expect(sessionCookieOf((await ssoSignIn(suite.url, holder.email, holder.sub)).response)).toBeDefined();
  });

  it('refuses another person’s passkey, a challenge of another pending link, a replayed assertion and another browser', async () => {
    const holder = await setUp();
    // Another member of A, with a passkey of her own.
    const otherEmail = `other-${unique()}@a.test`;
    await cli(suite.env.env, ['users', 'add', '--org', holder.orgA, '--email', otherEmail, '--password', PASSWORD, '--role', 'member']);
    const otherKey = await withPasskey(otherEmail);

    const first = await pendingLink(holder);
    const second = await pendingLink(holder);

    // Another person's passkey, on this pending link's own challenge.
    const offered = await options(first);
    expect(offered.status).toBe(200);
    const foreign = await consent(first, otherKey.authenticate(offered.body));
    expect(foreign.status).toBe(401);
    expect(sessionCookieOf(foreign)).toBeUndefined();

    // Her own passkey, answering the challenge of the first pending link, sent on the second.
    const firstOptions = await options(first);
    await options(second);
    const forFirst = holder.key.authenticate(firstOptions.body);
    const crossed = await consent(second, forFirst);
    expect(crossed.status).toBe(401);
    expect(sessionCookieOf(crossed)).toBeUndefined();

    // Another browser (no pending link), with a valid answer to the first link's challenge.
    const stranger = await consent(new CookieJar(), forFirst);
    expect(stranger.status).toBe(401);
    expect(sessionCookieOf(stranger)).toBeUndefined();
    expect(await linksOf(holder.id)).toEqual([]);

    // The first link's own challenge, answered by her, in the first browser: links, once.
    const again = await options(first);
    const answer = holder.key.authenticate(again.body);
    const done = await consent(first, answer);
    expect(done.status, await done.clone().text()).toBe(200);
    expect(sessionCookieOf(done)).toBeDefined();
    // Replayed: in the same browser (the pending link is used up) and on the second pending link.
    const replayed = await consent(first, answer);
    expect(replayed.status).toBe(401);
    expect(sessionCookieOf(replayed)).toBeUndefined();
    // (The second link's challenge went with the crossed answer: there is none to answer now.)
    const replayedElsewhere = await consent(second, answer);
    expect(replayedElsewhere.status).toBe(401);
    expect(sessionCookieOf(replayedElsewhere)).toBeUndefined();

    const reasons = (await failures(holder.id)).filter((f) => f.method === 'sso').map((f) => f.reason);
    expect(reasons).toContain('link_not_this_account');
    expect(reasons).toContain('link_invalid_passkey');
    expect(reasons).toContain('link_no_challenge');
    // Nothing was recorded against the other person, whose passkey it was.
    expect((await failures(await userId(otherEmail))).filter((f) => f.method === 'sso')).toEqual([]);
  });

  it('five refused passkeys end the pending link; requests from another site or without JSON are refused', async () => {
    const holder = await setUp();
    const jar = await pendingLink(holder);
    // Not JSON, or from another site: 403 before anything is read.
    const formPost = await jar.fetch(`${suite.url}/sso/link/passkey/options`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: suite.url },
      body: '',
    });
    expect(formPost.status).toBe(403);
    const crossSite = await json(jar, '/sso/link/passkey/options', {}, { origin: 'https://evil.test', 'sec-fetch-site': 'cross-site' });
    expect(crossSite.status).toBe(403);
    const noOrigin = await jar.fetch(`${suite.url}/sso/link/passkey`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ response: {} }),
    });
    expect(noOrigin.status).toBe(403);

    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const offered = await options(jar);
      expect(offered.status).toBe(200);
      // Another origin's signature: a phishing page's.
      const bad = await consent(jar, holder.key.authenticate(offered.body, undefined, { origin: 'https://evil.test' }));
      statuses.push(bad.status);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 401]);
    // The pending link is gone: its options, the page and a right answer find nothing.
    const after = await options(jar);
    expect(after.status).toBe(401);
    expect(after.body.redirect).toBe('/sso/link');
    expect((await jar.fetch(`${suite.url}/sso/link`)).status).toBe(400);
    expect(await linksOf(holder.id)).toEqual([]);
    expect((await failures(holder.id, holder.orgA)).filter((f) => f.reason === 'link_invalid_passkey')).toHaveLength(5);
  });
});
