import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import type { Config } from '../../src/config.js';
import { loadConfig } from '../../src/config/load.js';
import { migrateToLatest, openDatabase, type Db } from '../../src/db/database.js';
import { buildApp } from '../../src/app.js';
import { MemoryRateLimiter } from '../../src/infra/rateLimit/memoryRateLimiter.js';
import { createApiKey } from '../../src/domain/apiKeys/apiKeys.js';
import { createOrg } from '../../src/domain/orgs/orgs.js';
import type { FastifyInstance } from 'fastify';
import type { Org } from '../helpers/harness.js';

/** Debian's Chromium (apt-get install chromium); Playwright's own browser download is not used. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
export const hasChromium = existsSync(CHROMIUM);
export const ARTIFACTS = path.resolve('artifacts');

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export interface LiveServer {
  url: string;
  app: FastifyInstance;
  db: Db;
  config: Config;
  close(): Promise<void>;
}

/**
 * The real server on a loopback port, as `npm start` runs it, with its own data directory.
 * `hostname: 'localhost'` makes PUBLIC_URL http://localhost:PORT (WebAuthn's RP ID must be a
 * name, not an address); `env` adds settings (SMTP_URL, REAUTH_MINUTES, …).
 */
export async function startLiveServer(options: { hostname?: string; env?: Record<string, string> } = {}): Promise<LiveServer> {
  const port = await freePort();
  const dataDir = mkdtempSync(path.join(tmpdir(), 'orgdata-e2e-'));
  const url = `http://${options.hostname ?? '127.0.0.1'}:${port}`;
  const config = loadConfig({ DATA_DIR: dataDir, PORT: String(port), PUBLIC_URL: url, LOG_LEVEL: 'warn', ...options.env });
  const db = openDatabase({ databaseUrl: null, dataDir });
  await migrateToLatest(db);
  const rateLimiter = new MemoryRateLimiter({ burst: 1000, perSecond: 1000, dailyQuota: 100_000 });
  const app = await buildApp({ config, db, rateLimiter, logger: false });
  await app.listen({ port, host: '127.0.0.1' });
  return {
    url,
    app,
    db,
    config,
    async close() {
      await app.close();
      await db.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function launchBrowser(): Promise<Browser> {
  mkdirSync(ARTIFACTS, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-quic',
      '--no-first-run',
      '--disable-sync',
    ],
  });
}

/** Collects JavaScript errors and console errors a page raises (failed document loads aside). */
export function watchConsole(page: Page, into: string[]): void {
  page.on('pageerror', (error) => into.push(`pageerror: ${error.message}`));
  page.on('console', (message) => {
    if (message.type() === 'error' && !/Failed to load resource: the server responded with a status of 4\d\d/.test(message.text())) {
      into.push(`console: ${message.text()}`);
    }
  });
}

export async function signInAs(page: Page, base: string, email: string, password: string): Promise<void> {
  await page.goto(`${base}/login`);
  await page.getByLabel('Email', { exact: true }).fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in', exact: true }).click();
  await page.waitForURL(`${base}/`);
}

/** The password of the admin `acmeOrg` makes. */
export const ADMIN_PASSWORD = 'correct horse battery';

/**
 * The organisation most browser tests start from: "Acme Ltd" with its admin ada@example.com, made
 * on the live server's database. `org.adminCtx()` acts as that admin in the domain (to seed data);
 * `apiKey` makes a key of the admin's with these scopes.
 */
export async function acmeOrg(server: LiveServer) {
  const made = await createOrg(server.db.kysely, { name: 'Acme Ltd', adminEmail: 'ada@example.com', adminPassword: ADMIN_PASSWORD });
  const adminCtx = () => ({
    db: server.db.kysely,
    orgId: made.org.id,
    actor: { kind: 'user' as const, userId: made.user.id, role: 'admin' as const },
    requestId: 'e2e',
    now: new Date(),
  });
  const apiKey = (scopes: string[], name = 'CRM sync') =>
    createApiKey({ db: server.db.kysely, orgId: made.org.id, userId: made.user.id, now: new Date() }, server.config.secretKey, {
      name,
      scopes,
    });
  return { made, adminCtx, org: { adminCtx } as Org, apiKey };
}

/** A browser and one 1280 × 900 page signed in as Acme's admin, its console errors collected into `consoleErrors`. */
export async function adminPage(server: LiveServer, consoleErrors: string[]): Promise<{ browser: Browser; page: Page }> {
  const browser = await launchBrowser();
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  watchConsole(page, consoleErrors);
  await signInAs(page, server.url, 'ada@example.com', ADMIN_PASSWORD);
  return { browser, page };
}

/** Calls the live server's API with a key: the status, the Request-Id and the JSON body. */
export async function callApi(server: LiveServer, key: string, method: string, url: string, body?: unknown) {
  const res = await fetch(`${server.url}/api/v1${url}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  return { status: res.status, requestId: res.headers.get('request-id') ?? '', json: (await res.json()) as { id: string } };
}
