import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChallenge } from '../../src/domain/identity/challenges.js';
import { createOrg } from '../../src/domain/orgs/orgs.js';
import { seriousA11yViolations } from './accessibility.js';
import { ARTIFACTS, hasChromium, launchBrowser, signInAs, startLiveServer, watchConsole, type LiveServer } from './browser.js';

const PASSWORD = 'correct horse battery';
const EMAIL = 'ada@example.com';

/**
 * Passkeys in a real headless Chromium with its virtual authenticator (a platform authenticator
 * holding discoverable credentials, user verification on), against the real server on
 * http://localhost (a secure context; the RP ID must be a name): add a passkey, sign out, sign in
 * with it without typing an email, use it as the second step of a password sign-in and to
 * re-authenticate, remove it, and see it refused. Screenshots of the account page and the
 * sign-in page at 1280 and 375 px, each checked with axe.
 */
describe.skipIf(!hasChromium)('passkeys in a browser', { timeout: 180_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  let userId: string;
  let orgId: string;
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    server = await startLiveServer({ hostname: 'localhost' });
    const made = await createOrg(server.db.kysely, { name: 'Acme Ltd', adminEmail: EMAIL, adminPassword: PASSWORD });
    userId = made.user.id;
    orgId = made.org.id;
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  async function withAuthenticator(context: BrowserContext): Promise<Page> {
    const page = await context.newPage();
    watchConsole(page, consoleErrors);
    const cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: {
        protocol: 'ctap2',
        transport: 'internal',
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });
    return page;
  }

  async function accessible(page: Page): Promise<void> {
    expect(await seriousA11yViolations(page), page.url()).toEqual([]);
  }

  async function fitsWidth(page: Page, width: number): Promise<void> {
    expect((await page.evaluate('document.documentElement.scrollWidth')) as number, page.url()).toBeLessThanOrEqual(width);
  }

  async function events(type: string) {
    const rows = await server.db.kysely
      .selectFrom('events')
      .select('data')
      .where('type', '=', type)
      .where('subject_id', '=', userId)
      .orderBy('created_at')
      .execute();
    return rows.map((row) => JSON.parse(row.data) as Record<string, unknown>);
  }

  /** Pages other parts render (the two-factor step, /reauth) carry a button the script wires; here one is put on a page that loads it. */
  async function clickInjected(page: Page, attribute: string): Promise<void> {
    await page.evaluate(`(() => {
      const button = document.createElement('button');
      button.type = 'button';
      button.setAttribute('${attribute}', '');
      button.textContent = 'Use a passkey';
      document.querySelector('main').append(button);
    })()`);
    await page.getByRole('button', { name: 'Use a passkey' }).click();
  }

  it('adds a passkey, signs in with it, uses it as a second step and to re-authenticate, and removes it', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await withAuthenticator(context);
    await signInAs(page, server.url, EMAIL, PASSWORD);

    // Add a named passkey: it is listed, never used yet.
    await page.goto(`${server.url}/settings/account`);
    expect(await page.getByText('You have no passkeys yet.').count()).toBe(1);
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    // The status reads "Follow your browser's prompt…" until the server's answer (a name is needed) arrives.
    await expect.poll(() => page.locator('[data-passkey-status]').textContent()).toContain('Name');
    await page.getByLabel('Passkey name').fill('Work laptop');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await page.waitForURL(`${server.url}/settings/account#passkeys`);
    await page.getByText('Passkey “Work laptop” added').waitFor();
    const row = page.getByRole('row', { name: /Work laptop/ });
    expect(await row.count()).toBe(1);
    expect(await row.getByText('Never').count()).toBe(1);
    expect(await events('member.passkey_added')).toMatchObject([{ name: 'Work laptop' }]);
    await accessible(page);
    await page.screenshot({ path: path.join(ARTIFACTS, 'account-passkeys-1280px.png'), fullPage: true });

    // The same pages on a phone.
    const phone = await browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    const small = await phone.newPage();
    watchConsole(small, consoleErrors);
    await small.goto(`${server.url}/login`);
    await fitsWidth(small, 375);
    await accessible(small);
    await small.screenshot({ path: path.join(ARTIFACTS, 'login-passkey-375px.png'), fullPage: true });
    // The same session (a password sign-in would now ask for the passkey: this phone has none).
    await phone.addCookies(await context.cookies());
    await small.goto(`${server.url}/settings/account#passkeys`);
    await fitsWidth(small, 375);
    await accessible(small);
    await small.screenshot({ path: path.join(ARTIFACTS, 'account-passkeys-375px.png'), fullPage: true });
    await phone.close();

    // Sign out, then sign in with the passkey: no email typed.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${server.url}/login`);
    await page.goto(`${server.url}/login?next=${encodeURIComponent('/groups')}`);
    await accessible(page);
    await page.screenshot({ path: path.join(ARTIFACTS, 'login-passkey-1280px.png'), fullPage: true });
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.waitForURL(`${server.url}/groups`);
    expect(await events('member.signed_in')).toMatchObject([{ method: 'password' }, { method: 'passkey' }]);
    await page.goto(`${server.url}/activity?type=member.signed_in`);
    expect(await page.locator('table.activity').getByText('member.signed_in').count()).toBe(2);
    const session = await server.db.kysely
      .selectFrom('sessions')
      .select('method')
      .where('user_id', '=', userId)
      .orderBy('created_at', 'desc')
      .executeTakeFirstOrThrow();
    expect(session.method).toBe('passkey');

    // Re-authentication (the /reauth page offers the same button): the session is rotated.
    await page.goto(`${server.url}/settings/account?next=${encodeURIComponent('/settings/developer')}`);
    // Its sign-in shows as its last use.
    expect(
      await page
        .getByRole('row', { name: /Work laptop/ })
        .getByText('Never')
        .count(),
    ).toBe(0);
    await page.screenshot({ path: path.join(ARTIFACTS, 'account-passkeys-used-1280px.png'), fullPage: true });
    await clickInjected(page, 'data-passkey-reauth');
    await page.waitForURL(`${server.url}/settings/developer`);
    expect(await events('member.reauthenticated')).toMatchObject([{ method: 'passkey' }]);

    // The second step of a password sign-in (POST /login leaves the pending sign-in and its cookie).
    await page.getByRole('button', { name: 'Sign out' }).click();
    const pending = await createChallenge(
      server.db.kysely,
      'two_factor',
      userId,
      { orgId, next: '/labels', email: EMAIL },
      5 * 60_000,
      new Date(),
    );
    await context.addCookies([{ name: 'od_pending', value: pending, url: server.url, httpOnly: true, sameSite: 'Lax' }]);
    await page.goto(`${server.url}/login`);
    await clickInjected(page, 'data-passkey-second-factor');
    await page.waitForURL(`${server.url}/labels`);
    expect((await events('member.signed_in')).at(-1)).toMatchObject({ method: 'password+passkey' });

    // Remove it: the list is empty, and the passkey (still on the device) no longer signs in.
    await page.goto(`${server.url}/settings/account`);
    await page.getByRole('button', { name: 'Remove Work laptop' }).click();
    await page.getByText('Passkey “Work laptop” removed').waitFor();
    expect(await page.getByText('You have no passkeys yet.').count()).toBe(1);
    expect(await events('member.passkey_removed')).toMatchObject([{ name: 'Work laptop' }]);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.waitForURL(`${server.url}/login`);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.getByText('That passkey could not sign you in').waitFor();
    expect(page.url()).toBe(`${server.url}/login`);
    expect(await context.cookies(server.url)).not.toContainEqual(expect.objectContaining({ name: 'od_session' }));
    await context.close();
    expect(consoleErrors).toEqual([]);
  });
});
