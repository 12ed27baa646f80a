import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nowIso } from '../../src/domain/ids.js';
import { newTotpSecret, sealTotpSecret } from '../../src/domain/identity/totp.js';
import { addUser, createOrg } from '../../src/domain/orgs/orgs.js';
import { seriousA11yViolations } from './accessibility.js';
import { ARTIFACTS, hasChromium, launchBrowser, signInAs, startLiveServer, watchConsole, type LiveServer } from './browser.js';

const PASSWORD = 'correct horse battery';

/**
 * The security settings, your sessions, re-authentication and the two-factor policy in a real
 * headless Chromium against the real server. Screenshots at 1280 and 375 px of /settings/security,
 * the account page's sessions, /reauth and where the policy sends someone without a second
 * factor; axe-core finds no serious problem on any of them.
 */
describe.skipIf(!hasChromium)('sessions, re-authentication and the two-factor policy in a browser', { timeout: 180_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  let adminId = '';
  let orgId = '';
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    server = await startLiveServer();
    const made = await createOrg(server.db.kysely, { name: 'Acme Ltd', adminEmail: 'ada@example.com', adminPassword: PASSWORD });
    adminId = made.user.id;
    orgId = made.org.id;
    await addUser(server.db.kysely, { orgId, email: 'grace@example.com', password: PASSWORD, role: 'member' });
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  async function open(width: number): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext(
      width < 500 ? { viewport: { width, height: 740 }, isMobile: true, hasTouch: true } : { viewport: { width, height: 900 } },
    );
    const page = await context.newPage();
    watchConsole(page, consoleErrors);
    return { context, page };
  }

  async function shoot(page: Page, name: string, width: number): Promise<void> {
    const scroll = (await page.evaluate('document.documentElement.scrollWidth')) as number;
    expect(scroll, `${name} at ${width}px`).toBeLessThanOrEqual(width);
    await page.screenshot({ path: path.join(ARTIFACTS, `${name}-${width}px.png`), fullPage: true });
    expect(await seriousA11yViolations(page), `${name} at ${width}px`).toEqual([]);
  }

  it('lists and revokes sessions, asks again before a sensitive action, and holds back a member without two-factor', async () => {
    const desk = await open(1280);
    const phone = await open(375);
    await signInAs(desk.page, server.url, 'ada@example.com', PASSWORD);
    await signInAs(phone.page, server.url, 'ada@example.com', PASSWORD);

    // Your sessions: this one marked, the phone's revocable.
    await desk.page.goto(`${server.url}/settings/account`);
    expect(await desk.page.getByRole('row').filter({ hasText: 'This session' }).count()).toBe(1);
    await shoot(desk.page, 'account-sessions', 1280);
    await phone.page.goto(`${server.url}/settings/account`);
    await shoot(phone.page, 'account-sessions', 375);
    await desk.page.getByRole('button', { name: /^Revoke/ }).click();
    await desk.page.waitForURL(`${server.url}/settings/account`);
    expect(await desk.page.getByRole('status').textContent()).toContain('is signed out');
    await phone.page.goto(`${server.url}/contacts`);
    expect(new URL(phone.page.url()).pathname).toBe('/login');
    await signInAs(phone.page, server.url, 'ada@example.com', PASSWORD);

    // Security settings.
    await desk.page.goto(`${server.url}/settings/security`);
    await shoot(desk.page, 'security', 1280);
    await phone.page.goto(`${server.url}/settings/security`);
    await shoot(phone.page, 'security', 375);

    // Ten minutes later, creating an API key asks for the password first, then comes back.
    await server.db.kysely
      .updateTable('sessions')
      .set({ authenticated_at: nowIso(new Date(Date.now() - 11 * 60_000)) })
      .where('user_id', '=', adminId)
      .execute();
    await desk.page.goto(`${server.url}/settings/developer`);
    await desk.page.getByLabel('Name').fill('Nightly sync');
    await desk.page.getByLabel('contacts:read').check();
    await desk.page.getByRole('button', { name: /Create/ }).click();
    await desk.page.waitForURL(/\/reauth\?next=/);
    await shoot(desk.page, 'reauth', 1280);
    await phone.page.goto(`${server.url}/reauth?next=/settings/developer`);
    await shoot(phone.page, 'reauth', 375);
    await desk.page.getByLabel('Password').fill('wrong password');
    await desk.page.getByRole('button', { name: 'Confirm' }).click();
    expect(await desk.page.getByText('That is not your password.').count()).toBe(1);
    await desk.page.getByLabel('Password').fill(PASSWORD);
    await desk.page.getByRole('button', { name: 'Confirm' }).click();
    await desk.page.waitForURL(`${server.url}/settings/developer`);
    await desk.page.getByLabel('Name').fill('Nightly sync');
    await desk.page.getByLabel('contacts:read').check();
    await desk.page.getByRole('button', { name: /Create/ }).click();
    await desk.page.locator('#new-key').waitFor();
    expect(await desk.page.locator('#new-key').textContent()).toMatch(/\S{20,}/);

    // The admin has an authenticator app; the policy then holds back a member who has none.
    await server.db.kysely
      .insertInto('totp_factors')
      .values({
        user_id: adminId,
        secret_sealed: sealTotpSecret(server.config.secretKey, newTotpSecret()),
        created_at: nowIso(new Date()),
        confirmed_at: nowIso(new Date()),
        last_step: null,
      })
      .execute();
    await desk.page.goto(`${server.url}/settings/security`);
    await desk.page.getByLabel('Everyone').check();
    await desk.page.getByRole('button', { name: 'Save policy' }).click();
    await desk.page.waitForURL(`${server.url}/settings/security`);
    expect(await desk.page.getByRole('status').textContent()).toContain('now required for everyone');

    for (const width of [1280, 375]) {
      const grace = await open(width);
      await grace.page.goto(`${server.url}/login`);
      await grace.page.getByLabel('Email', { exact: true }).fill('grace@example.com');
      await grace.page.getByLabel('Password').fill(PASSWORD);
      await grace.page.getByRole('button', { name: 'Sign in', exact: true }).click();
      await grace.page.waitForURL(`${server.url}/settings/account/two-factor`);
      await shoot(grace.page, 'two-factor-required', width);
      await grace.page.goto(`${server.url}/contacts`);
      expect(new URL(grace.page.url()).pathname).toBe('/settings/account/two-factor');
      await grace.context.close();
    }
    await desk.context.close();
    await phone.context.close();
    expect(consoleErrors).toEqual([]);
  });
});
