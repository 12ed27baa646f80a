import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGroup } from '../../src/domain/groups/groups.js';
import { createLabel } from '../../src/domain/labels/labels.js';
import { seedContacts } from '../helpers/contactSeed.js';
import { acmeOrg, adminPage, ARTIFACTS, hasChromium, startLiveServer, type LiveServer } from './browser.js';

/**
 * The contacts list's power tools in Chromium (issue 20, item 5): sort by a column, page forward
 * and back, tick rows (one by one and the whole page), add them to a label, then delete them after
 * the confirmation. Screenshots: artifacts/contacts-bulk-*.png.
 */
describe.skipIf(!hasChromium)('contacts list power tools in a browser', { timeout: 120_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  let page: Page;
  const consoleErrors: string[] = [];
  let labelId = '';

  beforeAll(async () => {
    server = await startLiveServer();
    const acme = await acmeOrg(server);
    const { org } = acme;
    const ctx = acme.adminCtx();
    const people = ['Lovelace', 'Hopper', 'Turing', 'Noether', 'Curie', 'Franklin', 'Meitner', 'Goodall'];
    await seedContacts(org, 60, (i) => ({
      first_name: ['Ada', 'Grace', 'Alan', 'Emmy', 'Marie', 'Rosalind', 'Lise', 'Jane'][i % 8]!,
      last_name: `${people[i % 8]} ${i}`,
      email: `person${i}@example.com`,
    }));
    labelId = (await createLabel(ctx, { name: 'Newsletter' })).id;
    await createGroup(ctx, { name: 'Volunteers' });
    ({ browser, page } = await adminPage(server, consoleErrors));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  const rowsShown = () => page.locator('tbody input[name=ids]').count();

  it('sorts, pages both ways, ticks rows, adds a label and deletes after confirming', async () => {
    await page.goto(`${server.url}/contacts`);
    expect(await page.locator('#contacts-count').textContent()).toBe('60 contacts');
    // Sort by name, then page forward and back.
    await page.getByRole('link', { name: 'Name' }).click();
    await page.waitForURL(/sort=last_name/);
    expect(await page.locator('th[aria-sort=ascending]').textContent()).toContain('Name');
    const firstPage = await page.locator('tbody input[name=ids]').evaluateAll((boxes) => boxes.map((b) => b.getAttribute('value')));
    await page.getByRole('link', { name: 'Next page' }).click();
    await page.getByRole('link', { name: 'Previous page' }).click();
    expect(await page.locator('tbody input[name=ids]').evaluateAll((boxes) => boxes.map((b) => b.getAttribute('value')))).toEqual(
      firstPage,
    );
    // 50 a page.
    await page.getByLabel('Per page').selectOption('50');
    await page.getByRole('button', { name: 'Search' }).click();
    expect(await rowsShown()).toBe(50);

    // Search, tick the whole page with the header box, untick one: add the label to the rest.
    await page.getByLabel('Search', { exact: true }).fill('ada');
    await page.getByRole('button', { name: 'Search' }).click();
    expect(await page.locator('#contacts-count').textContent()).toBe('8 contacts');
    await page.getByLabel('Select every contact on this page').check();
    await page.getByLabel('Select Ada Lovelace 0').uncheck();
    // The bulk box shows only the picker the action needs.
    await page.getByLabel('Action').selectOption('add_to_group');
    expect(await page.getByLabel('Group to add to').isVisible()).toBe(true);
    expect(await page.getByLabel('Label to add').isVisible()).toBe(false);
    await page.getByLabel('Action').selectOption('delete');
    expect(await page.getByLabel('Group to add to').isVisible()).toBe(false);
    expect(await page.getByLabel('Label to add').isVisible()).toBe(false);
    await page.getByLabel('Action').selectOption('add_label');
    expect(await page.getByLabel('Label to add').isVisible()).toBe(true);
    expect(await page.getByLabel('Group to add to').isVisible()).toBe(false);
    await page.getByLabel('Label to add').selectOption(labelId);
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.waitForURL(/\/contacts\?q=ada/);
    expect(await page.locator('.notice').textContent()).toContain('Label added to 7 contacts.');
    expect(await page.locator('tbody .chip', { hasText: 'Newsletter' }).count()).toBe(7);
    await page.screenshot({ path: path.join(ARTIFACTS, 'contacts-bulk-labelled.png'), fullPage: true });

    // Delete every contact of the search: the confirmation says how many.
    await page.getByLabel(/All 8 contacts matching this search/).check();
    await page.getByLabel('Action').selectOption('delete');
    await page.getByRole('button', { name: 'Apply' }).click();
    // It names the first two (in the list's order, by name) and how many others.
    await page.getByRole('heading', { name: 'Delete Ada Lovelace 0, Ada Lovelace 16 and 6 others?' }).waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'contacts-bulk-confirm.png'), fullPage: true });
    await page.getByRole('button', { name: 'Delete 8 contacts' }).click();
    await page.waitForURL(/\/contacts\?q=ada/);
    expect(await page.locator('.notice').textContent()).toContain('Deleted 8 contacts.');
    expect(await page.locator('#contacts-count').textContent()).toBe('0 contacts');
    await page.goto(`${server.url}/contacts`);
    expect(await page.locator('#contacts-count').textContent()).toBe('52 contacts');
    await page.screenshot({ path: path.join(ARTIFACTS, 'contacts-bulk-after.png'), fullPage: true });
    expect(consoleErrors).toEqual([]);
  });
});
