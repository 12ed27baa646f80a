import type { Kysely } from 'kysely';
import type { Database } from '../../db/schema.js';
import { NotFoundError, ValidationError } from '../errors.js';
import { recordMemberEvent, type IdentityCause } from '../events/memberEvents.js';
import { nowIso } from '../ids.js';
import { vetWebhookUrl, type Resolve } from '../webhooks/urlGuard.js';
import { openSecret, sealSecret } from './secretBox.js';
import { replaceDomainClaims } from './ssoDomains.js';

/**
 * An organisation's single sign-on (IDENTITY.md "Single sign-on"): its OpenID provider (issuer,
 * client id, client secret sealed like a TOTP secret), the e-mail domains that lead to it, whether
 * people who are not members yet join as `member`, and whether members must use it. A domain
 * typed here is only a claim: it leads to the organisation (routes `/sso/start`, links, auto-joins)
 * once verified (ssoDomains.ts, IDENTITY.md rule 9), and a verified domain has one owner.
 */
export const SECRET_PURPOSE = 'sso-client-secret';
export type AutoJoin = 'member' | 'off';

export interface SsoSettings {
  issuer: string;
  client_id: string;
  /** Every domain claimed, verified or not. */
  domains: string[];
  /** The claimed domains that are verified: only these lead to the organisation. */
  verified_domains: string[];
  auto_join: AutoJoin;
  required: boolean;
  updated_at: string;
}

export interface SsoInput {
  issuer: string;
  clientId: string;
  /** Empty keeps the secret already stored (the dashboard's form); required the first time. */
  clientSecret: string;
  domains: string;
  autoJoin: string;
  required: boolean;
}

export interface IssuerPolicy {
  /** SSO_ALLOW_PRIVATE_ISSUERS: http:// and private or loopback addresses (development and tests). */
  allowPrivate: boolean;
  resolve?: Resolve;
}

const DOMAIN = /^(?=.{1,253}$)(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z0-9-]{2,63}$/;

export function emailDomain(email: string): string {
  return email
    .slice(email.lastIndexOf('@') + 1)
    .trim()
    .toLowerCase();
}

/** `a.com, B.com` → ['a.com', 'b.com']: lower-case, no duplicates, each a plausible host name. */
export function parseDomains(text: string): string[] {
  const domains = [
    ...new Set(
      text
        .split(/[\s,]+/)
        .map((d) => d.trim().toLowerCase().replace(/^@/, ''))
        .filter(Boolean),
    ),
  ];
  if (domains.length === 0) throw ValidationError.field('domains', 'must name at least one e-mail domain, such as example.com');
  const bad = domains.find((d) => !DOMAIN.test(d));
  if (bad) throw ValidationError.field('domains', `"${bad}" is not an e-mail domain such as example.com`);
  if (domains.length > 50) throw ValidationError.field('domains', 'must name at most 50 domains');
  return domains;
}

/**
 * The issuer passes the webhook URLs' SSRF guard (https, public addresses only; both lifted by
 * SSO_ALLOW_PRIVATE_ISSUERS), here when it is set and again before every request to it
 * (infra/oidc). Its messages are the guard's, said of the issuer.
 */
export async function vetIssuer(raw: string, policy: IssuerPolicy): Promise<URL> {
  try {
    const { url } = await vetWebhookUrl(raw, { allowPrivateUrls: policy.allowPrivate, resolve: policy.resolve });
    if (url.search) throw ValidationError.field('url', 'must not contain a ?query');
    return url;
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error;
    const message = (error.errors[0]?.message ?? 'is not allowed')
      .replace(/webhook URLs must/g, 'the issuer must')
      .replace(/webhook payloads must/g, 'sign-ins must')
      .replace('https://example.com/webhooks', 'https://login.example.com');
    throw ValidationError.field('issuer', message);
  }
}

function checkInput(input: SsoInput): { issuer: string; clientId: string; domains: string[]; autoJoin: AutoJoin } {
  const clientId = input.clientId.trim();
  if (!clientId) throw ValidationError.field('client_id', 'must not be empty');
  if (clientId.length > 255) throw ValidationError.field('client_id', 'must be at most 255 characters');
  if (input.clientSecret.length > 1024) throw ValidationError.field('client_secret', 'must be at most 1024 characters');
  const autoJoin = input.autoJoin || 'off';
  if (autoJoin !== 'member' && autoJoin !== 'off') throw ValidationError.field('auto_join', 'must be member or off');
  return { issuer: input.issuer.trim(), clientId, domains: parseDomains(input.domains), autoJoin };
}

export async function ssoSettingsOf(db: Kysely<Database>, orgId: string): Promise<SsoSettings | null> {
  const row = await db.selectFrom('sso_configs').selectAll().where('org_id', '=', orgId).executeTakeFirst();
  if (!row) return null;
  const domains = await db
    .selectFrom('sso_domains')
    .select(['domain', 'verified_at'])
    .where('org_id', '=', orgId)
    .orderBy('domain')
    .execute();
  return {
    issuer: row.issuer,
    client_id: row.client_id,
    domains: domains.map((d) => d.domain),
    verified_domains: domains.filter((d) => d.verified_at !== null).map((d) => d.domain),
    auto_join: row.auto_join === 'member' ? 'member' : 'off',
    required: row.required === 'yes',
    updated_at: row.updated_at,
  };
}

async function orgObject(db: Kysely<Database>, orgId: string) {
  const org = await db.selectFrom('orgs').select(['id', 'name']).where('id', '=', orgId).executeTakeFirst();
  if (!org) throw new NotFoundError(`There is no organisation ${orgId}.`);
  return { object: 'org' as const, id: org.id, name: org.name };
}

/** Sets (or replaces) an organisation's SSO; the issuer is vetted before the transaction (DNS). */
export async function setSso(
  db: Kysely<Database>,
  secretKey: string,
  policy: IssuerPolicy,
  orgId: string,
  input: SsoInput,
  cause: IdentityCause,
  now: Date,
): Promise<SsoSettings> {
  const checked = checkInput(input);
  await vetIssuer(checked.issuer, policy);
  const org = await orgObject(db, orgId);
  const sealed = input.clientSecret ? sealSecret(secretKey, SECRET_PURPOSE, input.clientSecret) : null;
  await db.transaction().execute(async (trx) => {
    const existing = await trx.selectFrom('sso_configs').select('org_id').where('org_id', '=', orgId).executeTakeFirst();
    const values = {
      issuer: checked.issuer,
      client_id: checked.clientId,
      auto_join: checked.autoJoin,
      required: input.required ? 'yes' : 'no',
    };
    if (existing) {
      await trx
        .updateTable('sso_configs')
        .set({ ...values, ...(sealed ? { client_secret_sealed: sealed } : {}), updated_at: nowIso(now) })
        .where('org_id', '=', orgId)
        .execute();
    } else {
      if (!sealed) throw ValidationError.field('client_secret', 'must not be empty');
      await trx
        .insertInto('sso_configs')
        .values({ org_id: orgId, ...values, client_secret_sealed: sealed, created_at: nowIso(now), updated_at: nowIso(now) })
        .execute();
    }
    // Claims only: another organisation's claim on the same domain, verified or not, is no
    // obstacle here (verifying is where a domain gets its one owner).
    await replaceDomainClaims(trx, orgId, checked.domains, now);
    await recordMemberEvent(trx, [orgId], 'security.sso_set', org, cause, now, {
      issuer: checked.issuer,
      domains: checked.domains.join(','),
      auto_join: checked.autoJoin,
      required: values.required,
    });
  });
  return (await ssoSettingsOf(db, orgId))!;
}

/**
 * Removes an organisation's SSO (its domain claims with it, verified or not: a later set-up proves
 * them again; linked identities stay).
 */
export async function removeSso(db: Kysely<Database>, orgId: string, cause: IdentityCause, now: Date): Promise<boolean> {
  const org = await orgObject(db, orgId);
  return db.transaction().execute(async (trx) => {
    await trx.deleteFrom('sso_domains').where('org_id', '=', orgId).execute();
    const removed = await trx.deleteFrom('sso_configs').where('org_id', '=', orgId).executeTakeFirst();
    if (Number(removed.numDeletedRows) === 0) return false;
    await recordMemberEvent(trx, [orgId], 'security.sso_removed', org, cause, now);
    return true;
  });
}

export interface SsoProvider {
  orgId: string;
  issuer: string;
  clientId: string;
  clientSecret: string;
  autoJoin: AutoJoin;
  /** The organisation's verified domains only: the e-mails its provider may vouch for (rule 9). */
  domains: string[];
  /** When the configuration was last saved: a save makes the provider's discovery be fetched again (infra/oidc). */
  updatedAt?: string;
}

/** The provider an organisation signs in with, its client secret opened; null without SSO. */
export async function ssoProviderOf(db: Kysely<Database>, secretKey: string, orgId: string): Promise<SsoProvider | null> {
  const row = await db.selectFrom('sso_configs').selectAll().where('org_id', '=', orgId).executeTakeFirst();
  if (!row) return null;
  const domains = await db
    .selectFrom('sso_domains')
    .select('domain')
    .where('org_id', '=', orgId)
    .where('verified_at', 'is not', null)
    .execute();
  return {
    orgId,
    issuer: row.issuer,
    clientId: row.client_id,
    clientSecret: openSecret(secretKey, SECRET_PURPOSE, row.client_secret_sealed),
    autoJoin: row.auto_join === 'member' ? 'member' : 'off',
    domains: domains.map((d) => d.domain),
    updatedAt: row.updated_at,
  };
}

/** The organisation that holds this email's domain verified, if any (an unverified claim leads nowhere). */
export async function ssoOrgForEmail(db: Kysely<Database>, email: string): Promise<string | null> {
  if (!email.includes('@')) return null;
  const row = await db
    .selectFrom('sso_domains')
    .select('org_id')
    .where('domain', '=', emailDomain(email))
    .where('verified_at', 'is not', null)
    .executeTakeFirst();
  return row?.org_id ?? null;
}
