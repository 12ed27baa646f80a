import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { ForbiddenError } from '../domain/errors.js';
import { hasSecondFactor } from '../domain/identity/totp.js';
import { coveredByPolicy } from '../domain/identity/twoFactorPolicy.js';
import { flash } from './context.js';

export const TWO_FACTOR_SETUP = '/settings/account/two-factor';

/**
 * What a person the policy holds back can still reach: setting up a second factor (TOTP or a
 * passkey), the dashboard's assets, signing out, and re-authenticating (turning on a factor may
 * ask for it).
 */
const OPEN_PATHS = [TWO_FACTOR_SETUP, '/settings/account/passkeys', '/assets/', '/logout', '/reauth', '/login'];

export function openDuringEnrolment(path: string): boolean {
  return OPEN_PATHS.some((open) => path.startsWith(open));
}

/**
 * The organisation's "Require two-factor for" (IDENTITY.md, Organisation policy), checked on every
 * signed-in request, so a session opened before the policy changed is caught at its next request.
 * A person it covers who has no second factor is sent to set one up (GET) or refused (any other
 * method: a form from a page opened earlier). The factors are only read when the policy is not
 * "nobody", so the default costs no query.
 */
export function requireTwoFactorEnrolment(db: Kysely<Database>) {
  return async function preHandler(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const session = request.session;
    if (!session || !coveredByPolicy(session.requireTwoFactor, session.role)) return undefined;
    const path = request.url.split('?')[0] ?? '';
    if (openDuringEnrolment(path)) return undefined;
    if (await hasSecondFactor(db, session.userId)) return undefined;
    const who = session.requireTwoFactor === 'everyone' ? 'everyone' : 'its admins';
    const why = `${session.orgName} requires two-factor authentication for ${who}. Set up an authenticator app or a passkey to continue.`;
    if (request.method === 'GET' || request.method === 'HEAD') {
      flash(reply, why);
      return reply.redirect(TWO_FACTOR_SETUP, 303);
    }
    throw new ForbiddenError(`${why} Nothing was changed.`);
  };
}
