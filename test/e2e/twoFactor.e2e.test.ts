import path from 'node:path';
import { generateSync } from 'otplib';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addUser, createOrg } from '../../src/domain/orgs/orgs.js';
import { seriousA11yViolations } from './accessibility.js';
import { ARTIFACTS, hasChromium, launchBrowser, signInAs, startLiveServer, watchConsole, type LiveServer } from './browser.js';

const PASSWORD = 'correct horse battery';
const code = (secret: string, steps = 0) => generateSync({ secret, epoch: Math.floor(Date.now() / 1000) + steps * 30 });

/**
 * Two-factor authentication in a real headless Chromium against the real server: set up by
 * scanning (reading) the page's otpauth URI, confirm with a code computed by otplib, the recovery
 * codes page, then a sign-in that stops at /login/two-factor with no session until the code.
 * Screenshots of the three pages at 1280 and 375 px wide go to artifacts/, each checked with axe.
 */
describe.skipIf(!hasChromium)('two-factor authentication in a browser', { timeout: 120_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  const consoleErrors: string[] = [];
  const outside: string[] = [];

  beforeAll(async () => {
    server = await startLiveServer();
    const { org } = await createOrg(server.db.kysely, { name: 'Acme Ltd', adminEmail: 'ada@example.com', adminPassword: PASSWORD });
    await addUser(server.db.kysely, { orgId: org.id, email: 'lin@example.com', password: PASSWORD, role: 'member' });
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  async function open(width: number): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext(
      width < 600 ? { viewport: { width, height: 740 }, isMobile: true, hasTouch: true } : { viewport: { width, height: 900 } },
    );
    const page = await context.newPage();
    watchConsole(page, consoleErrors);
    page.on('request', (request) => {
      if (!request.url().startsWith(server.url)) outside.push(request.url());
    });
    return { context, page };
  }

  async function check(page: Page, name: string, width: number): Promise<void> {
    const scroll = (await page.evaluate('document.documentElement.scrollWidth')) as number;
    expect(scroll, name).toBeLessThanOrEqual(width);
    await page.screenshot({ path: path.join(ARTIFACTS, `${name}-${width}px.png`), fullPage: true });
    expect(await seriousA11yViolations(page), name).toEqual([]);
  }

  /** Sets up two-factor for the signed-in person; returns the secret and the recovery codes. */
  async function setUp(page: Page, width: number): Promise<{ secret: string; codes: string[] }> {
    await page.goto(`${server.url}/settings/account`);
    await page.getByRole('link', { name: 'Two-factor authentication settings' }).click();
    await page.getByRole('button', { name: 'Set up two-factor authentication' }).click();
    const qr = page.getByRole('img', { name: /QR code for your authenticator app/ });
    expect(await qr.count()).toBe(1);
    expect(await page.locator('svg path').count()).toBeGreaterThan(0);
    const uri = (await page.locator('#totp-uri').textContent())?.trim() ?? '';
    expect(uri).toMatch(/^otpauth:\/\/totp\/orgdata:.+\?.*secret=[A-Z2-7]{32}/);
    const secret = new URL(uri).searchParams.get('secret')!;
    await check(page, 'two-factor-setup', width);
    await page.getByLabel('Code', { exact: true }).fill(code(secret, -1));
    await page.getByRole('button', { name: 'Turn on two-factor authentication' }).click();
    await page.getByRole('heading', { name: 'Your recovery codes' }).waitFor();
    const codes = (await page.locator('#recovery-codes code').allTextContents()).map((c) => c.trim());
    expect(codes).toHaveLength(10);
    await check(page, 'two-factor-recovery-codes', width);
    await page.getByRole('link', { name: 'I have stored them' }).click();
    expect(await page.getByText('Two-factor authentication is on').count()).toBe(1);
    expect(await page.getByText(codes[0]!).count()).toBe(0);
    await check(page, 'two-factor-on', width);
    return { secret, codes };
  }

  /** Password first: the browser lands on /login/two-factor holding no session. */
  async function passwordStep(page: Page, email: string): Promise<void> {
    await page.goto(`${server.url}/login`);
    await page.getByLabel('Email', { exact: true }).fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.waitForURL(`${server.url}/login/two-factor`);
    const cookies = await page.context().cookies();
    expect(cookies.map((c) => c.name)).not.toContain('od_session');
    expect(cookies.find((c) => c.name === 'od_pending')).toMatchObject({ httpOnly: true, sameSite: 'Lax' });
  }

  it('sets up, shows the recovery codes once, and asks for the code at the next sign-in (1280 px)', async () => {
    const { context, page } = await open(1280);
    await signInAs(page, server.url, 'ada@example.com', PASSWORD);
    const { secret } = await setUp(page, 1280);
    await context.close();

    const { context: later, page: again } = await open(1280);
    await passwordStep(again, 'ada@example.com');
    await check(again, 'login-two-factor', 1280);
    // A wrong code: said so next to the field, still no session.
    await again.getByLabel('Code', { exact: true }).fill('000000' === code(secret) ? '111111' : '000000');
    await again.getByRole('button', { name: 'Verify' }).click();
    expect(await again.getByText('That code is not right').count()).toBe(1);
    expect((await later.cookies()).map((c) => c.name)).not.toContain('od_session');
    await again.getByLabel('Code', { exact: true }).fill(code(secret));
    await again.getByRole('button', { name: 'Verify' }).click();
    await again.waitForURL(`${server.url}/`);
    expect((await later.cookies()).map((c) => c.name)).toContain('od_session');
    expect((await later.cookies()).map((c) => c.name)).not.toContain('od_pending');

    // Activity: the set-up and the sign-in with its method.
    await again.goto(`${server.url}/activity?type=member.*`);
    expect(await again.locator('table.activity').getByText('member.two_factor_enabled').count()).toBe(1);
    expect(await again.locator('table.activity').getByText('member.sign_in_failed').count()).toBe(1);
    await later.close();
  });

  it('works on a phone-sized screen, and a recovery code signs in once (375 px)', async () => {
    const { context, page } = await open(375);
    await signInAs(page, server.url, 'lin@example.com', PASSWORD);
    const { codes } = await setUp(page, 375);
    await context.close();

    const { context: later, page: again } = await open(375);
    await passwordStep(again, 'lin@example.com');
    await check(again, 'login-two-factor', 375);
    await again.getByLabel('Code', { exact: true }).fill(codes[0]!);
    await again.getByRole('button', { name: 'Verify' }).click();
    await again.waitForURL(`${server.url}/`);
    expect(await again.getByText('You signed in with a recovery code').count()).toBe(1);
    await later.close();
    expect(outside).toEqual([]);
    expect(consoleErrors).toEqual([]);
  });
});
