import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { ValidationError } from '../../../domain/errors.js';
import { ensureSandbox } from '../../../domain/orgs/sandbox.js';
import { setTestMode } from '../../../domain/sessions/sessions.js';
import { flash, text } from '../../context.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { safeNext } from '../signIn/safeNext.js';

/**
 * Where a page shows its own mode's records: after a switch, an address naming one record (a
 * contact, a group, an endpoint) would be of the other mode, so the person lands on its list.
 */
const LISTS = [
  '/contacts',
  '/labels',
  '/groups',
  '/files',
  '/import',
  '/activity',
  '/settings/developer/webhooks',
  '/settings/developer/logs',
  '/settings/developer/usage',
  '/settings/developer/test-data',
  '/settings/developer',
];

/** The page to come back to after switching: the list of the page the form was on (its Referer, when this site's). */
export function afterSwitch(request: FastifyRequest): string {
  let path = '/';
  try {
    const referer = new URL(request.headers.referer ?? '');
    if (referer.host === request.headers.host) path = safeNext(referer.pathname);
  } catch {
    return '/';
  }
  const list = LISTS.find((root) => path === root || path.startsWith(`${root}/`));
  if (list) return list;
  return path.startsWith('/settings/') ? path : '/';
}

/**
 * The header's Test mode switch (SANDBOX.md, "Dashboard"), for every member: a form POST of this
 * site (the page group checks its CSRF token), stored with the session. No GET, no query parameter
 * and no link can switch anyone's view.
 */
export const testModePages: FastifyPluginAsync<DashboardDeps> = async (app, { db }) => {
  app.post('/test-mode', async (request, reply) => {
    const session = request.session!;
    const mode = text(request.body, 'mode');
    if (mode !== 'test' && mode !== 'live') throw new ValidationError([{ field: 'mode', message: 'must be test or live' }]);
    // The sandbox is made the first time someone looks at it (the session reads it back on every request).
    if (mode === 'test') await ensureSandbox(db, session.orgId);
    await setTestMode(db, request.sessionToken!, mode === 'test');
    flash(
      reply,
      mode === 'test'
        ? `Test mode is on: you are viewing ${session.orgName}'s test data.`
        : `Test mode is off: you are viewing ${session.orgName}'s live data.`,
    );
    return reply.redirect(afterSwitch(request), 303);
  });
};
