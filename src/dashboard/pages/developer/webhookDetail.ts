import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { deliveryLog, resendDelivery, sendTestEvent, type AttemptView } from '../../../domain/webhooks/deliveries.js';
import {
  deleteEndpoint,
  disableEndpoint,
  enableEndpoint,
  getEndpoint,
  rollSecret,
  type EndpointView,
  type EndpointWithSecret,
} from '../../../domain/webhooks/endpoints.js';
import { adminOnly, ctxOf, flash, requireAdmin, takeFlash } from '../../context.js';
import { emptyState, html, plural, type Html } from '../../html.js';
import { icon } from '../../icons.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { requireRecentAuthentication } from '../../reauth.js';
import { WEBHOOKS } from './developerTabs.js';
import { secretCard, statusText, when } from './webhooks.js';

type Params = { Params: { id: string } };

function result(attempt: AttemptView): Html {
  const ok = attempt.status_code !== null && attempt.status_code >= 200 && attempt.status_code < 300;
  const code = attempt.status_code === null ? '' : html`<strong>${attempt.status_code}</strong> `;
  return html`${code}${ok ? 'OK' : (attempt.error ?? 'not a 2xx answer')}`;
}

function attemptRows(endpoint: EndpointView, attempts: AttemptView[], csrfField: Html): Html {
  if (attempts.length === 0)
    return emptyState('No delivery attempts yet.', 'Each event this endpoint subscribes to is sent here as it happens.');
  return html`<table>
    <thead>
      <tr>
        <th scope="col">Time</th>
        <th scope="col">Event</th>
        <th scope="col">Result</th>
        <th scope="col">Latency</th>
        <th scope="col">Answer (first 1 KiB)</th>
        <th scope="col">Delivery</th>
        <th scope="col">Actions</th>
      </tr>
    </thead>
    <tbody>
      ${attempts.map(
        (a) =>
          html`<tr>
            <td class="nowrap">${when(a.attempted_at)}</td>
            <td><code>${a.event_type}</code><br /><span class="muted mono">${a.event_id ?? 'test event'} · ${a.delivery_id}</span></td>
            <td>${result(a)}</td>
            <td class="nowrap">${a.latency_ms} ms</td>
            <td>
              ${
                a.response_excerpt
                  ? html`<details>
                      <summary>Show</summary>
                      <pre class="example">${a.response_excerpt}</pre>
                    </details>`
                  : html`<span class="muted">—</span>`
              }
            </td>
            <td>${a.delivery_status}</td>
            <td>
              <form method="post" action="${WEBHOOKS}/${endpoint.id}/deliveries/${a.delivery_id}/resend" class="inline">
                ${csrfField}<button type="submit" class="secondary">Resend<span class="visually-hidden"> ${a.delivery_id}</span></button>
              </form>
            </td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/** One endpoint: its state, actions (enable/disable, test, roll, delete) and its delivery log. */
export const webhookDetailPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;
  /**
   * A new signing secret and a re-enabled endpoint both send the organisation's events somewhere
   * (IDENTITY.md rule 11): a recent proof of identity first, as for creating an endpoint.
   */
  const sensitive = {
    preHandler: [
      adminOnly,
      requireRecentAuthentication(deps, { fallback: (request) => `${WEBHOOKS}/${(request.params as { id: string }).id}` }),
    ],
  };
  async function detailPage(request: FastifyRequest<Params>, reply: FastifyReply, rolled?: EndpointWithSecret) {
    const ctx = ctxOf(request, db);
    const session = request.session!;
    const endpoint = await getEndpoint(ctx, request.params.id);
    const log = await deliveryLog(ctx, endpoint.id);
    const base = `${WEBHOOKS}/${endpoint.id}`;
    const post = (action: string, label: string, cls = 'secondary') =>
      html`<form method="post" action="${base}/${action}" class="inline">
        ${csrf(session)}<button type="submit" class="${cls}">${label}</button>
      </form>`;
    return reply.type('text/html; charset=utf-8').send(
      page({
        title: `Webhook ${endpoint.url}`,
        session,
        section: 'developer',
        notice: takeFlash(request, reply),
        body: html`<p><a href="${WEBHOOKS}">← Webhooks</a></p>
          <h1>Webhook endpoint</h1>
          ${rolled ? secretCard(rolled, 'Your new signing secret') : ''}
          ${endpoint.status === 'disabled' ? html`<div class="alert" role="alert">${statusText(endpoint)}</div>` : ''}
          <dl class="counts">
            <dt>URL</dt>
            <dd><code>${endpoint.url}</code></dd>
            <dt>Events</dt>
            <dd>${endpoint.events.map((p) => html`<span class="chip">${p === '*' ? 'all events' : p}</span>`)}</dd>
            <dt>Status</dt>
            <dd>${statusText(endpoint)}</dd>
            <dt>Created</dt>
            <dd>${when(endpoint.created_at)}${endpoint.created_by === 'operator' ? ' by the operator (CLI)' : ''}</dd>
            <dt>Id</dt>
            <dd><code>${endpoint.id}</code></dd>
          </dl>
          <p class="row">
            ${endpoint.status === 'enabled' ? post('disable', 'Disable') : post('enable', 'Enable', '')} ${post('test', 'Send test event')}
            <a class="button secondary" href="${base}/roll">Roll secret</a>
            <a class="button secondary" href="${base}/delete">Delete…</a>
          </p>
          <h2>Delivery log</h2>
          <p class="muted">
            The last ${plural(log.attempts.length, 'attempt')}, newest first. ${plural(log.pending, 'delivery', 'deliveries')} waiting to be
            sent.
          </p>
          ${attemptRows(endpoint, log.attempts, csrf(session))}`,
      }),
    );
  }

  function confirmPage(request: FastifyRequest<Params>, reply: FastifyReply, endpoint: EndpointView, kind: 'roll' | 'delete') {
    const session = request.session!;
    const base = `${WEBHOOKS}/${endpoint.id}`;
    const body =
      kind === 'delete'
        ? html`<h1>Delete endpoint</h1>
            <div class="warning">
              <p>Delete the endpoint ${endpoint.url}? It stops receiving events at once, and its delivery log is deleted too.</p>
            </div>
            <form method="post" action="${base}/delete">
              ${csrf(session)}<button type="submit" class="danger">${icon('trash-2')}Delete endpoint</button>
              <a class="button secondary" href="${base}">Cancel</a>
            </form>`
        : html`<h1>Roll signing secret</h1>
            <div class="warning">
              <p>Make a new signing secret for ${endpoint.url}? It is shown once.</p>
              <p>The current secret keeps signing alongside it for 24 hours, so you can update your receiver without missing deliveries.</p>
            </div>
            <form method="post" action="${base}/roll">
              ${csrf(session)}<button type="submit">Roll secret</button> <a class="button secondary" href="${base}">Cancel</a>
            </form>`;
    return reply
      .type('text/html; charset=utf-8')
      .send(page({ title: kind === 'delete' ? 'Delete endpoint' : 'Roll secret', session, section: 'developer', body }));
  }

  app.get<Params>(`${WEBHOOKS}/:id`, async (request, reply) => {
    requireAdmin(request);
    return detailPage(request, reply);
  });

  for (const kind of ['roll', 'delete'] as const) {
    app.get<Params>(`${WEBHOOKS}/:id/${kind}`, async (request, reply) => {
      requireAdmin(request);
      return confirmPage(request, reply, await getEndpoint(ctxOf(request, db), request.params.id), kind);
    });
  }

  app.post<Params>(`${WEBHOOKS}/:id/roll`, sensitive, async (request, reply) => {
    requireAdmin(request);
    const rolled = await rollSecret(ctxOf(request, db), request.params.id);
    // Shown in this response only, like a new endpoint's secret.
    return detailPage(request, reply, rolled);
  });

  app.post<Params>(`${WEBHOOKS}/:id/delete`, async (request, reply) => {
    requireAdmin(request);
    const deleted = await deleteEndpoint(ctxOf(request, db), request.params.id);
    flash(reply, `Deleted the endpoint ${deleted.url}.`);
    return reply.redirect(WEBHOOKS, 303);
  });

  app.post<Params>(`${WEBHOOKS}/:id/enable`, sensitive, async (request, reply) => {
    requireAdmin(request);
    const endpoint = await enableEndpoint(ctxOf(request, db), request.params.id);
    flash(reply, `Enabled ${endpoint.url}. Deliveries still waiting are sent again.`);
    return reply.redirect(`${WEBHOOKS}/${endpoint.id}`, 303);
  });

  app.post<Params>(`${WEBHOOKS}/:id/disable`, async (request, reply) => {
    requireAdmin(request);
    const endpoint = await disableEndpoint(ctxOf(request, db), request.params.id);
    flash(reply, `Disabled ${endpoint.url}: no events are sent to it until it is enabled again.`);
    return reply.redirect(`${WEBHOOKS}/${endpoint.id}`, 303);
  });

  app.post<Params>(`${WEBHOOKS}/:id/test`, async (request, reply) => {
    requireAdmin(request);
    const { delivery_id } = await sendTestEvent(ctxOf(request, db), request.params.id);
    flash(reply, `Queued a test event (ping), message ${delivery_id}. It appears in the log once sent.`);
    return reply.redirect(`${WEBHOOKS}/${request.params.id}`, 303);
  });

  app.post<{ Params: { id: string; deliveryId: string } }>(`${WEBHOOKS}/:id/deliveries/:deliveryId/resend`, async (request, reply) => {
    requireAdmin(request);
    const queued = await resendDelivery(ctxOf(request, db), request.params.id, request.params.deliveryId);
    flash(
      reply,
      queued
        ? `Queued ${request.params.deliveryId} again, with the same webhook-id. It appears in the log once sent.`
        : `${request.params.deliveryId} is being sent right now; try again in a moment.`,
    );
    return reply.redirect(`${WEBHOOKS}/${request.params.id}`, 303);
  });
};
