import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inviteMember } from '../../src/domain/identity/invitations.js';
import { createOrg } from '../../src/domain/orgs/orgs.js';
import { seriousA11yViolations } from './accessibility.js';
import { ARTIFACTS, hasChromium, launchBrowser, startLiveServer, watchConsole, type LiveServer } from './browser.js';

/**
 * "Join with a passkey" in a real headless Chromium with its virtual authenticator (discoverable
 * credentials, user verification on) against the real server on http://localhost: the invited
 * person opens the link, joins with a passkey, lands signed in, signs out, and signs in again
 * with the passkey alone. Screenshots of the invitation page at 1280 and 375 px, checked with axe.
 */
describe.skipIf(!hasChromium)('joining with a passkey in a browser', { timeout: 180_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  let orgId: string;
  let adminId: string;
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    server = await startLiveServer({ hostname: 'localhost' });
    const made = await createOrg(server.db.kysely, {
      name: 'Acme Ltd',
      adminEmail: 'ada@example.com',
      adminPassword: 'correct horse battery',
    });
    orgId = made.org.id;
    adminId = made.user.id;
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  async function invite(email: string): Promise<string> {
    const ctx = {
      db: server.db.kysely,
      orgId,
      actor: { kind: 'user' as const, userId: adminId, role: 'admin' as const },
      requestId: 'e2e',
      now: new Date(),
    };
    const made = await inviteMember(
      ctx,
      { mailer: null, publicUrl: server.url, inviteTtlHours: 168, resetTtlMinutes: 60 },
      { email, role: 'member' },
      null,
    );
    return made.url;
  }

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

  it('opens the invitation, joins with a passkey, lands signed in, and signs in again with the passkey', async () => {
    const link = await invite('grace@example.com');

    // The page on a phone: it fits, and is accessible.
    const phone = await browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    const small = await phone.newPage();
    watchConsole(small, consoleErrors);
    await small.goto(link);
    expect(await small.getByRole('button', { name: 'Join with a passkey' }).count()).toBe(1);
    expect((await small.evaluate('document.documentElement.scrollWidth')) as number).toBeLessThanOrEqual(375);
    expect(await seriousA11yViolations(small)).toEqual([]);
    await small.screenshot({ path: path.join(ARTIFACTS, 'invite-passkey-375px.png'), fullPage: true });
    await phone.close();

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await withAuthenticator(context);
    await page.goto(link);
    expect(await page.getByRole('heading', { name: 'Join Acme Ltd on orgdata' }).count()).toBe(1);
    expect(await seriousA11yViolations(page)).toEqual([]);
    await page.screenshot({ path: path.join(ARTIFACTS, 'invite-passkey-1280px.png'), fullPage: true });

    await page.getByRole('button', { name: 'Join with a passkey' }).click();
    await page.waitForURL(`${server.url}/contacts`);
    await page.getByText('Welcome to Acme Ltd. You are signed in as grace@example.com with your passkey.').waitFor();
    const user = await server.db.kysely
      .selectFrom('users')
      .select('id')
      .where('email_lower', '=', 'grace@example.com')
      .executeTakeFirstOrThrow();
    const session = await server.db.kysely.selectFrom('sessions').select('method').where('user_id', '=', user.id).execute();
    expect(session).toEqual([{ method: 'passkey' }]);
    const passkeys = await server.db.kysely.selectFrom('passkeys').select('name').where('user_id', '=', user.id).execute();
    expect(passkeys).toEqual([{ name: 'Passkey' }]);

    // The link is used up: the page says so.
    const again = await page.goto(link);
    expect(again?.status()).toBe(410);

    // Signed out, the passkey alone signs in again (the same virtual authenticator).
    await context.clearCookies();
    await page.goto(`${server.url}/login`);
    await page.getByRole('button', { name: 'Sign in with a passkey' }).click();
    await page.waitForURL(`${server.url}/`);
    expect(await page.getByText('grace@example.com').count()).toBeGreaterThan(0);
    await context.close();

    // A link revoked while its page is open: the button leads to the page that says so.
    const other = await invite('linus@example.com');
    const late = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const latePage = await withAuthenticator(late);
    await latePage.goto(other);
    await server.db.kysely
      .updateTable('invitations')
      .set({ revoked_at: new Date().toISOString() })
      .where('email', '=', 'linus@example.com')
      .execute();
    await latePage.getByRole('button', { name: 'Join with a passkey' }).click();
    await latePage.getByRole('heading', { name: 'This invitation link no longer works' }).waitFor();
    await late.close();

    expect(consoleErrors.filter((e) => !e.includes('410'))).toEqual([]);
  });
});
