import { afterAll, describe, expect, it } from 'vitest';
import { CookieJar } from './helpers/oidcProvider.js';
import { cli, serverEnv, startServerProcess, type ServerEnv, type ServerProcess } from './helpers/serverProcess.js';
import { DIALECTS } from './helpers/harness.js';

/**
 * Issue 43, item 5: the first admin without a shell. A server with no organisation prints a
 * one-time link, PUBLIC_URL/setup/TOKEN, at start and in its log; its page creates the first
 * organisation and its admin and signs the admin in; the link dies on use, and whenever an
 * organisation exists.
 */
const setupUrlIn = (output: string) => output.match(/https?:\/\/[^\s"]+\/setup\/[A-Za-z0-9_-]{43}/g) ?? [];

async function form(jar: CookieJar, url: string): Promise<{ status: number; csrf: string; body: string }> {
  const res = await jar.fetch(url);
  const body = await res.text();
  return { status: res.status, csrf: body.match(/name="_csrf" value="([^"]+)"/)?.[1] ?? '', body };
}

const submit = (jar: CookieJar, url: string, fields: Record<string, string>) =>
  jar.fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(url).origin },
    body: new URLSearchParams(fields).toString(),
  });

describe.each(DIALECTS)('the set-up link on %s', (dialect) => {
  const envs: ServerEnv[] = [];
  const servers: ServerProcess[] = [];
  afterAll(async () => {
    for (const server of servers) server.child.kill('SIGTERM');
    await Promise.all(servers.map((s) => s.exited));
    for (const env of envs) await env.dispose();
  });
  const start = async (env: ServerEnv) => {
    const server = await startServerProcess(env);
    servers.push(server);
    // The link is printed after listening: wait for it (or for the log line saying nothing).
    for (let i = 0; i < 50 && setupUrlIn(server.output()).length === 0; i++) await new Promise((r) => setTimeout(r, 100));
    return server;
  };

  it(
    'is printed and logged at start, creates the first organisation and admin once, signs the admin in, then answers 410',
    { timeout: 120_000 },
    async () => {
      const env = await serverEnv(dialect, { LOG_LEVEL: 'warn', PUBLIC_URL: '' });
      env.env.PUBLIC_URL = env.url;
      envs.push(env);
      const server = await start(env);
      const printed = setupUrlIn(server.output());
      // Once as text for the operator, once in the JSON log line.
      expect(printed.length).toBe(2);
      expect(new Set(printed).size).toBe(1);
      expect(server.output()).toMatch(/"setup_url":"http[^"]+\/setup\/[A-Za-z0-9_-]{43}"/);
      const link = printed[0]!;
      expect(link.startsWith(`${env.url}/setup/`)).toBe(true);

      // The sign-in page of the empty install says to use it.
      const login = await (await fetch(`${env.url}/login`)).text();
      expect(login).toContain('set-up link');

      // Unknown and altered tokens: the same 410 as a used one.
      expect((await fetch(`${env.url}/setup/${'A'.repeat(43)}`)).status).toBe(410);
      expect((await fetch(`${link.slice(0, -1)}${link.endsWith('A') ? 'B' : 'A'}`)).status).toBe(410);
      expect((await fetch(`${env.url}/setup/short`)).status).toBe(410);

      const jar = new CookieJar();
      const page = await form(jar, link);
      expect(page.status).toBe(200);
      expect(page.body).toContain('Set up orgdata');
      // No form token: refused, nothing made.
      expect(
        (await submit(new CookieJar(), link, { org_name: 'Acme', email: 'ada@example.com', password: 'correct horse battery' })).status,
      ).toBe(403);
      // Bad input: 400 with the fields named, the link still works.
      const bad = await submit(jar, link, { _csrf: page.csrf, org_name: '', email: 'not-an-email', password: 'short' });
      expect(bad.status).toBe(400);
      const badBody = await bad.text();
      expect(badBody).toMatch(/id="org_name-error"|org_name/);
      expect((await fetch(link)).status).toBe(200);

      // Two submissions at once: one creates, the other finds the link gone.
      const second = new CookieJar();
      const secondPage = await form(second, link);
      const [a, b] = await Promise.all([
        submit(jar, link, { _csrf: page.csrf, org_name: 'Acme', email: 'ada@example.com', password: 'correct horse battery' }),
        submit(second, link, { _csrf: secondPage.csrf, org_name: 'Evil', email: 'mallory@example.com', password: 'correct horse battery' }),
      ]);
      expect([a.status, b.status].sort()).toEqual([303, 410]);
      const [winner, winnerJar] = a.status === 303 ? [a, jar] : [b, second];
      expect(winner.headers.get('location')).toBe('/contacts');
      // Signed in as the new admin.
      const contacts = await winnerJar.fetch(`${env.url}/contacts`);
      expect(contacts.status).toBe(200);
      const members = await winnerJar.fetch(`${env.url}/settings/members`);
      expect(members.status).toBe(200);

      // One organisation, one admin; the link is dead for good.
      const orgs = await cli<{ id: string; name: string; admins: number }[]>(env.env, ['org', 'list']);
      expect(orgs.map((o) => [o.name, o.admins])).toEqual([[a.status === 303 ? 'Acme' : 'Evil', 1]]);
      expect((await fetch(link)).status).toBe(410);
      expect(
        (
          await submit(a.status === 303 ? second : jar, link, {
            _csrf: a.status === 303 ? secondPage.csrf : page.csrf,
            org_name: 'Again',
            email: 'x@example.com',
            password: 'correct horse battery',
          })
        ).status,
      ).toBe(410);

      // A restart with an organisation prints no link.
      server.child.kill('SIGTERM');
      await server.exited;
      const again = await startServerProcess(env);
      servers.push(again);
      await new Promise((r) => setTimeout(r, 500));
      expect(setupUrlIn(again.output())).toEqual([]);
      const login2 = await (await fetch(`${env.url}/login`)).text();
      expect(login2).not.toContain('set-up link');
    },
  );

  it('dies when the first organisation is made by the CLI instead', { timeout: 120_000 }, async () => {
    const env = await serverEnv(dialect, { LOG_LEVEL: 'warn' });
    envs.push(env);
    const server = await start(env);
    const link = setupUrlIn(server.output())[0]!.replace(/^https?:\/\/[^/]+/, env.url);
    expect((await fetch(link)).status).toBe(200);
    await cli(env.env, [
      'org',
      'create',
      '--name',
      'By CLI',
      '--admin-email',
      'ops@example.com',
      '--admin-password',
      'correct horse battery',
    ]);
    expect((await fetch(link)).status).toBe(410);
  });
});
