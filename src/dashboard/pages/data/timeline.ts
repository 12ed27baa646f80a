import type { Ctx } from '../../../domain/context.js';
import { listActivity, type ActivityItem, type FieldChange } from '../../../domain/events/activity.js';
import type { RecordName } from '../../../domain/events/names.js';
import { emptyState, html, plural, type Html } from '../../html.js';

/** How many events a contact's or group's page shows; the rest are on /activity?subject=… */
export const TIMELINE_SIZE = 20;

const when = (iso: string) => html`<time datetime="${iso}">${iso.slice(0, 19).replace('T', ' ')} UTC</time>`;

/** A stored value as people read it: labels by name, metadata as key: value, nothing as a dash. */
export function valueText(value: unknown): string {
  if (value === null || value === undefined || value === '') return '—';
  if (typeof value === 'string') return value.length > 300 ? `${value.slice(0, 300)}…` : value;
  if (typeof value === 'number' || typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) {
    if (value.length === 0) return '—';
    return value.map((item) => (item && typeof item === 'object' && 'name' in item ? String(item.name) : valueText(item))).join(', ');
  }
  if (typeof value === 'object') {
    const entries = Object.entries(value);
    return entries.length === 0 ? '—' : entries.map(([key, v]) => `${key}: ${valueText(v)}`).join(', ');
  }
  return JSON.stringify(value);
}

/** An update's fields, before → after, folded under a summary (no script needed). */
export function changeTable(changes: FieldChange[]): Html {
  if (changes.length === 0) return html`<span class="muted">(what changed was erased)</span>`;
  return html`<details class="changes">
    <summary>${plural(changes.length, 'field')} changed</summary>
    <table>
      <thead>
        <tr>
          <th scope="col">Field</th>
          <th scope="col">Before</th>
          <th scope="col">After</th>
        </tr>
      </thead>
      <tbody>
        ${changes.map(
          (c) =>
            html`<tr>
              <th scope="row"><code>${c.field}</code></th>
              <td><del>${valueText(c.before)}</del></td>
              <td><ins>${valueText(c.after)}</ins></td>
            </tr>`,
        )}
      </tbody>
    </table>
  </details>`;
}

const PAGES: Record<RecordName['kind'], (id: string) => string> = {
  contact: (id) => `/contacts/${id}`,
  group: (id) => `/groups/${id}`,
  label: () => '/labels',
  file: () => '/files',
  member: () => '/settings/members',
};

/** A record by name, linking to its page while it exists. */
export function recordLink(record: RecordName): Html {
  const name = record.exists ? html`<a href="${PAGES[record.kind](record.id)}">${record.name}</a>` : html`<span>${record.name}</span>`;
  const email = record.email && record.email !== record.name ? html` <span class="muted">${record.email}</span>` : '';
  // A person (identity changes) is named as the event held them: not a record that was deleted.
  const gone = record.exists || record.kind === 'member' ? '' : html` <span class="muted">(${record.erased ? 'erased' : 'deleted'})</span>`;
  return html`${name}${email}${gone}`;
}

/** What an event was: its type, what it happened to, and for an update the fields before → after. */
export function whatCell(item: ActivityItem): Html {
  const group = item.group ? html` in group ${recordLink(item.group)}` : '';
  const role = item.role ? html` <span class="muted">as ${item.role}</span>` : '';
  const origin = item.origin ? html`<div class="muted">from ${item.origin}</div>` : '';
  const d = item.details;
  const details = d
    ? html`<div class="muted">
        ${[
          d.method ? `with ${d.method}` : '',
          d.reason ? `reason: ${d.reason}` : '',
          d.name ? `“${d.name}”` : '',
          d.from || d.to ? `${d.from ?? '?'} → ${d.to ?? '?'}` : '',
        ]
          .filter(Boolean)
          .join(' · ')}
      </div>`
    : '';
  return html`<code>${item.type}</code>
    ${recordLink(item.record)}${role}${group}${item.changes ? html`<div>${changeTable(item.changes)}</div>` : ''}${details}${origin}`;
}

/** The events as a table: when, what, who, and the request (what a caller quotes). */
/** What an empty activity list says under its title: how the list fills (see emptyState). */
const EMPTY_HOW: Record<string, string> = {
  'No activity yet.': 'Changes to contacts, groups, labels, files and settings show here as they happen.',
  'No events match.': 'Choose another type or person, or clear the filters.',
  'No more events.': 'Go back to the newest events.',
  'Nothing has happened to it yet.': 'Its changes show here as they happen.',
};

export function activityTable(items: ActivityItem[], options: { actorLinks: boolean; empty: string }): Html {
  if (items.length === 0) return emptyState(options.empty, EMPTY_HOW[options.empty] ?? 'Changes show here as they happen.');
  return html`<table class="activity">
    <thead>
      <tr>
        <th scope="col">When</th>
        <th scope="col">What</th>
        <th scope="col">Who</th>
        <th scope="col">Request</th>
      </tr>
    </thead>
    <tbody>
      ${items.map(
        (item) =>
          html`<tr id="${item.id}">
            <td class="nowrap">${when(item.created_at)}</td>
            <td>${whatCell(item)}</td>
            <td class="actor">
              ${
                options.actorLinks && item.actor.type !== null
                  ? html`<a href="/activity?${new URLSearchParams({ actor: item.actor.id ?? 'system' }).toString()}">${item.actor.name}</a>`
                  : item.actor.name
              }
            </td>
            <td class="nowrap">${item.request_id ? html`<code>${item.request_id}</code>` : html`<span class="muted">—</span>`}</td>
          </tr>`,
      )}
    </tbody>
  </table>`;
}

/**
 * A contact's or group's page's Timeline: its newest events (a group's with its members'), and a
 * link to all of them on the Activity page.
 */
export async function timelineSection(ctx: Ctx, subjectId: string): Promise<Html> {
  const page = await listActivity(ctx, { limit: TIMELINE_SIZE }, { subject: subjectId });
  return html`<h2 id="timeline">Timeline</h2>
    ${activityTable(page.items, { actorLinks: true, empty: 'Nothing has happened to it yet.' })}
    <p>
      <a href="/activity?${new URLSearchParams({ subject: subjectId }).toString()}"
        >${page.hasOlder ? `Older events: all of its activity` : 'Open in Activity'}</a
      >
    </p>`;
}
