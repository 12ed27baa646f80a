import type { FastifyPluginAsync } from 'fastify';
import { finishAssertion, PasskeyRefused, startAssertion } from '../../../domain/identity/webauthn.js';
import { answer, endCeremony, jsonBody, jsonEndpoint, relyingPartyOf, startCeremony, str } from '../../passkeyRequests.js';
import { signInFailed } from '../../signIns.js';
import { completeReauthentication } from '../../reauth.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { safeNext } from './auth.js';

/**
 * Re-authentication with a passkey before a sensitive action (the /reauth page offers it beside
 * the password): one of the signed-in person's own passkeys, for this very session (the
 * challenge is kept with the session's hash, so a challenge made for another session of theirs
 * does not count here). Then the session is rotated with authenticated_at now (reauthenticated)
 * and the page goes back to the action (`next`).
 */
export const passkeyReauthPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;

  app.post(
    '/reauth/passkey/options',
    jsonEndpoint(async (request, reply) => {
      const session = request.session!;
      const rp = relyingPartyOf(deps);
      const { options, token } = await startAssertion(
        db,
        rp,
        'passkey_reauth',
        session.userId,
        { session: session.sessionHash },
        new Date(),
      );
      startCeremony(reply, deps, 'passkey_reauth', token);
      return reply.header('cache-control', 'no-store').send(options);
    }),
  );

  app.post(
    '/reauth/passkey',
    jsonEndpoint(async (request, reply) => {
      const session = request.session!;
      const body = jsonBody(request);
      const token = endCeremony(request, reply, 'passkey_reauth');
      try {
        const asserted = await finishAssertion(
          db,
          relyingPartyOf(deps),
          'passkey_reauth',
          { token, response: body.response, userId: session.userId },
          new Date(),
        );
        if (asserted.data.session !== session.sessionHash)
          throw new PasskeyRefused('no_challenge', { id: session.userId, email: session.email });
      } catch (error) {
        if (!(error instanceof PasskeyRefused)) throw error;
        await signInFailed(request, deps, { user: { id: session.userId, email: session.email }, method: 'passkey', reason: error.reason });
        return answer(reply, 401, 'That passkey could not confirm it is you. Try again, or use your password.');
      }
      // As a password re-authentication ends: rotation, Activity, and REAUTH_MINUTES=0's single-use pass.
      await completeReauthentication(request, reply, deps, 'passkey');
      return reply.send({ redirect: safeNext(str(body, 'next')) });
    }),
  );
};
