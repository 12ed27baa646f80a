import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg } from '../../src/domain/orgs/orgs.js';
import { ARTIFACTS, hasChromium, launchBrowser, signInAs, startLiveServer, watchConsole, type LiveServer } from './browser.js';

const PASSWORD = 'correct horse battery';

/**
 * The invitation flow in a real headless Chromium against the real server (no mail configured, so
 * the admin is shown the link): invite, copy the link, open it, choose a password, land signed in;
 * the link then answers 410. Screenshots of the Members page and the invitation page at 1280 and
 * 375 px wide are written to artifacts/.
 */
describe.skipIf(!hasChromium)('invitations in a browser', { timeout: 120_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    server = await startLiveServer();
    await createOrg(server.db.kysely, { name: 'Acme Ltd', adminEmail: 'ada@example.com', adminPassword: PASSWORD });
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  async function fitsWidth(page: Page, width: number): Promise<void> {
    const scroll = (await page.evaluate('document.documentElement.scrollWidth')) as number;
    expect(scroll, page.url()).toBeLessThanOrEqual(width);
  }

  it('an admin invites, the invitee opens the link, chooses a password and is signed in; the link then answers 410', async () => {
    const admin = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    await admin.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
    const page = await admin.newPage();
    watchConsole(page, consoleErrors);
    await signInAs(page, server.url, 'ada@example.com', PASSWORD);
    await page.goto(`${server.url}/settings/members`);
    expect(await page.locator('input[type=password]').count()).toBe(0);
    await page.getByLabel('Email').fill('grace@example.com');
    await page.getByLabel('Role', { exact: true }).selectOption('admin');
    await page.getByRole('button', { name: 'Invite', exact: true }).click();
    const link = (await page.locator('#invite-link').textContent())?.trim() ?? '';
    expect(link).toMatch(new RegExp(`^${server.url}/invite/[A-Za-z0-9_-]{43}$`));
    await page.getByRole('button', { name: 'Copy' }).click();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(link);
    expect(await page.getByRole('row', { name: /grace@example.com/ }).count()).toBe(1);
    await page.screenshot({ path: path.join(ARTIFACTS, 'members-invited-1280px.png'), fullPage: true });

    const phoneAdmin = await browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    const small = await phoneAdmin.newPage();
    watchConsole(small, consoleErrors);
    await signInAs(small, server.url, 'ada@example.com', PASSWORD);
    await small.goto(`${server.url}/settings/members`);
    await fitsWidth(small, 375);
    await small.screenshot({ path: path.join(ARTIFACTS, 'members-375px.png'), fullPage: true });
    await phoneAdmin.close();

    // Looking at the invitation does not use it up: the phone first, then the desktop accepts.
    const phone = await browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    const invitePhone = await phone.newPage();
    watchConsole(invitePhone, consoleErrors);
    await invitePhone.goto(link);
    expect(await invitePhone.getByRole('heading', { name: 'Join Acme Ltd on orgdata' }).count()).toBe(1);
    await fitsWidth(invitePhone, 375);
    await invitePhone.screenshot({ path: path.join(ARTIFACTS, 'invite-375px.png'), fullPage: true });
    await phone.close();

    const invitee = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const grace = await invitee.newPage();
    watchConsole(grace, consoleErrors);
    await grace.goto(link);
    expect(await grace.getByText('grace@example.com').count()).toBeGreaterThan(0);
    await grace.screenshot({ path: path.join(ARTIFACTS, 'invite-1280px.png'), fullPage: true });
    await grace.getByLabel('Choose a password').fill('short');
    await grace.getByRole('button', { name: 'Join Acme Ltd' }).click();
    expect(await grace.getByText('Password must be 8 to 1,024 characters long.').count()).toBe(1);
    await grace.getByLabel('Choose a password').fill(PASSWORD);
    await grace.getByRole('button', { name: 'Join Acme Ltd' }).click();
    await grace.waitForURL(`${server.url}/contacts`);
    expect(await grace.getByText('Welcome to Acme Ltd').count()).toBe(1);
    expect(await grace.getByRole('link', { name: 'Members' }).count()).toBe(1); // invited as an admin

    const again = await grace.goto(link);
    expect(again?.status()).toBe(410);
    expect(await grace.getByRole('heading', { name: 'This invitation link no longer works' }).count()).toBe(1);
    await invitee.close();

    await page.goto(`${server.url}/settings/members`);
    expect(await page.getByText('No pending invitations.').count()).toBe(1);
    // Activity (admins): the invitation and the joining, each with who and where from.
    await page.goto(`${server.url}/activity?type=member.*`);
    expect(await page.locator('table.activity').getByText('member.invited').count()).toBe(1);
    expect(await page.locator('table.activity').getByText('member.joined').count()).toBe(1);
    // Each with where from; the sign-ins in between (the admin's, Grace's on joining) are there too.
    const rows = page.locator('table.activity tbody tr');
    for (const type of ['member.invited', 'member.joined']) {
      expect(
        await rows
          .filter({ hasText: type })
          .getByText(/from 127\.0\.0\.0\/24/)
          .count(),
      ).toBe(1);
    }
    expect(await rows.filter({ hasText: 'member.signed_in' }).filter({ hasText: 'with invitation' }).count()).toBe(1);
    await page.screenshot({ path: path.join(ARTIFACTS, 'activity-members-1280px.png'), fullPage: true });
    await admin.close();
    expect(consoleErrors).toEqual([]);
  });
});
