import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nowIso } from '../src/domain/ids.js';
import { newTotpSecret, sealTotpSecret } from '../src/domain/identity/totp.js';
import { findSession, openSession } from '../src/domain/sessions/sessions.js';
import { formBody, signedIn } from './helpers/browserSession.js';
import { addMember, DIALECTS, makeHarness, SECRET, type Harness } from './helpers/harness.js';

/**
 * The attacks a hostile review of this round's identity work found (an admin of organisation A who
 * controls A's SSO, against a person who is also in organisation B), each confirmed against the
 * code before the fix: an SSO session of A is no proof for the account (IDENTITY.md rule 8), and
 * locking out is not a weapon (rule 17).
 */
describe.each(DIALECTS)('trust boundaries after review on %s', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(() => h.close());

  /** A person who is admin of B and a plain member of A; A's admin runs A's provider. */
  async function victimInAandB() {
    const orgB = await h.newOrg('B');
    const victim = await addMember(h, orgB.orgId, 'admin');
    const orgA = await h.newOrg('A');
    await h.db.kysely
      .insertInto('memberships')
      .values({ org_id: orgA.orgId, user_id: victim.id, role: 'member', created_at: nowIso(new Date()) })
      .execute();
    return { orgA, orgB, victim };
  }

  /** A session of the victim's that A's provider opened (as after a linked SSO sign-in). */
  async function ssoSessionIn(orgId: string, userId: string) {
    const { token } = await openSession(h.db.kysely, userId, orgId, new Date(), { method: 'sso', origin: null });
    const session = (await findSession(h.db.kysely, token, new Date()))!;
    expect(session.accountProofAt).toBeNull();
    const headers = { host: 'orgdata.test', cookie: `od_session=${token}` };
    return {
      get: (url: string) => h.app.inject({ method: 'GET', url, headers }),
      post: (url: string, fields: Record<string, string> = {}) =>
        h.app.inject({
          method: 'POST',
          url,
          headers: { ...headers, 'content-type': 'application/x-www-form-urlencoded' },
          payload: formBody({ _csrf: session.csrfToken, ...fields }),
        }),
    };
  }

  async function passwordSignIn(email: string) {
    const form = await h.app.inject({ method: 'GET', url: '/login', headers: { host: 'orgdata.test' } });
    const cookie = (form.cookies as { name: string; value: string }[]).map((c) => `${c.name}=${c.value}`).join('; ');
    const csrf = /name="_csrf" value="([^"]+)"/.exec(form.body)?.[1] ?? '';
    return h.app.inject({
      method: 'POST',
      url: '/login',
      remoteAddress: '203.0.113.9',
      headers: { host: 'orgdata.test', cookie, 'content-type': 'application/x-www-form-urlencoded' },
      payload: formBody({ _csrf: csrf, email, password: 'correct horse battery' }),
    });
  }

  it("A requiring SSO for a domain of its own does not lock a member of A out of B (rule 17); for the member's own verified domain it does", async () => {
    const { orgA, victim } = await victimInAandB();
    expect((await passwordSignIn(victim.email)).statusCode).toBe(303);
    const at = nowIso(new Date());
    await h.db.kysely
      .insertInto('sso_configs')
      .values({
        org_id: orgA.orgId,
        issuer: 'https://idp.attacker.test',
        client_id: 'x',
        client_secret_sealed: 'x',
        auto_join: 'off',
        required: 'yes',
        created_at: at,
        updated_at: at,
      })
      .execute();
    const claim = (domain: string, verified: boolean) =>
      h.db.kysely
        .insertInto('sso_domains')
        .values({
          org_id: orgA.orgId,
          domain,
          token: `t-${domain}`,
          created_at: at,
          verified_at: verified ? at : null,
          verified_method: verified ? 'dns' : null,
        })
        .execute();
    await claim(`attacker-${orgA.orgId.slice(-6).toLowerCase()}.test`, true);
    // The victim's e-mail domain claimed but not verified: blocks nobody either (rule 9).
    const theirs = victim.email.split('@')[1]!;
    await claim(theirs, false);
    expect((await passwordSignIn(victim.email)).statusCode).toBe(303);
    // Verified for their own domain: the requirement holds (a plain member of A signs in with SSO).
    await h.db.kysely
      .updateTable('sso_domains')
      .set({ verified_at: at, verified_method: 'operator' })
      .where('org_id', '=', orgA.orgId)
      .where('domain', '=', theirs)
      .execute();
    const refused = await passwordSignIn(victim.email);
    expect(refused.statusCode).toBe(403);
    expect(refused.body).toContain('single sign-on');
    await h.db.kysely.deleteFrom('sso_domains').where('org_id', '=', orgA.orgId).execute();
    await h.db.kysely.deleteFrom('sso_configs').where('org_id', '=', orgA.orgId).execute();
  });

  it("an SSO session neither removes nor renames the account's passkey, nor ends the holder's other sessions, without the account's own proof (rule 8)", async () => {
    const { orgA, victim } = await victimInAandB();
    const own = await signedIn(h, victim.email);
    const at = nowIso(new Date());
    await h.db.kysely
      .insertInto('passkeys')
      .values({
        id: `pk_review_${victim.id.slice(-8)}`,
        user_id: victim.id,
        credential_id: `cred-${victim.id}`,
        public_key: Buffer.from('x').toString('base64url'),
        sign_count: 0,
        transports: '[]',
        name: 'Phone',
        created_at: at,
        last_used_at: null,
      })
      .execute();
    const attacker = await ssoSessionIn(orgA.orgId, victim.id);
    const pk = `pk_review_${victim.id.slice(-8)}`;
    for (const [url, fields] of [
      [`/settings/account/passkeys/${pk}/remove`, {}],
      [`/settings/account/passkeys/${pk}/rename`, { name: 'Gone' }],
      ['/settings/account/sessions/revoke-others', {}],
    ] as const) {
      const res = await attacker.post(url, fields);
      expect(res.statusCode, url).toBe(303);
      expect(res.headers.location, url).toMatch(/^\/reauth\?next=/);
    }
    const left = await h.db.kysely.selectFrom('passkeys').select('name').where('user_id', '=', victim.id).execute();
    expect(left).toEqual([{ name: 'Phone' }]);
    expect((await own.get('/contacts')).statusCode).toBe(200);
  });

  it('an SSO session does not see an authenticator secret waiting to be confirmed in another session (rule 8)', async () => {
    const { orgA, victim } = await victimInAandB();
    const secret = newTotpSecret();
    await h.db.kysely
      .insertInto('totp_factors')
      .values({
        user_id: victim.id,
        secret_sealed: sealTotpSecret(SECRET, secret),
        created_at: nowIso(new Date()),
        confirmed_at: null,
        last_step: null,
      })
      .execute();
    const attacker = await ssoSessionIn(orgA.orgId, victim.id);
    const page = await attacker.get('/settings/account/two-factor');
    expect(page.statusCode).toBe(200);
    expect(page.body).not.toContain(secret);
    expect(page.body).toContain('waiting in another session');
    // The holder's own session sees it.
    const own = await signedIn(h, victim.email);
    expect((await own.get('/settings/account/two-factor')).body).toContain(secret);
  });

  it('an admin of A signs a member out of A only, not out of B, where they are admin (their B session stays)', async () => {
    const { orgA, orgB, victim } = await victimInAandB();
    const inB = await signedIn(h, victim.email);
    await h.db.kysely.updateTable('sessions').set({ org_id: orgB.orgId }).where('user_id', '=', victim.id).execute();
    const inA = await openSession(h.db.kysely, victim.id, orgA.orgId, new Date(), { method: 'password', origin: null });
    const adminA = await signedIn(h, orgA.adminEmail);
    const res = await adminA.post(`/settings/members/${victim.id}/sign-out`, {});
    expect(res.statusCode).toBe(303);
    expect(await findSession(h.db.kysely, inA.token, new Date())).toBeNull();
    expect((await inB.get('/contacts')).statusCode).toBe(200);
  });
});
