import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGroup } from '../../src/domain/groups/groups.js';
import { addMembers } from '../../src/domain/groups/members.js';
import { seedContacts } from '../helpers/contactSeed.js';
import { acmeOrg, adminPage, ARTIFACTS, hasChromium, startLiveServer, type LiveServer } from './browser.js';

/**
 * Issue 32 item 5, the small frictions, in Chromium: the contacts list newest first, a group's
 * picker without its members, adding a contact to a group from its page, validation sentences,
 * and the Logs filters given room at 1280 and 375 px. Screenshots: artifacts/frictions-*.png.
 */
describe.skipIf(!hasChromium)('small frictions in a browser', { timeout: 120_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  let page: Page;
  const consoleErrors: string[] = [];
  let ids: string[] = [];
  let groupId = '';
  let key = '';

  beforeAll(async () => {
    server = await startLiveServer();
    const acme = await acmeOrg(server);
    const { org } = acme;
    const ctx = acme.adminCtx();
    const people = ['Lovelace', 'Hopper', 'Turing', 'Noether'];
    ids = await seedContacts(org, 12, (i) => ({
      first_name: ['Ada', 'Grace', 'Alan', 'Emmy'][i % 4]!,
      last_name: `${people[i % 4]} ${i}`,
      email: `person${i}@example.com`,
    }));
    groupId = (await createGroup(ctx, { name: 'Volunteers' })).id;
    await createGroup(ctx, { name: 'Speakers' });
    // Ada Lovelace 0 and 4 are members already.
    await addMembers(ctx, groupId, [ids[0]!, ids[4]!]);
    key = (await acme.apiKey(['contacts:read'])).key;
    ({ browser, page } = await adminPage(server, consoleErrors));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('opens the contacts list newest first', async () => {
    await page.goto(`${server.url}/contacts`);
    const shown = await page.locator('tbody input[name=ids]').evaluateAll((boxes) => boxes.map((b) => b.getAttribute('value')));
    expect(shown).toEqual([...ids].reverse());
    expect(await page.locator('th[aria-sort=descending]').textContent()).toContain('Created');
    await page.screenshot({ path: path.join(ARTIFACTS, 'frictions-contacts.png'), fullPage: true });
  });

  it("offers only non-members in a group's picker", async () => {
    await page.goto(`${server.url}/groups/${groupId}`);
    await page.getByLabel('Search contacts').fill('ada');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    const offered = await page
      .locator('fieldset.checks input[name=contact_ids]')
      .evaluateAll((boxes) => boxes.map((b) => b.getAttribute('value')));
    expect(offered.sort()).toEqual([ids[8]!].sort());
    await page.getByLabel(/Ada Lovelace 8/).check();
    await page.getByRole('button', { name: 'Add to group', exact: true }).click();
    expect(await page.locator('.notice').textContent()).toContain('the group has 3 members');
    // Everyone found is a member now: the page says so instead of offering them.
    await page.goto(`${server.url}/groups/${groupId}?q=ada`);
    expect(await page.locator('main').textContent()).toContain('Every contact matching “ada” is already in the group.');
    await page.screenshot({ path: path.join(ARTIFACTS, 'frictions-group.png'), fullPage: true });
  });

  it("adds a contact to a group from the contact's page", async () => {
    await page.goto(`${server.url}/contacts/${ids[1]}`);
    const picker = page.getByLabel('Group', { exact: true });
    expect(await picker.locator('option').allTextContents()).toEqual(['Volunteers', 'Speakers']);
    await picker.selectOption({ label: 'Speakers' });
    await page.getByRole('button', { name: 'Add to group', exact: true }).click();
    expect(await page.locator('.notice').textContent()).toContain('Added to Speakers.');
    expect(await page.locator('ul.contact-groups').textContent()).toContain('Speakers');
    expect(await page.getByLabel('Group', { exact: true }).locator('option').allTextContents()).toEqual(['Volunteers']);
    await page.screenshot({ path: path.join(ARTIFACTS, 'frictions-contact-groups.png'), fullPage: true });
  });

  it('says what is wrong with a field in a sentence', async () => {
    await page.goto(`${server.url}/contacts/new`);
    await page.getByLabel('Email').fill('not an address');
    await page.getByRole('button', { name: 'Create contact' }).click();
    expect(await page.locator('#f-first_name-error').textContent()).toBe("First name can't be empty.");
    expect(await page.locator('#f-email-error').textContent()).toBe('Email must be an email address such as ada@example.com.');
    await page.screenshot({ path: path.join(ARTIFACTS, 'frictions-validation.png'), fullPage: true });
  });

  it('gives each Logs filter room, labels above inputs, at 1280 and 375 px', async () => {
    for (let i = 0; i < 2; i++) await fetch(`${server.url}/api/v1/contacts?limit=1`, { headers: { authorization: `Bearer ${key}` } });
    for (const width of [1280, 375]) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${server.url}/settings/developer/logs`);
      const fields = await page.locator('form.filters .field').evaluateAll((nodes) =>
        nodes.map((node) => {
          const label = node.querySelector('label')!.getBoundingClientRect();
          const input = node.querySelector('input, select')!.getBoundingClientRect();
          return { labelBottom: label.bottom, inputTop: input.top, left: input.left, right: input.right, width: input.width };
        }),
      );
      expect(fields.length).toBe(4);
      for (const f of fields) {
        expect(f.labelBottom).toBeLessThanOrEqual(f.inputTop + 1);
        // Room: at least 12rem (or the whole width on a phone), and inside the page.
        expect(f.width).toBeGreaterThanOrEqual(Math.min(192, width - 40));
        expect(f.left).toBeGreaterThanOrEqual(0);
        expect(f.right).toBeLessThanOrEqual(width);
      }
      expect((await page.evaluate('document.documentElement.scrollWidth')) as number).toBeLessThanOrEqual(width);
      await page.screenshot({ path: path.join(ARTIFACTS, `frictions-logs-${width}.png`), fullPage: true });
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  });

  it('shows the pages it changed at 1280 and 375 px (screenshots), the bulk box with one picker', async () => {
    for (const width of [1280, 375]) {
      await page.setViewportSize({ width, height: 900 });
      await page.goto(`${server.url}/contacts`);
      // Add label is not offered (no label yet): Add to group is the first action, its picker alone.
      expect(await page.getByLabel('Group to add to').isVisible()).toBe(true);
      expect(await page.getByLabel('Label to add').count()).toBe(0);
      await page.screenshot({ path: path.join(ARTIFACTS, `frictions-contacts-${width}.png`), fullPage: true });
      await page.goto(`${server.url}/contacts/${ids[2]}`);
      await page.screenshot({ path: path.join(ARTIFACTS, `frictions-contact-${width}.png`), fullPage: true });
      await page.goto(`${server.url}/groups/${groupId}?q=grace`);
      await page.screenshot({ path: path.join(ARTIFACTS, `frictions-group-${width}.png`), fullPage: true });
      await page.goto(`${server.url}/labels`);
      await page.screenshot({ path: path.join(ARTIFACTS, `frictions-labels-empty-${width}.png`), fullPage: true });
    }
    await page.setViewportSize({ width: 1280, height: 900 });
    await page.goto(`${server.url}/contacts`);
    await page.getByLabel('Select every contact on this page').check();
    await page.getByLabel('Action').selectOption('delete');
    await page.getByRole('button', { name: 'Apply' }).click();
    await page.getByRole('heading', { name: 'Delete Emmy Noether 11, Alan Turing 10 and 10 others?' }).waitFor();
    await page.screenshot({ path: path.join(ARTIFACTS, 'frictions-delete-confirm.png'), fullPage: true });
    expect(consoleErrors).toEqual([]);
  });
});
