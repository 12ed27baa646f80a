import type { Config } from '../config.js';
import { ValidationError } from '../domain/errors.js';
import { OPERATOR } from '../domain/events/memberEvents.js';
import { removeSso, setSso, ssoSettingsOf, type SsoSettings } from '../domain/identity/ssoConfigs.js';
import { approveDomain, ssoDomainClaimsOf, type SsoDomainClaim } from '../domain/identity/ssoDomains.js';
import { required, UsageError, type Options } from './operatorError.js';
import { withDb } from './withDb.js';

/**
 * `orgdata sso set|show|remove --org ORG_ID` (IDENTITY.md "Single sign-on"). The client secret
 * comes from standard input, never an argument (arguments show in `ps` and shell history), and
 * is never printed back: `show` prints the settings and the redirect URI to register.
 */
async function readSecret(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return (Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0] ?? '').trim();
}

function describe(orgId: string, settings: SsoSettings | null, redirectUri: string) {
  const json = settings
    ? { org_id: orgId, configured: true, ...settings, redirect_uri: redirectUri }
    : { org_id: orgId, configured: false, redirect_uri: redirectUri };
  const text = settings
    ? [
        `issuer        ${settings.issuer}`,
        `client id     ${settings.client_id}`,
        `client secret (stored encrypted, not shown)`,
        `domains       ${settings.domains.map((d) => `${d} (${settings.verified_domains.includes(d) ? 'verified' : 'NOT verified'})`).join(', ')}`,
        `auto-join     ${settings.auto_join}`,
        `required      ${settings.required ? 'yes (members sign in only through SSO)' : 'no'}`,
        `redirect URI  ${redirectUri}`,
      ].join('\n')
    : `single sign-on is not set up for ${orgId}; the redirect URI to register at a provider is ${redirectUri}`;
  const unverified = settings ? settings.domains.length - settings.verified_domains.length : 0;
  const hint = unverified ? `\n${unverified} domain(s) lead nowhere until verified: see \`orgdata sso domains list --org ${orgId}\`` : '';
  return { json, text: text + hint };
}

function claimLine(orgId: string, claim: SsoDomainClaim): string {
  return claim.status === 'verified'
    ? `${claim.domain}  verified ${claim.verified_at} (${claim.verified_method === 'operator' ? 'approved by the operator' : 'DNS record'})`
    : `${claim.domain}  NOT verified  token ${claim.token}\n    create: ${claim.record_name} TXT "${claim.record_value}"\n    or approve: orgdata sso domains approve --org ${orgId} --domain ${claim.domain}`;
}

/**
 * `orgdata sso domains list|approve --org ORG_ID [--domain D]` (IDENTITY.md rule 9): an
 * organisation's SSO domains with their status and token, and the operator's approval of one,
 * which verifies it without DNS (for an organisation the operator knows owns the domain).
 */
export async function ssoDomainsCommand(
  config: Config,
  action: string | undefined,
  values: Options,
): Promise<{ json: unknown; text: string }> {
  const orgId = required(values, 'org');
  switch (action) {
    case 'list': {
      const claims = await withDb(config, (db) => ssoDomainClaimsOf(db.kysely, orgId));
      const text = claims.map((claim) => claimLine(orgId, claim)).join('\n');
      return { json: { org_id: orgId, domains: claims }, text: text || `${orgId} claims no single sign-on domain` };
    }
    case 'approve': {
      const domain = required(values, 'domain');
      const result = await withDb(config, (db) => approveDomain(db.kysely, orgId, domain, OPERATOR, new Date()));
      return {
        json: { org_id: orgId, approved: result.changed, domain: result.claim },
        text: result.changed
          ? `${result.claim.domain} is verified for ${orgId}: its e-mail addresses now lead to this organisation's single sign-on`
          : `${result.claim.domain} was already verified for ${orgId}`,
      };
    }
    default:
      throw new UsageError(action ? `unknown command "sso domains ${action}"` : 'missing "list" or "approve" after "sso domains"');
  }
}

export async function ssoCommand(config: Config, action: string, values: Options): Promise<{ json: unknown; text: string }> {
  const orgId = required(values, 'org');
  const redirectUri = `${config.publicUrl}/sso/callback`;
  switch (action) {
    case 'set': {
      const issuer = required(values, 'issuer');
      const clientId = required(values, 'client-id');
      const domains = required(values, 'domains');
      const autoJoin = values['auto-join'] === undefined ? 'off' : String(values['auto-join']);
      if (autoJoin !== 'member' && autoJoin !== 'off') throw new UsageError('--auto-join must be member or off');
      const clientSecret = await readSecret();
      if (!clientSecret) throw ValidationError.field('client_secret', 'must not be empty: pass it on standard input');
      const settings = await withDb(config, (db) =>
        setSso(
          db.kysely,
          config.secretKey,
          { allowPrivate: config.ssoAllowPrivateIssuers },
          orgId,
          { issuer, clientId, clientSecret, domains, autoJoin, required: values.require === true },
          OPERATOR,
          new Date(),
        ),
      );
      const shown = describe(orgId, settings, redirectUri);
      return { json: shown.json, text: `single sign-on set for ${orgId}\n${shown.text}` };
    }
    case 'show':
      return describe(orgId, await withDb(config, (db) => ssoSettingsOf(db.kysely, orgId)), redirectUri);
    case 'remove': {
      const removed = await withDb(config, (db) => removeSso(db.kysely, orgId, OPERATOR, new Date()));
      return {
        json: { org_id: orgId, removed },
        text: removed
          ? `single sign-on removed from ${orgId}: everyone signs in with a password again`
          : `single sign-on was not set up for ${orgId}`,
      };
    }
    default:
      throw new UsageError(`unknown command "sso ${action}"`);
  }
}
