import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChallenge } from '../../src/domain/identity/challenges.js';
import { addUser, createOrg } from '../../src/domain/orgs/orgs.js';
import { setupToken } from '../../src/domain/orgs/setup.js';
import { seriousA11yViolations } from './accessibility.js';
import { ARTIFACTS, hasChromium, launchBrowser, startLiveServer, watchConsole, type LiveServer } from './browser.js';

const PASSWORD = 'correct horse battery';
const WIDTHS = [1280, 375] as const;
const SCHEMES = ['light', 'dark'] as const;
/** A phone's closed navigation bar may be this tall at most (one row: the name and the Menu button). */
const PHONE_NAV_MAX = 64;

/**
 * Every dashboard page, signed out and signed in as an admin with data in every list, at 1280 and
 * 375 px in a real Chromium: no serious or critical axe-core violation, no sideways scrolling, a
 * closed phone menu one row high, and no heading, button, badge or short word broken inside a
 * word; in the light and the dark colour scheme. A screenshot of each page at each width goes to
 * artifacts/a11y-*.png (a11y-*-dark.png for the dark scheme).
 */
describe.skipIf(!hasChromium)('every dashboard page is accessible at 1280 and 375 px', { timeout: 600_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  const consoleErrors: string[] = [];
  const ids = { contact: '', label: '', group: '', file: '', key: '', webhook: '' };

  const api = async (key: string, method: string, url: string, body?: unknown) => {
    const response = await fetch(`${server.url}/api/v1${url}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const json = (await response.json()) as Record<string, unknown>;
    if (!response.ok) throw new Error(`${method} ${url}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };

  async function signIn(page: Page, email = 'ada@example.com'): Promise<void> {
    await page.goto(`${server.url}/login`);
    await page.getByLabel('Email', { exact: true }).fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await page.waitForURL((url) => !url.pathname.startsWith('/login'));
  }

  /** A second installation without any organisation, for its set-up link's page. */
  let fresh: LiveServer;
  let setupUrl = '';
  const who = { ada: '', dora: '', betaOrg: '' };

  beforeAll(async () => {
    server = await startLiveServer();
    fresh = await startLiveServer();
    setupUrl = `${fresh.url}/setup/${await setupToken(fresh.db.kysely, fresh.config.secretKey)}`;
    const acme = await createOrg(server.db.kysely, { name: 'Acme Ltd', adminEmail: 'ada@example.com', adminPassword: PASSWORD });
    who.ada = acme.user.id;
    // Identity pages: dora (passkeys only) for /sso/link; in Beta, which requires two-factor for
    // everyone, bob (an account Beta's SSO made) and cerys (a plain member) meet the gate.
    who.dora = (await addUser(server.db.kysely, { orgId: acme.org.id, email: 'dora@example.com', password: PASSWORD, role: 'member' })).id;
    await server.db.kysely
      .insertInto('passkeys')
      .values({
        id: 'pk_a11y',
        user_id: who.dora,
        credential_id: 'Y3JlZA',
        public_key: 'cHVibGlj',
        sign_count: 0,
        transports: '[]',
        name: 'Phone',
        created_at: new Date().toISOString(),
        last_used_at: null,
      })
      .execute();
    const beta = await createOrg(server.db.kysely, { name: 'Beta Co', adminEmail: 'boss@beta.example.com', adminPassword: PASSWORD });
    who.betaOrg = beta.org.id;
    await server.db.kysely.updateTable('orgs').set({ require_two_factor: 'everyone' }).where('id', '=', beta.org.id).execute();
    const bob = await addUser(server.db.kysely, { orgId: beta.org.id, email: 'bob@beta.example.com', password: PASSWORD, role: 'member' });
    await server.db.kysely.updateTable('users').set({ sso_org_id: beta.org.id }).where('id', '=', bob.id).execute();
    await addUser(server.db.kysely, { orgId: beta.org.id, email: 'cerys@beta.example.com', password: PASSWORD, role: 'member' });
    browser = await launchBrowser();
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
    const page = await context.newPage();
    await signIn(page);

    // An API key with every scope, then data in every list through the API (which fills the request log too).
    await page.goto(`${server.url}/settings/developer`);
    await page.getByLabel('Name').fill('CRM sync from the warehouse');
    for (const scope of ['contacts:write', 'groups:write', 'files:write']) await page.getByLabel(scope, { exact: true }).check();
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.locator('#new-key').textContent())?.trim() ?? '';
    expect(key).toMatch(/^od_live_/);
    await page.goto(`${server.url}/settings/developer`);
    const revoke = (await page.locator('form[action*="/keys/"]').first().getAttribute('action')) ?? '';
    ids.key = revoke.split('/keys/')[1]!.split('/')[0]!;

    ids.label = (await api(key, 'POST', '/contacts/labels', { name: 'Customers' })).id as string;
    await api(key, 'POST', '/contacts/labels', { name: 'Newsletter subscribers' });
    const people = [
      { first_name: 'Ada', last_name: 'Lovelace', email: 'ada.lovelace@analytical-engines.example.com', phone: '+44 20 7946 0958' },
      { first_name: 'Grace', last_name: 'Hopper', email: 'grace@example.com', phone: '+1 202 555 0143' },
      { first_name: 'Alan', last_name: 'Turing', email: 'alan.turing@bletchley-park.example.org' },
    ];
    const contactIds: string[] = [];
    for (const person of people) contactIds.push((await api(key, 'POST', '/contacts', { ...person, label_ids: [ids.label] })).id as string);
    ids.contact = contactIds[0]!;
    ids.group = (await api(key, 'POST', '/groups', { name: 'Analytical engine club', description: 'People who compute' })).id as string;
    await api(key, 'POST', `/groups/${ids.group}/members`, { contact_ids: contactIds.slice(0, 2) });
    const file = await api(key, 'POST', '/files', { name: 'quarterly-report-2026.pdf', content_type: 'application/pdf', size: 5 });
    ids.file = file.id as string;
    const put = await fetch(file.upload_url as string, { method: 'PUT', body: Buffer.from('%PDF-') });
    expect(put.status).toBe(200);
    await fetch(`${server.url}/api/v1/contacts/con_00000000000000000000`, { headers: { authorization: `Bearer ${key}` } });

    await page.goto(`${server.url}/settings/developer/webhooks`);
    await page.getByLabel('Endpoint URL').fill('https://93.184.216.34/hooks/orgdata');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const link = page.locator('a[href*="/settings/developer/webhooks/"]').first();
    ids.webhook = ((await link.getAttribute('href')) ?? '').split('/webhooks/')[1]!.split(/[/?#]/)[0]!;
    expect(ids.webhook).not.toBe('');
    await context.close();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await server?.close();
    await fresh?.close();
  });

  const signedOutPages = () => [
    { name: 'sign-in', path: '/login' },
    { name: 'forgot-password', path: '/forgot-password' },
    { name: 'reset-password-gone', path: '/reset-password/no-such-token' },
    { name: 'invite-gone', path: '/invite/no-such-token' },
    { name: 'not-found', path: '/no-such-page' },
  ];
  const signedInPages = () => [
    { name: 'home', path: '/' },
    { name: 'contacts', path: '/contacts' },
    { name: 'contacts-search', path: '/contacts?q=zzz-nobody' },
    { name: 'contact-new', path: '/contacts/new' },
    { name: 'contact', path: `/contacts/${ids.contact}` },
    { name: 'contact-delete', path: `/contacts/${ids.contact}/delete` },
    { name: 'contact-missing', path: '/contacts/con_00000000000000000000' },
    { name: 'labels', path: '/labels' },
    { name: 'label-delete', path: `/labels/${ids.label}/delete` },
    { name: 'groups', path: '/groups' },
    { name: 'group', path: `/groups/${ids.group}` },
    { name: 'group-delete', path: `/groups/${ids.group}/delete` },
    { name: 'files', path: '/files' },
    { name: 'file-delete', path: `/files/${ids.file}/delete` },
    { name: 'import', path: '/import' },
    { name: 'activity', path: '/activity' },
    { name: 'members', path: '/settings/members' },
    { name: 'account', path: '/settings/account' },
    { name: 'two-factor', path: '/settings/account/two-factor' },
    { name: 'reauth', path: '/reauth' },
    { name: 'security', path: '/settings/security' },
    { name: 'developer-keys', path: '/settings/developer' },
    { name: 'key-revoke', path: `/settings/developer/keys/${ids.key}/revoke` },
    { name: 'webhooks', path: '/settings/developer/webhooks' },
    { name: 'webhook', path: `/settings/developer/webhooks/${ids.webhook}` },
    { name: 'webhook-roll', path: `/settings/developer/webhooks/${ids.webhook}/roll` },
    { name: 'webhook-delete', path: `/settings/developer/webhooks/${ids.webhook}/delete` },
    { name: 'request-log', path: '/settings/developer/logs' },
    { name: 'usage', path: '/settings/developer/usage' },
  ];

  /**
   * Words broken across lines inside the page's table headings, buttons, badges, tabs and
   * navigation, and short words (up to 12 characters) in cells, headings, labels and paragraphs: a
   * word whose text spreads over two lines is split. Long tokens (ids, e-mails, URLs) may break.
   */
  const brokenWords = (page: Page) =>
    page.evaluate(`(() => {
      const found = [];
      const strict = 'th, button, .button, .badge, .chip, .status, .topbar a, .tabs a';
      const check = (element, maxLength) => {
        // Visually hidden text (a stacked table's column headings on a phone) is not on screen.
        if (element.closest('.visually-hidden, .sr-only') || (element.closest('thead') && element.closest('thead').getBoundingClientRect().width <= 1)) return;
        const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          if (node.parentElement.closest('.visually-hidden, .sr-only')) continue;
          for (const match of node.data.matchAll(/\\S+/g)) {
            if (match[0].length > maxLength) continue;
            const range = document.createRange();
            range.setStart(node, match.index);
            range.setEnd(node, match.index + match[0].length);
            const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
            if (lines.size > 1) found.push(element.tagName.toLowerCase() + ': ' + JSON.stringify(match[0]));
          }
        }
      };
      for (const element of document.querySelectorAll(strict)) check(element, 1000);
      for (const element of document.querySelectorAll('td, h1, h2, label, legend, p')) check(element, 12);
      return [...new Set(found)];
    })()`) as Promise<string[]>;

  async function inspect(page: Page, name: string, url: string, width: number, signedIn: boolean, problems: string[]) {
    const scheme = (await page.evaluate(`matchMedia('(prefers-color-scheme: dark)').matches`)) ? '-dark' : '';
    name = `${name}${scheme}`;
    const response = await page.goto(url.startsWith('http') ? url : `${server.url}${url}`);
    const status = response?.status() ?? 0;
    if (status >= 500) problems.push(`${name}@${width}: HTTP ${status}`);
    await page.screenshot({ path: path.join(ARTIFACTS, `a11y-${name}-${width}.png`), fullPage: true });
    for (const v of await seriousA11yViolations(page))
      problems.push(`${name}@${width}: axe ${v.impact} ${v.id} (${v.help}) at ${v.targets.join(', ')}`);
    const sideways = (await page.evaluate('[document.documentElement.scrollWidth, window.innerWidth]')) as [number, number];
    if (sideways[0] > sideways[1]) problems.push(`${name}@${width}: scrolls sideways (${sideways[0]} > ${sideways[1]} px)`);
    for (const word of await brokenWords(page)) problems.push(`${name}@${width}: word broken: ${word}`);
    if (signedIn && width < 640) {
      const nav = await page.locator('header.topbar').boundingBox();
      if (!nav || nav.height > PHONE_NAV_MAX) problems.push(`${name}@${width}: closed navigation is ${nav?.height} px high`);
    }
  }

  for (const colorScheme of SCHEMES)
    for (const width of WIDTHS) {
      it(`signed-out pages at ${width} px, ${colorScheme} scheme`, async () => {
        const context = await browser.newContext({ viewport: { width, height: 800 }, colorScheme });
        const page = await context.newPage();
        const problems: string[] = [];
        for (const { name, path: url } of signedOutPages()) await inspect(page, name, url, width, false, problems);
        await context.close();
        expect(problems).toEqual([]);
      });

      it(`signed-in pages at ${width} px, ${colorScheme} scheme`, async () => {
        const context = await browser.newContext({ viewport: { width, height: 800 }, colorScheme });
        const page = await context.newPage();
        watchConsole(page, consoleErrors);
        await signIn(page);
        const problems: string[] = [];
        for (const { name, path: url } of signedInPages()) await inspect(page, name, url, width, true, problems);
        await context.close();
        expect(problems).toEqual([]);
        expect(consoleErrors).toEqual([]);
      });
    }

  /** A pending SSO link for `userId` (as an SSO sign-in for an existing account leaves it), in the browser's cookie. */
  async function pendingLink(page: Page, userId: string): Promise<void> {
    const data = { orgId: who.betaOrg, issuer: 'https://id.example.com', subject: 'a11y', next: '/' };
    const token = await createChallenge(server.db.kysely, 'sso_link', userId, data, 10 * 60_000, new Date());
    await page.context().addCookies([{ name: 'od_sso_link', value: token, domain: '127.0.0.1', path: '/sso' }]);
  }

  for (const colorScheme of SCHEMES)
    for (const width of WIDTHS) {
      it(`set-up, SSO and two-factor gate pages at ${width} px, ${colorScheme} scheme`, async () => {
        const problems: string[] = [];
        const signedOut = await browser.newContext({ viewport: { width, height: 800 }, colorScheme });
        const page = await signedOut.newPage();
        watchConsole(page, consoleErrors);
        await inspect(page, 'setup', setupUrl, width, false, problems);
        await inspect(page, 'sso-start', '/sso/start?email=someone%40example.com', width, false, problems);
        await pendingLink(page, who.ada);
        await inspect(page, 'sso-link', '/sso/link', width, false, problems);
        await pendingLink(page, who.dora);
        await inspect(page, 'sso-link-passkey', '/sso/link', width, false, problems);
        await signedOut.close();
        for (const [name, email] of [
          ['two-factor-gate', 'cerys@beta.example.com'],
          ['two-factor-gate-sso', 'bob@beta.example.com'],
        ] as const) {
          const context = await browser.newContext({ viewport: { width, height: 800 }, colorScheme });
          const gated = await context.newPage();
          await signIn(gated, email);
          // Any page sends them to the gate, with the policy's notice.
          await inspect(gated, name, '/contacts', width, true, problems);
          expect(new URL(gated.url()).pathname).toBe('/settings/account/two-factor');
          await context.close();
        }
        expect(problems).toEqual([]);
        expect(consoleErrors).toEqual([]);
      });
    }

  it('on a phone the Menu button opens and closes the navigation from the keyboard; focus is visible', async () => {
    const context = await browser.newContext({ viewport: { width: 375, height: 800 } });
    const page = await context.newPage();
    await signIn(page);
    await page.goto(`${server.url}/activity`);
    const menu = page.getByRole('button', { name: 'Menu', exact: true });
    const contacts = page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Contacts' });
    expect(await menu.getAttribute('aria-expanded')).toBe('false');
    expect(await contacts.isVisible()).toBe(false);
    // Tab from the top of the page: the brand link, then the Menu button.
    await page.keyboard.press('Tab');
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.getAttribute("aria-controls")')).toBe('site-menu');
    const outline = (await page.evaluate('getComputedStyle(document.activeElement).outlineStyle')) as string;
    expect(outline).not.toBe('none');
    await page.keyboard.press('Enter');
    expect(await menu.getAttribute('aria-expanded')).toBe('true');
    expect(await contacts.isVisible()).toBe(true);
    await page.screenshot({ path: path.join(ARTIFACTS, 'a11y-menu-open-375.png'), fullPage: true });
    await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement.textContent.trim()')).toBe('Overview');
    await page.keyboard.press('Escape');
    expect(await menu.getAttribute('aria-expanded')).toBe('false');
    expect(await contacts.isVisible()).toBe(false);
    // Activity keeps Who and Request on a phone, as labelled stacked rows, without sideways scrolling.
    const first = page.locator('table.activity > tbody > tr').first();
    expect(await first.locator('td[data-label="Who"]').isVisible()).toBe(true);
    expect(await first.locator('td[data-label="Request"]').isVisible()).toBe(true);
    await page.goto(`${server.url}/settings/developer`);
    expect(
      await page
        .getByRole('button', { name: /^Revoke/ })
        .first()
        .isVisible(),
    ).toBe(true);
    await page.goto(`${server.url}/contacts`);
    expect(await page.getByText('+44 20 7946 0958').isVisible()).toBe(true);
    await page.goto(`${server.url}/settings/developer/usage`);
    // The chart drawn for phones: its axis labels at least 11 px high.
    const sizes = (await page.evaluate(
      `[...document.querySelectorAll('.chart svg')].filter((s) => s.getBoundingClientRect().width > 0).flatMap((s) => [...s.querySelectorAll('text')].map((t) => t.getBoundingClientRect().height))`,
    )) as number[];
    expect(sizes.length).toBeGreaterThan(0);
    for (const size of sizes) expect(size).toBeGreaterThanOrEqual(11);
    await context.close();
  });
});
