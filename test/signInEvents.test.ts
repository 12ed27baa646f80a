import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { visitor } from './helpers/anonymousForms.js';
import { signedIn } from './helpers/browserSession.js';
import { addMember, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { scrape, TOKEN, valueOf } from './helpers/metrics.js';

const PASSWORD = 'correct horse battery';

/**
 * Every sign-in is in Activity (IDENTITY.md, principle 5) with its method, a failure with its
 * reason, in every organisation the person belongs to (an unknown email in none), with the
 * approximate origin; and counted by method and result in /metrics.
 */
describe.each(DIALECTS)('sign-ins in Activity and /metrics on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let other: Org;

  beforeAll(async () => {
    h = await makeHarness(dialect, { env: { METRICS_TOKEN: TOKEN } });
    org = await h.newOrg('Sign-in Org');
    other = await h.newOrg('Second Org');
  });
  afterAll(() => h.close());

  const signIn = (email: string, password: string) => visitor(h.app, '203.0.113.77').post('/login', { email, password });

  it('records a successful and a failed password sign-in in each of the person’s organisations, and counts them', async () => {
    const before = await scrape(h);
    const ok = (name: string, result: string) => valueOf(before, 'orgdata_sign_ins_total', { method: name, result }) ?? 0;
    const person = await addMember(h, org.orgId, 'member');
    await h.db.kysely
      .insertInto('memberships')
      .values({ org_id: other.orgId, user_id: person.id, role: 'member', created_at: new Date().toISOString() })
      .execute();

    const good = await signIn(person.email, PASSWORD);
    expect(good.statusCode).toBe(303);
    const bad = await signIn(person.email, 'not the password');
    expect(bad.statusCode).toBe(401);
    const unknown = await signIn('nobody-at-all@example.com', 'whatever password');
    expect(unknown.statusCode).toBe(401);
    // The same page but for the email (and each browser's own form token).
    const untokened = (body: string) => body.replace(/name="_csrf" value="[^"]+"/g, 'name="_csrf"');
    expect(untokened(unknown.body)).toBe(untokened(bad.body).replace(person.email, 'nobody-at-all@example.com'));

    for (const o of [org, other]) {
      const admin = await signedIn(h, o.adminEmail);
      const page = (await admin.get('/activity?type=member.signed_in')).body;
      expect(page).toContain(person.email);
      expect(page).toContain('with password');
      expect(page).toContain('203.0.113.0/24');
      const failed = (await admin.get('/activity?type=member.sign_in_failed')).body;
      expect(failed).toContain(person.email);
      expect(failed).toContain('reason: wrong_password');
      // An unknown email belongs to no organisation: its failure is in none.
      expect(failed).not.toContain('nobody-at-all@example.com');
    }
    // Members do not see identity changes.
    const member = await signedIn(h, person.email);
    expect((await member.get('/activity')).body).not.toContain('member.sign_in_failed');

    const after = await scrape(h);
    expect(valueOf(after, 'orgdata_sign_ins_total', { method: 'password', result: 'succeeded' })).toBe(ok('password', 'succeeded') + 1);
    expect(valueOf(after, 'orgdata_sign_ins_total', { method: 'password', result: 'failed' })).toBe(ok('password', 'failed') + 2);
  });

  it('keeps how and from where each session was opened', async () => {
    const person = await addMember(h, org.orgId, 'member');
    const res = await visitor(h.app, '198.51.100.9').post('/login', { email: person.email, password: PASSWORD });
    expect(res.statusCode).toBe(303);
    const rows = await h.db.kysely.selectFrom('sessions').selectAll().where('user_id', '=', person.id).execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ method: 'password', origin: expect.stringContaining('198.51.100.0/24') });
    expect(rows[0]!.authenticated_at).toBe(rows[0]!.created_at);
  });
});
