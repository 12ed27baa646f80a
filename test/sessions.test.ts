import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedIn } from './helpers/browserSession.js';
import { addMember, DIALECTS, makeHarness, type Harness } from './helpers/harness.js';
import { enrolPasskey, enrolTotp, eventsOf, shortIdOf, signInOverHttp } from './helpers/identityFactors.js';
import { replaceRecoveryCodes } from '../src/domain/identity/totp.js';

const REVOKE = /action="\/settings\/account\/sessions\/([0-9a-f]{16})\/revoke"/g;

/**
 * Your sessions on /settings/account (listed, this one marked, revoke one, sign out everywhere
 * else) and an admin's Sign out everywhere / Reset two-factor on the Members page, with their
 * refusals: another person's session, a member, another organisation's user, a missing CSRF token.
 */
describe.each(DIALECTS)('sessions on %s', (dialect) => {
  let h: Harness;

  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(async () => {
    await h.close();
  });

  const alive = async (user: { get(url: string): Promise<{ statusCode: number }> }) => (await user.get('/contacts')).statusCode === 200;

  it('lists your sessions with when, where, which browser and how, this one marked and first', async () => {
    const org = await h.newOrg();
    const laptop = await signInOverHttp(h, org.adminEmail, { ip: '203.0.113.9', ua: 'Mozilla/5.0 (Macintosh)' });
    const phone = await signInOverHttp(h, org.adminEmail, { ip: '198.51.100.77', ua: 'Opera/9.80 (Android)' });
    const page = await laptop.get('/settings/account');
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('Your sessions');
    const rows = page.body.split('<tbody>')[1]!.split('</tbody>')[0]!.split('<tr').slice(1);
    expect(rows).toHaveLength(2);
    expect(rows[0]).toContain('This session');
    expect(rows[0]).toContain('203.0.113.0/24');
    expect(rows[0]).toContain('Mozilla');
    expect(rows[0]).toContain('Password');
    expect(rows[0]).not.toContain('/revoke');
    expect(rows[1]).toContain('198.51.100.0/24');
    expect(rows[1]).toContain('Opera');
    expect(rows[1]).toContain(`/settings/account/sessions/${phone.shortId}/revoke`);
    // Sessions are named by a short id, never by the cookie.
    expect(page.body).not.toContain(phone.token);
    expect(page.body).not.toContain(laptop.token);
    expect([...page.body.matchAll(REVOKE)].map((m) => m[1])).toEqual([phone.shortId]);
  });

  it('revokes one session: its cookie stops working, this one goes on; recorded in Activity', async () => {
    const org = await h.newOrg();
    const here = await signInOverHttp(h, org.adminEmail);
    const there = await signInOverHttp(h, org.adminEmail, { ip: '192.0.2.5' });
    expect((await here.post(`/settings/account/sessions/${there.shortId}/revoke`, {}, { csrf: null })).statusCode).toBe(403);
    expect(await alive(there)).toBe(true);
    const done = await here.post(`/settings/account/sessions/${there.shortId}/revoke`);
    expect(done.statusCode).toBe(303);
    expect(done.headers.location).toBe('/settings/account');
    const gone = await there.get('/contacts');
    expect(gone.statusCode).toBe(303);
    expect(gone.headers.location).toMatch(/^\/login/);
    expect(await alive(here)).toBe(true);
    // Revoked already: not found.
    expect((await here.post(`/settings/account/sessions/${there.shortId}/revoke`)).statusCode).toBe(404);
    const events = await eventsOf(h, org.orgId, 'member.session_revoked');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      actor_id: org.adminId,
      subject_id: org.adminId,
      data: { session: there.shortId, method: 'password' },
    });
    expect((await here.get('/activity?type=member.session_revoked')).body).toContain('<code>member.session_revoked</code>');
  });

  it("refuses another person's session id (404) and nothing is revoked; garbage ids too", async () => {
    const org = await h.newOrg();
    const other = await h.newOrg();
    const mine = await signInOverHttp(h, org.adminEmail);
    const colleague = await signInOverHttp(h, (await addMember(h, org.orgId, 'member')).email);
    const stranger = await signInOverHttp(h, other.adminEmail);
    for (const victim of [colleague, stranger]) {
      const res = await mine.post(`/settings/account/sessions/${victim.shortId}/revoke`);
      expect(res.statusCode).toBe(404);
      expect(await alive(victim)).toBe(true);
    }
    for (const id of ['zzzz', shortIdOf('x'.repeat(43)), colleague.token, `${colleague.shortId}00`]) {
      expect((await mine.post(`/settings/account/sessions/${encodeURIComponent(id)}/revoke`)).statusCode, id).toBe(404);
    }
    expect(await alive(colleague)).toBe(true);
    expect(await eventsOf(h, org.orgId, 'member.session_revoked')).toEqual([]);
  });

  it('signs out everywhere else: the other sessions end, this one goes on', async () => {
    const org = await h.newOrg();
    const here = await signInOverHttp(h, org.adminEmail);
    const others = [await signInOverHttp(h, org.adminEmail), await signedIn(h, org.adminEmail)];
    expect((await here.get('/settings/account')).body).toContain('action="/settings/account/sessions/revoke-others"');
    expect((await here.post('/settings/account/sessions/revoke-others', {}, { csrf: null })).statusCode).toBe(403);
    expect(await alive(others[0]!)).toBe(true);
    const done = await here.post('/settings/account/sessions/revoke-others');
    expect(done.statusCode).toBe(303);
    for (const other of others) expect(await alive(other)).toBe(false);
    expect(await alive(here)).toBe(true);
    const page = await here.get('/settings/account');
    expect([...page.body.matchAll(REVOKE)]).toEqual([]);
    expect(page.body).toContain('You are signed in nowhere else.');
    const events = await eventsOf(h, org.orgId, 'member.signed_out_everywhere');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ actor_id: org.adminId, data: { ended: '2', kept: 'current' } });
  });

  it("an admin signs a member out everywhere; a member, another organisation's admin and a form without CSRF cannot", async () => {
    const org = await h.newOrg();
    const other = await h.newOrg();
    const admin = await signedIn(h, org.adminEmail);
    const target = await addMember(h, org.orgId, 'member');
    const sessions = [await signInOverHttp(h, target.email), await signInOverHttp(h, target.email, { ip: '192.0.2.1' })];
    const peer = await signedIn(h, (await addMember(h, org.orgId, 'member')).email);
    const outsider = await signedIn(h, other.adminEmail);
    expect((await admin.get('/settings/members')).body).toContain(`action="/settings/members/${target.id}/sign-out"`);

    expect((await peer.post(`/settings/members/${target.id}/sign-out`)).statusCode).toBe(403);
    expect((await outsider.post(`/settings/members/${target.id}/sign-out`)).statusCode).toBe(404);
    expect((await admin.post(`/settings/members/${target.id}/sign-out`, {}, { csrf: null })).statusCode).toBe(403);
    expect((await admin.post(`/settings/members/usr_nobody/sign-out`)).statusCode).toBe(404);
    for (const s of sessions) expect(await alive(s)).toBe(true);

    const done = await admin.post(`/settings/members/${target.id}/sign-out`);
    expect(done.statusCode).toBe(303);
    expect(done.headers.location).toBe('/settings/members');
    for (const s of sessions) expect(await alive(s)).toBe(false);
    expect(await alive(admin)).toBe(true);
    const events = await eventsOf(h, org.orgId, 'member.signed_out_everywhere');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ actor_id: org.adminId, subject_id: target.id, data: { ended: '2', kept: 'none' } });
    expect(await eventsOf(h, other.orgId, 'member.signed_out_everywhere')).toEqual([]);
  });

  it("an admin resets a member's two-factor (TOTP, recovery codes, passkeys); refused to a member and to another organisation", async () => {
    const org = await h.newOrg();
    const other = await h.newOrg();
    const admin = await signedIn(h, org.adminEmail);
    const target = await addMember(h, org.orgId, 'member');
    await enrolTotp(h, target.id);
    await replaceRecoveryCodes(h.db.kysely, target.id, new Date());
    await enrolPasskey(h, target.id);
    const count = async (table: 'totp_factors' | 'recovery_codes' | 'passkeys') =>
      (await h.db.kysely.selectFrom(table).select('user_id').where('user_id', '=', target.id).execute()).length;

    const peer = await signedIn(h, (await addMember(h, org.orgId, 'member')).email);
    const outsider = await signedIn(h, other.adminEmail);
    expect((await peer.post(`/settings/members/${target.id}/reset-two-factor`)).statusCode).toBe(403);
    expect((await outsider.post(`/settings/members/${target.id}/reset-two-factor`)).statusCode).toBe(404);
    expect((await admin.post(`/settings/members/${target.id}/reset-two-factor`, {}, { csrf: null })).statusCode).toBe(403);
    expect([await count('totp_factors'), await count('recovery_codes'), await count('passkeys')]).toEqual([1, 10, 1]);

    const done = await admin.post(`/settings/members/${target.id}/reset-two-factor`);
    expect(done.statusCode).toBe(303);
    expect([await count('totp_factors'), await count('recovery_codes'), await count('passkeys')]).toEqual([0, 0, 0]);
    const events = await eventsOf(h, org.orgId, 'member.two_factor_reset');
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ actor_id: org.adminId, subject_id: target.id, data: { totp: 'true', passkeys: '1' } });
    expect((await admin.get('/activity?type=member.two_factor_reset')).body).toContain('<code>member.two_factor_reset</code>');
  });
});
