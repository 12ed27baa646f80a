import type { FastifyReply, FastifyRequest } from 'fastify';
import { UnavailableError } from '../domain/errors.js';
import { html } from './html.js';
import { page } from './layout.js';
import { answer } from './passkeyRequests.js';
import type { DashboardDeps } from './dashboardDeps.js';

/**
 * Endpoints without a session are bounded (IDENTITY.md rule 15). These routes answer anybody and
 * each stores a row (a challenge, a reset link) or calls out (the SSO provider, mail): every
 * request to them is counted per network and in total over a minute by the sign-in throttle
 * (memory, or Redis shared by every instance), and over the limit refused with **429** and
 * `Retry-After` — a page for pages, `{message}` for the passkey scripts' JSON. While Redis cannot
 * count them they are refused with 503, as sign-in is.
 */
const BOUNDED: Record<string, 'page' | 'json'> = {
  'POST /login/passkey/options': 'json',
  'POST /invite/:token/passkey/options': 'json',
  'GET /sso/start': 'page',
  'POST /sso/start': 'page',
  'GET /sso/callback': 'page',
  'GET /forgot-password': 'page',
  'POST /forgot-password': 'page',
  'GET /reset-password/:token': 'page',
  'POST /reset-password/:token': 'page',
  'GET /invite/:token': 'page',
  'POST /invite/:token': 'page',
};

function refusal(reply: FastifyReply, kind: 'page' | 'json', status: number, waitSeconds: number, message: string) {
  reply.header('retry-after', String(waitSeconds));
  if (kind === 'json') return answer(reply, status, message);
  const title = status === 429 ? 'Too many requests' : 'Temporarily unavailable';
  return reply
    .code(status)
    .header('cache-control', 'no-store')
    .type('text/html; charset=utf-8')
    .send(
      page({
        title,
        session: null,
        body: html`<div class="login card">
          <h1>${title}</h1>
          <div class="alert" role="alert">${message}</div>
          <p><a href="/login">Back to sign in</a></p>
        </div>`,
      }),
    );
}

/** The dashboard's onRequest hook: counts the requests to the routes above, refuses those over the limit. */
export function boundVisits(deps: Pick<DashboardDeps, 'signInThrottle'>) {
  return async (request: FastifyRequest, reply: FastifyReply) => {
    const kind = BOUNDED[`${request.method} ${request.routeOptions.url ?? ''}`];
    if (!kind) return;
    let wait;
    try {
      wait = await deps.signInThrottle.visit(request.ip);
    } catch (error) {
      if (!(error instanceof UnavailableError)) throw error;
      return refusal(reply, kind, 503, 5, 'This is unavailable for a moment. Try again in a few seconds.');
    }
    if (wait > 0) {
      return refusal(reply, kind, 429, wait, `Too many requests from your network. Try again in ${wait} second${wait === 1 ? '' : 's'}.`);
    }
  };
}
