import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATOR } from '../../src/domain/events/memberEvents.js';
import { setSso } from '../../src/domain/identity/ssoConfigs.js';
import { addUser, createOrg } from '../../src/domain/orgs/orgs.js';
import { startProvider, type TestProvider } from '../helpers/oidcProvider.js';
import { approveSsoDomains } from '../helpers/ssoServer.js';
import { seriousA11yViolations } from './accessibility.js';
import { ARTIFACTS, hasChromium, launchBrowser, signInAs, startLiveServer, watchConsole, type LiveServer } from './browser.js';

const PASSWORD = 'correct horse battery';

/**
 * Single sign-on in a real headless Chromium: the admin's SSO section of /settings/security and
 * the sign-in page's SSO form (screenshots at 1280 and 375 px, axe), then a whole SSO sign-in
 * through the provider's own login and consent pages.
 */
describe.skipIf(!hasChromium)('single sign-on in a browser', { timeout: 120_000 }, () => {
  let server: LiveServer;
  let browser: Browser;
  let idp: TestProvider;
  let orgId = '';
  const consoleErrors: string[] = [];

  beforeAll(async () => {
    // localhost: WebAuthn's RP ID must be a domain (the passkey test below).
    server = await startLiveServer({ hostname: 'localhost', env: { SSO_ALLOW_PRIVATE_ISSUERS: 'true' } });
    idp = await startProvider(`${server.url}/sso/callback`);
    idp.accounts.set('lin', { email: 'lin@sso-e2e.test', email_verified: true });
    const { org } = await createOrg(server.db.kysely, { name: 'Acme SSO', adminEmail: 'ada@example.com', adminPassword: PASSWORD });
    orgId = org.id;
    await addUser(server.db.kysely, { orgId, email: 'lin@sso-e2e.test', password: PASSWORD, role: 'member' });
    browser = await launchBrowser();
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await idp?.close();
    await server?.close();
  });

  async function check(page: Page, name: string, width: number): Promise<void> {
    const scroll = (await page.evaluate('document.documentElement.scrollWidth')) as number;
    expect(scroll, page.url()).toBeLessThanOrEqual(width);
    await page.screenshot({ path: path.join(ARTIFACTS, `${name}-${width}px.png`), fullPage: true });
    expect(await seriousA11yViolations(page), `${name} at ${width}px`).toEqual([]);
  }

  it('an admin sets SSO at /settings/security; the sign-in page offers it (screenshots, axe)', async () => {
    for (const width of [1280, 375]) {
      const context = await browser.newContext({ viewport: { width, height: 900 }, isMobile: width < 400 });
      const page = await context.newPage();
      watchConsole(page, consoleErrors);
      await page.goto(`${server.url}/login`);
      expect(await page.getByRole('button', { name: 'Sign in with SSO' }).count()).toBe(1);
      await check(page, 'login-sso', width);
      await signInAs(page, server.url, 'ada@example.com', PASSWORD);
      await page.goto(`${server.url}/settings/security`);
      expect(await page.locator('#sso-redirect-uri').textContent()).toBe(`${server.url}/sso/callback`);
      if (width === 1280) {
        await check(page, 'settings-security-sso-empty', width);
        await page.getByLabel('Issuer URL').fill('http://10.0.0.1');
        await page.getByLabel('Client ID').fill(idp.clientId);
        await page.getByLabel('Client secret').fill(idp.clientSecret);
        await page.getByLabel('Email domains').fill('sso-e2e.test');
        await page.getByRole('button', { name: 'Save single sign-on' }).click();
        // http:// is allowed here (SSO_ALLOW_PRIVATE_ISSUERS) but 10.0.0.1 serves nothing: saving does not fetch.
        expect(await page.getByText('Single sign-on saved.').count()).toBe(1);
        await page.getByLabel('Issuer URL').fill('not a url');
        await page.getByRole('button', { name: 'Save single sign-on' }).click();
        expect(await page.locator('#f-issuer-error').count()).toBe(1);
        await check(page, 'settings-security-sso-error', width);
        await page.getByLabel('Issuer URL').fill(idp.issuer);
        await page.getByRole('button', { name: 'Save single sign-on' }).click();
        expect(await page.getByText('Single sign-on saved.').count()).toBe(1);
        // The domain leads nowhere until verified: the record to create and its Verify button.
        expect(await page.getByText('_orgdata-challenge.sso-e2e.test', { exact: true }).count()).toBe(1);
        expect(await page.getByRole('button', { name: 'Verify sso-e2e.test' }).count()).toBe(1);
      }
      await check(page, 'settings-security-sso', width);
      await context.close();
    }
  });

  it("a member signs in with SSO through the provider's pages and lands signed in", async () => {
    // The same settings as the form's, in case the test above was filtered out.
    await setSso(
      server.db.kysely,
      server.config.secretKey,
      { allowPrivate: true },
      orgId,
      {
        issuer: idp.issuer,
        clientId: idp.clientId,
        clientSecret: idp.clientSecret,
        domains: 'sso-e2e.test',
        autoJoin: 'off',
        required: false,
      },
      OPERATOR,
      new Date(),
    );
    await approveSsoDomains(server.db, orgId, ['sso-e2e.test']);
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${server.url}/login`);
    await page.getByLabel('Work email').fill('lin@sso-e2e.test');
    await page.getByRole('button', { name: 'Sign in with SSO' }).click();
    await page.waitForURL(new RegExp(`^${idp.issuer}/interaction/`));
    await page.locator('input[name=login]').fill('lin');
    await page.locator('input[name=password]').fill('anything');
    await page.locator('button[type=submit]').click();
    await page.waitForURL(new RegExp(`^${idp.issuer}/interaction/`));
    await page.locator('button[type=submit]').click();
    // Lin has an account already: the first SSO sign-in links only once she signs in with its own
    // password (IDENTITY.md rule 10).
    await page.waitForURL(`${server.url}/sso/link`);
    expect(await page.getByText('An account with this email exists').count()).toBe(1);
    await page.screenshot({ path: path.join(ARTIFACTS, 'sso-link-1280px.png'), fullPage: true });
    expect(await seriousA11yViolations(page), 'sso-link').toEqual([]);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in and link' }).click();
    await page.waitForURL(`${server.url}/`);
    expect(await page.getByText('lin@sso-e2e.test').count()).toBeGreaterThan(0);
    await context.close();
    expect(consoleErrors).toEqual([]);
  });

  it('an SSO session adds a passkey only after the account’s own password (virtual authenticator)', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    // (No console watch: the provider's own development pages load outside resources.)
    const cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: {
        protocol: 'ctap2',
        transport: 'internal',
        hasResidentKey: true,
        hasUserVerification: true,
        isUserVerified: true,
        automaticPresenceSimulation: true,
      },
    });
    // Signed in through SSO (linked by the test above, or linked here with her password).
    await page.goto(`${server.url}/sso/start?email=lin%40sso-e2e.test`);
    await page.getByRole('button', { name: 'Sign in with SSO' }).click();
    await page.waitForURL(new RegExp(`^${idp.issuer}/interaction/`));
    await page.locator('input[name=login]').fill('lin');
    await page.locator('input[name=password]').fill('anything');
    await page.locator('button[type=submit]').click();
    await page.waitForURL(new RegExp(`^${idp.issuer}/interaction/`));
    await page.locator('button[type=submit]').click();
    await page.waitForURL((url) => url.href.startsWith(server.url));
    if (page.url() === `${server.url}/sso/link`) {
      await page.getByLabel('Password').fill(PASSWORD);
      await page.getByRole('button', { name: 'Sign in and link' }).click();
    }
    await page.waitForURL(`${server.url}/`);

    // Adding a passkey from the SSO session first asks for the account's own password.
    await page.goto(`${server.url}/settings/account`);
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await expect.poll(() => page.locator('[data-passkey-status]').textContent()).toContain('Name');
    await page.getByLabel('Passkey name').fill('SSO laptop');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await page.waitForURL(new RegExp(`^${server.url}/reauth`));
    const lin = await server.db.kysely
      .selectFrom('users')
      .select('id')
      .where('email_lower', '=', 'lin@sso-e2e.test')
      .executeTakeFirstOrThrow();
    const stored = () => server.db.kysely.selectFrom('passkeys').select(['name', 'added_in_sso']).where('user_id', '=', lin.id).execute();
    expect(await stored()).toEqual([]);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Confirm' }).click();
    await page.waitForURL(`${server.url}/settings/account`);
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await expect.poll(() => page.locator('[data-passkey-status]').textContent()).toContain('Name');
    await page.getByLabel('Passkey name').fill('SSO laptop');
    await page.getByRole('button', { name: 'Add a passkey' }).click();
    await expect
      .poll(
        async () =>
          `${page.url()} ${
            (await page
              .locator('[data-passkey-status]')
              .textContent()
              .catch(() => '')) ?? ''
          }`,
        { timeout: 20_000 },
      )
      .toContain('/settings/account#passkeys');
    // Recorded as added in an SSO session: a mailbox proof would remove it.
    expect(await stored()).toEqual([{ name: 'SSO laptop', added_in_sso: 1 }]);
    await context.close();
  });
});
