import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/domain/apiKeys/apiKeys.js';
import { createOrg } from '../../src/domain/orgs/orgs.js';
import { ARTIFACTS, hasChromium, launchBrowser, signInAs, startLiveServer, watchConsole, type LiveServer } from './browser.js';

const PASSWORD = 'correct horse battery';

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

  const api = async (method: string, url: string, body?: unknown) => {
    const res = await fetch(`${server.url}/api/v1${url}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, requestId: res.headers.get('request-id') ?? '', json: (await res.json()) as { id: string } };
  };

  beforeAll(async () => {
    server = await startLiveServer();
    const made = await createOrg(server.db.kysely, { name: 'Acme Ltd', adminEmail: 'ada@example.com', adminPassword: PASSWORD });
    key = (
      await createApiKey({ db: server.db.kysely, orgId: made.org.id, userId: made.user.id, now: new Date() }, server.config.secretKey, {
        name: 'CRM sync',
        scopes: ['contacts:write'],
      })
    ).key;
    browser = await launchBrowser();
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await context.newPage();
    watchConsole(page, consoleErrors);
    await signInAs(page, server.url, 'ada@example.com', PASSWORD);
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
