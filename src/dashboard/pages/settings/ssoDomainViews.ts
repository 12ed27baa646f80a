import type { SsoDomainClaim } from '../../../domain/identity/ssoDomains.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { html, type Html } from '../../html.js';
import { csrf } from '../../layout.js';

export const VERIFY_DOMAIN = '/settings/security/sso/domains/verify';

/** The outcome of a Verify press, shown beside its domain. */
export interface DomainAlert {
  domain: string;
  message: string;
}

function verifiedLabel(claim: SsoDomainClaim): string {
  const when = claim.verified_at ? claim.verified_at.slice(0, 10) : '';
  return claim.verified_method === 'operator' ? `Verified ${when} (approved by the operator)` : `Verified ${when} (DNS record)`;
}

function unverifiedRow(session: SessionView, claim: SsoDomainClaim, alert: DomainAlert | undefined, index: number): Html {
  const hintId = `sso-domain-${index}-record`;
  return html`<li class="sso-domain">
    <p><strong>${claim.domain}</strong> — <span class="status-unverified">Not verified</span>: leads nobody here yet.</p>
    ${alert ? html`<div class="alert" role="alert">${alert.message}</div>` : ''}
    <div id="${hintId}">
      <p>At the DNS provider of ${claim.domain}, create this TXT record, then press Verify:</p>
      <dl class="dns-record">
        <dt>Name</dt>
        <dd><code>${claim.record_name}</code></dd>
        <dt>Type</dt>
        <dd><code>TXT</code></dd>
        <dt>Value</dt>
        <dd><code>${claim.record_value}</code></dd>
      </dl>
      <p class="hint">In a zone file: <code>${claim.record_name}. 3600 IN TXT "${claim.record_value}"</code></p>
    </div>
    <form method="post" action="${VERIFY_DOMAIN}" novalidate>
      ${csrf(session)}
      <input type="hidden" name="domain" value="${claim.domain}" />
      <button type="submit" aria-describedby="${hintId}">Verify<span class="visually-hidden"> ${claim.domain}</span></button>
    </form>
  </li>`;
}

/**
 * The SSO domains of /settings/security with their status (IDENTITY.md rule 9): a verified one
 * leads its e-mail addresses to the provider; an unverified one shows the DNS record that proves
 * it and a Verify button.
 */
export function ssoDomainList(session: SessionView, claims: SsoDomainClaim[], alert?: DomainAlert): Html {
  if (claims.length === 0) return html``;
  return html`<h3 id="sso-domains-heading">Email domains</h3>
    <p>
      A domain leads its people to your provider only once it is verified: by a DNS record that shows your organisation controls it, or by
      the operator of this orgdata.
    </p>
    <ul class="sso-domains" aria-labelledby="sso-domains-heading">
      ${claims.map((claim, index) =>
        claim.status === 'verified'
          ? html`<li class="sso-domain">
              <p><strong>${claim.domain}</strong> — <span class="status-verified">${verifiedLabel(claim)}</span></p>
              ${alert?.domain === claim.domain ? html`<div class="notice" role="status">${alert.message}</div>` : ''}
            </li>`
          : unverifiedRow(session, claim, alert?.domain === claim.domain ? alert : undefined, index),
      )}
    </ul>`;
}
