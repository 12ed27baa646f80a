import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findSandbox } from '../src/domain/orgs/sandbox.js';
import { followRotation, signedIn, type DashboardUser } from './helpers/browserSession.js';
import { browserOf } from './helpers/identityFactors.js';
import { addMember, ALL_SCOPES, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

/**
 * A hostile review of test mode (issue 45, SANDBOX.md): each attack from the outside — another
 * organisation's admin, a plain member, an integrator holding only an od_test_ key, a cross-site
 * form — through HTTP, on both dialects. Names carry a marker of their mode: no answer of one mode
 * may hold the other's.
 */
const LIVE = 'Livewall';
const TEST = 'Testwall';
const MARK = { live: LIVE, test: TEST } as const;
type Mode = keyof typeof MARK;
const other = (mode: Mode): Mode => (mode === 'live' ? 'test' : 'live');

interface Seeded {
  key: string;
  contact: string;
  contact2: string;
  email: string;
  label: string;
  group: string;
  file: string;
  keyId: string;
}

describe.each(DIALECTS)('test mode under attack on %s', { timeout: 120_000 }, (dialect) => {
  let h: Harness;
  let org: Org;
  let admin: DashboardUser;
  let sandboxId: string;
  const seeded = {} as Record<Mode, Seeded>;

  async function seed(mode: Mode): Promise<Seeded> {
    const mark = MARK[mode];
    const key = await org.key(ALL_SCOPES, { mode });
    const post = async (url: string, body: unknown) => {
      const res = await h.call(key, 'POST', url, body);
      expect(res.statusCode, res.body).toBe(201);
      return res.json() as Record<string, unknown> & { id: string };
    };
    const email = `ada-${mark.toLowerCase()}@example.com`;
    const contact = await post('/api/v1/contacts', { first_name: `Ada ${mark}`, email, external_id: 'crm-1' });
    const contact2 = await post('/api/v1/contacts', { first_name: `Bob ${mark}`, email: `bob-${mark.toLowerCase()}@example.com` });
    const label = await post('/api/v1/contacts/labels', { name: `label ${mark}` });
    const group = await post('/api/v1/groups', { name: `group ${mark}` });
    const file = await post('/api/v1/files', { name: `file-${mark}.txt`, content_type: 'text/plain', size: 5 });
    const put = await h.app.inject({
      method: 'PUT',
      url: new URL(String(file.upload_url)).pathname,
      payload: mode === 'live' ? 'LIVE!' : 'test!',
    });
    expect(put.statusCode, put.body).toBeLessThan(300);
    const keyRow = await h.db.kysely
      .selectFrom('api_keys')
      .select('id')
      .where('org_id', '=', mode === 'live' ? org.orgId : (await findSandbox(h.db.kysely, org.orgId))!)
      .executeTakeFirstOrThrow();
    return { key, contact: contact.id, contact2: contact2.id, email, label: label.id, group: group.id, file: file.id, keyId: keyRow.id };
  }

  beforeAll(async () => {
    h = await makeHarness(dialect, { env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_WORKER: 'false' } });
    org = await h.newOrg('Wall Org');
    admin = await signedIn(h, org.adminEmail);
    seeded.live = await seed('live');
    seeded.test = await seed('test');
    sandboxId = (await findSandbox(h.db.kysely, org.orgId))!;
  });
  afterAll(() => h?.close());

  const db = () => h.db.kysely;
  const labelsOf = async (contactId: string) =>
    (await db().selectFrom('contact_labels').select('label_id').where('contact_id', '=', contactId).execute()).map((r) => r.label_id);
  const groupsOf = async (contactId: string) =>
    (await db().selectFrom('group_members').select('group_id').where('contact_id', '=', contactId).execute()).map((r) => r.group_id);
  const membersOf = async (groupId: string) =>
    (await db().selectFrom('group_members').select('contact_id').where('group_id', '=', groupId).execute()).map((r) => r.contact_id);

  describe('(b/d) dashboard forms: an id of the other mode in the body of a form on one of the own mode', () => {
    for (const mode of ['test', 'live'] as const) {
      it(`in ${mode} mode, no own contact gets the other mode's label or group, and no own group gets the other mode's contact`, async () => {
        await admin.post('/test-mode', { mode });
        const own = seeded[mode];
        const foreign = seeded[other(mode)];
        const attempts: [string, Record<string, string | string[]>][] = [
          [`/contacts/${own.contact}/labels`, { label_id: foreign.label }],
          [`/contacts/${own.contact}/groups`, { group_id: foreign.group }],
          [`/groups/${own.group}/members`, { contact_ids: [foreign.contact] }],
          ['/contacts/bulk', { action: 'add_label', ids: [own.contact], bulk_label_id: foreign.label }],
          ['/contacts/bulk', { action: 'add_to_group', ids: [own.contact], group_id: foreign.group }],
          ['/contacts/bulk', { action: 'add_label', ids: [foreign.contact], bulk_label_id: own.label }],
          ['/contacts/bulk', { action: 'add_to_group', ids: [foreign.contact], group_id: own.group }],
          ['/contacts/bulk', { action: 'delete', ids: [foreign.contact], confirmed: 'yes' }],
          ['/contacts', { first_name: `Eve ${MARK[mode]}`, email: `eve-${mode}@example.com`, label_ids: [foreign.label] }],
          [`/contacts/${own.contact}`, { first_name: `Ada ${MARK[mode]}`, email: own.email, label_ids: [foreign.label] }],
        ];
        for (const [url, fields] of attempts) {
          const res = await admin.post(url, fields);
          expect(res.statusCode, `${mode}: POST ${url} ${JSON.stringify(fields)} → ${res.body.slice(0, 300)}`).toBeLessThan(500);
          expect(res.body, url).not.toContain(MARK[other(mode)]);
        }
        expect(await labelsOf(own.contact)).not.toContain(foreign.label);
        expect(await groupsOf(own.contact)).not.toContain(foreign.group);
        expect(await membersOf(own.group)).not.toContain(foreign.contact);
        expect(await labelsOf(foreign.contact)).not.toContain(own.label);
        expect(await groupsOf(foreign.contact)).not.toContain(own.group);
        expect(await db().selectFrom('contacts').select('id').where('id', '=', foreign.contact).executeTakeFirst()).toBeDefined();
        const eve = await db().selectFrom('contacts').select('id').where('email', '=', `eve-${mode}@example.com`).executeTakeFirst();
        if (eve) expect(await labelsOf(eve.id)).not.toContain(foreign.label);
      });
    }
    it('leaves the two modes as seeded', async () => {
      await admin.post('/test-mode', { mode: 'live' });
      for (const mode of ['live', 'test'] as const) {
        const ids = seeded[mode];
        const row = await db()
          .selectFrom('contacts')
          .select(['org_id', 'first_name'])
          .where('id', '=', ids.contact)
          .executeTakeFirstOrThrow();
        expect(row.first_name).toBe(`Ada ${MARK[mode]}`);
        expect(row.org_id).toBe(mode === 'live' ? org.orgId : sandboxId);
      }
    });
  });

  describe('(b) downloads, exports and filters of one mode never carry the other', () => {
    for (const mode of ['test', 'live'] as const) {
      it(`in ${mode} mode: a download of the other mode's file is 404; CSV export, Activity and Logs filtered by the other mode's ids are empty of it`, async () => {
        await admin.post('/test-mode', { mode });
        const own = seeded[mode];
        const foreign = seeded[other(mode)];
        const mine = await admin.get(`/files/${own.file}/download`);
        expect(mine.statusCode).toBe(303);
        const theirs = await admin.get(`/files/${foreign.file}/download`);
        expect(theirs.statusCode, theirs.body).toBe(404);
        expect(theirs.headers.location).toBeUndefined();
        expect((await admin.get(`/files/${foreign.file}/delete`)).statusCode).toBe(404);

        const csv = await admin.get('/contacts/export.csv');
        expect(csv.statusCode).toBe(200);
        expect(csv.body).toContain(MARK[mode]);
        expect(csv.body).not.toContain(MARK[other(mode)]);
        const filtered = await admin.get(`/contacts/export.csv?label_id=${foreign.label}`);
        expect(filtered.statusCode).toBeLessThan(500);
        expect(filtered.body).not.toContain(MARK[other(mode)]);
        for (const url of [
          `/contacts?label_id=${foreign.label}`,
          `/contacts?q=${MARK[other(mode)]}`,
          `/activity?actor=${foreign.keyId}`,
          `/activity?q=${MARK[other(mode)]}`,
          `/activity?object=${foreign.contact}`,
          `/settings/developer/logs?key=${foreign.keyId}`,
          `/settings/developer/usage?key=${foreign.keyId}`,
          `/groups/${own.group}?q=${MARK[other(mode)]}`,
        ]) {
          const page = await admin.get(url);
          expect(page.statusCode, url).toBeLessThan(500);
          // (a search box echoes its own words: look for the other mode's records, not the marker)
          for (const name of [`Ada ${MARK[other(mode)]}`, `label ${MARK[other(mode)]}`, `group ${MARK[other(mode)]}`, foreign.email]) {
            expect(page.body, url).not.toContain(name);
          }
          expect(page.body, url).not.toContain(foreign.contact);
        }
      });
    }
  });

  it('(a/c) a 404 for the other mode\u2019s id reads exactly as one for an id that does not exist', async () => {
    const made = (id: string) => id.replace(/^([a-z]+_).*/, (_m, p: string) => `${p}${'0'.repeat(id.length - p.length)}`);
    for (const mode of ['test', 'live'] as const) {
      await admin.post('/test-mode', { mode });
      const foreign = seeded[other(mode)];
      for (const [kind, id, page] of [
        ['contacts', foreign.contact, ''],
        ['labels', foreign.label, '/delete'],
        ['groups', foreign.group, ''],
        ['files', foreign.file, '/delete'],
      ] as const) {
        const a = await admin.get(`/${kind}/${id}${page}`);
        const b = await admin.get(`/${kind}/${made(id)}${page}`);
        expect(a.statusCode, `/${kind}/${id}${page}`).toBe(404);
        expect(b.statusCode, `/${kind}/${made(id)}${page}`).toBe(404);
        expect(a.body.replaceAll(id, 'ID'), `/${kind}/${id}${page}`).toBe(b.body.replaceAll(made(id), 'ID'));
        // The API with the mode's own key.
        const path = kind === 'labels' ? `/api/v1/contacts/labels` : `/api/v1/${kind}`;
        const apiA = await h.call(seeded[mode].key, 'GET', `${path}/${id}`);
        const apiB = await h.call(seeded[mode].key, 'GET', `${path}/${made(id)}`);
        expect(apiA.statusCode).toBe(404);
        const strip = (body: string, x: string) => {
          const json = JSON.parse(body.replaceAll(x, 'ID')) as Record<string, unknown>;
          delete json.request_id;
          delete json.instance;
          return json;
        };
        expect(strip(apiA.body, id), `${path}/${id}`).toEqual(strip(apiB.body, made(id)));
      }
      const revokeA = await admin.post(`/settings/developer/keys/${foreign.keyId}/revoke`);
      const revokeB = await admin.post(`/settings/developer/keys/${made(foreign.keyId)}/revoke`);
      expect(revokeA.statusCode).toBe(404);
      expect(revokeA.body.replaceAll(foreign.keyId, 'ID')).toBe(revokeB.body.replaceAll(made(foreign.keyId), 'ID'));
    }
    await admin.post('/test-mode', { mode: 'live' });
  });

  describe('(c) an integrator holding only an od_test_ key', () => {
    it('cannot put a live label on a sandbox contact, or a live contact in a sandbox group, by an id in the body', async () => {
      const { key, contact, group } = seeded.test;
      const live = seeded.live;
      const attempts: [method: 'POST' | 'PATCH' | 'PUT', url: string, body: unknown][] = [
        ['POST', '/api/v1/contacts', { first_name: 'Mallory', email: 'mallory@example.com', label_ids: [live.label] }],
        ['PATCH', `/api/v1/contacts/${contact}`, { label_ids: [live.label] }],
        ['PUT', `/api/v1/contacts/${contact}/labels/${live.label}`, undefined],
        ['POST', `/api/v1/groups/${group}/members`, { contact_ids: [live.contact] }],
        [
          'POST',
          '/api/v1/contacts/batch',
          { mode: 'upsert', match_on: 'external_id', contacts: [{ external_id: 'crm-1', label_ids: [live.label] }] },
        ],
        [
          'POST',
          '/api/v1/contacts/batch',
          { mode: 'upsert', match_on: 'email', contacts: [{ email: live.email, first_name: 'Hijacked' }] },
        ],
      ];
      for (const [method, url, body] of attempts) {
        const res = await h.call(key, method, url, body);
        expect(res.statusCode, `${method} ${url} → ${res.body.slice(0, 300)}`).toBeLessThan(500);
        expect(res.body).not.toContain(LIVE);
      }
      expect(await labelsOf(contact)).not.toContain(live.label);
      expect(await membersOf(group)).not.toContain(live.contact);
      const liveRow = await db().selectFrom('contacts').select(['first_name']).where('id', '=', live.contact).executeTakeFirstOrThrow();
      expect(liveRow.first_name).toBe(`Ada ${LIVE}`);
      // No contact of the live organisation was made or changed by the test key.
      expect((await db().selectFrom('contacts').select('id').where('org_id', '=', org.orgId).execute()).length).toBe(2);
      expect(
        await db()
          .selectFrom('contacts')
          .select('id')
          .where('email', '=', 'mallory@example.com')
          .where('org_id', '=', org.orgId)
          .executeTakeFirst(),
      ).toBeUndefined();
    });

    it('a filter naming a live label answers as one naming no label at all (no existence leak)', async () => {
      const { key } = seeded.test;
      const live = seeded.live.label;
      const none = `lbl_${'0'.repeat(live.length - 4)}`;
      const a = await h.call(key, 'GET', `/api/v1/contacts?label_id=${live}`);
      const b = await h.call(key, 'GET', `/api/v1/contacts?label_id=${none}`);
      expect(a.statusCode).toBe(b.statusCode);
      const strip = (body: string, x: string) => {
        const json = JSON.parse(body.replaceAll(x, 'ID')) as Record<string, unknown>;
        delete json.request_id;
        delete json.instance;
        return json;
      };
      expect(strip(a.body, live)).toEqual(strip(b.body, none));
      const events = await h.call(key, 'GET', `/api/v1/events?limit=100`);
      expect(events.body).not.toContain(LIVE);
      expect(events.body).not.toContain(seeded.live.contact);
    });

    it('a download link minted for a sandbox file gives its bytes only; the live file is 404 through every path', async () => {
      const { key, file } = seeded.test;
      const link = await h.call(key, 'GET', `/api/v1/files/${file}/download`);
      expect(link.statusCode, link.body).toBeLessThan(400);
      const url = String((link.json() as { url?: string }).url ?? link.headers.location);
      const bytes = await h.app.inject({ method: 'GET', url: new URL(url, 'http://x').pathname });
      expect(bytes.body).toBe('test!');
      expect((await h.call(key, 'GET', `/api/v1/files/${seeded.live.file}/download`)).statusCode).toBe(404);
      expect((await h.call(key, 'DELETE', `/api/v1/files/${seeded.live.file}`)).statusCode).toBe(404);
      // The API does not answer a session cookie (the dashboard's) either way.
      const withCookie = await h.app.inject({ method: 'GET', url: `/api/v1/files/${seeded.live.file}`, headers: { cookie: admin.cookie } });
      expect(withCookie.statusCode).toBe(401);
    });

    it('an od_test_ key opens no dashboard page, in either mode', async () => {
      for (const url of ['/', '/contacts', '/settings/developer', '/settings/developer/test-data']) {
        const res = await h.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${seeded.test.key}` } });
        expect(res.statusCode, url).toBe(401);
      }
    });
  });

  it('(b) a delivery of the other mode cannot be resent through an endpoint of the shown one, nor its log read', async () => {
    const hookOrg = await h.newOrg('Hook Wall');
    const hooker = await signedIn(h, hookOrg.adminEmail);
    const endpoints = {} as Record<Mode, string>;
    const deliveries = {} as Record<Mode, string>;
    for (const mode of ['live', 'test'] as const) {
      await hooker.post('/test-mode', { mode });
      const url = `http://127.0.0.1:9/hook-${MARK[mode]}`;
      expect((await hooker.post('/settings/developer/webhooks', { url, events: '*' })).statusCode).toBe(200);
      endpoints[mode] = (await db().selectFrom('webhook_endpoints').select('id').where('url', '=', url).executeTakeFirstOrThrow()).id;
      const key = await hookOrg.key(ALL_SCOPES, { mode });
      const made = await h.call(key, 'POST', '/api/v1/contacts', { first_name: `Hook ${MARK[mode]}`, email: `hook-${mode}@example.com` });
      expect(made.statusCode).toBe(201);
      const delivery = await db()
        .selectFrom('webhook_deliveries')
        .selectAll()
        .where('endpoint_id', '=', endpoints[mode])
        .executeTakeFirstOrThrow();
      deliveries[mode] = delivery.id;
      await db().updateTable('webhook_deliveries').set({ status: 'failed', attempts: 9 }).where('id', '=', delivery.id).execute();
    }
    for (const mode of ['test', 'live'] as const) {
      await hooker.post('/test-mode', { mode });
      const own = endpoints[mode];
      const foreign = deliveries[other(mode)];
      const res = await hooker.post(`/settings/developer/webhooks/${own}/deliveries/${foreign}/resend`);
      expect(res.statusCode, res.body.slice(0, 200)).toBe(404);
      const page = await hooker.get(`/settings/developer/webhooks/${own}`);
      expect(page.statusCode).toBe(200);
      expect(page.body).not.toContain(foreign);
      expect(page.body).not.toContain(`hook-${MARK[other(mode)]}`);
      const after = await db()
        .selectFrom('webhook_deliveries')
        .select(['status', 'attempts'])
        .where('id', '=', foreign)
        .executeTakeFirstOrThrow();
      expect(after).toEqual({ status: 'failed', attempts: 9 });
    }
    await hooker.post('/test-mode', { mode: 'live' });
  });

  describe('(a/b/d) the switch', () => {
    it('another organisation\u2019s admin in test mode sees their own sandbox only, and cannot touch this one', async () => {
      const outsider = await h.newOrg('Outsider Wall');
      const them = await signedIn(h, outsider.adminEmail);
      expect((await them.post('/test-mode', { mode: 'test' })).statusCode).toBe(303);
      const theirSandbox = await findSandbox(h.db.kysely, outsider.orgId);
      expect(theirSandbox).not.toBe(sandboxId);
      const t = seeded.test;
      for (const url of [`/contacts/${t.contact}`, `/labels/${t.label}`, `/groups/${t.group}`, `/files/${t.file}/download`]) {
        expect((await them.get(url)).statusCode, url).toBe(404);
      }
      for (const url of [`/contacts/${t.contact}/delete`, `/files/${t.file}/delete`, `/settings/developer/keys/${t.keyId}/revoke`]) {
        expect((await them.post(url)).statusCode, url).toBe(404);
      }
      for (const url of ['/', '/contacts', '/settings/developer', '/activity', '/settings/developer/logs']) {
        const page = (await them.get(url)).body;
        expect(page, url).not.toContain(TEST);
        expect(page, url).not.toContain(LIVE);
      }
      // A CSRF token of a session of this organisation's admin is not theirs.
      expect((await them.post('/test-mode', { mode: 'live' }, { csrf: admin.csrf })).statusCode).toBe(403);
      expect(await db().selectFrom('api_keys').select('revoked_at').where('id', '=', t.keyId).executeTakeFirstOrThrow()).toEqual({
        revoked_at: null,
      });
    });

    it('an admin demoted while in test mode loses the Developer pages and their test keys at once', async () => {
      const demoted = await addMember(h, org.orgId, 'admin');
      const browser = await signedIn(h, demoted.email);
      await browser.post('/test-mode', { mode: 'test' });
      const made = await browser.post('/settings/developer/keys', { name: 'soon gone', scopes: 'contacts:read', expires: '90' });
      expect(made.statusCode, made.body.slice(0, 300)).toBe(200);
      const key = /<code id="new-key">([^<]+)<\/code>/.exec(made.body)![1]!;
      expect(key.startsWith('od_test_')).toBe(true);
      expect((await h.call(key, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
      expect(
        (await admin.post('/settings/members/role', { email: demoted.email, role: 'member', confirm: 'yes' })).statusCode,
      ).toBeLessThan(400);
      expect((await db().selectFrom('memberships').select('role').where('user_id', '=', demoted.id).executeTakeFirstOrThrow()).role).toBe(
        'member',
      );
      expect((await browser.get('/settings/developer')).statusCode).toBe(403);
      expect((await browser.post('/settings/developer/test-data', { keys: '1' })).statusCode).toBe(403);
      expect((await h.call(key, 'GET', '/api/v1/contacts')).statusCode).toBe(401);
    });

    it('demoting an admin whose only keys are test keys warns that they will be revoked, as it does for live keys', async () => {
      const holder = await addMember(h, org.orgId, 'admin');
      const testOnly = await org.key(['contacts:read'], { mode: 'test', userId: holder.id });
      expect(testOnly.startsWith('od_test_')).toBe(true);
      const members = await admin.get('/settings/members');
      const row = members.body.slice(members.body.indexOf(holder.email));
      expect(/<td>(\d+)<\/td>/.exec(row)?.[1], 'the members list counts their test key').toBe('1');
      const asked = await admin.post('/settings/members/role', { email: holder.email, role: 'member' });
      expect(asked.statusCode, 'a confirmation page, not a silent revocation').toBe(200);
      expect(asked.body).toContain('revokes the 1 API key');
      expect((await h.call(testOnly, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
      const removal = await admin.post('/settings/members/remove', { email: holder.email });
      expect(removal.body).toContain('and revoke 1 API key');
    });

    it('a password change rotates the session without dropping it out of test mode behind the person\u2019s back', async () => {
      const person = await addMember(h, org.orgId, 'member');
      const browser = await signedIn(h, person.email);
      await browser.post('/test-mode', { mode: 'test' });
      const changed = await browser.post('/settings/account/password', {
        current_password: 'correct horse battery',
        password: 'a new horse battery staple',
      });
      expect(changed.statusCode, changed.body.slice(0, 300)).toBe(303);
      expect(followRotation(browser, changed)).toBe(true);
      const after = await browser.get('/contacts');
      expect(after.statusCode).toBe(200);
      expect(after.body).toContain('id="test-mode-banner"');
      expect(after.body).toContain(TEST);
      expect(after.body).not.toContain(`Ada ${LIVE}`);
    });

    it('no session can be switched into a sandbox as if it were an organisation (its own or another\u2019s)', async () => {
      const outsider = await h.newOrg('Switcher Wall');
      const them = await signedIn(h, outsider.adminEmail);
      await them.post('/test-mode', { mode: 'test' });
      const theirs = (await findSandbox(h.db.kysely, outsider.orgId))!;
      for (const target of [sandboxId, theirs, org.orgId]) {
        const res = await them.post('/orgs/switch', { org_id: target });
        expect(res.statusCode, target).toBe(403);
      }
      const row = await db().selectFrom('sessions').select(['org_id']).where('user_id', '=', outsider.adminId).executeTakeFirstOrThrow();
      expect(row.org_id).toBe(outsider.orgId);
      expect((await them.get('/contacts')).body).not.toContain(TEST);
    });

    it('redirects after a switch only to a page of this site, whatever the Referer says', async () => {
      const user = await signedIn(h, (await addMember(h, org.orgId, 'member')).email);
      for (const referer of [
        'https://evil.example/contacts',
        'http://localhost//evil.example/x',
        'http://localhost/\\evil.example',
        'http://localhost/%2F%2Fevil.example',
        'javascript:alert(1)',
      ]) {
        const res = await h.app.inject({
          method: 'POST',
          url: '/test-mode',
          headers: { cookie: user.cookie, 'content-type': 'application/x-www-form-urlencoded', referer, host: 'localhost' },
          payload: `_csrf=${encodeURIComponent(user.csrf)}&mode=test`,
        });
        expect(res.statusCode, referer).toBe(303);
        const location = String(res.headers.location);
        expect(location, referer).toMatch(/^\/(?![/\\])/);
      }
    });

    it('a plain member in test mode can neither make, list nor revoke keys, nor manage endpoints, nor reset', async () => {
      const user = await signedIn(h, (await addMember(h, org.orgId, 'member')).email);
      await user.post('/test-mode', { mode: 'test' });
      expect((await user.get('/settings/developer')).statusCode).toBe(403);
      expect((await user.post('/settings/developer/keys', { name: 'sneaky', scopes: 'contacts:read', expires: '90' })).statusCode).toBe(
        403,
      );
      expect((await user.post(`/settings/developer/keys/${seeded.test.keyId}/revoke`)).statusCode).toBe(403);
      expect((await user.post('/settings/developer/webhooks', { url: 'http://127.0.0.1:9/x', events: '*' })).statusCode).toBe(403);
      expect((await user.get('/settings/developer/test-data')).statusCode).toBe(403);
      expect((await user.post('/settings/developer/test-data', { keys: '1', endpoints: '1' })).statusCode).toBe(403);
      expect((await db().selectFrom('api_keys').select('id').where('name', '=', 'sneaky').execute()).length).toBe(0);
      expect((await db().selectFrom('contacts').select('id').where('org_id', '=', sandboxId).execute()).length).toBeGreaterThan(0);
    });

    it('a GET never switches, resets or changes anything', async () => {
      const user = await signedIn(h, org.adminEmail);
      for (const url of ['/test-mode', '/test-mode?mode=test', '/settings/developer/test-data?keys=1&endpoints=1', '/?mode=test']) {
        const res = await user.get(url);
        expect(res.statusCode, url).toBeLessThan(500);
      }
      expect((await user.get('/contacts')).body).not.toContain('id="test-mode-banner"');
      expect((await db().selectFrom('contacts').select('id').where('org_id', '=', sandboxId).execute()).length).toBeGreaterThan(0);
    });
  });

  describe('(a/b/d) Reset test data never touches live rows', () => {
    it('keeps every live row of the shared tables: files and bytes, idempotency keys, request log, usage, events', async () => {
      const resetOrg = await h.newOrg('Reset Wall');
      const liveKey = await resetOrg.key(ALL_SCOPES, { mode: 'live' });
      const testKey = await resetOrg.key(ALL_SCOPES, { mode: 'test' });
      const sandbox = (await findSandbox(h.db.kysely, resetOrg.orgId))!;
      // The same Idempotency-Key and the same external_id in both modes.
      for (const [key, name] of [
        [liveKey, 'Lina'],
        [testKey, 'Tess'],
      ] as const) {
        const made = await h.call(
          key,
          'POST',
          '/api/v1/contacts',
          { first_name: name, email: 'same@example.com', external_id: 'same' },
          { 'idempotency-key': 'same-key-123' },
        );
        expect(made.statusCode, made.body).toBe(201);
        const file = await h.call(key, 'POST', '/api/v1/files', { name: `${name}.txt`, content_type: 'text/plain', size: 4 });
        expect(file.statusCode).toBe(201);
        const put = await h.app.inject({
          method: 'PUT',
          url: new URL(String((file.json() as { upload_url: string }).upload_url)).pathname,
          payload: name,
        });
        expect(put.statusCode).toBeLessThan(300);
      }
      // The request log is written after each answer: wait for the live key's two requests.
      for (let i = 0; i < 100; i++) {
        const logged = await db().selectFrom('request_log').selectAll().where('org_id', '=', resetOrg.orgId).execute();
        if (logged.length >= 2) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const liveFile = await db()
        .selectFrom('files')
        .select(['id', 'storage_key'])
        .where('org_id', '=', resetOrg.orgId)
        .executeTakeFirstOrThrow();
      const count = async (
        table: 'files' | 'idempotency_keys' | 'request_log' | 'request_usage' | 'events' | 'contacts',
        orgId: string,
      ) => {
        const row = await db()
          .selectFrom(table)
          .select((eb) => eb.fn.countAll<string | number>().as('n'))
          .where('org_id', '=', orgId)
          .executeTakeFirstOrThrow();
        return Number(row.n);
      };
      const tables = ['files', 'idempotency_keys', 'request_log', 'request_usage', 'events', 'contacts'] as const;
      const before: Record<string, number> = {};
      for (const t of tables) before[t] = await count(t, resetOrg.orgId);
      expect(before.idempotency_keys).toBeGreaterThan(0);
      expect(before.files).toBe(1);

      const resetter = await signedIn(h, resetOrg.adminEmail);
      await resetter.post('/test-mode', { mode: 'test' });
      const done = await resetter.post('/settings/developer/test-data', { keys: '1', endpoints: '1' });
      expect(done.statusCode, done.body).toBe(303);
      expect(await count('contacts', sandbox)).toBe(0);
      expect(await count('files', sandbox)).toBe(0);
      for (const t of tables) {
        // Events: the live Activity gains the reset's own row, nothing else.
        expect(await count(t, resetOrg.orgId), t).toBe(before[t]! + (t === 'events' ? 1 : 0));
      }
      // The live file's bytes are still there, and no purge is queued for them.
      expect(
        await db().selectFrom('blob_purges').selectAll().where('storage_key', '=', liveFile.storage_key!).executeTakeFirst(),
      ).toBeUndefined();
      const link = await h.call(liveKey, 'GET', `/api/v1/files/${liveFile.id}/download`);
      const url = String((link.json() as { url?: string }).url ?? link.headers.location);
      expect((await h.app.inject({ method: 'GET', url: new URL(url, 'http://x').pathname })).body).toBe('Lina');
      // The live key still works, and its idempotency key still answers with the live contact.
      const again = await h.call(
        liveKey,
        'POST',
        '/api/v1/contacts',
        { first_name: 'Lina', email: 'same@example.com', external_id: 'same' },
        { 'idempotency-key': 'same-key-123' },
      );
      expect(again.statusCode).toBe(201);
      expect(again.body).toContain('Lina');
      // The test key is gone; the session stays in test mode on an empty sandbox.
      expect((await h.call(testKey, 'GET', '/api/v1/contacts')).statusCode).toBe(401);
      const empty = await resetter.get('/contacts');
      expect(empty.body).toContain('id="test-mode-banner"');
      expect(empty.body).not.toContain('Lina');
    });

    it('links minted before a reset (an upload not yet sent, a download) write and give nothing after it', async () => {
      const linkOrg = await h.newOrg('Links Wall');
      const testKey = await linkOrg.key(ALL_SCOPES, { mode: 'test' });
      const pending = (
        await h.call(testKey, 'POST', '/api/v1/files', { name: 'later.txt', content_type: 'text/plain', size: 5 })
      ).json() as {
        id: string;
        upload_url: string;
      };
      const done = (await h.call(testKey, 'POST', '/api/v1/files', { name: 'now.txt', content_type: 'text/plain', size: 5 })).json() as {
        id: string;
        upload_url: string;
      };
      expect((await h.app.inject({ method: 'PUT', url: new URL(done.upload_url).pathname, payload: 'bytes' })).statusCode).toBe(200);
      const link = await h.call(testKey, 'GET', `/api/v1/files/${done.id}/download`);
      const downloadUrl = new URL(String((link.json() as { url?: string }).url ?? link.headers.location), 'http://x').pathname;
      const keys = await db().selectFrom('files').select(['id', 'storage_key']).where('id', 'in', [pending.id, done.id]).execute();
      const blobPath = (key: string) => path.join(h.config.dataDir, 'files', 'blobs', key);

      const resetter = await signedIn(h, linkOrg.adminEmail);
      expect((await resetter.post('/settings/developer/test-data', {})).statusCode).toBe(303);
      const late = await h.app.inject({ method: 'PUT', url: new URL(pending.upload_url).pathname, payload: 'late!' });
      expect(late.statusCode, late.body).toBeGreaterThanOrEqual(400);
      expect(late.statusCode).toBeLessThan(500);
      const gone = await h.app.inject({ method: 'GET', url: downloadUrl });
      expect(gone.statusCode, gone.body).toBeGreaterThanOrEqual(400);
      expect(gone.body).not.toContain('bytes');
      for (const row of keys) if (row.storage_key) expect(existsSync(blobPath(row.storage_key)), row.id).toBe(false);
      expect(existsSync(blobPath(`test/${(await findSandbox(h.db.kysely, linkOrg.orgId))!}/${pending.id}`))).toBe(false);
    });

    it('a cross-site form (no token, the other session\u2019s token) resets nothing, even right after a re-authentication', async () => {
      const victimOrg = await h.newOrg('Victim Wall');
      const testKey = await victimOrg.key(ALL_SCOPES, { mode: 'test' });
      expect((await h.call(testKey, 'POST', '/api/v1/contacts', { first_name: 'Keep', email: 'keep@example.com' })).statusCode).toBe(201);
      const sandbox = (await findSandbox(h.db.kysely, victimOrg.orgId))!;
      const victim = await signedIn(h, victimOrg.adminEmail);
      const attacker = await h.newOrg('Attacker Wall');
      const them = await signedIn(h, attacker.adminEmail);
      const forged = [
        await victim.post('/settings/developer/test-data', { keys: '1' }, { csrf: null }),
        await victim.post('/settings/developer/test-data', { keys: '1' }, { csrf: them.csrf }),
        await h.app.inject({
          method: 'POST',
          url: '/settings/developer/test-data',
          headers: { cookie: victim.cookie, 'content-type': 'text/plain' },
          payload: `_csrf=${victim.csrf}&keys=1`,
        }),
      ];
      for (const res of forged) expect(res.statusCode, res.body.slice(0, 200)).toBeGreaterThanOrEqual(400);
      expect((await db().selectFrom('contacts').select('id').where('org_id', '=', sandbox).execute()).length).toBe(1);
      expect((await h.call(testKey, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    });
  });
});

describe.each(DIALECTS)('Reset test data with REAUTH_MINUTES=0 on %s', { timeout: 120_000 }, (dialect) => {
  let h: Harness;
  afterAll(() => h?.close());

  it('one re-authentication lets one reset through; the pass replayed resets nothing more', async () => {
    h = await makeHarness(dialect, { env: { REAUTH_MINUTES: '0' } });
    const org = await h.newOrg('Replay Wall');
    const testKey = await org.key(ALL_SCOPES, { mode: 'test' });
    const sandbox = (await findSandbox(h.db.kysely, org.orgId))!;
    const sandboxContacts = async () =>
      (await h.db.kysely.selectFrom('contacts').select('id').where('org_id', '=', sandbox).execute()).length;
    const add = async (n: number) =>
      expect((await h.call(testKey, 'POST', '/api/v1/contacts', { first_name: `R${n}`, email: `r${n}@example.com` })).statusCode).toBe(201);
    await add(1);
    const RESET = '/settings/developer/test-data';
    const admin = await browserOf(h, org.adminEmail);
    await admin.get(RESET);
    const asked = await admin.post(RESET, {});
    expect(asked.statusCode).toBe(303);
    expect(String(asked.headers.location)).toMatch(/^\/reauth\?next=/);
    expect(await sandboxContacts()).toBe(1);
    await admin.get(String(asked.headers.location));
    expect((await admin.post('/reauth', { password: 'correct horse battery', next: RESET })).statusCode).toBe(303);
    const pass = admin.cookies.get('od_reauth')!;
    expect(pass).toBeTruthy();
    await admin.get(RESET);
    const done = await admin.post(RESET, {});
    expect(done.statusCode).toBe(303);
    expect(done.headers.location).toBe(RESET);
    expect(await sandboxContacts()).toBe(0);
    // The same pass again (a replayed cookie): asked again, nothing deleted.
    await add(2);
    admin.cookies.set('od_reauth', pass);
    await admin.get(RESET);
    const replayed = await admin.post(RESET, {});
    expect(replayed.statusCode).toBe(303);
    expect(String(replayed.headers.location)).toMatch(/^\/reauth\?next=/);
    expect(await sandboxContacts()).toBe(1);
  });
});
