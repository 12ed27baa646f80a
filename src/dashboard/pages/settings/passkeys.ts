import type { FastifyPluginAsync } from 'fastify';
import { renamePasskey, removePasskey, passkeyName } from '../../../domain/identity/passkeys.js';
import { finishRegistration, startRegistration } from '../../../domain/identity/webauthn.js';
import { flash, text } from '../../context.js';
import { answer, endCeremony, jsonBody, jsonEndpoint, relyingPartyOf, startCeremony, str } from '../../passkeyRequests.js';
import { causeOf } from '../../signIns.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { reauthenticationNeeded, requireAccountProof } from '../../reauth.js';
import { PASSKEYS_PATH } from './passkeyViews.js';
import { markAddedInSso } from '../../../domain/identity/ssoTrust.js';

/**
 * Adding, renaming and removing one's own passkeys (the list is on /settings/account). Adding is
 * two JSON requests around the browser's WebAuthn prompt: the options (with a challenge kept for
 * 5 minutes), then the browser's answer, checked and stored. The session's CSRF token comes in
 * the JSON body and is checked with every other POST of a signed-in page (plugin.ts); removing
 * and renaming are ordinary forms. Every query is the signed-in person's own: another person's
 * passkey id is not found (404).
 */
export const passkeyPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;

  app.post(
    `${PASSKEYS_PATH}/options`,
    jsonEndpoint(async (request, reply) => {
      const session = request.session!;
      // The name is checked before the prompt, so a bad one does not cost a trip through it.
      passkeyName(str(jsonBody(request), 'name'));
      // A new way in is sensitive (a stolen session must not add its own passkey): a recent proof of
      // identity first. The ceremony's challenge, made only here, then carries it to the second step.
      // A session opened by an organisation's SSO is no such proof for the account (IDENTITY.md rule 8).
      const reauth = await reauthenticationNeeded(request, reply, deps, '/settings/account', { account: true });
      if (reauth) return answer(reply, 401, 'Confirm it is you before adding a passkey.', { redirect: reauth });
      const { options, token } = await startRegistration(
        db,
        relyingPartyOf(deps),
        { id: session.userId, email: session.email },
        new Date(),
      );
      startCeremony(reply, deps, 'passkey_register', token);
      return reply.header('cache-control', 'no-store').send(options);
    }),
  );

  app.post(
    PASSKEYS_PATH,
    jsonEndpoint(async (request, reply) => {
      const session = request.session!;
      const body = jsonBody(request);
      // The options asked for the account's own proof; an SSO session without one finishes nothing either.
      if (session.method === 'sso' && session.accountProofAt === null) {
        return answer(reply, 401, 'Confirm it is you before adding a passkey.', { redirect: '/reauth?next=%2Fsettings%2Faccount' });
      }
      const started = new Date();
      const added = await finishRegistration(
        db,
        relyingPartyOf(deps),
        { id: session.userId, email: session.email },
        { token: endCeremony(request, reply, 'passkey_register'), response: body.response, name: str(body, 'name') },
        causeOf(request, session.userId),
        new Date(),
      );
      // Added from an SSO session: a mailbox proof removes it (IDENTITY.md rule 10).
      if (session.method === 'sso') await markAddedInSso(db, 'passkeys', session.userId, started);
      flash(reply, `Passkey “${added.name}” added. You can sign in with it from now on.`);
      return reply
        .code(201)
        .header('cache-control', 'no-store')
        .send({ id: added.id, name: added.name, redirect: '/settings/account#passkeys' });
    }),
  );

  // Renaming and removing change the account: in a session SSO opened, its own proof first (rule 8).
  app.post<{ Params: { id: string } }>(
    `${PASSKEYS_PATH}/:id/rename`,
    { preHandler: requireAccountProof(deps, { fallback: '/settings/account', ssoOnly: true }) },
    async (request, reply) => {
      const renamed = await renamePasskey(db, request.session!.userId, request.params.id, text(request.body, 'name'));
      flash(reply, `Passkey renamed to “${renamed.name}”.`);
      return reply.redirect('/settings/account#passkeys', 303);
    },
  );

  // Removing one is sensitive: a recent proof of identity first (REAUTH_MINUTES).
  app.post<{ Params: { id: string } }>(
    `${PASSKEYS_PATH}/:id/remove`,
    { preHandler: requireAccountProof(deps, { fallback: '/settings/account' }) },
    async (request, reply) => {
      const session = request.session!;
      const removed = await removePasskey(
        db,
        { id: session.userId, email: session.email },
        request.params.id,
        causeOf(request, session.userId),
        new Date(),
      );
      flash(reply, `Passkey “${removed.name}” removed: it can no longer sign you in.`);
      return reply.redirect('/settings/account#passkeys', 303);
    },
  );
};
