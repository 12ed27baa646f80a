import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findSandbox } from '../src/domain/orgs/sandbox.js';
import { signedIn, type DashboardUser } from './helpers/browserSession.js';
import { addMember, ALL_SCOPES, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

/** Markers in every name seeded: a page of one mode must never hold the other's. */
const LIVE = 'Livemark';
const TEST = 'Testmark';
const MARK = { live: LIVE, test: TEST } as const;
type Mode = keyof typeof MARK;
const other = (mode: Mode): Mode => (mode === 'live' ? 'test' : 'live');

interface Seeded {
  contact: string;
  label: string;
  group: string;
  file: string;
  endpoint: string;
  key: string;
  delivery: string | null;
}

/**
 * Every GET route the dashboard registers (Fastify's own route tree, so that a page added later is
 * checked too), with its parameters.
 */
function dashboardGetRoutes(h: Harness): string[] {
  const tree = h.app.printRoutes({ commonPrefix: false, method: 'GET' });
  const routes: string[] = [];
  const stack: { depth: number; path: string }[] = [];
  for (const line of tree.split('\n')) {
    const match = /^([│ ]*)(?:├── |└── )(\S+)/.exec(line);
    if (!match) continue;
    const depth = match[1]!.length;
    while (stack.length && stack.at(-1)!.depth >= depth) stack.pop();
    const path = (stack.at(-1)?.path ?? '') + match[2]!;
    stack.push({ depth, path });
    if (/\(GET/.test(line)) routes.push(path);
  }
  return routes;
}

/** Pages without a session, the API and the documentation: no mode. */
const OUTSIDE =
  /^\/(healthz|readyz|reauth|reset-password|downloads|docs|assets|api|favicon\.ico|forgot-password|login|invite|setup|sso)(\/|$)/;
/** Settings: the live organisation's in both modes (people and settings are shared). */
const SETTINGS = /^\/settings\/(members|account|security)(\/|$)/;
/** The data and Developer pages (SANDBOX.md): those whose org follows the session's mode. */
const DATA = /^\/($|contacts|labels|groups|files|import|activity|settings\/developer)(\/|$)/;
const isDataRoute = (route: string) => {
  if (DATA.test(route)) return true;
  if (OUTSIDE.test(route) || SETTINGS.test(route)) return false;
  throw new Error(`teach dashboardTestMode.test.ts whether ${route} shows data (test mode) or settings (live)`);
};

describe.each(DIALECTS)('dashboard test mode on %s', { timeout: 120_000 }, (dialect) => {
  let h: Harness;
  let org: Org;
  let admin: DashboardUser;
  let sandboxId: string;
  const seeded = {} as Record<Mode, Seeded>;

  async function seed(mode: Mode, key: string): Promise<Seeded> {
    const mark = MARK[mode];
    const call = async (method: 'POST', url: string, body: unknown) => {
      const res = await h.call(key, method, url, body);
      expect(res.statusCode, res.body).toBe(201);
      return res.json() as { id: string };
    };
    const contact = await call('POST', '/api/v1/contacts', { first_name: `Ada ${mark}`, email: `ada-${mark.toLowerCase()}@example.com` });
    const label = await call('POST', '/api/v1/contacts/labels', { name: `label ${mark}` });
    const group = await call('POST', '/api/v1/groups', { name: `group ${mark}` });
    await h.call(key, 'POST', `/api/v1/groups/${group.id}/members`, { contact_id: contact.id });
    const file = await call('POST', '/api/v1/files', { name: `file-${mark}.txt`, content_type: 'text/plain', size: 5 });
    // The endpoint is made in the dashboard, in the mode it shows.
    await admin.post('/test-mode', { mode });
    const made = await admin.post('/settings/developer/webhooks', { url: `http://127.0.0.1:9/hook-${mark}`, events: '*' });
    expect(made.statusCode, made.body).toBe(200);
    const endpoint = (
      await h.db.kysely
        .selectFrom('webhook_endpoints')
        .select('id')
        .where('url', '=', `http://127.0.0.1:9/hook-${mark}`)
        .executeTakeFirstOrThrow()
    ).id;
    const keyRow = await h.db.kysely
      .selectFrom('api_keys')
      .select('id')
      .where('org_id', '=', mode === 'live' ? org.orgId : sandboxId)
      .executeTakeFirstOrThrow();
    const delivery = await h.db.kysely.selectFrom('webhook_deliveries').select('id').where('endpoint_id', '=', endpoint).executeTakeFirst();
    return {
      contact: contact.id,
      label: label.id,
      group: group.id,
      file: file.id,
      endpoint,
      key: keyRow.id,
      delivery: delivery?.id ?? null,
    };
  }

  beforeAll(async () => {
    h = await makeHarness(dialect, { env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_WORKER: 'false', SANDBOX_DAILY_QUOTA: '777777' } });
    org = await h.newOrg(`Mode Org`);
    admin = await signedIn(h, org.adminEmail);
    const liveKey = await org.key(ALL_SCOPES, { mode: 'live' });
    const testKey = await org.key(ALL_SCOPES, { mode: 'test' });
    sandboxId = (await findSandbox(h.db.kysely, org.orgId))!;
    seeded.live = await seed('live', liveKey);
    seeded.test = await seed('test', testKey);
    // Requests of each key, for the request log and usage.
    await h.call(liveKey, 'GET', `/api/v1/contacts?q=${LIVE}`);
    await h.call(testKey, 'GET', `/api/v1/contacts?q=${TEST}`);
    await h.db.kysely
      .updateTable('api_keys')
      .set({ name: `key ${LIVE}` })
      .where('org_id', '=', org.orgId)
      .execute();
    await h.db.kysely
      .updateTable('api_keys')
      .set({ name: `key ${TEST}` })
      .where('org_id', '=', sandboxId)
      .execute();
    await admin.post('/test-mode', { mode: 'live' });
  });
  afterAll(() => h?.close());

  /** A route with its parameters filled with one mode's ids. */
  function fill(route: string, mode: Mode): string | null {
    const ids = seeded[mode];
    let path = route;
    const params: Record<string, string | null> = {
      '/contacts/:id': ids.contact,
      '/labels/:id': ids.label,
      '/groups/:id': ids.group,
      '/files/:id': ids.file,
      '/webhooks/:id': ids.endpoint,
      '/keys/:id': ids.key,
      '/members/:contactId': ids.contact,
      '/labels/:labelId': ids.label,
      '/deliveries/:deliveryId': ids.delivery,
    };
    for (const [pattern, value] of Object.entries(params)) {
      if (path.includes(pattern)) {
        if (value === null) return null;
        path = path.replace(pattern, pattern.replace(/:[A-Za-z]+/, value));
      }
    }
    if (path.includes(':')) throw new Error(`teach dashboardTestMode.test.ts the parameters of ${route}`);
    return path;
  }

  it('every data and Developer page shows only the mode of the session, and a record of the other mode is not found', async () => {
    const routes = dashboardGetRoutes(h).filter(isDataRoute);
    // The list is the app's own: it must hold the pages SANDBOX.md names.
    for (const page of [
      '/',
      '/contacts',
      '/labels',
      '/groups',
      '/files',
      '/import',
      '/activity',
      '/settings/developer',
      '/settings/developer/webhooks',
      '/settings/developer/logs',
      '/settings/developer/usage',
    ]) {
      expect(routes).toContain(page);
    }
    expect(routes.some((r) => r.startsWith('/contacts/:id'))).toBe(true);
    const checked: string[] = [];
    for (const mode of ['test', 'live'] as const) {
      const switched = await admin.post('/test-mode', { mode });
      expect(switched.statusCode).toBe(303);
      for (const route of routes) {
        const own = fill(route, mode);
        if (own === null) continue;
        const page = await admin.get(own);
        if (page.statusCode === 303 || route.endsWith('/download')) continue;
        expect(page.statusCode, `${mode} ${own}: ${page.body.slice(0, 300)}`).toBeLessThan(400);
        expect(page.body, `${mode} ${own} shows the other mode's data`).not.toContain(MARK[other(mode)]);
        checked.push(`${mode} ${own}`);
        const isPage = String(page.headers['content-type']).startsWith('text/html');
        if (mode === 'test' && isPage) expect(page.body, own).toContain('id="test-mode-banner"');
        else expect(page.body, own).not.toContain('id="test-mode-banner"');
        if (route.includes(':')) {
          const foreign = fill(route, other(mode));
          if (foreign === null) continue;
          const refused = await admin.get(foreign);
          expect(refused.statusCode, `${mode} ${foreign} (the other mode's id)`).toBe(404);
          expect(refused.body).not.toContain(MARK[other(mode)]);
        }
      }
    }
    // Each list page shows its own mode's records.
    for (const mode of ['test', 'live'] as const) {
      await admin.post('/test-mode', { mode });
      for (const page of [
        '/contacts',
        '/labels',
        '/groups',
        '/files',
        '/activity',
        '/settings/developer',
        '/settings/developer/webhooks',
        '/settings/developer/logs',
      ]) {
        expect((await admin.get(page)).body, `${mode} ${page}`).toContain(MARK[mode]);
      }
      // Activity's "Who" lists the organisation's people in both modes (they are shared).
      expect((await admin.get('/activity')).body, mode).toContain(`<optgroup label="People">`);
      // Usage: the sandbox's own daily quota (SANDBOX_DAILY_QUOTA).
      const usage = (await admin.get('/settings/developer/usage')).body;
      expect(usage).toContain(mode === 'test' ? 'of 777,777 requests today' : 'of 1,000,000 requests today');
    }
    expect(checked.length).toBeGreaterThan(30);
    await admin.post('/test-mode', { mode: 'live' });
  });

  it('refuses a form POST naming a record of the other mode: 404, nothing changed', async () => {
    for (const mode of ['test', 'live'] as const) {
      await admin.post('/test-mode', { mode });
      const foreign = seeded[other(mode)];
      const attempts: [string, Record<string, string>][] = [
        [`/contacts/${foreign.contact}`, { first_name: 'Hijacked', email: 'x@example.com' }],
        [`/contacts/${foreign.contact}/delete`, {}],
        [`/contacts/${foreign.contact}/labels`, { label_id: foreign.label }],
        [`/contacts/${foreign.contact}/groups`, { group_id: foreign.group }],
        [`/contacts/${foreign.contact}/labels/${foreign.label}/remove`, {}],
        [`/labels/${foreign.label}/rename`, { name: 'Hijacked' }],
        [`/labels/${foreign.label}/delete`, {}],
        [`/groups/${foreign.group}`, { name: 'Hijacked' }],
        [`/groups/${foreign.group}/delete`, {}],
        [`/groups/${foreign.group}/members`, { email: `ada-${MARK[other(mode)].toLowerCase()}@example.com` }],
        [`/groups/${foreign.group}/members/${foreign.contact}/remove`, {}],
        [`/files/${foreign.file}/delete`, {}],
        [`/settings/developer/webhooks/${foreign.endpoint}/delete`, {}],
        [`/settings/developer/webhooks/${foreign.endpoint}/disable`, {}],
        [`/settings/developer/webhooks/${foreign.endpoint}/enable`, {}],
        [`/settings/developer/webhooks/${foreign.endpoint}/roll`, {}],
        [`/settings/developer/webhooks/${foreign.endpoint}/test`, {}],
        [`/settings/developer/keys/${foreign.key}/revoke`, {}],
      ];
      for (const [url, fields] of attempts) {
        const res = await admin.post(url, fields);
        expect(res.statusCode, `${mode}: POST ${url} → ${res.statusCode} ${res.body.slice(0, 200)}`).toBe(404);
      }
      // Bulk actions name contacts in the body.
      const bulk = await admin.post('/contacts/bulk', { action: 'delete', ids: foreign.contact, confirmed: 'yes' });
      expect(bulk.statusCode).toBeLessThan(500);
    }
    await admin.post('/test-mode', { mode: 'live' });
    const db = h.db.kysely;
    for (const mode of ['live', 'test'] as const) {
      const ids = seeded[mode];
      const contact = await db.selectFrom('contacts').select(['first_name']).where('id', '=', ids.contact).executeTakeFirst();
      expect(contact?.first_name).toBe(`Ada ${MARK[mode]}`);
      expect(await db.selectFrom('contact_labels').select('contact_id').where('label_id', '=', ids.label).execute()).toEqual([]);
      expect((await db.selectFrom('labels').select('name').where('id', '=', ids.label).executeTakeFirst())?.name).toBe(
        `label ${MARK[mode]}`,
      );
      expect((await db.selectFrom('groups').select('name').where('id', '=', ids.group).executeTakeFirst())?.name).toBe(
        `group ${MARK[mode]}`,
      );
      expect(await db.selectFrom('files').select('id').where('id', '=', ids.file).executeTakeFirst()).toBeDefined();
      const endpoint = await db.selectFrom('webhook_endpoints').selectAll().where('id', '=', ids.endpoint).executeTakeFirst();
      expect(endpoint).toBeDefined();
      expect(endpoint!.disabled_reason).toBeNull();
      expect(endpoint!.previous_secret).toBeNull();
      expect((await db.selectFrom('api_keys').select('revoked_at').where('id', '=', ids.key).executeTakeFirst())?.revoked_at).toBeNull();
    }
  });

  it('makes od_test_ keys in test mode and od_live_ keys live, each listed in its own mode', async () => {
    for (const mode of ['test', 'live'] as const) {
      await admin.post('/test-mode', { mode });
      const made = await admin.post('/settings/developer/keys', { name: `made in ${mode}`, scopes: 'contacts:read', expires: '90' });
      expect(made.statusCode).toBe(200);
      const key = /<code id="new-key">([^<]+)<\/code>/.exec(made.body)![1]!;
      expect(key.startsWith(`od_${mode}_`)).toBe(true);
      const res = await h.call(key, 'GET', '/api/v1/contacts');
      expect(res.statusCode).toBe(200);
      expect(res.body).toContain(MARK[mode]);
      expect(res.body).not.toContain(MARK[other(mode)]);
      expect((await admin.get('/settings/developer')).body).toContain(`made in ${mode}`);
      expect((await admin.get('/settings/developer')).body).not.toContain(`made in ${other(mode)}`);
    }
    await admin.post('/test-mode', { mode: 'live' });
  });

  it('switches only by a same-site form: no GET, no query parameter, no other site, no bad value', async () => {
    const user = await signedIn(h, (await addMember(h, org.orgId, 'member')).email);
    // A link cannot switch: there is no GET, and a query parameter means nothing.
    expect([404, 405]).toContain((await user.get('/test-mode?mode=test')).statusCode);
    expect((await user.get('/contacts?mode=test')).body).not.toContain('id="test-mode-banner"');
    // Another site's form has no CSRF token (or a wrong one).
    expect((await user.post('/test-mode', { mode: 'test' }, { csrf: null })).statusCode).toBe(403);
    expect((await user.post('/test-mode', { mode: 'test' }, { csrf: 'x'.repeat(32) })).statusCode).toBe(403);
    expect((await user.get('/contacts')).body).not.toContain('id="test-mode-banner"');
    expect((await user.post('/test-mode', { mode: 'sideways' })).statusCode).toBe(400);
    // A member may switch (and sees the sandbox's contacts), which changes nobody else's view.
    const on = await user.post('/test-mode', { mode: 'test' });
    expect(on.statusCode).toBe(303);
    const contacts = (await user.get('/contacts')).body;
    expect(contacts).toContain('id="test-mode-banner"');
    expect(contacts).toContain(TEST);
    expect(contacts).not.toContain(LIVE);
    expect((await admin.get('/contacts')).body).toContain(LIVE);
    // Settings stay the live organisation's.
    expect((await user.get('/settings/account')).statusCode).toBe(200);
  });

  it('a member removed from the organisation loses test mode with the session; another organisation opens live', async () => {
    const member = await addMember(h, org.orgId, 'member');
    const user = await signedIn(h, member.email);
    await user.post('/test-mode', { mode: 'test' });
    expect((await user.get('/contacts')).body).toContain(TEST);
    await h.db.kysely.deleteFrom('memberships').where('org_id', '=', org.orgId).where('user_id', '=', member.id).execute();
    const after = await user.get('/contacts');
    expect(after.statusCode).toBe(303);
    expect(after.headers.location).toContain('/login');

    // Switching organisations ends test mode: the other organisation opens live, and its own sandbox is never the first one's.
    const second = await h.newOrg('Second Org');
    const both = await addMember(h, org.orgId, 'admin');
    await h.db.kysely
      .insertInto('memberships')
      .values({ org_id: second.orgId, user_id: both.id, role: 'admin', created_at: new Date().toISOString() })
      .execute();
    const browser = await signedIn(h, both.email);
    await browser.post('/test-mode', { mode: 'test' });
    expect((await browser.get('/contacts')).body).toContain(TEST);
    const moved = await browser.post('/orgs/switch', { org_id: second.orgId });
    expect(moved.statusCode).toBe(303);
    const there = (await browser.get('/contacts')).body;
    expect(there).not.toContain('id="test-mode-banner"');
    expect(there).not.toContain(TEST);
    expect(there).not.toContain(LIVE);
    await browser.post('/test-mode', { mode: 'test' });
    const secondSandbox = await findSandbox(h.db.kysely, second.orgId);
    expect(secondSandbox).not.toBe(sandboxId);
    const sandboxPage = (await browser.get('/contacts')).body;
    expect(sandboxPage).toContain('id="test-mode-banner"');
    expect(sandboxPage).not.toContain(TEST);
    expect(sandboxPage).not.toContain(LIVE);
  });

  describe('Reset test data', () => {
    const RESET = '/settings/developer/test-data';
    let resetOrg: Org;
    let resetSandboxId: string;
    const sandboxContacts = async () =>
      (await h.db.kysely.selectFrom('contacts').select('id').where('org_id', '=', resetSandboxId).execute()).length;
    const liveContacts = async () =>
      (await h.db.kysely.selectFrom('contacts').select('id').where('org_id', '=', resetOrg.orgId).execute()).length;
    const resets = async (orgId: string) =>
      h.db.kysely
        .selectFrom('events')
        .select(['actor_id', 'actor_type', 'data'])
        .where('org_id', '=', orgId)
        .where('type', '=', 'security.sandbox_reset')
        .execute();

    beforeAll(async () => {
      resetOrg = await h.newOrg('Reset Org');
      const testKey = await resetOrg.key(ALL_SCOPES, { mode: 'test' });
      const liveKey = await resetOrg.key(ALL_SCOPES, { mode: 'live' });
      resetSandboxId = (await findSandbox(h.db.kysely, resetOrg.orgId))!;
      for (const [key, name] of [
        [testKey, 'Sandy'],
        [liveKey, 'Livia'],
      ] as const) {
        expect(
          (await h.call(key, 'POST', '/api/v1/contacts', { first_name: name, email: `${name.toLowerCase()}@example.com` })).statusCode,
        ).toBe(201);
      }
    });

    it('is refused to a member, without a CSRF token, without a recent re-authentication, and reaches no other organisation', async () => {
      const member = await signedIn(h, (await addMember(h, resetOrg.orgId, 'member')).email);
      expect((await member.get(RESET)).statusCode).toBe(403);
      expect((await member.post(RESET, { keys: '1', endpoints: '1' })).statusCode).toBe(403);

      const admin2 = await addMember(h, resetOrg.orgId, 'admin');
      const resetter = await signedIn(h, admin2.email);
      // Another site's form: no token, or a wrong one.
      expect((await resetter.post(RESET, {}, { csrf: null })).statusCode).toBe(403);
      expect((await resetter.post(RESET, {}, { csrf: 'y'.repeat(32) })).statusCode).toBe(403);
      // A session whose last proof of identity is older than REAUTH_MINUTES is sent to /reauth first.
      await h.db.kysely
        .updateTable('sessions')
        .set({ authenticated_at: new Date(Date.now() - 3_600_000).toISOString() })
        .where('user_id', '=', admin2.id)
        .execute();
      const stale = await resetter.post(RESET, {});
      expect(stale.statusCode).toBe(303);
      expect(stale.headers.location).toMatch(/^\/reauth\?next=/);

      // Another organisation's admin resets their own sandbox only, whatever the form names.
      const outsider = await h.newOrg('Outsider Org');
      const outsiderAdmin = await signedIn(h, outsider.adminEmail);
      const theirs = await outsiderAdmin.post(RESET, { org_id: resetOrg.orgId, keys: '1' });
      expect(theirs.statusCode).toBe(303);
      expect(await sandboxContacts()).toBe(1);
      expect(await liveContacts()).toBe(1);
      expect(await resets(resetOrg.orgId)).toEqual([]);
      expect((await h.db.kysely.selectFrom('api_keys').select('id').where('org_id', '=', resetSandboxId).execute()).length).toBe(1);
    });

    it('an admin who signed in recently resets the sandbox only; the live Activity names them', async () => {
      const admin = await signedIn(h, resetOrg.adminEmail);
      const page = await admin.get(RESET);
      expect(page.statusCode).toBe(200);
      expect(page.body).toContain('name="keys"');
      expect(page.body).toContain('name="endpoints"');
      const done = await admin.post(RESET, { keys: '1' });
      expect(done.statusCode, done.body).toBe(303);
      expect(await sandboxContacts()).toBe(0);
      expect(await liveContacts()).toBe(1);
      expect((await h.db.kysely.selectFrom('api_keys').select('id').where('org_id', '=', resetSandboxId).execute()).length).toBe(0);
      expect((await h.db.kysely.selectFrom('api_keys').select('id').where('org_id', '=', resetOrg.orgId).execute()).length).toBe(1);
      const recorded = await resets(resetOrg.orgId);
      expect(recorded).toHaveLength(1);
      expect(recorded[0]).toMatchObject({ actor_type: 'user', actor_id: resetOrg.adminId });
      expect(JSON.parse(recorded[0]!.data)).toMatchObject({ contacts: '1', api_keys: '1' });
      const activity = (await admin.get('/activity?type=security.sandbox_reset')).body;
      expect(activity).toContain('security.sandbox_reset');
      expect(activity).toContain(resetOrg.adminEmail);
      const told = (done.cookies as { name: string; value: string }[]).find((c) => c.name === 'od_flash');
      expect(decodeURIComponent(told?.value ?? '')).toContain('Test data reset: 1 contact');
    });
  });
});
