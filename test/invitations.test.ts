import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedIn, type DashboardUser } from './helpers/browserSession.js';
import { visitor } from './helpers/anonymousForms.js';
import { startMailCatcher, type MailCatcher } from './helpers/mailCatcher.js';
import { ALL_SCOPES, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { freePort } from './helpers/serverProcess.js';

const PASSWORD = 'correct horse battery';
const LINK = /http:\/\/orgdata\.test\/invite\/([A-Za-z0-9_-]{43})/;
const shownLink = (body: string) =>
  /<code id="invite-link">\s*(http:\/\/orgdata\.test\/invite\/[A-Za-z0-9_-]{43})\s*<\/code>/.exec(body)?.[1];
const pathOf = (url: string) => new URL(url).pathname;

/**
 * Invitations (IDENTITY.md): an admin invites, the person chooses their own password through the
 * link (mailed through a real SMTP server here, or shown to the admin without one), joins and is
 * signed in; the link works once, expires, and dies when revoked or resent.
 */
describe.each(DIALECTS)('invitations on %s', (dialect) => {
  let mail: MailCatcher;
  let h: Harness;
  let org: Org;
  let admin: DashboardUser;
  const fresh = (name: string) => `${name}-${Math.random().toString(36).slice(2, 10)}@example.com`;

  async function invite(email: string, role = 'member'): Promise<string> {
    const before = mail.to(email).length;
    const res = await admin.post('/settings/members', { email, role });
    expect(res.statusCode, res.body).toBe(303);
    const sent = await mail.waitFor(email, { skip: before });
    return pathOf(LINK.exec(sent.text)![0]);
  }

  beforeAll(async () => {
    mail = await startMailCatcher();
    h = await makeHarness(dialect, { env: { SMTP_URL: mail.url } });
    org = await h.newOrg('Invite Org');
    admin = await signedIn(h, org.adminEmail);
  });
  afterAll(async () => {
    await h.close();
    await mail.close();
  });

  it('mails a plain-text invitation; the person chooses a password, is signed in, and the link works once', async () => {
    const email = fresh('grace');
    const res = await admin.post('/settings/members', { email, role: 'admin' });
    expect(res.statusCode).toBe(303);
    expect(decodeURIComponent(String(res.headers['set-cookie']))).toContain(`Invited ${email}`);
    const sent = await mail.waitFor(email);
    expect(sent.parsed.from?.value[0]).toMatchObject({ name: 'orgdata', address: 'no-reply@orgdata.test' });
    expect(sent.html).toBe(false);
    expect(sent.subject).toContain('Invite Org');
    expect(sent.text).toContain(`${org.adminEmail} invited you to join Invite Org on orgdata as an admin`);
    expect(sent.text).toContain('7 days');
    const link = pathOf(LINK.exec(sent.text)![0]);

    // The admin's page lists it as pending, without the link.
    const members = await admin.get('/settings/members');
    expect(members.body).toContain(email);
    expect(members.body).not.toContain(link);

    const grace = visitor(h.app);
    const offer = await grace.get(link);
    expect(offer.statusCode).toBe(200);
    expect(offer.body).toContain('Join Invite Org on orgdata');
    expect(offer.body).toContain(email);
    expect(offer.body).toContain('as an admin');
    expect(offer.body).toContain('autocomplete="new-password"');
    expect((await grace.post(link, { password: 'short' })).statusCode).toBe(400);
    const same = await grace.post(link, { password: email.toUpperCase() });
    expect(same.statusCode).toBe(400);
    expect(same.body).toContain('must not be your email address');

    // A second tab with the same link open, for after it has been used.
    const otherTab = visitor(h.app);
    await otherTab.get(link);
    const joined = await grace.post(link, { password: PASSWORD });
    expect(joined.statusCode).toBe(303);
    expect(joined.headers.location).toBe('/contacts');
    const home = await grace.get('/contacts');
    expect(home.statusCode).toBe(200);
    expect(home.body).toContain(email);
    expect((await grace.get('/settings/members')).statusCode).toBe(200); // an admin, as invited

    // Used: the same 410 page, on GET and POST.
    for (const res of [await visitor(h.app).get(link), await otherTab.post(link, { password: PASSWORD })]) {
      expect(res.statusCode).toBe(410);
      expect(res.body).toContain('This invitation link no longer works');
      expect(res.body).toContain('Ask an admin of the organisation to send you a new invitation');
    }
    expect((await admin.get('/settings/members')).body).not.toContain('Expired');

    // Activity (admins): invited by the admin, joined by the person, each with its origin.
    const activity = await admin.get('/activity?type=member.*');
    expect(activity.body).toContain('member.invited');
    expect(activity.body).toContain('member.joined');
    expect(activity.body).toContain('198.51.100.0/24');
    // Not API events: a key reading everything sees none of them, and none is a webhook type.
    const key = await org.key(ALL_SCOPES);
    const events = (await h.call(key, 'GET', '/api/v1/events?limit=100')).json() as { data: { type: string }[] };
    expect(events.data.filter((e) => e.type.startsWith('member.'))).toEqual([]);
    expect((await h.call(key, 'GET', '/api/v1/events?type=member.joined')).statusCode).toBe(400);
  });

  it('answers 410 alike for an unknown, an expired and a revoked link; Resend kills the old link', async () => {
    const gone = async (link: string) => {
      const res = await visitor(h.app).get(link);
      expect(res.statusCode, link).toBe(410);
      return res.body;
    };
    const unknown = await gone(`/invite/${'A'.repeat(43)}`);
    expect(await gone('/invite/short')).toBe(unknown);

    const late = fresh('late');
    const lateLink = await invite(late);
    await h.db.kysely.updateTable('invitations').set({ expires_at: '2020-01-01T00:00:00.000Z' }).where('email', '=', late).execute();
    expect(await gone(lateLink)).toBe(unknown);
    expect((await admin.get('/settings/members')).body).toContain('Expired');

    const revoked = fresh('revoked');
    const revokedLink = await invite(revoked);
    const row = await h.db.kysely.selectFrom('invitations').select('id').where('email', '=', revoked).executeTakeFirstOrThrow();
    expect((await admin.post(`/settings/members/invitations/${row.id}/revoke`)).statusCode).toBe(303);
    expect(await gone(revokedLink)).toBe(unknown);
    expect((await admin.get('/settings/members')).body).not.toContain(revoked);

    const again = fresh('again');
    const first = await invite(again);
    const id = (await h.db.kysely.selectFrom('invitations').select('id').where('email', '=', again).executeTakeFirstOrThrow()).id;
    expect((await admin.post(`/settings/members/invitations/${id}/resend`)).statusCode).toBe(303);
    const second = pathOf(LINK.exec((await mail.waitFor(again, { skip: 1 })).text)![0]);
    expect(second).not.toBe(first);
    expect(await gone(first)).toBe(unknown);
    expect((await visitor(h.app).get(second)).statusCode).toBe(200);
    // The expired invitation can be resent too, and its new link works.
    const lateId = (await h.db.kysely.selectFrom('invitations').select('id').where('email', '=', late).executeTakeFirstOrThrow()).id;
    expect((await admin.post(`/settings/members/invitations/${lateId}/resend`)).statusCode).toBe(303);
    const renewed = pathOf(LINK.exec((await mail.waitFor(late, { skip: 1 })).text)![0]);
    expect((await visitor(h.app).get(renewed)).statusCode).toBe(200);
    const types = await h.db.kysely
      .selectFrom('events')
      .select('type')
      .where('org_id', '=', org.orgId)
      .where('resource', '=', 'member')
      .execute();
    expect(types.map((t) => t.type)).toEqual(expect.arrayContaining(['member.invitation_revoked', 'member.invitation_resent']));
  });

  it('refuses a second invitation of the same email, and of a member', async () => {
    const twice = fresh('twice');
    await invite(twice);
    const again = await admin.post('/settings/members', { email: twice, role: 'member' });
    expect(again.statusCode).toBe(400);
    expect(again.body).toContain('has a pending invitation already');
    const member = await admin.post('/settings/members', { email: org.adminEmail, role: 'member' });
    expect(member.statusCode).toBe(400);
    expect(member.body).toContain('is already a member');
  });

  it('asks someone who already has an account to sign in with it, and adds the membership once they have', async () => {
    const other = await h.newOrg('Other Org');
    const link = await invite(other.adminEmail);
    const ada = visitor(h.app, '198.51.100.77');
    const offer = await ada.get(link);
    expect(offer.body).toContain('You already have an orgdata account with this email');
    expect(offer.body).toContain('autocomplete="current-password"');
    const wrong = await ada.post(link, { password: 'not my password' });
    expect(wrong.statusCode).toBe(401);
    const memberships = () => h.db.kysely.selectFrom('memberships').select('org_id').where('user_id', '=', other.adminId).execute();
    expect(await memberships()).toHaveLength(1);
    const joined = await ada.post(link, { password: PASSWORD });
    expect(joined.statusCode).toBe(303);
    expect((await memberships()).map((m) => m.org_id).sort()).toEqual([org.orgId, other.orgId].sort());
    // Their password is their own, unchanged.
    expect((await signedIn(h, other.adminEmail, PASSWORD)).cookie).toMatch(/^od_session=/);
    expect((await ada.get('/contacts')).body).toContain('Invite Org');
  });

  it('refuses every new form without its CSRF token', async () => {
    const email = fresh('csrf');
    expect((await admin.post('/settings/members', { email, role: 'member' }, { csrf: null })).statusCode).toBe(403);
    const link = await invite(email);
    const id = (await h.db.kysely.selectFrom('invitations').select('id').where('email', '=', email).executeTakeFirstOrThrow()).id;
    for (const action of ['resend', 'revoke']) {
      expect((await admin.post(`/settings/members/invitations/${id}/${action}`, {}, { csrf: null })).statusCode).toBe(403);
    }
    const person = visitor(h.app);
    await person.get(link);
    expect((await person.post(link, { password: PASSWORD }, { csrf: null })).statusCode).toBe(403);
    expect((await person.post(link, { password: PASSWORD }, { csrf: 'x'.repeat(43) })).statusCode).toBe(403);
    // A token from another browser (another nonce cookie) is no good either.
    const stranger = visitor(h.app);
    const strangerPage = await stranger.get(link);
    const foreign = /name="_csrf" value="([^"]+)"/.exec(strangerPage.body)![1]!;
    expect((await person.post(link, { password: PASSWORD }, { csrf: foreign })).statusCode).toBe(403);
    expect((await visitor(h.app).get(link)).statusCode).toBe(200); // still unused
  });
});

describe.each(DIALECTS)('invitations without mail, and with the mail server down, on %s', (dialect) => {
  it('shows the link once to the admin who made it when there is no SMTP_URL', async () => {
    const h = await makeHarness(dialect);
    try {
      const org = await h.newOrg('No Mail Org');
      const admin = await signedIn(h, org.adminEmail);
      const res = await admin.post('/settings/members', { email: 'nomail@example.com', role: 'member' });
      expect(res.statusCode).toBe(200);
      expect(res.body).toContain('This orgdata does not send email');
      expect(res.body).toContain('data-copy="invite-link"');
      const link = shownLink(res.body)!;
      expect(link).toBeDefined();
      expect(String(res.headers['set-cookie'] ?? '')).not.toContain(link.split('/').pop());
      expect((await admin.get('/settings/members')).body).not.toContain(link);
      const person = visitor(h.app);
      await person.get(pathOf(link));
      expect((await person.post(pathOf(link), { password: PASSWORD })).statusCode).toBe(303);
    } finally {
      await h.close();
    }
  });

  it('keeps the invitation and shows the link when the mail server cannot be reached, within the deadline', async () => {
    const h = await makeHarness(dialect, { env: { SMTP_URL: `smtp://127.0.0.1:${await freePort()}` } });
    try {
      const org = await h.newOrg('Down Org');
      const admin = await signedIn(h, org.adminEmail);
      const started = Date.now();
      const res = await admin.post('/settings/members', { email: 'down@example.com', role: 'member' });
      expect(Date.now() - started).toBeLessThan(15_000);
      expect(res.statusCode).toBe(200);
      expect(res.body).toContain('The invitation is saved, but the email to down@example.com could not be sent');
      const link = shownLink(res.body)!;
      expect((await admin.get('/settings/members')).body).toContain('down@example.com');
      const id = (
        await h.db.kysely.selectFrom('invitations').select('id').where('email', '=', 'down@example.com').executeTakeFirstOrThrow()
      ).id;
      // Resend fails the same way and shows the new link; the first one died.
      const resent = await admin.post(`/settings/members/invitations/${id}/resend`);
      expect(resent.statusCode).toBe(200);
      const second = shownLink(resent.body)!;
      expect(second).not.toBe(link);
      expect((await visitor(h.app).get(pathOf(link))).statusCode).toBe(410);
      const person = visitor(h.app);
      expect((await person.get(pathOf(second))).statusCode).toBe(200);
      expect((await person.post(pathOf(second), { password: PASSWORD })).statusCode).toBe(303);
    } finally {
      await h.close();
    }
  });
});
