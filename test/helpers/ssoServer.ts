import { spawn } from 'node:child_process';
import path from 'node:path';
import type { Db } from '../../src/db/database.js';
import { OPERATOR } from '../../src/domain/events/memberEvents.js';
import { approveDomain } from '../../src/domain/identity/ssoDomains.js';
import { cli, type ServerEnv } from './serverProcess.js';
import { CookieJar, authorizeAt } from './oidcProvider.js';
import { csrfIn } from './signInForm.js';
import { cliEntry } from './cliEntry.js';

const CLI = cliEntry(path.resolve(import.meta.dirname, '../..'));

/** An operator command as a process, with what it is given on standard input; its exit code and output. */
export function runCli(
  env: Record<string, string>,
  args: string[],
  stdin = '',
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...CLI, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

/**
 * `/sso/start` as the sign-in page's form sends it: the form first (`GET /sso/start?email=…`, for
 * this browser's form token), then its POST (login CSRF, IDENTITY.md rule 18). Returns the POST's
 * response, not followed: 303 to the provider, or the 400 page for an email without SSO.
 */
export async function startSso(base: string, email: string, jar = new CookieJar(), next = ''): Promise<Response> {
  const form = await jar.fetch(`${base}/sso/start?email=${encodeURIComponent(email)}`);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? '';
  return jar.fetch(`${base}/sso/start`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base },
    body: new URLSearchParams({ _csrf: csrf, email, next }).toString(),
  });
}

/**
 * One SSO sign-in as a browser makes it: `/sso/start?email=…`, the provider's pages (logging in
 * as `login`), then the callback. `tamper` may change the authorization URL on its way to the
 * provider. Returns the callback's response (not followed) and its URL.
 */
export async function ssoSignIn(
  base: string,
  email: string,
  login: string,
  options: { jar?: CookieJar; tamper?: (url: URL) => void } = {},
): Promise<{ response: Response; callbackUrl: string; jar: CookieJar }> {
  const jar = options.jar ?? new CookieJar();
  const start = await startSso(base, email, jar);
  if (start.status !== 303) throw new Error(`/sso/start answered ${start.status}: ${(await start.text()).slice(0, 500)}`);
  const authorization = new URL(start.headers.get('location')!);
  options.tamper?.(authorization);
  const callbackUrl = await authorizeAt(jar, authorization.href, login, `${base}/sso/callback`);
  const response = await jar.fetch(callbackUrl);
  return { response, callbackUrl, jar };
}

/** Signs in with the password form over HTTP; the jar then holds the session. */
export async function passwordSignIn(
  base: string,
  email: string,
  password: string,
  jar = new CookieJar(),
): Promise<{ response: Response; jar: CookieJar }> {
  // The form first, as a browser loads it: its token and the cookie it is bound to (IDENTITY.md rule 18).
  const csrf = csrfIn(await (await jar.fetch(`${base}/login`)).text()) ?? '';
  const response = await jar.fetch(`${base}/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: csrf, email, password, next: '' }).toString(),
  });
  return { response, jar };
}

export const sessionCookieOf = (response: Response) =>
  response.headers.getSetCookie().find((c) => c.startsWith('od_session=') && !c.startsWith('od_session=;'));

/**
 * Approves an organisation's SSO domains as the operator does (IDENTITY.md rule 9: a domain
 * routes `/sso/start`, links and auto-joins only once verified). Every test that sets SSO up and
 * expects it to work calls this right after setting it. With a server's environment it runs
 * `orgdata sso domains approve` (the CLI, as an operator would); with a database (in-process
 * tests), the same domain function the CLI calls. Throws when a domain is not approved.
 */
export async function approveSsoDomains(target: ServerEnv | Db, orgId: string, domains: readonly string[]): Promise<void> {
  for (const domain of domains) {
    if ('kysely' in target) {
      await approveDomain(target.kysely, orgId, domain, OPERATOR, new Date());
      continue;
    }
    const approved = await runCli(target.env, ['sso', 'domains', 'approve', '--org', orgId, '--domain', domain, '--json']);
    if (approved.code !== 0) throw new Error(`approving ${domain} failed: ${approved.stdout}${approved.stderr}`);
    const claim = (JSON.parse(approved.stdout) as { domain: { status: string } }).domain;
    if (claim.status !== 'verified') throw new Error(`${domain} is not verified after approval: ${approved.stdout}`);
  }
}

/**
 * The one place tests set an organisation's SSO (`orgdata sso set`, the secret on standard
 * input): anything an SSO domain needs before it works (domain verification, IDENTITY.md rule 9)
 * belongs here, so every test that configures SSO gets it.
 */
export async function configureSso(
  env: ServerEnv,
  options: {
    orgId: string;
    provider: SsoProvider;
    domains: string[];
    autoJoin?: 'member' | 'off';
    require?: boolean;
  },
): Promise<void> {
  const extra = ['--auto-join', options.autoJoin ?? 'off', ...(options.require ? ['--require'] : [])];
  const set = await ssoSet(env, options.provider, options.orgId, options.domains.join(','), extra);
  if (set.code !== 0) throw new Error(`sso set failed: ${set.stdout}${set.stderr}`);
  // Rule 9: the domains do nothing until verified; the operator approves them here.
  await approveSsoDomains(env, options.orgId, options.domains);
}

/** The OpenID provider an organisation signs in with, as `orgdata sso set` is given it. */
export interface SsoProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
}

/**
 * `orgdata sso set` for `orgId` with `provider` and `domains` (comma-separated), `extra` options
 * before `--json`, the client secret on standard input: the command's exit code and output.
 */
export function ssoSet(
  env: ServerEnv,
  provider: SsoProvider,
  orgId: string,
  domains: string,
  extra: string[] = [],
  secret = provider.clientSecret,
) {
  const args = ['sso', 'set', '--org', orgId, '--issuer', provider.issuer, '--client-id', provider.clientId, '--domains', domains];
  return runCli(env.env, [...args, ...extra, '--json'], `${secret}\n`);
}

/**
 * The account holder's consent at `/sso/link` (IDENTITY.md rule 10), in the browser whose SSO
 * sign-in was sent there: the account's own password (and `code` when it has TOTP). Returns the
 * form's response (303 with a session when it linked).
 */
export async function consentToLink(base: string, jar: CookieJar, password: string, code?: string): Promise<Response> {
  const page = await (await jar.fetch(`${base}/sso/link`)).text();
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1] ?? '';
  return jar.fetch(`${base}/sso/link`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: base },
    body: new URLSearchParams({ _csrf: csrf, password, ...(code ? { code } : {}) }).toString(),
  });
}

/** An organisation made through the operator CLI (`orgdata org create`), its admin signing in with `password`: its id. */
export async function orgThroughCli(env: Record<string, string>, name: string, adminEmail: string, password: string): Promise<string> {
  const made = await cli<{ org: { id: string } }>(env, [
    'org',
    'create',
    '--name',
    name,
    '--admin-email',
    adminEmail,
    '--admin-password',
    password,
  ]);
  return made.org.id;
}

/** A person added to an organisation through the operator CLI (`orgdata users add`). */
export async function userThroughCli(
  env: Record<string, string>,
  orgId: string,
  email: string,
  password: string,
  role: 'admin' | 'member',
): Promise<void> {
  await cli(env, ['users', 'add', '--org', orgId, '--email', email, '--password', password, '--role', role]);
}

/** The id of the user with this email (compared lower-cased), if there is one. */
export async function userIdOf(db: Db, email: string): Promise<string | undefined> {
  return (await db.kysely.selectFrom('users').select('id').where('email_lower', '=', email.toLowerCase()).executeTakeFirst())?.id;
}
