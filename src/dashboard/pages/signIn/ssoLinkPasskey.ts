import type { FastifyPluginAsync } from 'fastify';
import { UnavailableError } from '../../../domain/errors.js';
import { findChallenge } from '../../../domain/identity/challenges.js';
import { provePasskeyConsent, startPasskeyConsent, type PendingSsoLink } from '../../../domain/identity/ssoLinks.js';
import { answer, jsonBody, jsonEndpoint, relyingPartyOf } from '../../passkeyRequests.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { completeLink, linkRefused, SSO_LINK_COOKIE, SSO_LINK_PATH } from './ssoLink.js';

const GONE =
  'This request to link has expired or was not started in this browser. Start again with “Sign in with SSO” on the sign-in page.';

/**
 * The holder's passkey as the consent to link at `/sso/link` (IDENTITY.md rule 10: "password and
 * code, or a passkey"), for the page's "Link with a passkey" button (/assets/passkeys.js):
 *
 * - `POST /sso/link/passkey/options`: the pending link (cookie `od_sso_link`) names the account;
 *   only its passkeys are offered, and the WebAuthn challenge is kept in the pending link itself.
 * - `POST /sso/link/passkey`: the assertion, checked against that challenge (used once) and that
 *   account's credentials. A refusal is in Activity (member.sign_in_failed, method sso, reason
 *   `link_` + the passkey's) and counts against the sign-in throttle and the pending link's five
 *   answers, as a wrong password does; success links and opens the SSO session (`{redirect}`).
 *
 * Same-site JSON only (jsonEndpoint: a JSON body and this site's Origin), like every passkey
 * endpoint without a session; the pending link's cookie ties it to the browser that signed in.
 */
export const ssoLinkPasskeyPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;
  const expired = (reply: Parameters<typeof answer>[0], status = 401) => answer(reply, status, GONE, { redirect: SSO_LINK_PATH });

  app.post(
    `${SSO_LINK_PATH}/passkey/options`,
    jsonEndpoint(async (request, reply) => {
      const options = await startPasskeyConsent(db, relyingPartyOf(deps), request.cookies[SSO_LINK_COOKIE], new Date());
      if (!options) return expired(reply);
      return reply.header('cache-control', 'no-store').send(options);
    }),
  );

  app.post(
    `${SSO_LINK_PATH}/passkey`,
    jsonEndpoint(async (request, reply) => {
      const token = request.cookies[SSO_LINK_COOKIE];
      const now = new Date();
      const pending = await findChallenge<PendingSsoLink>(db, 'sso_link', token, now);
      const owner = pending?.userId
        ? await db.selectFrom('users').select(['id', 'email']).where('id', '=', pending.userId).executeTakeFirst()
        : undefined;
      if (!token || !pending || !owner) return expired(reply);
      const user = { id: owner.id, email: owner.email };
      let attempt;
      try {
        attempt = await deps.signInThrottle.begin(user.email, request.ip);
      } catch (error) {
        if (!(error instanceof UnavailableError)) throw error;
        reply.header('retry-after', '5');
        return answer(reply, 503, 'This is unavailable for a moment. Try again in a few seconds.');
      }
      if (attempt.waitSeconds > 0) {
        const minutes = Math.ceil(attempt.waitSeconds / 60);
        reply.header('retry-after', String(attempt.waitSeconds));
        return answer(reply, 429, `Too many failed attempts. Try again in ${minutes} minute${minutes === 1 ? '' : 's'}.`);
      }
      const refused = await provePasskeyConsent(db, relyingPartyOf(deps), token, pending, jsonBody(request).response, now);
      if (refused) {
        if (!(await linkRefused(request, reply, deps, token, user, refused))) return expired(reply);
        return answer(reply, 401, 'That passkey could not confirm it is you. Try again with one of your own passkeys.');
      }
      await attempt.succeeded().catch((error: unknown) => request.log.warn({ err: error }, 'sign-in throttle: attempt not forgiven'));
      const linked = await completeLink(request, reply, deps, token, user, now);
      if (linked.next === null) return expired(reply, linked.status);
      return reply.header('cache-control', 'no-store').send({ redirect: linked.next });
    }),
  );
};
