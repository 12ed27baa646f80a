import { describe, expect, it } from 'vitest';
import { randomBase62 } from '../src/domain/ids.js';
import { csrfOf, DashboardBrowser } from './helpers/dashboardBrowser.js';
import { DIALECTS } from './helpers/harness.js';
import { totpCode } from './helpers/identityFactors.js';
import { nowIso } from '../src/domain/ids.js';
import { newTotpSecret, sealTotpSecret } from '../src/domain/identity/totp.js';
import { openSession } from '../src/domain/sessions/sessions.js';
import { SECRET } from './helpers/harness.js';
import { CookieJar } from './helpers/oidcProvider.js';
import { cli } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';
import { runCli } from './helpers/ssoServer.js';

const PASSWORD = 'correct horse battery';
const NEW_PASSWORD = 'a brand new passphrase';
const MEMBERS = '/settings/members';
const TWO_FACTOR = '/settings/account/two-factor';
const fresh = (name: string) => `${name}-${randomBase62(8).toLowerCase()}@example.com`;
/** The approximate origin of a request from this machine: the /24 and the browser's name. */
const LOCAL_ORIGIN = /^127\.0\.0\.0\/24/;

/**
 * IDENTITY.md rules 12 and 13 against a real server process over HTTP (and the operator CLI as a
 * process): every change of privilege is in Activity with actor, target and origin; a changed
 * credential ends what it protected.
 */
describe.each(DIALECTS)('privilege changes on %s', { timeout: 120_000 }, (dialect) => {
  const suite = suiteServer(dialect, {}, { publicUrl: true, migrate: true, database: true, stopWith: 'SIGTERM' });

  async function newOrg(): Promise<{ orgId: string; adminEmail: string; adminId: string }> {
    const adminEmail = fresh('admin');
    const made = await cli<{ org: { id: string }; user: { id: string } }>(suite.env.env, [
      'org',
      'create',
      '--name',
      'Privilege Org',
      '--admin-email',
      adminEmail,
      '--admin-password',
      PASSWORD,
    ]);
    return { orgId: made.org.id, adminEmail, adminId: made.user.id };
  }

  async function addMember(orgId: string, role: 'admin' | 'member'): Promise<{ id: string; email: string }> {
    const email = fresh(role);
    const added = await cli<{ id: string }>(suite.env.env, [
      'users',
      'add',
      '--org',
      orgId,
      '--email',
      email,
      '--role',
      role,
      '--password',
      PASSWORD,
    ]);
    return { id: added.id, email };
  }

  async function eventsOf(orgId: string, type: string) {
    const rows = await suite.db.kysely
      .selectFrom('events')
      .select(['actor_type', 'actor_id', 'subject_id', 'data'])
      .where('org_id', '=', orgId)
      .where('type', '=', type)
      .orderBy('created_at')
      .execute();
    return rows.map((row) => ({ ...row, data: JSON.parse(row.data) as Record<string, unknown> }));
  }

  /** Whether a browser's session still opens the dashboard. */
  const signedIn = async (browser: DashboardBrowser) => (await browser.get('/settings/account')).status === 200;

  async function resetLink(orgId: string, email: string): Promise<string> {
    return (await cli<{ reset_url: string }>(suite.env.env, ['users', 'reset-link', '--org', orgId, '--email', email])).reset_url;
  }

  it('role changes and removals by an admin are in Activity with actor, target, old and new role, and origin', async () => {
    const org = await newOrg();
    const member = await addMember(org.orgId, 'member');
    const leaver = await addMember(org.orgId, 'member');
    const admin = await DashboardBrowser.signIn(suite.url, org.adminEmail);

    expect((await admin.submit(MEMBERS, `${MEMBERS}/role`, { email: member.email, role: 'admin' })).status).toBe(303);
    expect((await admin.submit(MEMBERS, `${MEMBERS}/role`, { email: member.email, role: 'member', confirm: 'yes' })).status).toBe(303);
    const changes = await eventsOf(org.orgId, 'member.role_changed');
    expect(changes).toHaveLength(2);
    expect(changes[0]).toMatchObject({
      actor_type: 'user',
      actor_id: org.adminId,
      subject_id: member.id,
      data: { object: { object: 'member', id: member.id, email: member.email, role: 'admin' }, from: 'member', to: 'admin' },
    });
    expect(changes[0]!.data.origin).toMatch(LOCAL_ORIGIN);
    expect(changes[1]!.data).toMatchObject({ from: 'admin', to: 'member', revoked_keys: '0' });

    expect((await admin.submit(MEMBERS, `${MEMBERS}/remove`, { email: leaver.email, confirm: 'yes' })).status).toBe(303);
    const [removed] = await eventsOf(org.orgId, 'member.removed');
    expect(removed).toMatchObject({
      actor_type: 'user',
      actor_id: org.adminId,
      subject_id: leaver.id,
      data: { object: { object: 'member', id: leaver.id, email: leaver.email, role: 'member' } },
    });
    expect(removed!.data.origin).toMatch(LOCAL_ORIGIN);

    // The Activity page lists them for admins.
    const activity = await (await admin.get('/activity?type=member.*')).text();
    expect(activity).toContain('member.role_changed');
    expect(activity).toContain('member.removed');
  });

  it('invitations carry their role; an admin ending a member’s sessions is recorded with both of them', async () => {
    const org = await newOrg();
    const member = await addMember(org.orgId, 'member');
    const admin = await DashboardBrowser.signIn(suite.url, org.adminEmail);
    const elsewhere = await DashboardBrowser.signIn(suite.url, member.email);
    const email = fresh('invitee');
    expect((await admin.submit(MEMBERS, MEMBERS, { email, role: 'admin' })).status).toBe(200);
    const invitation = await suite.db.kysely
      .selectFrom('invitations')
      .select('id')
      .where('org_id', '=', org.orgId)
      .executeTakeFirstOrThrow();
    expect((await admin.submit(MEMBERS, `${MEMBERS}/invitations/${invitation.id}/resend`)).status).toBe(200);
    expect((await admin.submit(MEMBERS, `${MEMBERS}/invitations/${invitation.id}/revoke`)).status).toBe(303);
    for (const type of ['member.invited', 'member.invitation_resent', 'member.invitation_revoked']) {
      const [event] = await eventsOf(org.orgId, type);
      expect(event, type).toMatchObject({ actor_id: org.adminId, data: { object: { email, role: 'admin' } } });
      expect(event!.data.origin).toMatch(LOCAL_ORIGIN);
    }

    expect((await admin.submit(MEMBERS, `${MEMBERS}/${member.id}/sign-out`)).status).toBe(303);
    expect(await signedIn(elsewhere)).toBe(false);
    const [ended] = await eventsOf(org.orgId, 'member.signed_out_everywhere');
    expect(ended).toMatchObject({ actor_id: org.adminId, subject_id: member.id, data: { ended: '1' } });
    expect(ended!.data.origin).toMatch(LOCAL_ORIGIN);
  });

  it('the operator’s set-role and set-password are in Activity as the system’s; set-password ends every session and every reset link', async () => {
    const org = await newOrg();
    const member = await addMember(org.orgId, 'member');
    expect((await cli(suite.env.env, ['users', 'set-role', '--org', org.orgId, '--email', member.email, '--role', 'admin'])).role).toBe(
      'admin',
    );
    const [promoted] = await eventsOf(org.orgId, 'member.role_changed');
    expect(promoted).toMatchObject({
      actor_type: 'system',
      actor_id: null,
      subject_id: member.id,
      data: { from: 'member', to: 'admin', origin: null },
    });

    const browser = await DashboardBrowser.signIn(suite.url, member.email);
    const link = await resetLink(org.orgId, member.email);
    expect((await fetch(link)).status).toBe(200);
    const set = await runCli(
      suite.env.env,
      ['users', 'set-password', '--org', org.orgId, '--email', member.email, '--json'],
      `${NEW_PASSWORD}\n`,
    );
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toMatchObject({ ended_sessions: 1 });
    expect(await signedIn(browser)).toBe(false);
    // The link made before the new password no longer works: it could set another one.
    expect((await fetch(link)).status).toBe(410);
    const [event] = await eventsOf(org.orgId, 'member.password_set');
    expect(event).toMatchObject({
      actor_type: 'system',
      actor_id: null,
      subject_id: member.id,
      data: { ended_sessions: '1', origin: null },
    });
    await DashboardBrowser.signIn(suite.url, member.email, NEW_PASSWORD);
  });

  it('the operator adding a member is in Activity with the role', async () => {
    const org = await newOrg();
    const member = await addMember(org.orgId, 'admin');
    const [added] = await eventsOf(org.orgId, 'member.added');
    expect(added).toMatchObject({ actor_type: 'system', subject_id: member.id, data: { object: { email: member.email, role: 'admin' } } });
  });

  it('an admin resetting a member’s two-factor ends that member’s sessions', async () => {
    const org = await newOrg();
    const member = await addMember(org.orgId, 'member');
    await suite.db.kysely
      .insertInto('totp_factors')
      .values({
        user_id: member.id,
        secret_sealed: sealTotpSecret(SECRET, newTotpSecret()),
        created_at: nowIso(new Date()),
        confirmed_at: nowIso(new Date()),
        last_step: null,
      })
      .execute();
    // The member's session, opened before the reset (directly: the sign-in would ask for the code).
    const browser = new DashboardBrowser(suite.url);
    const opened = await openSession(suite.db.kysely, member.id, org.orgId, new Date(), { method: 'password+totp', origin: null });
    browser.jar.take(suite.url, new Response(null, { headers: { 'set-cookie': `od_session=${opened.token}; Path=/` } }));
    expect(await signedIn(browser)).toBe(true);

    const admin = await DashboardBrowser.signIn(suite.url, org.adminEmail);
    expect((await admin.submit(MEMBERS, `${MEMBERS}/${member.id}/reset-two-factor`)).status).toBe(303);
    expect(await signedIn(browser)).toBe(false);
    const [reset] = await eventsOf(org.orgId, 'member.two_factor_reset');
    expect(reset).toMatchObject({ actor_id: org.adminId, subject_id: member.id, data: { totp: 'true', ended_sessions: '1' } });
    expect(reset!.data.origin).toMatch(LOCAL_ORIGIN);
  });

  it('turning on two-factor ends your other sessions and rotates this one', async () => {
    const org = await newOrg();
    const member = await addMember(org.orgId, 'member');
    const here = await DashboardBrowser.signIn(suite.url, member.email);
    const there = await DashboardBrowser.signIn(suite.url, member.email);
    expect((await here.submit(TWO_FACTOR, `${TWO_FACTOR}/setup`)).status).toBe(303);
    const page = await (await here.get(TWO_FACTOR)).text();
    const secret = /<code id="totp-secret">([A-Z2-7 ]+)<\/code>/.exec(page)![1]!.replace(/ /g, '');
    const before = here.cookie('od_session');
    const confirmed = await here.submit(TWO_FACTOR, `${TWO_FACTOR}/confirm`, { code: totpCode(secret) });
    expect(confirmed.status).toBe(200);
    expect(await confirmed.text()).toContain('Two-factor authentication is on.');
    expect(here.cookie('od_session')).not.toBe(before);
    expect(await signedIn(here)).toBe(true);
    expect(await signedIn(there)).toBe(false);
    const stale = new DashboardBrowser(suite.url, new CookieJar());
    stale.jar.take(suite.url, new Response(null, { headers: { 'set-cookie': `od_session=${before}; Path=/` } }));
    expect(await signedIn(stale)).toBe(false);
  });

  it('a password changed on the account page or through a reset link kills every open reset link and every other session', async () => {
    const org = await newOrg();
    const member = await addMember(org.orgId, 'member');
    const here = await DashboardBrowser.signIn(suite.url, member.email);
    const there = await DashboardBrowser.signIn(suite.url, member.email);
    const link = await resetLink(org.orgId, member.email);
    const changed = await here.submit('/settings/account', '/settings/account/password', {
      current_password: PASSWORD,
      password: NEW_PASSWORD,
    });
    expect(changed.status).toBe(303);
    expect(await signedIn(here)).toBe(true);
    expect(await signedIn(there)).toBe(false);
    expect((await fetch(link)).status).toBe(410);

    const first = await resetLink(org.orgId, member.email);
    const second = await resetLink(org.orgId, member.email);
    const other = await DashboardBrowser.signIn(suite.url, member.email, NEW_PASSWORD);
    const jar = new CookieJar();
    const form = await jar.fetch(first);
    const done = await jar.fetch(first, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrfOf(await form.text()), password: 'yet another passphrase' }).toString(),
    });
    expect(done.status).toBe(200);
    expect(await signedIn(here)).toBe(false);
    expect(await signedIn(other)).toBe(false);
    expect((await fetch(second)).status).toBe(410);
  });
});
