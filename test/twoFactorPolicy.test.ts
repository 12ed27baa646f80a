import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedIn } from './helpers/browserSession.js';
import { visitor } from './helpers/anonymousForms.js';
import { addMember, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { enrolPasskey, enrolTotp, eventsOf } from './helpers/identityFactors.js';
import { cli, serverEnv, type ServerEnv } from './helpers/serverProcess.js';

const PASSWORD = 'correct horse battery';

/** The policy's radio buttons as rendered: value → checked. */
function radios(body: string): Record<string, boolean> {
  const out: Record<string, boolean> = {};
  for (const [input] of body.matchAll(/<input[^>]*name="require_two_factor"[^>]*>/g)) {
    out[/value="([^"]*)"/.exec(input)![1]!] = /\schecked\b/.test(input);
  }
  return out;
}
const SETUP = '/settings/account/two-factor';

/**
 * The organisation's two-factor policy (IDENTITY.md, Organisation policy): set by an admin on
 * /settings/security or by the operator's CLI, and enforced on every request of whoever it covers
 * and has no second factor, sessions already open included.
 */
describe.each(DIALECTS)('two-factor policy on %s', (dialect) => {
  let h: Harness;

  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(async () => {
    await h.close();
  });

  const policyOf = async (orgId: string) =>
    (await h.db.kysely.selectFrom('orgs').select('require_two_factor').where('id', '=', orgId).executeTakeFirstOrThrow())
      .require_two_factor;

  async function withFactor(org: Org) {
    // The admin who sets the policy has a second factor, so the policy does not hold them back.
    await enrolTotp(h, org.adminId);
    return signedIn(h, org.adminEmail);
  }

  it('an admin sets the policy on /settings/security; it is in Activity with from and to', async () => {
    const org = await h.newOrg('Policy Org');
    const admin = await withFactor(org);
    const form = await admin.get('/settings/security');
    expect(form.statusCode).toBe(200);
    expect(radios(form.body)).toEqual({ nobody: true, admins: false, everyone: false });
    expect(form.body).toContain('action="/settings/security/policy"');

    const done = await admin.post('/settings/security/policy', { require_two_factor: 'admins' });
    expect(done.statusCode).toBe(303);
    expect(done.headers.location).toBe('/settings/security');
    expect(await policyOf(org.orgId)).toBe('admins');
    expect(radios((await admin.get('/settings/security')).body)).toEqual({ nobody: false, admins: true, everyone: false });

    // The same value again changes and records nothing.
    expect((await admin.post('/settings/security/policy', { require_two_factor: 'admins' })).statusCode).toBe(303);
    const events = await eventsOf(h, org.orgId, 'security.two_factor_policy_changed');
    expect(events).toHaveLength(1);
    expect(events[0]!.actor_id).toBe(org.adminId);
    expect(events[0]!.data).toMatchObject({ from: 'nobody', to: 'admins', object: { object: 'org', id: org.orgId, name: 'Policy Org' } });
    const activity = await admin.get('/activity?type=security.two_factor_policy_changed');
    expect(activity.statusCode).toBe(200);
    expect(activity.body).toContain('<code>security.two_factor_policy_changed</code>');
    expect((await admin.get('/activity')).body).toContain('<code>security.two_factor_policy_changed</code>');
  });

  it('refuses a bad value (400), a missing CSRF token (403) and a member (403), changing nothing', async () => {
    const org = await h.newOrg();
    const admin = await withFactor(org);
    const bad = await admin.post('/settings/security/policy', { require_two_factor: 'sometimes' });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toContain('Choose nobody, admins or everyone.');
    expect((await admin.post('/settings/security/policy', { require_two_factor: 'everyone' }, { csrf: null })).statusCode).toBe(403);
    expect((await admin.post('/settings/security/policy', { require_two_factor: 'everyone' }, { csrf: 'x'.repeat(32) })).statusCode).toBe(
      403,
    );
    const member = await signedIn(h, (await addMember(h, org.orgId, 'member')).email);
    expect((await member.get('/settings/security')).statusCode).toBe(403);
    const refused = await member.post('/settings/security/policy', { require_two_factor: 'nobody' });
    expect(refused.statusCode).toBe(403);
    expect(await policyOf(org.orgId)).toBe('nobody');
    expect(await eventsOf(h, org.orgId, 'security.two_factor_policy_changed')).toEqual([]);
  });

  it('"admins" holds back an admin without a second factor, from the next request of a session already open, and lifts once they enrol', async () => {
    const org = await h.newOrg();
    const admin = await withFactor(org);
    const other = await addMember(h, org.orgId, 'admin');
    const member = await addMember(h, org.orgId, 'member');
    const otherOpen = await signedIn(h, other.email);
    const memberOpen = await signedIn(h, member.email);
    expect((await otherOpen.get('/contacts')).statusCode).toBe(200);

    await admin.post('/settings/security/policy', { require_two_factor: 'admins' });
    const sent = await otherOpen.get('/contacts');
    expect(sent.statusCode).toBe(303);
    expect(sent.headers.location).toBe(SETUP);
    expect(String(sent.headers['set-cookie'])).toContain('requires%20two-factor');
    for (const path of ['/settings/members', '/settings/account', '/activity', '/settings/security']) {
      const res = await otherOpen.get(path);
      expect(res.statusCode, path).toBe(303);
      expect(res.headers.location, path).toBe(SETUP);
    }
    // A form from a page opened earlier: refused, nothing created.
    const post = await otherOpen.post('/labels', { name: 'Sneaky' });
    expect(post.statusCode).toBe(403);
    expect(post.body).toContain('requires two-factor authentication');
    expect(await h.db.kysely.selectFrom('labels').select('id').where('org_id', '=', org.orgId).execute()).toEqual([]);
    // What stays open: setting up a factor, passkeys, re-authentication, the assets, signing out.
    for (const path of [SETUP, `${SETUP}/setup`, '/settings/account/passkeys', '/reauth?next=/contacts', '/assets/dashboard.css']) {
      expect((await otherOpen.get(path)).statusCode, path).not.toBe(303);
    }
    // A member is not covered; the admin who has a factor neither.
    expect((await memberOpen.get('/contacts')).statusCode).toBe(200);
    expect((await admin.get('/contacts')).statusCode).toBe(200);

    await enrolTotp(h, other.id);
    expect((await otherOpen.get('/contacts')).statusCode).toBe(200);

    // Signing out still works for someone held back.
    const third = await addMember(h, org.orgId, 'admin');
    const thirdOpen = await signedIn(h, third.email);
    const out = await thirdOpen.post('/logout');
    expect(out.statusCode).toBe(303);
    expect(out.headers.location).toBe('/login');
  });

  it('"everyone" sends a member to set up two-factor right after signing in; a passkey lifts it', async () => {
    const org = await h.newOrg();
    const admin = await withFactor(org);
    await admin.post('/settings/security/policy', { require_two_factor: 'everyone' });
    const member = await addMember(h, org.orgId, 'member');
    const person = visitor(h.app);
    await person.get('/login');
    const login = await person.post('/login', { email: member.email, password: PASSWORD, next: '/contacts' });
    expect(login.statusCode).toBe(303);
    const next = await person.get(login.headers.location as string);
    expect(next.statusCode).toBe(303);
    expect(next.headers.location).toBe(SETUP);
    await enrolPasskey(h, member.id);
    expect((await person.get('/contacts')).statusCode).toBe(200);

    // "nobody" lets everyone through again.
    const bare = await signedIn(h, (await addMember(h, org.orgId, 'member')).email);
    expect((await bare.get('/contacts')).statusCode).toBe(303);
    await admin.post('/settings/security/policy', { require_two_factor: 'nobody' });
    expect((await bare.get('/contacts')).statusCode).toBe(200);
  });

  it('"everyone" tells an account SSO made that it cannot enrol from its SSO session, and links to the password reset first (rule 8)', async () => {
    const org = await h.newOrg();
    const admin = await withFactor(org);
    await admin.post('/settings/security/policy', { require_two_factor: 'everyone' });
    // An account the organisation's SSO made (no password of its own) in a session SSO opened.
    const member = await addMember(h, org.orgId, 'member');
    await h.db.kysely.updateTable('users').set({ sso_org_id: org.orgId }).where('id', '=', member.id).execute();
    const sso = await signedIn(h, member.email);
    await h.db.kysely.updateTable('sessions').set({ method: 'sso', account_proof_at: null }).where('user_id', '=', member.id).execute();

    const held = await sso.get('/contacts');
    expect(held.headers.location).toBe(SETUP);
    const gate = await sso.get(SETUP);
    expect(gate.statusCode).toBe(200);
    const text = gate.body.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ');
    expect(text).toMatch(/cannot be set up from a single sign.on session/);
    expect(gate.body).toContain('href="/forgot-password?email=');
    // The set-up button, which could only lead to /reauth and a dead end, is not offered.
    expect(gate.body).not.toContain('action="/settings/account/two-factor/setup"');
    // Its holder signed in with a password it has since (the mailbox proven): the page is as usual.
    await h.db.kysely.updateTable('users').set({ sso_org_id: null }).where('id', '=', member.id).execute();
    const usual = await sso.get(SETUP);
    expect(usual.body).toContain('action="/settings/account/two-factor/setup"');
    expect(usual.body).not.toMatch(/cannot be set up from a single sign.on session/);
  });
});

describe.each(DIALECTS)('orgdata org policy on %s', { timeout: 120_000 }, (dialect) => {
  let env: ServerEnv;
  beforeAll(async () => {
    env = await serverEnv(dialect);
    await cli(env.env, ['migrate']);
  }, 120_000);
  afterAll(async () => {
    await env?.dispose();
  });

  it('shows and sets the policy, records the change, and refuses a bad value or an unknown organisation', async () => {
    const created = await cli<{ org: { id: string } }>(env.env, [
      'org',
      'create',
      '--name',
      'Cli Policy',
      '--admin-email',
      'op@example.com',
      '--admin-password',
      PASSWORD,
    ]);
    const orgId = created.org.id;
    expect(await cli(env.env, ['org', 'policy', '--org', orgId])).toEqual({
      org_id: orgId,
      org_name: 'Cli Policy',
      require_two_factor: 'nobody',
    });
    const set = await cli(env.env, ['org', 'policy', '--org', orgId, '--require-2fa', 'everyone']);
    expect(set).toEqual({ org_id: orgId, org_name: 'Cli Policy', require_two_factor: 'everyone', changed: true });
    expect(await cli(env.env, ['org', 'policy', '--org', orgId])).toMatchObject({ require_two_factor: 'everyone' });
    expect(await cli(env.env, ['org', 'policy', '--org', orgId, '--require-2fa', 'everyone'])).toMatchObject({ changed: false });
    await expect(cli(env.env, ['org', 'policy', '--org', orgId, '--require-2fa', 'maybe'])).rejects.toMatchObject({
      stdout: expect.stringContaining('"invalid_request"'),
    });
    await expect(cli(env.env, ['org', 'policy', '--org', 'org_nope', '--require-2fa', 'admins'])).rejects.toMatchObject({
      stdout: expect.stringContaining('"not_found"'),
    });
    await expect(cli(env.env, ['org', 'policy'])).rejects.toMatchObject({ code: 2 });
  });
});
