import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seriousA11yViolations } from './accessibility.js';
import { ARTIFACTS, hasChromium, launchBrowser, startLiveServer, watchConsole, type LiveServer } from './browser.js';

/** The sidebar's tags, in the order a newcomer needs them (issue 31, item 4). */
const TAG_ORDER = ['Contacts', 'Labels', 'Groups', 'Files', 'Events', 'Uploads and downloads', 'Meta'];

/**
 * The API reference at /docs in a real Chromium (issue 31, items 1 and 4): Redoc from our own
 * origin under a strict CSP, with a sidebar by tag, a search that finds operations and the
 * operations rendered. Screenshots: artifacts/docs.png (1280 px), docs-phone.png (375 px).
 */
describe.skipIf(!hasChromium)('the API reference in a browser', { timeout: 120_000 }, () => {
  let server: LiveServer;
  let browser: Browser;

  beforeAll(async () => {
    server = await startLiveServer();
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  /** A page that records every request it makes, every console error and every CSP violation. */
  async function watchedPage(width: number): Promise<{ context: BrowserContext; page: Page; requests: string[]; errors: string[] }> {
    const context = await browser.newContext({ viewport: { width, height: 900 } });
    const page = await context.newPage();
    const requests: string[] = [];
    const errors: string[] = [];
    // The page's requests and its workers' (the search index runs in one).
    context.on('request', (request) => requests.push(request.url()));
    watchConsole(page, errors);
    // Reported to the page as events before any script of ours runs, so none is missed.
    // A string: this file is compiled without the DOM's types.
    await page.addInitScript(`document.addEventListener('securitypolicyviolation', (event) => {
      console.error('CSP violation: ' + event.violatedDirective + ' blocked ' + (event.blockedURI || '(inline)'));
    })`);
    return { context, page, requests, errors };
  }

  it('renders Redoc from our own origin with no CSP violation: sidebar by tag, search, operations', async () => {
    const { context, page, requests, errors } = await watchedPage(1280);
    const res = await page.goto(`${server.url}/docs`);
    expect(res?.status()).toBe(200);
    const csp = res?.headers()['content-security-policy'] ?? '';
    expect(csp).toContain("script-src 'self';");
    expect(csp).not.toContain('unsafe-eval');
    expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);

    // The sidebar lists the tags (Redoc renders tag names in its menu) in our order.
    const menu = page.locator('.menu-content');
    await menu.waitFor({ timeout: 30_000 });
    const tagLabels = await menu.evaluate((element) =>
      [...element.querySelectorAll('li[data-item-id^="tag/"]')]
        .filter((item) => !item.getAttribute('data-item-id')!.includes('/operation/'))
        .map((item) => item.querySelector('label')!.textContent!.trim()),
    );
    expect(tagLabels).toEqual(TAG_ORDER);
    // The groups of x-tagGroups.
    const menuText = (await menu.textContent()) ?? '';
    expect(menuText).toContain('Resources');
    expect(menuText).toContain('Links and meta');

    // An operation's section: its heading, its path and its 201 answer.
    const create = page.locator('[data-section-id="tag/Contacts/operation/createContact"]');
    await create.waitFor();
    expect((await create.locator('h2').first().textContent())?.trim()).toBe('Create a contact');
    expect(await create.textContent()).toContain('/contacts');
    expect(await create.textContent()).toContain('201');
    await page.evaluate(`document.querySelector('[data-section-id="tag/Contacts/operation/createContact"]').scrollIntoView()`);
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs-operation.png') });

    // Search (run in Redoc's worker, from a blob: URL) finds operations by their summary.
    const search = page.getByPlaceholder('Search...');
    await search.fill('label');
    const results = page.locator('[data-role="search:results"] li[role="menuitem"]');
    await results.first().waitFor({ timeout: 15_000 });
    const found = (await results.allTextContents()).join(' | ');
    expect(found).toMatch(/Create a label/);
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs-search.png') });
    // A result leads to its operation.
    await results.filter({ hasText: 'Create a label' }).first().click();
    await expect.poll(() => page.url()).toContain('operation/createLabel');
    await search.fill('upsert');
    // Found by a word of its description: the summary is "Create or upsert up to 100 contacts".
    await expect
      .poll(async () => (await results.allTextContents()).join(' | '), { timeout: 15_000 })
      .toMatch(/Create or upsert up to 100 contacts/);
    await page.goto(`${server.url}/docs`);
    await create.waitFor({ timeout: 30_000 });

    await page.screenshot({ path: path.join(ARTIFACTS, 'docs.png') });

    const origin = new URL(server.url).origin;
    const foreign = requests.filter((url) => !url.startsWith(`${origin}/`) && !/^(data|blob):/.test(url));
    expect(foreign).toEqual([]);
    expect(requests).toContain(`${origin}/api/v1/openapi.json`);
    expect(errors).toEqual([]);
    await context.close();
  });

  /**
   * Accessible at both widths in both colour schemes (issue 42): no serious or critical axe-core
   * violation (Redoc's default colours missed contrast, its code blocks scrolled without keyboard
   * access, a sidebar item's accessible name did not match its text); every scrollable region can
   * be reached and scrolled with the keyboard, and shows where the focus is.
   */
  for (const width of [1280, 375] as const)
    for (const colorScheme of ['light', 'dark'] as const)
      it(`is accessible at ${width} px, ${colorScheme} scheme`, async () => {
        const context = await browser.newContext({ viewport: { width, height: 900 }, colorScheme });
        const page = await context.newPage();
        const errors: string[] = [];
        watchConsole(page, errors);
        await page.goto(`${server.url}/docs`);
        await page.locator('[data-section-id="tag/Contacts/operation/createContact"]').waitFor({ timeout: 30_000 });
        // Once Redoc has rendered: the marker our script sets after its last pass over the page.
        await page.locator('html[data-reference-ready]').waitFor({ state: 'attached', timeout: 30_000 });
        expect(await seriousA11yViolations(page)).toEqual([]);

        // Scrollable code samples: in the tab order, named, and focus drawn around them.
        const scrollables = (await page.evaluate(`[...document.querySelectorAll('#redoc *')]
          .filter((e) => { const s = getComputedStyle(e); return e.getClientRects().length > 0 && ((/(auto|scroll)/.test(s.overflowX) && e.scrollWidth > e.clientWidth + 1) || (/(auto|scroll)/.test(s.overflowY) && e.scrollHeight > e.clientHeight + 1)); })
          .map((e) => ({ tabindex: e.getAttribute('tabindex'), name: e.getAttribute('aria-label') || e.getAttribute('aria-labelledby') || '' }))`)) as {
          tabindex: string | null;
          name: string;
        }[];
        expect(scrollables.length).toBeGreaterThan(0);
        for (const region of scrollables) {
          expect(region.tabindex).toBe('0');
          expect(region.name).not.toBe('');
        }
        const sample = page.locator('#redoc pre[tabindex="0"]').first();
        await sample.focus();
        // A string is evaluated in the page (this file is compiled without the DOM's types).
        const focused = (await page.evaluate(
          `(() => { const e = document.activeElement; const s = getComputedStyle(e); return { tag: e.tagName, outline: s.outlineStyle + ' ' + s.outlineWidth }; })()`,
        )) as { tag: string; outline: string };
        expect(focused.tag).toBe('PRE');
        expect(focused.outline).not.toMatch(/^none|\b0px$/);
        await page.screenshot({ path: path.join(ARTIFACTS, `docs-a11y-${width}-${colorScheme}.png`) });
        expect(errors).toEqual([]);
        await context.close();
      });

  it('is readable on a phone (375 px)', async () => {
    const { context, page, errors } = await watchedPage(375);
    await page.goto(`${server.url}/docs`);
    await page.locator('[data-section-id="tag/Contacts/operation/createContact"]').waitFor({ timeout: 30_000 });
    // No sideways scrolling of the page itself.
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(375);
    await page.screenshot({ path: path.join(ARTIFACTS, 'docs-phone.png') });
    expect(errors).toEqual([]);
    await context.close();
  });
});
