import type { FastifyPluginAsync } from 'fastify';
import { findSandbox } from '../../../domain/orgs/sandbox.js';
import { resetSandbox } from '../../../domain/orgs/sandboxReset.js';
import { adminOnly, flash, requireAdmin, shownOf, takeFlash, text } from '../../context.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { html, plural } from '../../html.js';
import { icon } from '../../icons.js';
import { csrf } from '../../layout.js';
import { requireRecentAuthentication } from '../../reauth.js';
import { causeOf } from '../../signIns.js';
import { developerPage, TEST_DATA } from './developerTabs.js';

/**
 * Settings → Developer → Test data (admins): Reset test data (SANDBOX.md). Deletes every contact,
 * label, group, file (bytes included), event and delivery of the organisation's sandbox, and its
 * keys and endpoints when ticked; never live data. Asks for the password again (a destructive
 * action), and the live Activity records who did it (security.sandbox_reset).
 */
export const testDataPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;

  app.get(TEST_DATA, { preHandler: adminOnly }, async (request, reply) => {
    const session = request.session!;
    const sandbox = await findSandbox(db, shownOf(request).liveOrgId);
    return reply.type('text/html; charset=utf-8').send(
      developerPage('test-data', {
        title: 'Test data',
        session,
        notice: takeFlash(request, reply),
        body: html`<h2>Reset test data</h2>
          <p>
            Deletes everything in ${session.orgName}'s test mode: every contact, label, group, file (its bytes included), event and webhook
            delivery. Live data is not touched. The Activity of the live organisation records who reset it.
          </p>
          ${
            sandbox
              ? html`<form method="post" action="${TEST_DATA}">
                  ${csrf(session)}
                  <fieldset class="checks">
                    <legend>Also delete</legend>
                    <label
                      ><input type="checkbox" name="keys" value="1" /> Test API keys (<code>od_test_…</code>): they stop working at
                      once</label
                    >
                    <label><input type="checkbox" name="endpoints" value="1" /> Test webhook endpoints</label>
                  </fieldset>
                  <p class="hint">Unticked, the test keys and endpoints stay and keep working.</p>
                  <button type="submit" class="danger">${icon('trash-2')}Reset test data</button>
                </form>`
              : html`<p>There is no test data yet: turn on <strong>Test mode</strong> in the header, or create a test key, to start.</p>`
          }`,
      }),
    );
  });

  // Deletes data for good: admins only (a member is refused, never asked for a password), re-authenticated.
  app.post(TEST_DATA, { preHandler: [adminOnly, requireRecentAuthentication(deps, { fallback: TEST_DATA })] }, async (request, reply) => {
    requireAdmin(request);
    const session = request.session!;
    const reset = await resetSandbox(db, deps.files.blobs, shownOf(request).liveOrgId, causeOf(request, session.userId), {
      keys: text(request.body, 'keys') === '1',
      endpoints: text(request.body, 'endpoints') === '1',
    });
    flash(
      reply,
      `Test data reset: ${plural(reset.contacts, 'contact')}, ${plural(reset.files, 'file')}, ${plural(reset.events, 'event')} deleted` +
        (reset.api_keys ? `, ${plural(reset.api_keys, 'test key')}` : '') +
        (reset.webhook_endpoints ? `, ${plural(reset.webhook_endpoints, 'endpoint')}` : '') +
        '. Live data was not touched.',
    );
    return reply.redirect(TEST_DATA, 303);
  });
};
