import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ChallengePurpose } from '../domain/identity/challenges.js';
import { CEREMONY_MS, relyingParty, type RelyingParty } from '../domain/identity/webauthn.js';
import { ServiceError, ValidationError } from '../domain/errors.js';
import { statusOf } from '../web/errorStatus.js';
import { crossSite } from './formGuard.js';
import type { DashboardDeps } from './dashboardDeps.js';

/**
 * What the passkey endpoints share. They take and answer JSON (fetched by /assets/passkeys.js),
 * never a form, and each WebAuthn ceremony's challenge token travels in a cookie of its own
 * (HttpOnly, SameSite=Strict, 5 minutes), not in the page: a sign-in begun in one browser cannot be
 * finished from another, so another site cannot sign a visitor in to an account of its choosing
 * with an assertion it made itself. Session-less endpoints have no CSRF token to check; they
 * require a same-site Origin header (every browser sends one with a POST from fetch) and a JSON
 * body (which a cross-site form cannot send).
 */
export function relyingPartyOf(deps: DashboardDeps): RelyingParty {
  return relyingParty(deps.identity.publicUrl);
}

const cookieName = (purpose: ChallengePurpose) => `od_${purpose}`;

export function startCeremony(reply: FastifyReply, deps: DashboardDeps, purpose: ChallengePurpose, token: string): void {
  reply.setCookie(cookieName(purpose), token, {
    path: '/',
    httpOnly: true,
    sameSite: 'strict',
    secure: deps.secureCookies,
    maxAge: CEREMONY_MS / 1000,
  });
}

/** The ceremony's token from its cookie; the cookie is cleared (the challenge is used once). */
export function endCeremony(request: FastifyRequest, reply: FastifyReply, purpose: ChallengePurpose): string | undefined {
  const token = request.cookies[cookieName(purpose)];
  if (token !== undefined) reply.clearCookie(cookieName(purpose), { path: '/' });
  return token;
}

/** A JSON request from a page of this site: refused otherwise (403), before anything is read. */
export function fromThisSite(request: FastifyRequest): boolean {
  const json = String(request.headers['content-type'] ?? '').startsWith('application/json');
  const origin = request.headers.origin;
  return json && typeof origin === 'string' && origin !== '' && !crossSite(request);
}

/** The JSON body as an object (a missing or non-object body reads as empty). */
export function jsonBody(request: FastifyRequest): Record<string, unknown> {
  const body = request.body;
  return typeof body === 'object' && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {};
}

export const str = (body: Record<string, unknown>, name: string) => (typeof body[name] === 'string' ? body[name] : '');

export function answer(reply: FastifyReply, status: number, message: string, extra: Record<string, unknown> = {}) {
  return reply
    .code(status)
    .header('cache-control', 'no-store')
    .send({ message, ...extra });
}

/**
 * A JSON endpoint: the same-site check first, then the handler; a domain error becomes
 * `{message}` with its status (a field error's message names the field), as the script shows it.
 */
export function jsonEndpoint(handler: (request: FastifyRequest, reply: FastifyReply) => Promise<unknown>) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    if (!fromThisSite(request)) {
      return answer(reply, 403, 'This request did not come from this site. Reload the page and try again.');
    }
    try {
      return await handler(request, reply);
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      const message =
        error instanceof ValidationError ? error.errors.map((e) => `${labelOf(e.field)} ${e.message}.`).join(' ') : error.message;
      return answer(reply, statusOf(error), message);
    }
  };
}

const labelOf = (field: string) => (field === 'name' ? 'Name:' : field === 'response' || field === 'passkey' ? 'Passkey:' : `${field}:`);
