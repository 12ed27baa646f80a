import type { FastifyPluginAsync } from 'fastify';
import { listApiKeys } from '../../../domain/apiKeys/apiKeys.js';
import { requestUsage, type StatusClass, type UsageDay } from '../../../domain/requests/requestLog.js';
import { ctxOf, keyListArgs, requireAdmin, shownOf } from '../../context.js';
import { formatNumber, html, type Html } from '../../html.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { developerPage, USAGE } from './developerTabs.js';

const DAYS = 30;

/** Stacked bottom to top in this order; 3xx is rare in an API and drawn with 2xx's neighbours. */
const SERIES: { cls: StatusClass; label: string; colour: string }[] = [
  { cls: '2xx', label: 'Succeeded (2xx)', colour: '#2f7d4f' },
  { cls: '3xx', label: 'Redirected (3xx)', colour: '#7a8a99' },
  { cls: '4xx', label: 'Refused (4xx)', colour: '#c77700' },
  { cls: '429', label: 'Rate limited (429)', colour: '#b3261e' },
  { cls: '5xx', label: 'Failed (5xx)', colour: '#3d1a5b' },
];

const total = (day: UsageDay) => SERIES.reduce((sum, s) => sum + day.counts[s.cls], 0);

/**
 * Requests per day as a stacked bar chart, drawn on the server as SVG (no script, no build step).
 * The chart is an image with a text summary; the table after it is the accessible alternative.
 */
function chart(days: UsageDay[], title: string, height = 160): Html {
  const top = Math.max(1, ...days.map(total));
  const sum = days.reduce((n, d) => n + total(d), 0);
  // Drawn twice: wide for screens, narrow for phones (CSS shows one), so the axis labels stay 11 px high.
  const svg = (width: number, cls: string) => {
    const bar = width / days.length;
    const bars = days.map((day, i) => {
      let y = height;
      return SERIES.filter((s) => day.counts[s.cls] > 0).map((s) => {
        const h = (day.counts[s.cls] / top) * (height - 4);
        y -= h;
        return html`<rect
          x="${(i * bar + (bar > 6 ? 1 : 0.5)).toFixed(1)}"
          y="${y.toFixed(1)}"
          width="${(bar - (bar > 6 ? 2 : 1)).toFixed(1)}"
          height="${h.toFixed(1)}"
          fill="${s.colour}"
          ><title>${day.day}: ${formatNumber(day.counts[s.cls])} ${s.label}</title></rect
        >`;
      });
    });
    return html`<svg
      class="${cls}"
      viewBox="0 0 ${width} ${height + 18}"
      width="100%"
      role="img"
      aria-label="${title}: ${formatNumber(sum)} requests in ${days.length} days, at most ${formatNumber(top)} a day"
    >
      <line x1="0" y1="${height}" x2="${width}" y2="${height}" stroke="#767676" />
      ${bars}
      <text x="0" y="${height + 14}" font-size="11">${days[0]!.day}</text>
      <text x="${width}" y="${height + 14}" font-size="11" text-anchor="end">${days.at(-1)!.day}</text>
      <text x="2" y="11" font-size="11">${formatNumber(top)}/day</text>
    </svg>`;
  };
  return html`<figure class="chart">${svg(720, 'wide')} ${svg(340, 'narrow')} ${chartLegend(SERIES)}</figure>`;
}

/** A chart's legend: a swatch and a label for each series (the Usage page and the overview). */
export function chartLegend(series: readonly { label: string; colour: string }[]): Html {
  return html`<figcaption>
    ${series.map(
      (s) =>
        html`<span class="legend"
          ><svg width="12" height="12" aria-hidden="true"><rect width="12" height="12" fill="${s.colour}" /></svg> ${s.label}</span
        > `,
    )}
  </figcaption>`;
}

function table(days: UsageDay[], caption: string): Html {
  return html`<details>
    <summary>${caption} as a table</summary>
    <table>
      <caption class="sr-only">
        ${caption}
      </caption>
      <thead>
        <tr>
          <th scope="col">Day (UTC)</th>
          ${SERIES.map((s) => html`<th scope="col">${s.cls}</th>`)}
          <th scope="col">All</th>
        </tr>
      </thead>
      <tbody>
        ${[...days].reverse().map(
          (day) =>
            html`<tr>
              <th scope="row">${day.day}</th>
              ${SERIES.map((s) => html`<td>${formatNumber(day.counts[s.cls])}</td>`)}
              <td>${formatNumber(total(day))}</td>
            </tr>`,
        )}
      </tbody>
    </table>
  </details>`;
}

/** Settings → Developer → Usage (admins): requests per day for 30 days, the organisation's and each key's. */
export const usagePages: FastifyPluginAsync<DashboardDeps> = async (app, { db, dailyQuota: liveQuota, sandboxDailyQuota }) => {
  app.get(USAGE, async (request, reply) => {
    requireAdmin(request);
    const ctx = ctxOf(request, db);
    const session = request.session!;
    // The sandbox has its own daily quota (SANDBOX_DAILY_QUOTA).
    const dailyQuota = shownOf(request).mode === 'test' ? sandboxDailyQuota : liveQuota;
    const usage = await requestUsage(ctx, DAYS);
    const keys = new Map((await listApiKeys(...keyListArgs(request, db))).map((k) => [k.id, k]));
    const used = usage.quotaUsedToday;
    const share = Math.min(100, Math.round((used / dailyQuota) * 100));
    return reply.type('text/html; charset=utf-8').send(
      developerPage('usage', {
        title: 'Usage',
        session,
        body: html`<h2>Today's quota</h2>
          <p>
            <meter
              id="quota"
              min="0"
              max="${dailyQuota}"
              value="${Math.min(used, dailyQuota)}"
              low="${Math.round(dailyQuota * 0.8)}"
              high="${Math.round(dailyQuota * 0.95)}"
              optimum="0"
            ></meter>
            <label for="quota"><strong>${formatNumber(used)}</strong> of ${formatNumber(dailyQuota)} requests today (${share} %)</label>,
            counted until midnight UTC (requests refused with 429 do not count; a second behind at most).
          </p>
          <h2>Requests per day, last ${DAYS} days</h2>
          ${chart(usage.days, `All keys of ${session.orgName}`)} ${table(usage.days, 'Requests per day')}
          <h2>By key</h2>
          ${
            usage.keys.length === 0
              ? html`<p>No key made a request in the last ${DAYS} days.</p>`
              : usage.keys.map(({ keyId, days }) => {
                  const key = keys.get(keyId);
                  const name = key ? `${key.name} (…${key.last4})` : keyId;
                  return html`<h3>${name}</h3>
                    ${chart(days, name, 90)} ${table(days, `Requests per day of ${name}`)}`;
                })
          }`,
      }),
    );
  });
};
