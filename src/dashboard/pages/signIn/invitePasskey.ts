import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { finishPasskeyJoin, startPasskeyJoin } from '../../../domain/identity/passkeyJoin.js';
import { flash, originOf } from '../../context.js';
import { checkFormToken } from '../../formGuard.js';
import { answer, endCeremony, jsonBody, jsonEndpoint, relyingPartyOf, startCeremony, str } from '../../passkeyRequests.js';
import { finishSignIn } from '../../signIns.js';
import type { DashboardDeps } from '../../dashboardDeps.js';

/**
 * "Join with a passkey" on the invitation page (domain/identity/passkeyJoin.ts), for an email
 * with no account yet: two JSON requests around the browser's prompt to create a passkey, like
 * adding one on the account page, but without a session. Like the other session-less passkey
 * endpoints they take only a same-site JSON request (passkeyRequests.ts) and keep the ceremony's
 * token in a cookie of its own; they also take the invitation page's form token (formGuard.ts),
 * so only a browser that had the page open can start or finish one. A link that no longer works
 * gets 410 with the link to follow (its page says what to do next), as the form would.
 */
const GONE = 'This invitation link no longer works: it was used already, revoked, or has expired.';

export const invitePasskeyPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret } = deps;
  const inviteToken = (request: FastifyRequest) => (request.params as { token: string }).token;
  const gone = (reply: FastifyReply, token: string) => answer(reply, 410, GONE, { redirect: `/invite/${encodeURIComponent(token)}` });

  app.post(
    '/invite/:token/passkey/options',
    jsonEndpoint(async (request, reply) => {
      checkFormToken(request, secret, str(jsonBody(request), '_csrf'));
      const token = inviteToken(request);
      const started = await startPasskeyJoin(db, relyingPartyOf(deps), token, new Date());
      if (!started) return gone(reply, token);
      startCeremony(reply, deps, 'passkey_join', started.token);
      return reply.header('cache-control', 'no-store').send(started.options);
    }),
  );

  app.post(
    '/invite/:token/passkey',
    jsonEndpoint(async (request, reply) => {
      const body = jsonBody(request);
      checkFormToken(request, secret, str(body, '_csrf'));
      const token = inviteToken(request);
      const joined = await finishPasskeyJoin(
        db,
        relyingPartyOf(deps),
        token,
        { token: endCeremony(request, reply, 'passkey_join'), response: body.response, name: str(body, 'name') },
        { requestId: request.id, origin: originOf(request) },
        new Date(),
      );
      if (!joined) return gone(reply, token);
      await finishSignIn(request, reply, deps, { userId: joined.userId, email: joined.email, orgId: joined.orgId, method: 'passkey' });
      flash(reply, `Welcome to ${joined.orgName}. You are signed in as ${joined.email} with your passkey.`);
      return reply.header('cache-control', 'no-store').send({ redirect: '/contacts' });
    }),
  );
};
