import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ForbiddenError } from '../../../domain/errors.js';
import { countChallengeFailure, findChallenge } from '../../../domain/identity/challenges.js';
import { PENDING_SIGN_IN_ATTEMPTS } from '../../../domain/identity/pendingSignIns.js';
import { finishAssertion, PasskeyRefused, startAssertion } from '../../../domain/identity/webauthn.js';
import { passwordRefusedBySso } from '../../../domain/identity/ssoSignIn.js';
import { answer, endCeremony, jsonBody, jsonEndpoint, relyingPartyOf, startCeremony, str } from '../../passkeyRequests.js';
import { finishSignIn, signInFailed } from '../../signIns.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { safeNext } from './safeNext.js';
import { finishPendingSignIn, PENDING_COOKIE } from './twoFactorSignIn.js';

/**
 * Signing in with a passkey, for people who are not signed in (IDENTITY.md, "Passkeys"):
 *
 * - `/login/passkey`: usernameless. The browser offers the site's discoverable credentials, the
 *   person picks one and unlocks it (user verification: two factors in one), and the stored
 *   credential its id names says who it is. It satisfies any two-factor requirement.
 * - `/login/two-factor/passkey`: the second step of a password sign-in. POST /login left a
 *   pending sign-in (challenge `two_factor`, cookie `od_pending`, 5 minutes, data {orgId, next,
 *   email}); only that person's passkeys are offered and accepted. A refused passkey counts
 *   against the pending sign-in like a wrong code (five end it).
 *
 * Every success ends in finishSignIn (a new session, Activity, the counter) and every refusal in
 * signInFailed with its reason; the answer is `{redirect}` for the script to follow.
 */

interface Pending {
  orgId?: string;
  next?: string;
  email?: string;
}

const EXPIRED = 'Your sign-in has expired. Sign in again with your email and password.';

export const passkeySignInPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;

  async function refused(request: FastifyRequest, reply: FastifyReply, method: string, error: unknown) {
    if (!(error instanceof PasskeyRefused)) throw error;
    await signInFailed(request, deps, { user: error.user, method, reason: error.reason });
    return answer(reply, 401, error.message);
  }

  app.post(
    '/login/passkey/options',
    jsonEndpoint(async (_request, reply) => {
      const { options, token } = await startAssertion(db, relyingPartyOf(deps), 'passkey_sign_in', null, {}, new Date());
      startCeremony(reply, deps, 'passkey_sign_in', token);
      return reply.header('cache-control', 'no-store').send(options);
    }),
  );

  app.post(
    '/login/passkey',
    jsonEndpoint(async (request, reply) => {
      const body = jsonBody(request);
      const token = endCeremony(request, reply, 'passkey_sign_in');
      let asserted;
      try {
        asserted = await finishAssertion(
          db,
          relyingPartyOf(deps),
          'passkey_sign_in',
          { token, response: body.response, userId: null },
          new Date(),
        );
      } catch (error) {
        return refused(request, reply, 'passkey', error);
      }
      // An organisation that requires single sign-on lets its members in only through it (admins
      // keep their own way in: a passkey is one, being two factors).
      const ssoOnly = await passwordRefusedBySso(db, asserted.userId);
      if (ssoOnly) {
        await signInFailed(request, deps, {
          user: { id: asserted.userId, email: asserted.email },
          method: 'passkey',
          reason: 'sso_required',
        });
        return answer(reply, 403, ssoOnly);
      }
      try {
        await finishSignIn(request, reply, deps, { userId: asserted.userId, email: asserted.email, method: 'passkey' });
      } catch (error) {
        // An account in no organisation: nowhere to open a session.
        if (!(error instanceof ForbiddenError)) throw error;
        await signInFailed(request, deps, {
          user: { id: asserted.userId, email: asserted.email },
          method: 'passkey',
          reason: 'no_organisation',
        });
        return answer(reply, 403, error.message);
      }
      return reply.send({ redirect: safeNext(str(body, 'next')) });
    }),
  );

  app.post(
    '/login/two-factor/passkey/options',
    jsonEndpoint(async (request, reply) => {
      const now = new Date();
      const pending = await findChallenge<Pending>(db, 'two_factor', request.cookies[PENDING_COOKIE], now);
      if (!pending || !pending.userId) return answer(reply, 401, EXPIRED, { redirect: '/login' });
      const { options, token } = await startAssertion(db, relyingPartyOf(deps), 'passkey_second_factor', pending.userId, {}, now);
      startCeremony(reply, deps, 'passkey_second_factor', token);
      return reply.header('cache-control', 'no-store').send(options);
    }),
  );

  app.post(
    '/login/two-factor/passkey',
    jsonEndpoint(async (request, reply) => {
      const pendingToken = request.cookies[PENDING_COOKIE];
      const pending = await findChallenge<Pending>(db, 'two_factor', pendingToken, new Date());
      const token = endCeremony(request, reply, 'passkey_second_factor');
      if (!pending || !pending.userId || !pendingToken) return answer(reply, 401, EXPIRED, { redirect: '/login' });
      const method = 'password+passkey';
      try {
        await finishAssertion(
          db,
          relyingPartyOf(deps),
          'passkey_second_factor',
          { token, response: jsonBody(request).response, userId: pending.userId },
          new Date(),
        );
      } catch (error) {
        if (error instanceof PasskeyRefused) await countChallengeFailure(db, pendingToken, PENDING_SIGN_IN_ATTEMPTS);
        return refused(request, reply, method, error);
      }
      // Taken once (two answers racing for one pending sign-in open one session), and ended as a
      // code ends it: an invitation waiting on the second factor is joined.
      const next = await finishPendingSignIn(request, reply, deps, method);
      if (next === null) return answer(reply, 401, EXPIRED, { redirect: '/login' });
      return reply.send({ redirect: next });
    }),
  );
};
