import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { TwoFactorPolicy } from '../../../db/schema.js';
import { ValidationError } from '../../../domain/errors.js';
import { hasSecondFactor } from '../../../domain/identity/totp.js';
import { setTwoFactorPolicy, twoFactorPolicyOf } from '../../../domain/identity/twoFactorPolicy.js';
import { ssoSettingsOf } from '../../../domain/identity/ssoConfigs.js';
import { ssoDomainClaimsOf } from '../../../domain/identity/ssoDomains.js';
import { adminOnly, flash, requireAdmin, takeFlash, text } from '../../context.js';
import { html, type Html } from '../../html.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { requireRecentAuthentication } from '../../reauth.js';
import { causeOf } from '../../signIns.js';
import { ssoSection } from './ssoSettings.js';

export const SECURITY = '/settings/security';

const CHOICES: { value: TwoFactorPolicy; label: string; hint: string }[] = [
  { value: 'nobody', label: 'Nobody', hint: 'Each person chooses whether to set up two-factor authentication.' },
  {
    value: 'admins',
    label: 'Admins',
    hint: 'Admins without an authenticator app or a passkey must set one up before doing anything else.',
  },
  {
    value: 'everyone',
    label: 'Everyone',
    hint: 'Every member without an authenticator app or a passkey must set one up before doing anything else.',
  },
];

function policyForm(request: FastifyRequest, current: TwoFactorPolicy, error?: string): Html {
  const session = request.session!;
  return html`<form method="post" action="${SECURITY}/policy" novalidate>
    ${csrf(session)}
    <fieldset class="policy" ${error ? html` aria-describedby="policy-error"` : ''}>
      <legend>Require two-factor authentication for</legend>
      ${CHOICES.map(
        (choice) =>
          html`<div class="choice">
            <input
              type="radio"
              id="require-${choice.value}"
              name="require_two_factor"
              value="${choice.value}"
              aria-describedby="require-${choice.value}-hint"
              ${choice.value === current ? html` checked` : ''}
            />
            <label for="require-${choice.value}">${choice.label}</label>
            <p class="hint" id="require-${choice.value}-hint">${choice.hint}</p>
          </div>`,
      )}
      ${error ? html`<p class="error" id="policy-error">${error}</p>` : ''}
    </fieldset>
    <p class="hint">People already signed in are held to a new policy from their next page.</p>
    <button type="submit">Save policy</button>
  </form>`;
}

/**
 * `/settings/security` (admins): how the organisation's people sign in. The two-factor policy is
 * here; the single sign-on section (pages/ssoSettings.ts) goes below it.
 */
export const securityPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;

  async function securityPage(request: FastifyRequest, reply: FastifyReply, status: number, error?: string) {
    const session = request.session!;
    const [policy, protectedSelf, sso, claims] = await Promise.all([
      twoFactorPolicyOf(db, session.orgId),
      hasSecondFactor(db, session.userId),
      ssoSettingsOf(db, session.orgId),
      ssoDomainClaimsOf(db, session.orgId),
    ]);
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(
        page({
          title: 'Security',
          session,
          section: 'security',
          notice: takeFlash(request, reply),
          body: html`<h1>Security of ${session.orgName}</h1>
            <section aria-labelledby="two-factor-policy">
              <h2 id="two-factor-policy">Two-factor authentication</h2>
              <p>
                A person the policy covers and who has neither an authenticator app nor a passkey is sent to set one up after signing in,
                and can reach nothing else until they have.
              </p>
              ${
                protectedSelf
                  ? ''
                  : html`<div class="warning">
                      You have no second factor yet: requiring it for admins or everyone sends you to
                      <a href="/settings/account/two-factor">set one up</a> first.
                    </div>`
              }
              ${error ? html`<div class="alert" role="alert">${error}</div>` : ''} ${policyForm(request, policy.require_two_factor, error)}
            </section>
            ${ssoSection(session, sso, claims, `${deps.identity.publicUrl}/sso/callback`)}`,
        }),
      );
  }

  app.get(SECURITY, async (request, reply) => {
    requireAdmin(request);
    return securityPage(request, reply, 200);
  });

  app.post(
    `${SECURITY}/policy`,
    { preHandler: [adminOnly, requireRecentAuthentication(deps, { fallback: SECURITY })] },
    async (request, reply) => {
      const session = request.session!;
      try {
        const result = await setTwoFactorPolicy(
          db,
          session.orgId,
          text(request.body, 'require_two_factor'),
          causeOf(request, session.userId),
          new Date(),
        );
        const label = CHOICES.find((c) => c.value === result.require_two_factor)!.label.toLowerCase();
        flash(
          reply,
          result.changed
            ? `Two-factor authentication is now required for ${label}.`
            : `Two-factor authentication was already required for ${label}.`,
        );
        return reply.redirect(SECURITY, 303);
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        return securityPage(request, reply, 400, 'Choose nobody, admins or everyone.');
      }
    },
  );
};
