import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/domain/apiKeys/apiKeys.js';
import { seriousA11yViolations } from './accessibility.js';
import {
  acmeOrg,
  ADMIN_PASSWORD,
  ARTIFACTS,
  callApi,
  hasChromium,
  launchBrowser,
  signInAs,
  startLiveServer,
  watchConsole,
  type LiveServer,
} from './browser.js';

const WIDTHS = [1280, 375] as const;
const SCHEMES = ['light', 'dark'] as const;

/**
 * Test mode in a real Chromium (SANDBOX.md, "Dashboard"): the header's switch flips the session
 * to the sandbox at 1280 and 375 px; the banner and the header's colour say so on every page; the
 * contacts shown are the sandbox's; no serious or critical axe-core violation in test mode, light
 * and dark. One browser for the file; screenshots to artifacts/testmode-*.png.
 */
describe.skipIf(!hasChromium)('test mode in the browser', { timeout: 300_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  const consoleErrors: string[] = [];
  const ids = { liveContact: '', testContact: '' };

  beforeAll(async () => {
    server = await startLiveServer();
    const acme = await acmeOrg(server);
    const live = await acme.apiKey(['contacts:write']);
    const test = await createApiKey(
      { db: server.db.kysely, orgId: acme.made.org.id, userId: acme.made.user.id, now: new Date() },
      server.config.secretKey,
      { name: 'Sandbox sync', scopes: ['contacts:write'], mode: 'test' },
    );
    ids.liveContact = (
      await callApi(server, live.key, 'POST', '/contacts', { first_name: 'Livia', last_name: 'Live', email: 'livia@example.com' })
    ).json.id;
    ids.testContact = (
      await callApi(server, test.key, 'POST', '/contacts', { first_name: 'Sandy', last_name: 'Sandbox', email: 'sandy@example.com' })
    ).json.id;
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  /** The header's switch: behind the Menu button on a phone. */
  async function flip(page: Page, width: number, to: 'on' | 'off'): Promise<void> {
    if (width < 640) {
      const menu = page.getByRole('button', { name: 'Menu' });
      if ((await menu.getAttribute('aria-expanded')) !== 'true') await menu.click();
    }
    const toggle = page.getByRole('switch', { name: 'Test mode' });
    await expect(toggle.getAttribute('aria-checked')).resolves.toBe(to === 'on' ? 'false' : 'true');
    await toggle.click();
    await page.waitForLoadState('load');
  }

  const headerColour = (page: Page) =>
    page.evaluate(`getComputedStyle(document.querySelector('header.topbar')).backgroundColor`) as Promise<string>;

  for (const width of WIDTHS)
    it(`the switch shows the sandbox with a banner and another colour at ${width} px`, async () => {
      const context = await browser.newContext({ viewport: { width, height: 800 } });
      const page = await context.newPage();
      watchConsole(page, consoleErrors);
      await signInAs(page, server.url, 'ada@example.com', ADMIN_PASSWORD);
      await page.goto(`${server.url}/contacts`);
      await expect(page.getByText('Livia').first().isVisible()).resolves.toBe(true);
      const liveColour = await headerColour(page);

      await flip(page, width, 'on');
      expect(new URL(page.url()).pathname).toBe('/contacts');
      const banner = page.locator('#test-mode-banner');
      await expect(banner.isVisible()).resolves.toBe(true);
      await expect(banner.textContent()).resolves.toContain('Test mode');
      // In view at the top without opening anything, on a phone too.
      const box = await banner.boundingBox();
      expect(box && box.y < 200).toBe(true);
      expect(await headerColour(page)).not.toBe(liveColour);
      const table = (await page.locator('main').textContent()) ?? '';
      expect(table).toContain('Sandy');
      expect(table).not.toContain('Livia');
      await page.screenshot({ path: path.join(ARTIFACTS, `testmode-contacts-${width}.png`), fullPage: true });

      // Every page keeps saying so; the live contact's own page is not found in test mode.
      for (const url of ['/', '/labels', '/activity', '/settings/account', '/settings/developer']) {
        await page.goto(`${server.url}${url}`);
        await expect(page.locator('#test-mode-banner').isVisible(), url).resolves.toBe(true);
      }
      expect((await page.goto(`${server.url}/contacts/${ids.liveContact}`))?.status()).toBe(404);
      expect((await page.goto(`${server.url}/contacts/${ids.testContact}`))?.status()).toBe(200);

      await page.goto(`${server.url}/contacts`);
      await flip(page, width, 'off');
      await expect(page.locator('#test-mode-banner').count()).resolves.toBe(0);
      expect(await headerColour(page)).toBe(liveColour);
      const back = (await page.locator('main').textContent()) ?? '';
      expect(back).toContain('Livia');
      expect(back).not.toContain('Sandy');
      await context.close();
      expect(consoleErrors).toEqual([]);
    });

  for (const colorScheme of SCHEMES)
    for (const width of WIDTHS)
      it(`test-mode pages have no serious axe-core violation at ${width} px, ${colorScheme} scheme`, async () => {
        const context = await browser.newContext({ viewport: { width, height: 800 }, colorScheme });
        const page = await context.newPage();
        await signInAs(page, server.url, 'ada@example.com', ADMIN_PASSWORD);
        await page.goto(`${server.url}/contacts`);
        await flip(page, width, 'on');
        const problems: string[] = [];
        for (const url of [
          '/',
          '/contacts',
          `/contacts/${ids.testContact}`,
          '/activity',
          '/settings/developer',
          '/settings/developer/test-data',
          '/settings/members',
        ]) {
          await page.goto(`${server.url}${url}`);
          for (const v of await seriousA11yViolations(page))
            problems.push(`${url}@${width}: axe ${v.impact} ${v.id} (${v.help}) at ${v.targets.join(', ')}`);
          const sideways = (await page.evaluate('[document.documentElement.scrollWidth, window.innerWidth]')) as [number, number];
          if (sideways[0] > sideways[1]) problems.push(`${url}@${width}: scrolls sideways (${sideways[0]} > ${sideways[1]} px)`);
        }
        await page.goto(`${server.url}/settings/developer/test-data`);
        await page.screenshot({
          path: path.join(ARTIFACTS, `testmode-test-data-${width}${colorScheme === 'dark' ? '-dark' : ''}.png`),
          fullPage: true,
        });
        await context.close();
        expect(problems).toEqual([]);
      });
});
