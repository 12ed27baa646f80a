import type { FastifyPluginAsync } from 'fastify';
import { listActivity } from '../../../domain/events/activity.js';
import { gettingStarted, overviewCounts, type BoundedCount, type GettingStarted } from '../../../domain/orgs/overview.js';
import { requestUsage, type UsageDay } from '../../../domain/requests/requestLog.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { ctxOf, takeFlash } from '../../context.js';
import { formatNumber, html, type Html } from '../../html.js';
import { page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { DEVELOPER, LOGS, USAGE, WEBHOOKS } from '../developer/developerTabs.js';
import { activityTable } from './timeline.js';
import { chartLegend } from '../developer/usage.js';

/** How many events the overview shows; the rest are on /activity. */
const RECENT_EVENTS = 5;
/** Days of API usage on the overview (the Usage page has 30, by key). */
const USAGE_DAYS = 14;

function countText({ count, more }: BoundedCount, one: string, many: string): Html {
  return html`<strong class="stat-number">${formatNumber(count)}${more ? '+' : ''}</strong>
    <span class="stat-label">${count === 1 && !more ? one : many}</span>`;
}

interface Step {
  done: boolean;
  title: string;
  how: Html;
}

/** The steps the person can take themselves: an admin connects the API, a member fills it with data. */
function steps(session: SessionView, started: GettingStarted, counts: { contacts: BoundedCount; groups: BoundedCount }): Step[] {
  if (session.role === 'admin') {
    return [
      {
        done: started.apiKey,
        title: 'Create an API key',
        how: html`Under <a href="${DEVELOPER}">Developer → API keys</a>, with the scopes your program needs.`,
      },
      {
        done: started.firstRequest,
        title: 'Make your first API call',
        how: html`Send a request with the key (the <a href="/docs">API reference</a> has examples); it appears in the
          <a href="${LOGS}">request log</a>.`,
      },
      {
        done: started.webhook,
        title: 'Add a webhook endpoint',
        how: html`Under <a href="${WEBHOOKS}">Developer → Webhooks</a>, to be told of every change as it happens.`,
      },
    ];
  }
  return [
    {
      done: counts.contacts.count > 0,
      title: 'Add a contact',
      how: html`<a href="/contacts/new">Add one</a> or <a href="/import">import a CSV file</a>.`,
    },
    {
      done: counts.groups.count > 0,
      title: 'Create a group',
      how: html`On the <a href="/groups">Groups</a> page, to keep contacts that belong together.`,
    },
  ];
}

function gettingStartedList(session: SessionView, list: Step[]): Html {
  const done = list.filter((s) => s.done).length;
  return html`<section class="card getting-started" aria-labelledby="getting-started">
    <h2 id="getting-started">Getting started</h2>
    <p class="muted">${done} of ${list.length} steps done.</p>
    <ol class="steps">
      ${list.map(
        (step) =>
          html`<li class="${step.done ? 'done' : 'todo'}">
            <span class="step-mark" aria-hidden="true">${step.done ? '✓' : ''}</span>
            <div>
              <strong>${step.title}</strong> <span class="sr-only">${step.done ? '(done)' : '(not done yet)'}</span>
              ${step.done ? '' : html`<div class="hint">${step.how}</div>`}
            </div>
          </li>`,
      )}
    </ol>
    ${
      session.role === 'admin'
        ? ''
        : html`<p class="hint">API keys and webhooks, which connect other systems to ${session.orgName}, are set up by its admins.</p>`
    }
  </section>`;
}

const SERIES = [
  { label: 'Succeeded', colour: '#2f7d4f', of: (d: UsageDay) => d.counts['2xx'] + d.counts['3xx'] },
  { label: 'Refused', colour: '#c77700', of: (d: UsageDay) => d.counts['4xx'] + d.counts['429'] },
  { label: 'Failed', colour: '#b3261e', of: (d: UsageDay) => d.counts['5xx'] },
];
const dayTotal = (day: UsageDay) => SERIES.reduce((sum, s) => sum + s.of(day), 0);
const shortDay = (day: string) =>
  new Date(`${day}T00:00:00Z`).toLocaleDateString('en', { month: 'short', day: 'numeric', timeZone: 'UTC' });

/**
 * Requests per day as stacked bars: an SVG stretched to the width (its bars only), with its
 * labels in HTML so that they keep their size on a phone; the table is the accessible alternative.
 */
function usageChart(days: UsageDay[]): Html {
  const top = Math.max(1, ...days.map(dayTotal));
  const sum = days.reduce((n, d) => n + dayTotal(d), 0);
  if (sum === 0) return html`<p class="muted">No API requests in the last ${days.length} days.</p>`;
  const height = 100;
  const bars = days.map((day, i) => {
    let y = height;
    return SERIES.filter((s) => s.of(day) > 0).map((s) => {
      const h = (s.of(day) / top) * height;
      y -= h;
      return html`<rect x="${i * 10 + 1}" y="${y.toFixed(2)}" width="8" height="${h.toFixed(2)}" fill="${s.colour}"
        ><title>${shortDay(day.day)}: ${formatNumber(s.of(day))} ${s.label.toLowerCase()}</title></rect
      >`;
    });
  });
  return html`<figure class="usage-chart">
      <p class="usage-total">
        <strong>${formatNumber(sum)}</strong> ${sum === 1 ? 'request' : 'requests'} in the last ${days.length} days, at most
        ${formatNumber(top)} a day.
      </p>
      <svg
        viewBox="0 0 ${days.length * 10} ${height}"
        class="usage-bars"
        preserveAspectRatio="none"
        role="img"
        aria-label="Requests per day, ${shortDay(days[0]!.day)} to ${shortDay(days.at(-1)!.day)}: ${formatNumber(sum)} in all"
      >
        <line x1="0" y1="${height}" x2="${days.length * 10}" y2="${height}" stroke="#8c959f" vector-effect="non-scaling-stroke" />
        ${bars}
      </svg>
      <div class="usage-axis" aria-hidden="true"><span>${shortDay(days[0]!.day)}</span><span>${shortDay(days.at(-1)!.day)}</span></div>
      ${chartLegend(SERIES)}
    </figure>
    <details>
      <summary>Requests per day as a table</summary>
      <table class="usage-days">
        <caption class="sr-only">
          Requests per day, last ${days.length} days
        </caption>
        <thead>
          <tr>
            <th scope="col">Day</th>
            ${SERIES.map((s) => html`<th scope="col">${s.label}</th>`)}
            <th scope="col">All</th>
          </tr>
        </thead>
        <tbody>
          ${[...days].reverse().map(
            (day) =>
              html`<tr>
                <th scope="row"><time datetime="${day.day}">${shortDay(day.day)}</time></th>
                ${SERIES.map((s) => html`<td>${formatNumber(s.of(day))}</td>`)}
                <td>${formatNumber(dayTotal(day))}</td>
              </tr>`,
          )}
        </tbody>
      </table>
    </details>`;
}

/**
 * The overview at `/`, where people land after signing in: how much the organisation holds, what
 * happened last, the API's use in the last two weeks (admins: the log and usage are theirs), and
 * for a new organisation the first steps, each ticked from what exists.
 */
export const overviewPages: FastifyPluginAsync<DashboardDeps> = async (app, { db }) => {
  app.get('/', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const session = request.session!;
    const admin = session.role === 'admin';
    const [counts, started, recent, usage] = await Promise.all([
      overviewCounts(ctx),
      gettingStarted(ctx),
      listActivity(ctx, { limit: RECENT_EVENTS }),
      admin ? requestUsage(ctx, USAGE_DAYS) : null,
    ]);
    const list = steps(session, started, counts);
    return reply.type('text/html; charset=utf-8').send(
      page({
        title: 'Overview',
        session,
        section: 'overview',
        notice: takeFlash(request, reply),
        body: html`<h1>Overview</h1>
          ${list.every((s) => s.done) ? '' : gettingStartedList(session, list)}
          <section aria-labelledby="counts">
            <h2 id="counts">${session.orgName}'s data</h2>
            <ul class="stats">
              <li><a href="/contacts">${countText(counts.contacts, 'contact', 'contacts')}</a></li>
              <li><a href="/groups">${countText(counts.groups, 'group', 'groups')}</a></li>
              <li><a href="/files">${countText(counts.files, 'file', 'files')}</a></li>
            </ul>
          </section>
          <section aria-labelledby="recent">
            <h2 id="recent">Recent activity</h2>
            ${activityTable(recent.items, { actorLinks: true, empty: 'Nothing has happened yet.' })}
            ${recent.items.length ? html`<p><a href="/activity">All activity</a></p>` : ''}
          </section>
          ${
            usage
              ? html`<section aria-labelledby="usage">
                  <h2 id="usage">API usage, last ${USAGE_DAYS} days</h2>
                  ${usageChart(usage.days)}
                  <p><a href="${USAGE}">Usage by key, last 30 days</a></p>
                </section>`
              : ''
          }`,
      }),
    );
  });
};
