import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrg } from '../../src/domain/orgs/orgs.js';
import { ARTIFACTS, hasChromium, launchBrowser, signInAs, startLiveServer, watchConsole, type LiveServer } from './browser.js';

const PASSWORD = 'correct horse battery';

/**
 * The dashboard in a real headless Chromium against the real server on a loopback port: what an
 * admin and a member see and do, and how the API sees the same records. Screenshots of the key and
 * contacts pages are written to artifacts/.
 */
describe.skipIf(!hasChromium)('dashboard in a browser', { timeout: 120_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  let admin: BrowserContext;
  let page: Page;
  const consoleErrors: string[] = [];
  let orgId = '';

  const api = (key: string, method: string, url: string, body?: unknown) =>
    fetch(`${server.url}/api/v1${url}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });

  async function createKey(p: Page, name: string, scopes: string[]): Promise<string> {
    await p.goto(`${server.url}/settings/developer`);
    await p.getByLabel('Name').fill(name);
    for (const scope of scopes) await p.getByLabel(scope, { exact: true }).check();
    await p.getByRole('button', { name: 'Create key' }).click();
    expect(await p.getByText('You will not see it again').count()).toBeGreaterThan(0);
    const key = (await p.locator('#new-key').textContent())?.trim() ?? '';
    expect(key).toMatch(/^od_live_[A-Za-z0-9]{43}$/);
    return key;
  }

  beforeAll(async () => {
    server = await startLiveServer();
    const made = await createOrg(server.db.kysely, { name: 'Acme Ltd', adminEmail: 'ada@example.com', adminPassword: PASSWORD });
    orgId = made.org.id;
    browser = await launchBrowser();
    admin = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    await admin.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.url });
    page = await admin.newPage();
    watchConsole(page, consoleErrors);
    await signInAs(page, server.url, 'ada@example.com', PASSWORD);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
  });

  it('an admin makes a key, copies it, uses it against the API, and revoking it stops it', async () => {
    await page.goto(`${server.url}/settings/developer`);
    // Ticking a write scope ticks its read scope.
    await page.getByLabel('contacts:write', { exact: true }).check();
    expect(await page.getByLabel('contacts:read', { exact: true }).isChecked()).toBe(true);
    const key = await createKey(page, 'CRM sync', ['contacts:write', 'files:write']);
    await page.screenshot({ path: path.join(ARTIFACTS, 'developer-key-created.png'), fullPage: true });
    await page.getByRole('button', { name: 'Copy' }).click();
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(key);

    const list = await api(key, 'GET', '/contacts');
    expect(list.status).toBe(200);
    expect(list.headers.get('ratelimit-policy')).toContain('"default"');

    await page.goto(`${server.url}/settings/developer`);
    const row = page.getByRole('row', { name: /CRM sync/ });
    expect(await row.textContent()).toContain(`…${key.slice(-4)}`);
    await page.screenshot({ path: path.join(ARTIFACTS, 'developer-keys.png'), fullPage: true });
    await row.getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('button', { name: /Revoke/ }).click();
    expect((await api(key, 'GET', '/contacts')).status).toBe(401);
  });

  it('records flow both ways: dashboard → API and API → dashboard', async () => {
    const key = await createKey(page, 'Two-way', ['contacts:write']);
    await page.goto(`${server.url}/contacts/new`);
    await page.getByLabel('First name').fill('Grace');
    await page.getByLabel('Last name').fill('Hopper');
    await page.getByLabel('Email').fill('not-an-email');
    await page.getByRole('button', { name: 'Create contact' }).click();
    expect(await page.locator('#f-email-error').textContent()).toBe('Email must be an email address such as ada@example.com.');
    await page.getByLabel('Email').fill('grace@example.com');
    await page.getByRole('button', { name: 'Create contact' }).click();
    const fromDashboard = (await (await api(key, 'GET', '/contacts?email=grace@example.com')).json()) as { data: unknown[] };
    expect(fromDashboard.data[0]).toMatchObject({ first_name: 'Grace', last_name: 'Hopper', source_type: 'manual' });

    const made = await api(key, 'POST', '/contacts', { first_name: 'Ada', last_name: 'Lovelace', email: 'ada.lovelace@example.com' });
    expect(made.status).toBe(201);
    await page.goto(`${server.url}/contacts`);
    expect(await page.getByRole('link', { name: 'Ada Lovelace' }).count()).toBe(1);
    await page.screenshot({ path: path.join(ARTIFACTS, 'contacts.png'), fullPage: true });
    await page.getByLabel('Search').fill('lovelace');
    await page.getByRole('button', { name: 'Search' }).click();
    expect(await page.getByRole('link', { name: 'Grace Hopper' }).count()).toBe(0);
    expect(await page.getByRole('link', { name: 'Ada Lovelace' }).count()).toBe(1);
  });

  it('imports contacts from a CSV file and reports each row', async () => {
    const key = await createKey(page, 'Import check', ['contacts:read']);
    await page.goto(`${server.url}/import`);
    const csv = 'first_name,last_name,email\nAlan,Turing,alan@example.com\nKatherine,Johnson,katherine@example.com\n';
    await page.getByLabel('CSV file').setInputFiles({ name: 'people.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) });
    await page.getByRole('button', { name: 'Import' }).click();
    expect(await page.getByText('alan@example.com').count()).toBeGreaterThan(0);
    const imported = (await (await api(key, 'GET', '/contacts?email=alan@example.com')).json()) as { data: unknown[] };
    expect(imported.data[0]).toMatchObject({ first_name: 'Alan', source_type: 'csv_import' });
  });

  it('uploads a file through the two-step reservation and downloads it byte-identical', async () => {
    const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
    await page.goto(`${server.url}/files`);
    await page
      .getByLabel('File', { exact: true })
      .setInputFiles({ name: 'report é.bin', mimeType: 'application/octet-stream', buffer: bytes });
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.waitForURL(/\/files\?uploaded=/);
    expect(await page.getByText('report é.bin').count()).toBeGreaterThan(0);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page
        .getByRole('link', { name: /Download/ })
        .first()
        .click(),
    ]);
    const saved = await download.path();
    expect(download.suggestedFilename()).toBe('report é.bin');
    const got = readFileSync(saved);
    expect(createHash('sha256').update(got).digest('hex')).toBe(createHash('sha256').update(bytes).digest('hex'));
  });

  it("keeps members out of Settings, and a demoted admin's keys stop working at once", async () => {
    // The admin invites a second admin and a member from Settings → Members (no mail configured:
    // the link is shown), and each opens their link and chooses their own password.
    for (const [email, role] of [
      ['bob@example.com', 'admin'],
      ['mia@example.com', 'member'],
    ] as const) {
      await page.goto(`${server.url}/settings/members`);
      await page.getByLabel('Email').fill(email);
      await page.getByLabel('Role', { exact: true }).selectOption(role);
      await page.getByRole('button', { name: 'Invite', exact: true }).click();
      const link = (await page.locator('#invite-link').textContent())?.trim() ?? '';
      expect(link).toMatch(new RegExp(`^${server.url}/invite/[A-Za-z0-9_-]{43}$`));
      const joining = await browser.newContext();
      const joiner = await joining.newPage();
      watchConsole(joiner, consoleErrors);
      await joiner.goto(link);
      await joiner.getByLabel('Choose a password').fill(PASSWORD);
      await joiner.getByRole('button', { name: /^Join (?!with)/ }).click();
      await joiner.waitForURL(`${server.url}/contacts`);
      await joining.close();
      await page.goto(`${server.url}/settings/members`);
      expect(await page.getByRole('row', { name: new RegExp(email) }).count()).toBeGreaterThan(0);
    }

    const memberContext = await browser.newContext();
    const memberPage = await memberContext.newPage();
    watchConsole(memberPage, consoleErrors);
    await signInAs(memberPage, server.url, 'mia@example.com', PASSWORD);
    expect(await memberPage.getByRole('link', { name: 'Developer' }).count()).toBe(0);
    const denied = await memberPage.goto(`${server.url}/settings/developer`);
    expect(denied?.status()).toBe(403);
    await memberContext.close();

    const bobContext = await browser.newContext();
    const bobPage = await bobContext.newPage();
    watchConsole(bobPage, consoleErrors);
    await signInAs(bobPage, server.url, 'bob@example.com', PASSWORD);
    const bobKey = await createKey(bobPage, "Bob's integration", ['contacts:read']);
    expect((await api(bobKey, 'GET', '/contacts')).status).toBe(200);
    await bobContext.close();

    // Ada demotes Bob: the page warns that his key will be revoked, then his key is refused.
    await page.goto(`${server.url}/settings/members`);
    const bobRow = page.getByRole('row', { name: /bob@example.com/ });
    await bobRow.getByLabel(/Role/).selectOption('member');
    await bobRow.getByRole('button', { name: /Change role|Save/ }).click();
    expect(await page.getByText(/revokes the 1 API key/).count()).toBeGreaterThan(0);
    await page.getByRole('button', { name: /Demote|Confirm/ }).click();
    expect((await api(bobKey, 'GET', '/contacts')).status).toBe(401);
    expect(orgId).toMatch(/^org_/);
  });

  it('fits every page at phone width (375 px): no horizontal scroll, every navigation link on screen behind the Menu button', async () => {
    const key = await createKey(page, 'Phone check', ['contacts:write', 'groups:write']);
    const contact = (await (
      await api(key, 'POST', '/contacts', {
        first_name: 'Wilhelmina-Konstantinopolitanische',
        last_name: 'Donaudampfschifffahrtsgesellschaftskapitän',
        email: 'a.very.long.address.for.a.narrow.screen@subdomain.example.com',
        phone: '+44 20 7946 0018',
        notes: 'x'.repeat(300),
      })
    ).json()) as { id: string };
    const group = (await (await api(key, 'POST', '/groups', { name: 'Phone group', description: 'y'.repeat(200) })).json()) as {
      id: string;
    };
    const tooWide: string[] = [];
    const phone = await browser.newContext({ viewport: { width: 375, height: 740 }, isMobile: true, hasTouch: true });
    const small = await phone.newPage();
    watchConsole(small, consoleErrors);
    try {
      const pages = ['/login', '/docs', '/docs/api/errors', '/docs/client'];
      for (const url of pages) await expectFits(small, url);
      await signInAs(small, server.url, 'ada@example.com', PASSWORD);
      for (const url of [
        '/contacts',
        '/contacts?q=Wilhelmina',
        '/contacts/new',
        `/contacts/${contact.id}`,
        `/contacts/${contact.id}/delete`,
        '/labels',
        '/groups',
        `/groups/${group.id}`,
        `/groups/${group.id}/delete`,
        '/files',
        '/import',
        '/settings/members',
        '/settings/developer',
        '/settings/developer/webhooks',
      ]) {
        await expectFits(small, url);
        // The navigation folds behind the Menu button on a phone: open it, and every link is on screen.
        const menu = small.getByRole('button', { name: 'Menu', exact: true });
        expect(await menu.getAttribute('aria-expanded'), url).toBe('false');
        await menu.click();
        expect(await menu.getAttribute('aria-expanded'), url).toBe('true');
        for (const name of ['Contacts', 'Members', 'Developer']) {
          const box = await small.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true }).boundingBox();
          expect(box, `${url}: ${name}`).not.toBeNull();
          expect(box!.x, `${url}: ${name}`).toBeGreaterThanOrEqual(0);
          expect(box!.x + box!.width, `${url}: ${name}`).toBeLessThanOrEqual(375);
        }
      }
      expect(tooWide).toEqual([]);
      await small.goto(`${server.url}/settings/developer`);
      await small.screenshot({ path: path.join(ARTIFACTS, 'developer-375px.png'), fullPage: true });
    } finally {
      await phone.close();
    }

    async function expectFits(p: Page, url: string): Promise<void> {
      const res = await p.goto(`${server.url}${url}`);
      expect(res?.status(), url).toBeLessThan(400);
      const width = (await p.evaluate('document.documentElement.scrollWidth')) as number;
      if (width > 375) {
        const culprits = await p.evaluate(
          `[...document.querySelectorAll('body *')].filter((e) => !e.closest('table, pre') && e.getBoundingClientRect().right > 375).slice(0, 3).map((e) => e.tagName + '.' + e.className)`,
        );
        tooWide.push(`${url} is ${width} px wide: ${String(culprits)}`);
      }
    }
  });

  it('raised no JavaScript errors in any page', () => {
    expect(consoleErrors).toEqual([]);
  });
});
