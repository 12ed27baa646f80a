import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/domain/apiKeys/apiKeys.js';
import { addUser, createOrg } from '../../src/domain/orgs/orgs.js';
import { seriousA11yViolations } from './accessibility.js';
import { ARTIFACTS, hasChromium, launchBrowser, signInAs, startLiveServer, watchConsole, type LiveServer } from './browser.js';

const PASSWORD = 'correct horse battery';

/**
 * The overview at `/` in a real Chromium (issue 32, item 3): where sign-in lands, a new
 * organisation's first steps, then the counts, activity and usage once the API is in use; at
 * 1280 and 375 px, with axe-core. Screenshots: artifacts/overview-new-1280px.png,
 * overview-1280px.png, overview-375px.png.
 */
describe.skipIf(!hasChromium)('overview in a browser', { timeout: 120_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  let orgId = '';
  let userId = '';
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    server = await startLiveServer();
    const made = await createOrg(server.db.kysely, { name: 'Acme Ltd', adminEmail: 'ada@example.com', adminPassword: PASSWORD });
    orgId = made.org.id;
    userId = made.user.id;
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  async function open(width: number, email = 'ada@example.com'): Promise<Page> {
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    const page = await context.newPage();
    watchConsole(page, consoleErrors);
    await signInAs(page, server.url, email, PASSWORD);
    return page;
  }

  async function check(page: Page, name: string, width: number): Promise<void> {
    expect(await seriousA11yViolations(page), name).toEqual([]);
    expect((await page.evaluate('document.documentElement.scrollWidth')) as number, name).toBeLessThanOrEqual(width);
    await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
  }

  it('lands a new organisation on its first steps, then shows counts, activity and usage (1280 and 375 px)', async () => {
    const page = await open(1280);
    expect(new URL(page.url()).pathname).toBe('/');
    expect(await page.getByRole('heading', { name: 'Overview', level: 1 }).count()).toBe(1);
    expect(await page.getByRole('link', { name: 'Overview', exact: true }).getAttribute('aria-current')).toBe('page');
    const steps = page.locator('ol.steps li');
    expect(await steps.count()).toBe(3);
    expect(await page.getByText('0 of 3 steps done.').count()).toBe(1);
    await check(page, 'overview-new-1280px', 1280);

    const { key } = await createApiKey({ db: server.db.kysely, orgId, userId, now: new Date() }, server.config.secretKey, {
      name: 'CRM sync',
      scopes: ['contacts:write', 'groups:write'],
    });
    const api = (url: string, body: unknown) =>
      fetch(`${server.url}/api/v1${url}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
    for (const [first, last] of [
      ['Ada', 'Lovelace'],
      ['Grace', 'Hopper'],
      ['Katherine', 'Johnson'],
    ]) {
      expect((await api('/contacts', { first_name: first, last_name: last, email: `${first!.toLowerCase()}@example.com` })).status).toBe(
        201,
      );
    }
    expect((await api('/groups', { name: 'Pioneers' })).status).toBe(201);
    expect((await api('/contacts', { first_name: '' })).status).toBe(400);
    await expect
      .poll(
        async () => (await server.db.kysely.selectFrom('request_log').select('request_id').where('org_id', '=', orgId).execute()).length,
        {
          timeout: 5000,
        },
      )
      .toBe(5);

    await page.reload();
    expect(await page.getByText('2 of 3 steps done.').count()).toBe(1);
    expect(await page.getByRole('link', { name: '3 contacts' }).count()).toBe(1);
    expect(await page.getByRole('link', { name: '1 group' }).count()).toBe(1);
    expect(await page.getByRole('link', { name: 'Katherine Johnson' }).count()).toBe(1);
    expect(await page.getByText(/5\s+requests in the last 14 days/).count()).toBe(1);
    expect(await page.getByRole('img', { name: /^Requests per day, .*: 5 in all$/ }).count()).toBe(1);
    await check(page, 'overview-1280px', 1280);

    const phone = await open(375);
    await check(phone, 'overview-375px', 375);
    // The chart fills the width; its labels keep a readable size (HTML, not scaled SVG text).
    const chart = (await phone.locator('svg.usage-bars').boundingBox())!;
    expect(chart.width).toBeGreaterThan(300);
    const labelSize = (await phone.evaluate('parseFloat(getComputedStyle(document.querySelector(".usage-axis span")).fontSize)')) as number;
    expect(labelSize).toBeGreaterThanOrEqual(12);
    expect(consoleErrors).toEqual([]);
  });

  it("shows a member the counts, activity and their own first steps, without the admins' usage (375 and 1280 px)", async () => {
    await addUser(server.db.kysely, { orgId, email: 'mia@example.com', password: PASSWORD, role: 'member' });
    for (const width of [375, 1280]) {
      const page = await open(width, 'mia@example.com');
      expect(new URL(page.url()).pathname).toBe('/');
      expect(await page.getByRole('heading', { name: /^API usage/ }).count()).toBe(0);
      expect(await page.getByRole('link', { name: '3 contacts' }).count()).toBe(1);
      // Contacts and a group exist: a member's steps are done, so the list is gone.
      expect(await page.getByRole('heading', { name: 'Getting started' }).count()).toBe(0);
      await check(page, `overview-member-${width}px`, width);
    }
    expect(consoleErrors).toEqual([]);
  });
});
