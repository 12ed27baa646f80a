import type { FastifyPluginAsync } from 'fastify';
import { listApiKeys, type ApiKeyView } from '../../../domain/apiKeys/apiKeys.js';
import { NotFoundError } from '../../../domain/errors.js';
import {
  getRequest,
  listRequests,
  STATUS_CLASSES,
  type LoggedRequest,
  type LogPosition,
  type RequestDetail,
  type RequestFilters,
  type StatusClass,
} from '../../../domain/requests/requestLog.js';
import { ctxOf, keyListArgs, requireAdmin } from '../../context.js';
import { emptyState, html, type Html } from '../../html.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { developerPage, LOGS } from './developerTabs.js';
import { when } from './webhooks.js';
import { parseJson } from '../../../domain/json.js';

const PAGE = 50;

function keyName(keys: Map<string, ApiKeyView>, id: string): string {
  const key = keys.get(id);
  return key ? `${key.name} (…${key.last4})` : id;
}

/** `at|request_id` of the last row shown: where the next (older) page starts. */
function parseBefore(value: string | undefined): LogPosition | null {
  const [at, requestId] = (value ?? '').split('|');
  return at && requestId ? { at, requestId } : null;
}

function query(params: Record<string, string | undefined>): string {
  const entries = Object.entries(params).filter((entry): entry is [string, string] => Boolean(entry[1]));
  return entries.length ? `?${new URLSearchParams(entries).toString()}` : '';
}

function statusCell(row: LoggedRequest): Html {
  return html`<span class="status s${String(row.status).slice(0, 1)}">${row.status}</span
    >${row.error_code ? html` <code>${row.error_code}</code>` : ''}`;
}

function logTable(rows: LoggedRequest[], keys: Map<string, ApiKeyView>, filtered: boolean): Html {
  if (rows.length === 0) {
    return filtered
      ? emptyState('No requests match.', 'Choose another key, status or route, or show every request.')
      : emptyState(
          'No requests yet.',
          html`Requests made with an API key show here; create one under <a href="/settings/developer">API keys</a>.`,
        );
  }
  return html`<table>
    <caption class="sr-only">
      API requests, newest first
    </caption>
    <thead>
      <tr>
        <th scope="col">When</th>
        <th scope="col">Key</th>
        <th scope="col">Request</th>
        <th scope="col">Status</th>
        <th scope="col">Time</th>
        <th scope="col">Request id</th>
        <th scope="col">From</th>
      </tr>
    </thead>
    <tbody>
      ${rows.map(
        (row) =>
          html`<tr>
            <td>${when(row.at)}</td>
            <td>${keyName(keys, row.key_id)}</td>
            <td><code>${row.method} ${row.route}</code></td>
            <td>${statusCell(row)}</td>
            <td>${row.duration_ms.toFixed(1)} ms</td>
            <td>
              <a href="${LOGS}${query({ request_id: row.request_id })}"><code>${row.request_id}</code></a>
            </td>
            <td>${row.origin}</td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

function detailCard(detail: RequestDetail, keys: Map<string, ApiKeyView>): Html {
  const r = detail.request;
  const events = detail.events.map((text) => parseJson(text) as { id: string; type: string; data: { object: { id: string } } });
  return html`<section class="card" aria-labelledby="request-title">
    <h2 id="request-title">Request <code>${r.request_id}</code></h2>
    <dl>
      <dt>When</dt>
      <dd>${when(r.at)}</dd>
      <dt>Key</dt>
      <dd>${keyName(keys, r.key_id)}</dd>
      <dt>Request</dt>
      <dd><code>${r.method} ${r.route}</code></dd>
      <dt>Answer</dt>
      <dd>${statusCell(r)} in ${r.duration_ms.toFixed(1)} ms</dd>
      <dt>From</dt>
      <dd>${r.origin}</dd>
    </dl>
    <h3>Events it caused</h3>
    ${
      events.length === 0
        ? html`<p>None: it changed nothing (a read, a refusal, or a change that was already so).</p>`
        : html`<ul>
            ${events.map((e) => html`<li><code>${e.type}</code> <code>${e.data.object.id}</code> (<code>${e.id}</code>)</li>`)}
          </ul>`
    }
  </section>`;
}

function filterForm(filters: RequestFilters, keys: ApiKeyView[], requestId: string): Html {
  const option = (value: string, label: string, selected: boolean) =>
    html`<option value="${value}" ${selected ? html` selected` : ''}>${label}</option>`;
  return html`<form method="get" action="${LOGS}" class="filters log-filters" role="search">
      <div class="field wide">
        <label for="f-request-id">Find a request by its id</label>
        <input type="search" id="f-request-id" name="request_id" value="${requestId}" placeholder="req_…" autocomplete="off" />
      </div>
      <button type="submit">Find</button>
    </form>
    <form method="get" action="${LOGS}" class="filters log-filters" aria-label="Filter the log">
      <div class="field">
        <label for="f-key">Key</label>
        <select id="f-key" name="key">
          ${option('', 'All keys', !filters.keyId)}${keys.map((k) => option(k.id, `${k.name} (…${k.last4})`, filters.keyId === k.id))}
        </select>
      </div>
      <div class="field">
        <label for="f-status">Status</label>
        <select id="f-status" name="status">
          ${option('', 'Any status', !filters.statusClass)}${STATUS_CLASSES.map((c) => option(c, c, filters.statusClass === c))}
        </select>
      </div>
      <div class="field wide">
        <label for="f-route">Route</label>
        <input type="text" id="f-route" name="route" value="${filters.route ?? ''}" placeholder="/api/v1/contacts/:id" />
      </div>
      <button type="submit" class="secondary">Filter</button>
    </form>`;
}

/** Settings → Developer → Logs (admins): the request log, and a request found by its id. */
export const requestLogPages: FastifyPluginAsync<DashboardDeps> = async (app, { db }) => {
  app.get<{ Querystring: Record<string, string | undefined> }>(LOGS, async (request, reply) => {
    requireAdmin(request);
    const ctx = ctxOf(request, db);
    const session = request.session!;
    const q = request.query;
    const keyList = await listApiKeys(...keyListArgs(request, db));
    const keys = new Map(keyList.map((k) => [k.id, k]));
    const filters: RequestFilters = {
      keyId: q.key || undefined,
      statusClass: (STATUS_CLASSES as readonly string[]).includes(q.status ?? '') ? (q.status as StatusClass) : undefined,
      route: q.route?.trim() || undefined,
    };
    const requestId = (q.request_id ?? '').trim();
    let found: Html = html``;
    let status = 200;
    if (requestId) {
      try {
        found = detailCard(await getRequest(ctx, requestId), keys);
      } catch (error) {
        if (!(error instanceof NotFoundError)) throw error;
        status = 404;
        found = html`<div class="alert" role="alert">
          No request <code>${requestId}</code> in the log. It keeps the last days' requests made with a key of this organisation
          (<code>REQUEST_LOG_DAYS</code>); a request refused before its key was checked (401) is not logged.
        </div>`;
      }
    }
    const { items, next } = await listRequests(ctx, { limit: PAGE, before: parseBefore(q.before) }, filters);
    const base = { key: filters.keyId, status: filters.statusClass, route: filters.route };
    return reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(
        developerPage('logs', {
          title: 'Logs',
          session,
          body: html`<p>
              Every API request made with one of ${session.orgName}'s keys, newest first: never its body, never the key. A caller quotes the
              <code>request_id</code> of an error (or the <code>Request-Id</code> header): find it here.
            </p>
            ${filterForm(filters, keyList, requestId)} ${found}
            ${logTable(items, keys, Boolean(filters.keyId || filters.statusClass || filters.route || q.before))}
            <nav aria-label="Pages" class="pager">
              ${q.before ? html`<a href="${LOGS}${query(base)}">Newest</a>` : ''}
              ${next ? html`<a href="${LOGS}${query({ ...base, before: `${next.at}|${next.requestId}` })}" rel="next">Older</a>` : ''}
            </nav>`,
        }),
      );
  });
};
