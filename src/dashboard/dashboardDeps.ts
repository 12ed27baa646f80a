import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { FileDeps } from '../domain/files/files.js';
import type { IdentityDeps } from '../domain/identity/mailer.js';
import type { OpenIdClient } from '../domain/identity/ssoSignIn.js';
import type { TxtLookup } from '../domain/identity/txtLookup.js';
import type { UrlPolicy } from '../domain/webhooks/urlGuard.js';
import type { SignInThrottle } from './signInThrottle.js';

/** What every dashboard page is given (plugin.ts registers the pages with it). */
export interface DashboardDeps {
  db: Kysely<Database>;
  secret: string;
  files: FileDeps;
  /** Cookies get `Secure` when the dashboard is served over HTTPS. */
  secureCookies: boolean;
  maxImportBytes: number;
  /** The SSRF guard's rules for webhook endpoint URLs. */
  webhooks: UrlPolicy;
  /** Counts sign-in attempts (shared by every instance with Redis). */
  signInThrottle: SignInThrottle;
  /** DAILY_QUOTA, for the Usage page. */
  dailyQuota: number;
  /** SANDBOX_DAILY_QUOTA, for the Usage page in test mode. */
  sandboxDailyQuota: number;
  /** Invitations and password resets: the mailer (null without SMTP_URL), PUBLIC_URL, the links' lifetimes. */
  identity: IdentityDeps;
  /** Counts a sign-in step in /metrics (orgdata_sign_ins_total); a no-op without METRICS_TOKEN. */
  countSignIn: (method: string, result: 'succeeded' | 'failed') => void;
  /** REAUTH_MINUTES: how long a proof of identity lets sensitive actions through (0 = never). */
  reauthMinutes: number;
  /** SESSION_IDLE_MINUTES: a session not seen for longer ends. */
  sessionIdleMinutes: number;
  /** SSO_ALLOW_PRIVATE_ISSUERS: development and tests only. */
  ssoAllowPrivateIssuers: boolean;
  /** The OpenID Connect relying party of single sign-on (infra/oidc). */
  oidc: OpenIdClient;
  /** DNS TXT look-ups of the Verify button of SSO domains (infra/dns; DNS_SERVERS). */
  txtLookup: TxtLookup;
}
