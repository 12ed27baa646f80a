import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acmeOrg, adminPage, ARTIFACTS, callApi, hasChromium, startLiveServer, type LiveServer } from './browser.js';

/**
 * Developer → Logs and Usage in a real Chromium (issue 20, items 3-4): requests made with a key,
 * one found by the request_id a caller would quote, with the event it caused; usage charted.
 * Screenshots: artifacts/logs.png, logs-request.png, usage.png.
 */
describe.skipIf(!hasChromium)('request log and usage in a browser', { timeout: 120_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  let page: Page;
  const consoleErrors: string[] = [];
  let key = '';

  const api = (method: string, url: string, body?: unknown) => callApi(server, key, method, url, body);

  beforeAll(async () => {
    server = await startLiveServer();
    key = (await (await acmeOrg(server)).apiKey(['contacts:write'])).key;
    ({ browser, page } = await adminPage(server, consoleErrors));
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('lists requests, finds one by its request_id with its events, and charts usage', async () => {
    const created = await api('POST', '/contacts', { first_name: 'Grace', email: 'grace@example.com' });
    expect(created.status).toBe(201);
    const refused = await api('POST', '/contacts', { first_name: 'Grace', email: 'grace@example.com' });
    expect(refused.status).toBe(409);
    for (let i = 0; i < 3; i++) await api('GET', '/contacts?limit=5');
    // The log is written in batches, within a second.
    await expect
      .poll(async () => {
        await page.goto(`${server.url}/settings/developer/logs`);
        return page.locator('main table tbody tr').count();
      })
      .toBe(5);
    expect(await page.locator('main table tbody tr').first().textContent()).toContain('GET /api/v1/contacts');
    expect(await page.getByRole('row', { name: new RegExp(refused.requestId) }).textContent()).toContain('contact_exists');
    await page.screenshot({ path: path.join(ARTIFACTS, 'logs.png'), fullPage: true });

    // What a caller quotes, pasted into the search box.
    await page.getByLabel('Find a request by its id').fill(created.requestId);
    await page.getByRole('button', { name: 'Find' }).click();
    const card = page.locator('section.card');
    expect(await card.textContent()).toContain('contact.created');
    expect(await card.textContent()).toContain(created.json.id);
    await page.screenshot({ path: path.join(ARTIFACTS, 'logs-request.png'), fullPage: true });

    await page.getByRole('link', { name: 'Usage' }).click();
    expect(await page.locator('meter#quota').getAttribute('value')).toBe('5');
    const chart = page.getByRole('img', { name: /All keys of Acme Ltd: 5 requests in 30 days/ });
    expect(await chart.count()).toBe(1);
    await page.getByText('Requests per day as a table').click();
    const today = new Date().toISOString().slice(0, 10);
    expect(
      await page
        .getByRole('row', { name: new RegExp(today) })
        .first()
        .textContent(),
    ).toMatch(/4\s*0\s*1\s*0\s*0\s*5/);
    await page.screenshot({ path: path.join(ARTIFACTS, 'usage.png'), fullPage: true });
    expect(consoleErrors).toEqual([]);
  });
});
