import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startMailCatcher, type MailCatcher } from './helpers/mailCatcher.js';
import { DIALECTS } from './helpers/harness.js';
import { cli } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';
import { fetchSignIn } from './helpers/signInForm.js';

const PASSWORD = 'correct horse battery';

/** A form page's CSRF token and the form guard's cookie, as a browser would keep them. */
async function formOf(url: string): Promise<{ status: number; csrf: string; cookie: string; body: string }> {
  const res = await fetch(url);
  const body = await res.text();
  const cookie = (res.headers.getSetCookie()[0] ?? '').split(';')[0]!;
  return { status: res.status, csrf: /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '', cookie, body };
}

async function submit(url: string, form: { csrf: string; cookie: string }, fields: Record<string, string>): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: form.csrf, ...fields }).toString(),
  });
}

/**
 * `orgdata users invite` and `orgdata users reset-link` as processes, against a running server
 * process over HTTP: the links they print work in the server, and the invitation is mailed when
 * SMTP_URL is set.
 */
describe.each(DIALECTS)('identity CLI on %s', { timeout: 120_000 }, (dialect) => {
  let mail: MailCatcher;
  let orgId = '';
  beforeAll(async () => {
    mail = await startMailCatcher();
  }, 120_000);
  // Registered before the server, so closed once it has stopped (vitest runs afterAll hooks last first).
  afterAll(async () => {
    await mail?.close();
  });
  const suite = suiteServer(dialect, () => ({ SMTP_URL: mail.url }), { publicUrl: true, stopWith: 'SIGTERM' });
  beforeAll(async () => {
    orgId = (
      await cli<{ org: { id: string } }>(suite.env.env, [
        'org',
        'create',
        '--name',
        'Cli Org',
        '--admin-email',
        'op@example.com',
        '--admin-password',
        PASSWORD,
      ])
    ).org.id;
  }, 120_000);

  it('invites by the CLI: prints the link and its expiry as JSON, mails it, and the link works in the server', async () => {
    const out = await cli<{ invite_url: string; expires_at: string; mailed: boolean }>(suite.env.env, [
      'users',
      'invite',
      '--org',
      orgId,
      '--email',
      'cli-invitee@example.com',
      '--role',
      'member',
    ]);
    expect(out.invite_url).toMatch(new RegExp(`^${suite.url}/invite/[A-Za-z0-9_-]{43}$`));
    expect(Date.parse(out.expires_at) - Date.now()).toBeGreaterThan(167 * 3600 * 1000);
    expect(out.mailed).toBe(true);
    const sent = await mail.waitFor('cli-invitee@example.com');
    expect(sent.text).toContain(out.invite_url);
    expect(sent.text).toContain('The operator of this orgdata invited you to join Cli Org');

    const form = await formOf(out.invite_url);
    expect(form.status).toBe(200);
    expect(form.body).toContain('Join Cli Org on orgdata');
    const joined = await submit(out.invite_url, form, { password: PASSWORD });
    expect(joined.status).toBe(303);
    const members = await cli<{ email: string; role: string }[]>(suite.env.env, ['users', 'list', '--org', orgId]);
    expect(members.map((m) => m.email)).toContain('cli-invitee@example.com');
    expect((await fetch(out.invite_url)).status).toBe(410);
  });

  it('prints a reset link for a member, which sets a new password once', async () => {
    const out = await cli<{ reset_url: string; expires_at: string }>(suite.env.env, [
      'users',
      'reset-link',
      '--org',
      orgId,
      '--email',
      'op@example.com',
    ]);
    expect(out.reset_url).toMatch(new RegExp(`^${suite.url}/reset-password/[A-Za-z0-9_-]{43}$`));
    const form = await formOf(out.reset_url);
    expect(form.status).toBe(200);
    expect((await submit(out.reset_url, form, { password: 'the operator chose this' })).status).toBe(200);
    expect((await fetch(out.reset_url)).status).toBe(410);
    const signIn = await fetchSignIn(suite.url, { email: 'op@example.com', password: 'the operator chose this' });
    expect(signIn.status).toBe(303);
    // Not a member of that organisation: a clear error, no link.
    await expect(cli(suite.env.env, ['users', 'reset-link', '--org', orgId, '--email', 'stranger@example.com'])).rejects.toMatchObject({
      stdout: expect.stringContaining('"code":"not_found"'),
    });
  });
});
