import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ValidationError } from '../../../domain/errors.js';
import { removeSso, setSso, ssoSettingsOf, type SsoSettings } from '../../../domain/identity/ssoConfigs.js';
import { DomainNotVerified, ssoDomainClaimsOf, verifyDomainByDns, type SsoDomainClaim } from '../../../domain/identity/ssoDomains.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { adminOnly, flash, takeFlash, text } from '../../context.js';
import { requireRecentAuthentication } from '../../reauth.js';
import { field, fieldErrors, html, type FieldErrors, type Html } from '../../html.js';
import { csrf, page } from '../../layout.js';
import { causeOf } from '../../signIns.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { ssoDomainList, VERIFY_DOMAIN, type DomainAlert } from './ssoDomainViews.js';

const SECURITY = '/settings/security';

export interface SsoFormValues {
  issuer?: string;
  client_id?: string;
  domains?: string;
  auto_join?: string;
  required?: boolean;
}

/**
 * The single sign-on section of `/settings/security` (admins): the provider's settings, the
 * redirect URI to register at the provider, the e-mail domains with their verification, and
 * removal. Exported on its own because the page also holds the two-factor policy (built
 * elsewhere): the page is the sum of its sections.
 */
export function ssoSection(
  session: SessionView,
  settings: SsoSettings | null,
  claims: SsoDomainClaim[],
  redirectUri: string,
  options: { errors?: FieldErrors; values?: SsoFormValues; alert?: string; domainAlert?: DomainAlert } = {},
): Html {
  const values: SsoFormValues = options.values ?? {
    issuer: settings?.issuer,
    client_id: settings?.client_id,
    domains: settings?.domains.join(', '),
    auto_join: settings?.auto_join ?? 'off',
    required: settings?.required ?? false,
  };
  const errors = options.errors;
  const option = (value: string, label: string) =>
    html`<option value="${value}" ${values.auto_join === value ? html` selected` : ''}>${label}</option>`;
  return html`<section aria-labelledby="sso-heading" class="card">
    <h2 id="sso-heading">Single sign-on (OpenID Connect)</h2>
    <p>
      ${
        !settings
          ? html`Not set up: everyone signs in with a password.`
          : settings.verified_domains.length > 0
            ? html`People with an email at <strong>${settings.verified_domains.join(', ')}</strong> can sign in through
                <strong>${settings.issuer}</strong>.`
            : html`No email domain is verified yet: nobody can sign in through <strong>${settings.issuer}</strong> until one is (see below).`
      }
    </p>
    ${
      settings?.required && settings.verified_domains.length === 0
        ? html`<div class="warning">
            <p>
              Single sign-on is required but leads nobody here yet: members cannot sign in until a domain is verified. Verify a domain
              below.
            </p>
          </div>`
        : ''
    }
    ${ssoDomainList(session, claims, options.domainAlert)}
    <p>Register orgdata at your provider as a web application with this redirect URI:</p>
    <p><code id="sso-redirect-uri">${redirectUri}</code></p>
    ${options.alert ? html`<div class="alert" role="alert">${options.alert}</div>` : ''}
    <form method="post" action="${SECURITY}/sso" novalidate>
      ${csrf(session)}
      ${field({ name: 'issuer', label: 'Issuer URL', type: 'url', value: values.issuer, errors, required: true, hint: 'For example https://login.example.com — orgdata reads its /.well-known/openid-configuration.' })}
      ${field({ name: 'client_id', label: 'Client ID', value: values.client_id, errors, required: true, autocomplete: 'off' })}
      ${field({
        name: 'client_secret',
        label: 'Client secret',
        type: 'password',
        errors,
        required: !settings,
        autocomplete: 'new-password',
        hint: settings
          ? 'Leave blank to keep the secret already saved. It is stored encrypted and never shown.'
          : 'Stored encrypted; never shown again.',
      })}
      ${field({ name: 'domains', label: 'Email domains', value: values.domains, errors, required: true, hint: 'Comma-separated, such as example.com, example.org.' })}
      <div class="field${errors?.auto_join ? ' has-error' : ''}">
        <label for="f-auto_join">People without a membership</label>
        <select id="f-auto_join" name="auto_join">
          ${option('off', 'Refuse them (invite people first)')} ${option('member', 'Let them join as member')}
        </select>
        ${errors?.auto_join ? html`<p class="error">${errors.auto_join}</p>` : ''}
      </div>
      <div class="field">
        <label
          ><input type="checkbox" name="require" value="yes" ${values.required ? html` checked` : ''} /> Require single sign-on for
          members</label
        >
        <p class="hint">
          Members can no longer sign in with a password. Admins keep password + a second factor for when the provider is down.
        </p>
      </div>
      <button type="submit">Save single sign-on</button>
    </form>
    ${
      settings
        ? html`<form method="post" action="${SECURITY}/sso/remove" class="sso-remove">
            ${csrf(session)}
            <button type="submit" class="secondary">Remove single sign-on</button>
          </form>`
        : ''
    }
  </section>`;
}

/**
 * The SSO section's forms on `/settings/security` (the page itself, with the two-factor policy
 * above this section, is pages/security.ts). A form with errors is shown again with this section
 * alone. Both changes are sensitive: admins only, and a recent proof of identity (REAUTH_MINUTES).
 */
export const ssoSettingsPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret } = deps;
  const redirectUri = `${deps.identity.publicUrl}/sso/callback`;
  const policy = { allowPrivate: deps.ssoAllowPrivateIssuers };
  const sensitive = { preHandler: [adminOnly, requireRecentAuthentication(deps, { fallback: SECURITY })] };

  async function show(request: FastifyRequest, reply: FastifyReply, status: number, options: Parameters<typeof ssoSection>[4] = {}) {
    const session = request.session!;
    const [settings, claims] = await Promise.all([ssoSettingsOf(db, session.orgId), ssoDomainClaimsOf(db, session.orgId)]);
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(
        page({
          title: 'Security',
          session,
          section: 'security',
          notice: takeFlash(request, reply),
          body: html`<p><a href="${SECURITY}">Security settings</a></p>
            <h1>Security of ${session.orgName}</h1>
            ${ssoSection(session, settings, claims, redirectUri, options)}`,
        }),
      );
  }

  app.post(`${SECURITY}/sso`, sensitive, async (request, reply) => {
    const session = request.session!;
    const body = request.body;
    const values: SsoFormValues = {
      issuer: text(body, 'issuer'),
      client_id: text(body, 'client_id'),
      domains: text(body, 'domains'),
      auto_join: text(body, 'auto_join') || 'off',
      required: text(body, 'require') === 'yes',
    };
    try {
      await setSso(
        db,
        secret,
        policy,
        session.orgId,
        {
          issuer: values.issuer!,
          clientId: values.client_id!,
          clientSecret: text(body, 'client_secret'),
          domains: values.domains!,
          autoJoin: values.auto_join!,
          required: values.required!,
        },
        causeOf(request, session.userId),
        new Date(),
      );
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      return show(request, reply, 400, { errors: fieldErrors(error.errors), values, alert: 'Single sign-on was not saved: see below.' });
    }
    flash(reply, 'Single sign-on saved.');
    return reply.redirect(SECURITY, 303);
  });

  // Verify: the claim's TXT record is looked up now (DNS, outside any transaction, with its
  // deadline); the outcome is said beside the domain.
  app.post(VERIFY_DOMAIN, sensitive, async (request, reply) => {
    const session = request.session!;
    const domain = text(request.body, 'domain').slice(0, 300);
    try {
      const { claim, changed } = await verifyDomainByDns(
        db,
        deps.txtLookup,
        session.orgId,
        domain,
        causeOf(request, session.userId),
        new Date(),
      );
      flash(
        reply,
        changed
          ? `${claim.domain} is verified: people with an email at ${claim.domain} can now sign in with single sign-on.`
          : `${claim.domain} was already verified.`,
      );
      return reply.redirect(SECURITY, 303);
    } catch (error) {
      if (!(error instanceof DomainNotVerified)) throw error;
      const status =
        error.code === 'verified_elsewhere' ? 409 : error.code === 'dns_timeout' ? 504 : error.code === 'dns_failed' ? 502 : 400;
      const alert = `${domain.trim().toLowerCase() || 'The domain'} was not verified. ${error.message}`;
      return show(request, reply, status, {
        alert: error.code === 'not_claimed' ? alert : undefined,
        domainAlert: { domain: domain.trim().toLowerCase(), message: alert },
      });
    }
  });

  app.post(`${SECURITY}/sso/remove`, sensitive, async (request, reply) => {
    const session = request.session!;
    const removed = await removeSso(db, session.orgId, causeOf(request, session.userId), new Date());
    flash(reply, removed ? 'Single sign-on removed: everyone signs in with a password again.' : 'Single sign-on was not set up.');
    return reply.redirect(SECURITY, 303);
  });
};
