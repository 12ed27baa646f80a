import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acmeOrg, adminPage, ARTIFACTS, callApi, hasChromium, startLiveServer, type LiveServer } from './browser.js';

/**
 * Activity and a contact's Timeline in a real Chromium (issue 20, item 2): changes made through
 * the API with a key and in the dashboard by a person, then read back as who did what.
 * Screenshots: artifacts/activity*.png, contact-timeline.png, group-timeline.png.
 */
describe.skipIf(!hasChromium)('activity in a browser', { timeout: 120_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  let page: Page;
  const consoleErrors: string[] = [];
  let key = '';
  let keyId = '';

  const api = (method: string, url: string, body?: unknown) => callApi(server, key, method, url, body);

  beforeAll(async () => {
    server = await startLiveServer();
    const created = await (await acmeOrg(server)).apiKey(['contacts:write', 'groups:write']);
    key = created.key;
    keyId = created.id;
    ({ browser, page } = await adminPage(server, consoleErrors));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('shows who changed what, before → after, on Activity and on the contact’s and group’s timelines', async () => {
    const grace = (await api('POST', '/contacts', { first_name: 'Grace', last_name: 'Hopper', email: 'grace@example.com' })).json;
    const patched = await api('PATCH', `/contacts/${grace.id}`, { phone: '+1 555 0100', notes: 'Navy' });
    expect(patched.status).toBe(200);
    const group = (await api('POST', '/groups', { name: 'Pioneers' })).json;
    await api('POST', `/groups/${group.id}/members`, { contact_ids: [grace.id] });
    // A person edits the contact in the dashboard.
    await page.goto(`${server.url}/contacts/${grace.id}`);
    await page.getByLabel('Last name').fill('Hopper (RADM)');
    await page.getByRole('button', { name: 'Save changes' }).click();
    await page.waitForURL(`${server.url}/contacts/${grace.id}`);

    await page.goto(`${server.url}/activity`);
    // The data's events; the admin's sign-in (an identity change, shown to admins) is there too.
    expect(await page.locator('table.activity > tbody > tr').filter({ hasText: 'member.signed_in' }).count()).toBe(1);
    const rows = page.locator('table.activity > tbody > tr').filter({ hasNotText: 'member.signed_in' });
    expect(await rows.count()).toBe(5);
    const newest = rows.first();
    expect(await newest.textContent()).toContain('ada@example.com');
    expect(await newest.textContent()).toContain('contact.updated');
    const byKey = page.getByRole('row', { name: new RegExp(patched.requestId) });
    expect(await byKey.textContent()).toContain(`CRM sync (key …${key.slice(-4)})`);
    await byKey.getByText('2 fields changed').click();
    expect(await byKey.getByRole('cell', { name: '+1 555 0100' }).count()).toBe(1);
    await page.screenshot({ path: path.join(ARTIFACTS, 'activity.png'), fullPage: true });

    // Filter by the key: only its events.
    await page.getByLabel('Who').selectOption(keyId);
    await page.getByRole('button', { name: 'Show' }).click();
    await page.waitForURL(/actor=/);
    expect(await rows.count()).toBe(4);
    await page.screenshot({ path: path.join(ARTIFACTS, 'activity-by-key.png'), fullPage: true });

    // The contact's timeline: the dashboard's edit and the key's, newest first.
    await page.goto(`${server.url}/contacts/${grace.id}`);
    const timeline = page.locator('#timeline + table > tbody > tr');
    expect(await timeline.count()).toBe(4);
    for (const summary of await page.locator('#timeline + table summary').all()) await summary.click();
    expect(await timeline.first().textContent()).toContain('Hopper (RADM)');
    await page.locator('#timeline').scrollIntoViewIfNeeded();
    await page.screenshot({ path: path.join(ARTIFACTS, 'contact-timeline.png'), fullPage: true });

    await page.goto(`${server.url}/groups/${group.id}`);
    expect(await page.locator('#timeline + table > tbody > tr').count()).toBe(2);
    await page.screenshot({ path: path.join(ARTIFACTS, 'group-timeline.png'), fullPage: true });
    await page.getByRole('link', { name: 'Open in Activity' }).click();
    await page.waitForURL(/subject=/);
    expect(await rows.count()).toBe(2);
    expect(consoleErrors).toEqual([]);
  });
});
