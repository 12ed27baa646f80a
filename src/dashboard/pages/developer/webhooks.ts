import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { ValidationError } from '../../../domain/errors.js';
import { EVENT_TYPES } from '../../../domain/events/types.js';
import { createEndpoint, listEndpoints, type EndpointView, type EndpointWithSecret } from '../../../domain/webhooks/endpoints.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { adminOnly, ctxOf, list, requireAdmin, takeFlash, text } from '../../context.js';
import { requireRecentAuthentication } from '../../reauth.js';
import { emptyState, field, fieldErrors, html, type FieldErrors, type Html } from '../../html.js';
import { csrf } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { developerPage, WEBHOOKS } from './developerTabs.js';

export const when = (iso: string) => html`<time datetime="${iso}">${iso.slice(0, 16).replace('T', ' ')} UTC</time>`;

const PREFIXES = [...new Set(EVENT_TYPES.map((type) => type.slice(0, type.indexOf('.'))))];

export function statusText(endpoint: EndpointView): Html {
  if (endpoint.status === 'enabled') return html`Enabled`;
  return html`<strong>Disabled</strong>${endpoint.disabled_reason ? html`: ${endpoint.disabled_reason}` : ''}`;
}

/** The one-time display of a signing secret, after creating an endpoint or rolling its secret. */
export function secretCard(endpoint: EndpointWithSecret, heading: string): Html {
  return html`<section class="card" aria-labelledby="new-secret-title">
    <h2 id="new-secret-title">${heading}</h2>
    <div class="warning" role="alert">
      <strong>Copy this signing secret now. You will not see it again.</strong> Your receiver verifies each delivery's
      <code>webhook-signature</code> with it; if it is lost, roll the secret.
    </div>
    <div class="key-box">
      <code id="new-secret">${endpoint.secret}</code><button type="button" class="secondary" data-copy="new-secret">Copy</button>
    </div>
    ${
      endpoint.previous_secret_expires_at
        ? html`<p>
            The previous secret keeps signing too until ${when(endpoint.previous_secret_expires_at)}: switch your receiver before then.
          </p>`
        : ''
    }
    <p>Verify with the <code>standardwebhooks</code> library: <code>new Webhook(secret).verify(body, headers)</code>.</p>
  </section>`;
}

function eventChoices(chosen: Set<string>, error: string | undefined): Html {
  const box = (value: string, label: Html | string) =>
    html`<label><input type="checkbox" name="events" value="${value}" ${chosen.has(value) ? html` checked` : ''} /> ${label}</label>`;
  return html`<fieldset class="checks${error ? ' has-error' : ''}" ${error ? html` aria-describedby="f-events-error"` : ''}>
      <legend>Events to send</legend>
      ${box('*', html`<strong>All events</strong>`)}<span></span>
      ${PREFIXES.map((prefix) => box(`${prefix}.*`, html`Every <code>${prefix}.*</code> event`))}
      ${EVENT_TYPES.map((type) => box(type, html`<code>${type}</code>`))}
    </fieldset>
    <p class="hint">Tick all events, every event of a kind, or single types. New kinds of events reach “All events” endpoints too.</p>
    ${error ? html`<p class="error" id="f-events-error">${error}</p>` : ''}`;
}

export interface EndpointForm {
  url?: string;
  events?: string[];
}

function endpointForm(session: SessionView, values: EndpointForm, errors?: FieldErrors): Html {
  return html`<form method="post" action="${WEBHOOKS}" novalidate>
    ${csrf(session)}
    ${field({
      name: 'url',
      label: 'Endpoint URL',
      value: values.url,
      errors,
      required: true,
      hint: 'An https:// address on the public internet, e.g. https://example.com/webhooks/orgdata.',
    })}
    ${eventChoices(new Set(values.events ?? ['*']), errors?.events)}
    <button type="submit">Add endpoint</button>
  </form>`;
}

function endpointTable(endpoints: EndpointView[]): Html {
  if (endpoints.length === 0)
    return emptyState('No webhook endpoints yet.', 'Add one with Add an endpoint below to be told when contacts change.');
  return html`<table>
    <thead>
      <tr>
        <th scope="col">URL</th>
        <th scope="col">Events</th>
        <th scope="col">Status</th>
        <th scope="col">Created</th>
      </tr>
    </thead>
    <tbody>
      ${endpoints.map(
        (e) =>
          html`<tr>
            <td><a href="${WEBHOOKS}/${e.id}">${e.url}</a></td>
            <td>${e.events.map((p) => html`<span class="chip">${p === '*' ? 'all events' : p}</span>`)}</td>
            <td>${statusText(e)}</td>
            <td>${when(e.created_at)}</td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** Settings → Developer → Webhooks: the organisation's endpoints, and a form to add one. */
export const webhookPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, webhooks } = deps;
  async function webhooksPage(
    request: FastifyRequest,
    reply: FastifyReply,
    options: { status?: number; created?: EndpointWithSecret; values?: EndpointForm; errors?: FieldErrors } = {},
  ) {
    const ctx = ctxOf(request, db);
    const session = request.session!;
    const endpoints = await listEndpoints(ctx);
    const { created, errors } = options;
    return reply
      .code(options.status ?? 200)
      .type('text/html; charset=utf-8')
      .send(
        developerPage('webhooks', {
          title: created ? 'New webhook endpoint' : 'Webhooks',
          session,
          notice: takeFlash(request, reply),
          body: html`${created ? secretCard(created, `Signing secret for ${created.url}`) : ''}
            <h2>Webhook endpoints</h2>
            <p>
              Every change to ${session.orgName}'s data is an event; each endpoint receives the events it subscribes to as signed HTTP POSTs
              (Standard Webhooks), retried for about a day until it answers 2xx. Order is not guaranteed: compare
              <code>created_at</code>.
            </p>
            ${endpointTable(endpoints)}
            <h2>Add an endpoint</h2>
            ${errors ? html`<div class="alert" role="alert">Please fix the fields marked below.</div>` : ''}
            ${endpointForm(session, created ? {} : (options.values ?? {}), errors)}`,
        }),
      );
  }

  app.get(WEBHOOKS, async (request, reply) => {
    requireAdmin(request);
    return webhooksPage(request, reply);
  });

  // A new endpoint receives the organisation's data: a sensitive action (IDENTITY.md).
  app.post(WEBHOOKS, { preHandler: [adminOnly, requireRecentAuthentication(deps, { fallback: WEBHOOKS })] }, async (request, reply) => {
    requireAdmin(request);
    const values: EndpointForm = { url: text(request.body, 'url'), events: list(request.body, 'events') };
    try {
      const created = await createEndpoint(ctxOf(request, db), webhooks, { url: values.url ?? '', events: values.events ?? [] });
      // Shown in this response only: never redirected through a URL or kept in a cookie.
      return webhooksPage(request, reply, { created });
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      return webhooksPage(request, reply, { status: 400, values, errors: fieldErrors(error.errors) });
    }
  });
};
