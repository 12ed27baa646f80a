import type { FastifyPluginAsync } from 'fastify';
import { listActivity, type ActivityFilters } from '../../../domain/events/activity.js';
import { activityActors, describeRecords, recordKey } from '../../../domain/events/names.js';
import { MEMBER_EVENT_TYPES } from '../../../domain/events/memberEvents.js';
import { EVENT_TYPES, type EventResource } from '../../../domain/events/types.js';
import { decodeCursor, encodeCursor } from '../../../domain/pagination.js';
import { ctxOf, takeFlash, text } from '../../context.js';
import { html, type Html } from '../../html.js';
import { page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { activityTable, recordLink } from './timeline.js';
import { send } from './groupDetail.js';

const PAGE_SIZE = 25;
const RESOURCES: { resource: EventResource; label: string }[] = [
  { resource: 'contact', label: 'Contacts' },
  { resource: 'label', label: 'Labels' },
  { resource: 'group', label: 'Groups' },
  { resource: 'file', label: 'Files' },
];

function option(value: string, label: string, chosen: string): Html {
  return html`<option value="${value}" ${value === chosen ? html` selected` : ''}>${label}</option>`;
}

/**
 * Activity: what happened to the organisation's data and who did it, newest first, filtered by
 * type or resource, actor and record (a contact's or group's page links here for its whole
 * timeline). Every member sees it (see domain/events/activity.ts). The request column is the
 * request_id a caller quotes from an error: Ctrl+F finds it here.
 */
export const activityPages: FastifyPluginAsync<DashboardDeps> = async (app, { db, secret }) => {
  app.get('/activity', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const session = request.session!;
    const query = request.query;
    const filters: ActivityFilters = {};
    for (const name of ['type', 'actor', 'subject'] as const) {
      const value = text(query, name).trim().slice(0, 100);
      if (value !== '') filters[name] = value;
    }
    const binding = JSON.stringify(['dashboard:activity', ctx.orgId, filters.type ?? '', filters.actor ?? '', filters.subject ?? '']);
    const older = text(query, 'older');
    const newer = text(query, 'newer');
    const [found, actors] = await Promise.all([
      listActivity(
        ctx,
        {
          limit: PAGE_SIZE,
          older: older ? decodeCursor(secret, binding, older) : null,
          newer: !older && newer ? decodeCursor(secret, binding, newer) : null,
        },
        filters,
      ),
      activityActors(ctx),
    ]);
    // The record the page is narrowed to, by name (one lookup; its kind from its id's prefix).
    let subject: Html | string = '';
    if (filters.subject) {
      const kind = ({ con: 'contact', grp: 'group', lbl: 'label', file: 'file' } as const)[filters.subject.split('_')[0] ?? ''];
      subject = kind
        ? recordLink((await describeRecords(ctx, [recordKey(kind, filters.subject, null)]))(recordKey(kind, filters.subject, null)))
        : filters.subject;
    }
    const here = (extra: Record<string, string>) => {
      const params = new URLSearchParams({ ...(filters as Record<string, string>), ...extra }).toString();
      return `/activity${params ? `?${params}` : ''}`;
    };
    const first = found.items[0];
    const last = found.items.at(-1);
    const olderLink =
      found.hasOlder && last ? here({ older: encodeCursor(secret, binding, { createdAt: last.created_at, id: last.id }) }) : null;
    const newerLink =
      found.hasNewer && first ? here({ newer: encodeCursor(secret, binding, { createdAt: first.created_at, id: first.id }) }) : null;
    const type = filters.type ?? '';
    const actor = filters.actor ?? '';
    const others = new URLSearchParams({ ...(type ? { type } : {}), ...(actor ? { actor } : {}) }).toString();
    const everything = others ? `/activity?${others}` : '/activity';
    // A former member is not among the choices: named from their events when the page shows any.
    const actorName = found.items.find((i) => i.actor.id === actor)?.actor.name ?? actor;
    const knownActor = actor === '' || actor === 'system' || [...actors.keys, ...actors.members].some((a) => a.id === actor);
    return send(
      reply,
      200,
      page({
        title: 'Activity',
        session,
        section: 'activity',
        notice: takeFlash(request, reply),
        body: html`<h1>Activity</h1>
          <p>
            What happened to ${session.orgName}'s contacts, labels, groups and files, newest first, and who did it: a person in the
            dashboard, an API key, or the system (the operator's command
            line).${session.role === 'admin' ? ' Admins also see invitations and password changes, with where they came from.' : ''}
            <strong>Request</strong> is the <code>request_id</code> a caller quotes from an error or a response header.
          </p>
          <form method="get" action="/activity" class="row" role="search" aria-label="Filter activity">
            <div class="field">
              <label for="activity-type">What</label>
              <select id="activity-type" name="type">
                ${option('', 'Every event', type)}
                ${RESOURCES.map(
                  ({ resource, label }) =>
                    html`<optgroup label="${label}">
                      ${option(`${resource}.*`, `All ${label.toLowerCase()} events`, type)}
                      ${EVENT_TYPES.filter((t) => t.startsWith(`${resource}.`)).map((t) => option(t, t, type))}
                    </optgroup>`,
                )}
                ${
                  session.role === 'admin'
                    ? html`<optgroup label="Members (admins only)">
                        ${option('member.*', 'All member events', type)} ${MEMBER_EVENT_TYPES.map((t) => option(t, t, type))}
                      </optgroup>`
                    : ''
                }
              </select>
            </div>
            <div class="field">
              <label for="activity-actor">Who</label>
              <select id="activity-actor" name="actor">
                ${option('', 'Anyone', actor)} ${option('system', 'System', actor)} ${knownActor ? '' : option(actor, actorName, actor)}
                ${actors.members.length ? html`<optgroup label="People">${actors.members.map((m) => option(m.id, m.name, actor))}</optgroup>` : ''}
                ${actors.keys.length ? html`<optgroup label="API keys">${actors.keys.map((k) => option(k.id, k.name, actor))}</optgroup>` : ''}
              </select>
            </div>
            ${filters.subject ? html`<input type="hidden" name="subject" value="${filters.subject}" />` : ''}
            <button type="submit" class="secondary">Show</button>
            ${type || actor || filters.subject ? html`<a class="button secondary" href="/activity">Clear filters</a>` : ''}
          </form>
          ${
            filters.subject
              ? html`<p>
                  Only what happened to ${subject}${filters.subject.startsWith('grp_') ? ' and its members' : ''}.
                  <a href="${everything}">Everything</a>
                </p>`
              : ''
          }
          ${activityTable(found.items, { actorLinks: true, empty: older || newer ? 'No more events.' : type || actor || filters.subject ? 'No events match.' : 'No activity yet.' })}
          <nav class="pager" aria-label="Activity pages">
            ${older || newer ? html`<a class="button secondary" href="${here({})}">Newest</a>` : ''}
            ${newerLink ? html`<a class="button secondary" href="${newerLink}" rel="prev">← Newer</a>` : ''}
            ${olderLink ? html`<a class="button secondary" href="${olderLink}" rel="next">Older →</a>` : ''}
          </nav>`,
      }),
    );
  });
};
