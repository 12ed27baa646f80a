import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import {
  createApiKey,
  DEFAULT_EXPIRY_DAYS,
  keyCreatorEmails,
  listApiKeys,
  revokeApiKey,
  type ApiKeyView,
  type KeyAdmin,
} from '../../../domain/apiKeys/apiKeys.js';
import { NotFoundError, ValidationError } from '../../../domain/errors.js';
import { expandScopes, isScope, SCOPES } from '../../../domain/scopes.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { adminOnly, flash, keyAdminOf, list, requireAdmin, shownOf, takeFlash, text } from '../../context.js';
import { requireRecentAuthentication } from '../../reauth.js';
import { emptyState, field, fieldErrors, html, type FieldErrors, type Html } from '../../html.js';
import { icon } from '../../icons.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { developerPage } from './developerTabs.js';

const DEVELOPER = '/settings/developer';
/** The official client's README (it follows cursors, retries, sends idempotency keys, verifies webhooks). */
const CLIENT_README = '/docs/client';

interface KeyForm {
  name?: string;
  scopes?: string[];
  expires?: string;
}

const when = (iso: string) => html`<time datetime="${iso}"><span class="nowrap">${iso.slice(0, 10)}</span> ${iso.slice(11, 16)} UTC</time>`;

const REVOKED_BECAUSE: Record<string, string> = {
  revoked: 'revoked by an admin',
  creator_demoted: 'its creator is no longer an admin',
  creator_removed: 'its creator left the organisation',
};

function status(key: ApiKeyView, now: Date): { active: boolean; text: string } {
  if (key.revoked_at) {
    const reason = REVOKED_BECAUSE[key.revoked_reason ?? ''] ?? key.revoked_reason ?? 'revoked';
    return { active: false, text: `Revoked ${key.revoked_at.slice(0, 10)}: ${reason}` };
  }
  if (key.expires_at && key.expires_at <= now.toISOString()) return { active: false, text: 'Expired' };
  return { active: true, text: 'Active' };
}

function keyForm(session: SessionView, values: KeyForm = {}, errors?: FieldErrors): Html {
  const chosen = new Set(values.scopes ?? []);
  const expires = values.expires ?? String(DEFAULT_EXPIRY_DAYS);
  const expiryError = errors?.expires_in_days;
  return html`<form method="post" action="${DEVELOPER}/keys" novalidate>
    ${csrf(session)}
    ${field({ name: 'name', label: 'Name', value: values.name, errors, required: true, hint: 'What uses the key, e.g. "Newsletter sync".' })}
    <fieldset class="checks${errors?.scopes ? ' has-error' : ''}" ${errors?.scopes ? html` aria-describedby="f-scopes-error"` : ''}>
      <legend>Scopes</legend>
      ${SCOPES.map(
        (scope) =>
          html`<label><input type="checkbox" name="scopes" value="${scope}" ${chosen.has(scope) ? html` checked` : ''} /> ${scope}</label>`,
      )}
    </fieldset>
    <p class="hint">A write scope includes its read scope.</p>
    ${errors?.scopes ? html`<p class="error" id="f-scopes-error">${errors.scopes}</p>` : ''}
    <fieldset class="checks" ${expiryError ? html` aria-describedby="f-expires-error"` : ''}>
      <legend>Expires</legend>
      <label
        ><input type="radio" name="expires" value="${DEFAULT_EXPIRY_DAYS}" ${expires !== 'never' ? html` checked` : ''} /> In
        ${DEFAULT_EXPIRY_DAYS} days</label
      >
      <label><input type="radio" name="expires" value="never" ${expires === 'never' ? html` checked` : ''} /> Never</label>
    </fieldset>
    ${expiryError ? html`<p class="error" id="f-expires-error">${expiryError}</p>` : ''}
    <button type="submit">Create key</button>
  </form>`;
}

function keyRow(key: ApiKeyView, creators: Map<string, string>, now: Date): Html {
  const state = status(key, now);
  return html`<tr>
    <td>${key.name}</td>
    <td class="nowrap"><code>…${key.last4}</code></td>
    <td>${key.scopes.map((s) => html`<span class="chip">${s}</span>`)}</td>
    <td>${creators.get(key.created_by) ?? html`<span class="muted">unknown</span>`}</td>
    <td>${when(key.created_at)}</td>
    <td>${key.expires_at ? when(key.expires_at) : 'Never'}</td>
    <td>${key.last_used_at ? when(key.last_used_at) : 'Never'}</td>
    <td>${key.last_used_origin ?? html`<span class="muted">—</span>`}</td>
    <td>${state.text}</td>
    <td>
      ${
        state.active
          ? html`<form method="get" action="${DEVELOPER}/keys/${key.id}/revoke" class="inline">
              <button type="submit" class="danger">
                ${icon('ban')}Revoke<span class="visually-hidden"> ${key.name} (…${key.last4})</span>
              </button>
            </form>`
          : ''
      }
    </td>
  </tr>`;
}

function keyTable(keys: ApiKeyView[], creators: Map<string, string>, now: Date): Html {
  if (keys.length === 0) return emptyState('No API keys yet.', 'Create one with Create a key below to call the API.');
  return html`<table>
    <thead>
      <tr>
        <th scope="col">Name</th>
        <th scope="col">Key</th>
        <th scope="col">Scopes</th>
        <th scope="col">Created by</th>
        <th scope="col">Created</th>
        <th scope="col">Expires</th>
        <th scope="col">Last used</th>
        <th scope="col">Approximate origin</th>
        <th scope="col">Status</th>
        <th scope="col">Actions</th>
      </tr>
    </thead>
    <tbody>
      ${keys.map((k) => keyRow(k, creators, now))}
    </tbody>
  </table>`;
}

/** The form's expiry: 90 days, never, or (anything else) a value the domain refuses with its own message. */
function expiresInDays(value: string): number | null {
  if (value === 'never') return null;
  if (value === '') return DEFAULT_EXPIRY_DAYS;
  return Number(value);
}

export const developerPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret } = deps;
  // An admin of the live organisation manages the keys; the page lists, makes and revokes those of the mode it shows.
  const adminOf = (request: FastifyRequest): KeyAdmin => {
    requireAdmin(request);
    return keyAdminOf(request, db).admin;
  };
  const modeOf = (request: FastifyRequest) => shownOf(request).mode;

  async function keysPage(
    request: FastifyRequest,
    reply: FastifyReply,
    options: { status?: number; created?: ApiKeyView & { key: string }; values?: KeyForm; errors?: FieldErrors } = {},
  ) {
    const admin = adminOf(request);
    const session = request.session!;
    const [keys, creators] = await Promise.all([listApiKeys(admin, modeOf(request)), keyCreatorEmails(admin)]);
    const { created, errors } = options;
    return reply
      .code(options.status ?? 200)
      .type('text/html; charset=utf-8')
      .send(
        developerPage('keys', {
          title: created ? 'New API key' : 'Developer',
          session,
          notice: takeFlash(request, reply),
          body: html`${
              created
                ? html`<section class="card" aria-labelledby="new-key-title">
                    <h2 id="new-key-title">Your new key “${created.name}”</h2>
                    <div class="warning" role="alert">
                      <strong>Copy this key now. You will not see it again.</strong> It is stored only as a hash and cannot be recovered; if
                      it is lost, create a new key and revoke this one.
                    </div>
                    <div class="key-box">
                      <code id="new-key">${created.key}</code><button type="button" class="secondary" data-copy="new-key">Copy</button>
                    </div>
                    <p>
                      Scopes: ${created.scopes.join(', ')} ·
                      ${created.expires_at ? html`expires ${when(created.expires_at)}` : 'never expires'}. Send it as
                      <code>Authorization: Bearer …</code> to <code>/api/v1</code>, never in a URL.
                    </p>
                    <p><a href="${DEVELOPER}">Done, I have copied the key</a></p>
                  </section>`
                : ''
            }
            <h2>API keys</h2>
            <p>
              ${
                modeOf(request) === 'test'
                  ? html`Test keys (<code>od_test_…</code>) reach only ${session.orgName}'s test data, never live data.`
                  : html`Keys give programs access to ${session.orgName}'s data through the API.`
              }
              A key stops working when it is revoked, when it expires, or when the admin who created it stops being an admin.
            </p>
            <p>
              From Node.js, the official TypeScript client follows cursors, retries and sends idempotency keys for you: read the
              <a href="${CLIENT_README}">@orgdata/client README</a>. Every endpoint is in the <a href="/docs">API reference</a>.
            </p>
            ${keyTable(keys, creators, admin.now)}
            <h2>Create a key</h2>
            ${errors ? html`<div class="alert" role="alert">Please fix the fields marked below.</div>` : ''}
            ${keyForm(session, created ? {} : options.values, errors)}`,
        }),
      );
  }

  async function keyNamed(request: FastifyRequest, id: string): Promise<ApiKeyView> {
    const key = (await listApiKeys(adminOf(request), modeOf(request))).find((k) => k.id === id);
    if (!key) throw new NotFoundError(`No API key ${id} in this organisation.`);
    return key;
  }

  app.get(DEVELOPER, async (request, reply) => {
    requireAdmin(request);
    return keysPage(request, reply);
  });

  // Creating a key hands out access to the organisation's data: a sensitive action (IDENTITY.md).
  app.post(
    `${DEVELOPER}/keys`,
    { preHandler: [adminOnly, requireRecentAuthentication(deps, { fallback: DEVELOPER })] },
    async (request, reply) => {
      requireAdmin(request);
      const ticked = list(request.body, 'scopes');
      const values: KeyForm = { name: text(request.body, 'name'), scopes: ticked, expires: text(request.body, 'expires') };
      // Write includes read: store both, so the list shows what the key can really do.
      const granted = expandScopes(ticked.filter(isScope));
      const scopes = [...SCOPES.filter((s) => granted.has(s)), ...ticked.filter((s) => !isScope(s))];
      try {
        const created = await createApiKey(adminOf(request), secret, {
          name: values.name ?? '',
          scopes,
          expiresInDays: expiresInDays(values.expires ?? ''),
          mode: modeOf(request),
        });
        // Shown in this response only: never redirected through a URL or kept in a cookie.
        return keysPage(request, reply, { created });
      } catch (error) {
        if (!(error instanceof ValidationError)) throw error;
        return keysPage(request, reply, { status: 400, values, errors: fieldErrors(error.errors) });
      }
    },
  );

  app.get<{ Params: { id: string } }>(`${DEVELOPER}/keys/:id/revoke`, async (request, reply) => {
    requireAdmin(request);
    const key = await keyNamed(request, request.params.id);
    const session = request.session!;
    const state = status(key, new Date());
    return reply.type('text/html; charset=utf-8').send(
      page({
        title: 'Revoke key',
        session,
        section: 'developer',
        body: html`<h1>Revoke key</h1>
          ${
            state.active
              ? html`<div class="warning">
                    <p>Revoke key ${key.name} (…${key.last4})? Requests with it are refused at once.</p>
                    <p>Integrations using it stop working, and a revoked key cannot be restored.</p>
                  </div>
                  <form method="post" action="${DEVELOPER}/keys/${key.id}/revoke">
                    ${csrf(session)}
                    <button type="submit" class="danger">${icon('ban')}Revoke key ${key.name}</button>
                    <a class="button secondary" href="${DEVELOPER}">Cancel</a>
                  </form>`
              : html`<p>Key ${key.name} (…${key.last4}) no longer works: ${state.text.toLowerCase()}.</p>
                  <p><a href="${DEVELOPER}">Back to API keys</a></p>`
          }`,
      }),
    );
  });

  app.post<{ Params: { id: string } }>(`${DEVELOPER}/keys/:id/revoke`, async (request, reply) => {
    requireAdmin(request);
    const key = await revokeApiKey(adminOf(request), request.params.id, modeOf(request));
    flash(reply, `Revoked key ${key.name} (…${key.last4}). Requests with it are now refused.`);
    return reply.redirect(DEVELOPER, 303);
  });
};
