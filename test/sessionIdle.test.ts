import { beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { nowIso, randomBase62 } from '../src/domain/ids.js';
import { DashboardBrowser } from './helpers/dashboardBrowser.js';
import { DIALECTS, SECRET } from './helpers/harness.js';
import { cli } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';
import { passwordSignIn } from './helpers/ssoServer.js';

const PASSWORD = 'correct horse battery';

/**
 * IDENTITY.md rule 14: a session not seen for SESSION_IDLE_MINUTES (default 720) ends, beside the
 * absolute SESSION_DAYS; the person goes back to sign-in with `next` kept. Against a real server
 * process with the default, the last request made to look long ago in the database.
 */
describe.each(DIALECTS)('idle sessions on %s', { timeout: 120_000 }, (dialect) => {
  const suite = suiteServer(dialect, {}, { publicUrl: true, migrate: true, database: true, stopWith: 'SIGTERM' });
  let email = '';
  let userId = '';

  beforeAll(async () => {
    email = `idle-${randomBase62(8).toLowerCase()}@example.com`;
    const made = await cli<{ user: { id: string } }>(suite.env.env, [
      'org',
      'create',
      '--name',
      'Idle Org',
      '--admin-email',
      email,
      '--admin-password',
      PASSWORD,
    ]);
    userId = made.user.id;
  }, 120_000);

  /** Makes the user's sessions look last seen `minutes` ago. */
  async function lastSeen(minutes: number) {
    await suite.db.kysely
      .updateTable('sessions')
      .set({ last_seen_at: nowIso(new Date(Date.now() - minutes * 60_000)) })
      .where('user_id', '=', userId)
      .execute();
  }
  const sessionCount = async () =>
    (await suite.db.kysely.selectFrom('sessions').select('id_hash').where('user_id', '=', userId).execute()).length;

  it('a session seen within SESSION_IDLE_MINUTES goes on, and is seen again', async () => {
    const browser = await DashboardBrowser.signIn(suite.url, email);
    await lastSeen(719);
    expect((await browser.get('/settings/account')).status).toBe(200);
    const row = await suite.db.kysely.selectFrom('sessions').select('last_seen_at').where('user_id', '=', userId).executeTakeFirstOrThrow();
    expect(Date.now() - Date.parse(row.last_seen_at!)).toBeLessThan(60_000);
    await suite.db.kysely.deleteFrom('sessions').where('user_id', '=', userId).execute();
  });

  it('a session idle for longer ends: the page goes to sign-in with next kept, and signing in comes back to it', async () => {
    const browser = await DashboardBrowser.signIn(suite.url, email);
    await lastSeen(722);
    const page = await browser.get('/settings/account?tab=sessions');
    expect(page.status).toBe(303);
    expect(page.headers.get('location')).toBe(`/login?next=${encodeURIComponent('/settings/account?tab=sessions')}`);
    expect(await sessionCount()).toBe(0);
    // Not revived by coming back with the same cookie later.
    expect((await browser.get('/contacts')).status).toBe(303);

    const login = await browser.get(page.headers.get('location')!);
    expect(login.status).toBe(200);
    // The sign-in form's own token (login CSRF, IDENTITY.md rule 18), from the page just loaded.
    const csrf = /name="_csrf" value="([^"]+)"/.exec(await login.text())?.[1] ?? '';
    const back = await browser.jar.fetch(`${suite.url}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrf, email, password: PASSWORD, next: '/settings/account?tab=sessions' }).toString(),
    });
    expect(back.status).toBe(303);
    expect(back.headers.get('location')).toBe('/settings/account?tab=sessions');
    await suite.db.kysely.deleteFrom('sessions').where('user_id', '=', userId).execute();
  });

  it('a form sent from an idle session changes nothing and goes to sign-in with the form’s page as next', async () => {
    const browser = await DashboardBrowser.signIn(suite.url, email);
    const page = await (await browser.get('/labels')).text();
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page)![1]!;
    await lastSeen(800);
    const sent = await browser.jar.fetch(`${suite.url}/labels`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', referer: `${suite.url}/labels` },
      body: new URLSearchParams({ _csrf: csrf, name: 'Not made' }).toString(),
    });
    expect(sent.status).toBe(303);
    expect(sent.headers.get('location')).toBe(`/login?next=${encodeURIComponent('/labels')}`);
    expect(await suite.db.kysely.selectFrom('labels').select('id').where('name', '=', 'Not made').execute()).toEqual([]);
    // A Referer of another site is not a place to come back to.
    const signedIn = await passwordSignIn(suite.url, email, PASSWORD);
    expect(signedIn.response.status).toBe(303);
    await lastSeen(800);
    const elsewhere = await signedIn.jar.fetch(`${suite.url}/labels`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', referer: 'https://evil.example/labels' },
      body: new URLSearchParams({ _csrf: 'x', name: 'Not made' }).toString(),
    });
    expect(elsewhere.headers.get('location')).toBe('/login');
  });
});

describe('SESSION_IDLE_MINUTES', () => {
  const load = (extra: Record<string, string>) => loadConfig({ SECRET_KEY: SECRET, DATA_DIR: '/tmp/orgdata-idle-config', ...extra });

  it('defaults to 720 and takes 5 minutes up to the absolute session lifetime (7 days)', () => {
    expect(load({}).sessionIdleMinutes).toBe(720);
    expect(load({ SESSION_IDLE_MINUTES: '30' }).sessionIdleMinutes).toBe(30);
    expect(load({ SESSION_IDLE_MINUTES: String(7 * 1440) }).sessionIdleMinutes).toBe(7 * 1440);
    for (const bad of ['4', String(7 * 1440 + 1), '0', 'ten', '-5']) {
      expect(() => load({ SESSION_IDLE_MINUTES: bad }), bad).toThrow(/SESSION_IDLE_MINUTES/);
    }
  });
});
