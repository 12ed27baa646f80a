import { describe, expect, it } from 'vitest';
import { nowIso, randomBase62 } from '../src/domain/ids.js';
import { csrfOf, DashboardBrowser } from './helpers/dashboardBrowser.js';
import { DIALECTS } from './helpers/harness.js';
import { CookieJar } from './helpers/oidcProvider.js';
import { cli } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';

const PASSWORD = 'correct horse battery';
const MEMBERS = '/settings/members';
const DEVELOPER = '/settings/developer';
const WEBHOOKS = '/settings/developer/webhooks';
const KEY_FORM = { name: 'Exfiltrate', scopes: 'contacts:read', expires: '30' };
const shownLink = (body: string) => /<code id="invite-link">\s*(http:\/\/[^<\s]+\/invite\/[A-Za-z0-9_-]{43})\s*<\/code>/.exec(body)?.[1];
const fresh = (name: string) => `${name}-${randomBase62(8).toLowerCase()}@example.com`;

/**
 * IDENTITY.md rule 11, "every grant of power steps up", against a real server process over HTTP:
 * once the session's last proof of identity is older than REAUTH_MINUTES, inviting an admin,
 * changing a role, removing a member, rolling a webhook secret or enabling an endpoint does
 * nothing and sends the person to /reauth, which brings them back to the form.
 */
describe.each(DIALECTS)('step-up on every grant of power on %s', { timeout: 120_000 }, (dialect) => {
  // No SMTP_URL: an invitation's link is shown to the admin who made it.
  const suite = suiteServer(
    dialect,
    { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_WORKER: 'false' },
    { publicUrl: true, migrate: true, database: true, stopWith: 'SIGTERM' },
  );

  async function newOrg(): Promise<{ orgId: string; adminEmail: string; adminId: string }> {
    const adminEmail = fresh('admin');
    const made = await cli<{ org: { id: string }; user: { id: string } }>(suite.env.env, [
      'org',
      'create',
      '--name',
      'Step-up Org',
      '--admin-email',
      adminEmail,
      '--admin-password',
      PASSWORD,
    ]);
    return { orgId: made.org.id, adminEmail, adminId: made.user.id };
  }

  /** Makes every session of a user look last authenticated `minutes` ago. */
  async function age(userId: string, minutes: number) {
    await suite.db.kysely
      .updateTable('sessions')
      .set({ authenticated_at: nowIso(new Date(Date.now() - minutes * 60_000)) })
      .where('user_id', '=', userId)
      .execute();
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

  const count = async (table: 'api_keys' | 'invitations', orgId: string) =>
    (await suite.db.kysely.selectFrom(table).select('id').where('org_id', '=', orgId).execute()).length;

  const roleOf = async (orgId: string, userId: string) =>
    (
      await suite.db.kysely
        .selectFrom('memberships')
        .select('role')
        .where('org_id', '=', orgId)
        .where('user_id', '=', userId)
        .executeTakeFirst()
    )?.role;

  it('the attack: a stale admin session invites an admin whose fresh session makes API keys; now it is sent to /reauth and nothing is made', async () => {
    const org = await newOrg();
    const admin = await DashboardBrowser.signIn(suite.url, org.adminEmail);
    await age(org.adminId, 11);

    const invited = await admin.submit(MEMBERS, MEMBERS, { email: fresh('intruder'), role: 'admin' });
    // What the attacker would do with the link shown: join as an admin and make a key.
    const link = invited.status === 200 ? shownLink(await invited.text()) : undefined;
    if (link) {
      const jar = new CookieJar();
      const form = await jar.fetch(link);
      const joined = await jar.fetch(link, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ _csrf: csrfOf(await form.text()), password: 'the intruder chose this' }).toString(),
      });
      expect(joined.status).toBe(303);
      const intruder = new DashboardBrowser(suite.url, jar);
      expect((await intruder.submit(DEVELOPER, `${DEVELOPER}/keys`, KEY_FORM)).status).toBe(200);
    }
    expect(await count('api_keys', org.orgId)).toBe(0);
    expect(await count('invitations', org.orgId)).toBe(0);
    expect(invited.status).toBe(303);
    expect(invited.headers.get('location')).toBe(`/reauth?next=${encodeURIComponent(MEMBERS)}`);

    // After re-authenticating the person is back on the form, and the invitation goes through.
    await admin.get(invited.headers.get('location')!);
    const back = await admin.submit(invited.headers.get('location')!, '/reauth', { password: PASSWORD, next: MEMBERS });
    expect(back.status).toBe(303);
    expect(back.headers.get('location')).toBe(MEMBERS);
    const again = await admin.submit(MEMBERS, MEMBERS, { email: fresh('colleague'), role: 'admin' });
    expect(again.status).toBe(200);
    expect(shownLink(await again.text())).toBeDefined();
    expect(await count('invitations', org.orgId)).toBe(1);
  });

  it('every invitation widens who reaches the data: a member invitation and its resend are asked for too; revoking is not', async () => {
    const org = await newOrg();
    const admin = await DashboardBrowser.signIn(suite.url, org.adminEmail);
    const made = await admin.submit(MEMBERS, MEMBERS, { email: fresh('future-admin'), role: 'admin' });
    expect(made.status).toBe(200);
    await age(org.adminId, 11);
    const stale = await admin.submit(MEMBERS, MEMBERS, { email: fresh('reader'), role: 'member' });
    expect(stale.status).toBe(303);
    expect(stale.headers.get('location')).toBe(`/reauth?next=${encodeURIComponent(MEMBERS)}`);
    expect((await suite.db.kysely.selectFrom('invitations').select('id').where('org_id', '=', org.orgId).execute()).length).toBe(1);
    await age(org.adminId, 0);
    expect((await admin.submit(MEMBERS, MEMBERS, { email: fresh('reader'), role: 'member' })).status).toBe(200);
    await age(org.adminId, 11);
    const rows = await suite.db.kysely
      .selectFrom('invitations')
      .select(['id', 'role', 'token_hash'])
      .where('org_id', '=', org.orgId)
      .execute();
    const adminInvite = rows.find((r) => r.role === 'admin')!;
    const memberInvite = rows.find((r) => r.role === 'member')!;

    const resent = await admin.submit(MEMBERS, `${MEMBERS}/invitations/${adminInvite.id}/resend`);
    expect(resent.status).toBe(303);
    expect(resent.headers.get('location')).toBe(`/reauth?next=${encodeURIComponent(MEMBERS)}`);
    const after = await suite.db.kysely
      .selectFrom('invitations')
      .select('token_hash')
      .where('id', '=', adminInvite.id)
      .executeTakeFirstOrThrow();
    expect(after.token_hash).toBe(adminInvite.token_hash);
    const memberResend = await admin.submit(MEMBERS, `${MEMBERS}/invitations/${memberInvite.id}/resend`);
    expect(memberResend.status).toBe(303);
    expect(memberResend.headers.get('location')).toBe(`/reauth?next=${encodeURIComponent(MEMBERS)}`);
    // Revoking takes power away: not asked.
    expect((await admin.submit(MEMBERS, `${MEMBERS}/invitations/${adminInvite.id}/revoke`)).status).toBe(303);
    expect(
      (await suite.db.kysely.selectFrom('invitations').select('revoked_at').where('id', '=', adminInvite.id).executeTakeFirstOrThrow())
        .revoked_at,
    ).not.toBeNull();
  });

  it('changing a role and removing a member are asked for when stale, and done after re-authenticating', async () => {
    const org = await newOrg();
    const member = await addMember(org.orgId, 'member');
    const other = await addMember(org.orgId, 'admin');
    const admin = await DashboardBrowser.signIn(suite.url, org.adminEmail);
    await age(org.adminId, 11);
    const reauth = `/reauth?next=${encodeURIComponent(MEMBERS)}`;

    const promote = await admin.submit(MEMBERS, `${MEMBERS}/role`, { email: member.email, role: 'admin' });
    expect(promote.status).toBe(303);
    expect(promote.headers.get('location')).toBe(reauth);
    expect(await roleOf(org.orgId, member.id)).toBe('member');
    const demote = await admin.submit(MEMBERS, `${MEMBERS}/role`, { email: other.email, role: 'member', confirm: 'yes' });
    expect(demote.headers.get('location')).toBe(reauth);
    expect(await roleOf(org.orgId, other.id)).toBe('admin');
    const remove = await admin.submit(MEMBERS, `${MEMBERS}/remove`, { email: member.email, confirm: 'yes' });
    expect(remove.headers.get('location')).toBe(reauth);
    expect(await roleOf(org.orgId, member.id)).toBe('member');

    expect((await admin.submit(reauth, '/reauth', { password: PASSWORD, next: MEMBERS })).headers.get('location')).toBe(MEMBERS);
    expect((await admin.submit(MEMBERS, `${MEMBERS}/role`, { email: member.email, role: 'admin' })).status).toBe(303);
    expect(await roleOf(org.orgId, member.id)).toBe('admin');
    expect((await admin.submit(MEMBERS, `${MEMBERS}/remove`, { email: other.email, confirm: 'yes' })).status).toBe(303);
    expect(await roleOf(org.orgId, other.id)).toBeUndefined();
  });

  it('rolling a webhook secret and enabling an endpoint are asked for when stale; disabling is not', async () => {
    const org = await newOrg();
    const made = await cli<{ id: string; secret: string }>(suite.env.env, [
      'webhooks',
      'create',
      '--org',
      org.orgId,
      '--url',
      'http://127.0.0.1:9/hook',
    ]);
    const admin = await DashboardBrowser.signIn(suite.url, org.adminEmail);
    await age(org.adminId, 11);
    const detail = `${WEBHOOKS}/${made.id}`;
    const secretsOf = async () =>
      (await suite.db.kysely.selectFrom('webhook_endpoints').selectAll().where('id', '=', made.id).executeTakeFirstOrThrow()) as Record<
        string,
        unknown
      >;
    const before = await secretsOf();

    const roll = await admin.submit(`${detail}/roll`, `${detail}/roll`);
    expect(roll.status).toBe(303);
    expect(roll.headers.get('location')).toBe(`/reauth?next=${encodeURIComponent(`${detail}/roll`)}`);
    expect(await secretsOf()).toEqual(before);

    expect((await admin.submit(detail, `${detail}/disable`)).status).toBe(303);
    expect((await secretsOf()).status).toBe('disabled');
    const enable = await admin.submit(detail, `${detail}/enable`);
    expect(enable.headers.get('location')).toBe(`/reauth?next=${encodeURIComponent(detail)}`);
    expect((await secretsOf()).status).toBe('disabled');

    const reauth = enable.headers.get('location')!;
    expect((await admin.submit(reauth, '/reauth', { password: PASSWORD, next: detail })).headers.get('location')).toBe(detail);
    expect((await admin.submit(detail, `${detail}/enable`)).status).toBe(303);
    expect((await secretsOf()).status).toBe('enabled');
    const rolled = await admin.submit(`${detail}/roll`, `${detail}/roll`);
    expect(rolled.status).toBe(200);
    expect(await rolled.text()).toContain('Your new signing secret');
  });
});
