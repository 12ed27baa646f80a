import type { SessionView } from '../domain/sessions/sessions.js';
import { html, type Html } from './html.js';
import { icon, type IconName } from './icons.js';

export type Section =
  'overview' | 'contacts' | 'labels' | 'groups' | 'files' | 'import' | 'activity' | 'members' | 'developer' | 'security' | 'none';

export interface PageOptions {
  title: string;
  session: SessionView | null;
  section?: Section;
  notice?: string | null;
  body: Html;
}

const NAV: { section: Section; href: string; label: string; admin?: boolean }[] = [
  { section: 'overview', href: '/', label: 'Overview' },
  { section: 'contacts', href: '/contacts', label: 'Contacts' },
  { section: 'labels', href: '/labels', label: 'Labels' },
  { section: 'groups', href: '/groups', label: 'Groups' },
  { section: 'files', href: '/files', label: 'Files' },
  { section: 'import', href: '/import', label: 'Import' },
  { section: 'activity', href: '/activity', label: 'Activity' },
  { section: 'members', href: '/settings/members', label: 'Members', admin: true },
  { section: 'developer', href: '/settings/developer', label: 'Developer', admin: true },
  { section: 'security', href: '/settings/security', label: 'Security', admin: true },
];

/** Each section's icon in the navigation (a section without one shows its name alone). */
const NAV_ICONS: Partial<Record<Section, IconName>> = {
  overview: 'layout-dashboard',
  contacts: 'users',
  labels: 'tag',
  groups: 'users-round',
  files: 'file',
  import: 'upload',
  activity: 'activity',
  members: 'user-cog',
  developer: 'code',
  security: 'shield',
};

/** The hidden CSRF field every form carries. */
export function csrf(session: SessionView): Html {
  return html`<input type="hidden" name="_csrf" value="${session.csrfToken}" />`;
}

function header(session: SessionView, section: Section): Html {
  const links = NAV.filter((item) => !item.admin || session.role === 'admin');
  const main = links.filter((item) => !item.admin);
  const settings = links.filter((item) => item.admin);
  const link = (item: (typeof NAV)[number]) =>
    html`<li>
      <a href="${item.href}" ${item.section === section ? html` aria-current="page"` : ''}
        >${NAV_ICONS[item.section] ? icon(NAV_ICONS[item.section]!) : ''}<span>${item.label}</span></a
      >
    </li>`;
  return html`<header class="topbar${session.testMode ? ' test-mode' : ''}">
    <a class="brand" href="/">orgdata</a>
    <button type="button" class="menu-toggle secondary" aria-expanded="false" aria-controls="site-menu">${icon('menu')}Menu</button>
    <div class="site-menu" id="site-menu">
      <nav aria-label="Main">
        <ul>
          ${main.map(link)}${
            settings.length
              ? html`<li class="sep" aria-hidden="true"></li>
                  <li class="nav-title">Settings</li>
                  ${settings.map(link)}`
              : ''
          }
        </ul>
      </nav>
      <div class="who">
        ${
          session.orgs.length > 1
            ? html`<form method="post" action="/orgs/switch" class="inline">
                ${csrf(session)}
                <label for="org-switch" class="visually-hidden">Organisation</label>
                <select id="org-switch" name="org_id">
                  ${session.orgs.map(
                    (org) => html`<option value="${org.id}" ${org.id === session.orgId ? html` selected` : ''}>${org.name}</option>`,
                  )}
                </select>
                <button type="submit" class="secondary">Switch</button>
              </form>`
            : html`<span class="org">${session.orgName}</span>`
        }
        ${testModeSwitch(session)}
        <a class="email" href="/settings/account" title="Your account">${session.email}</a>
        <form method="post" action="/logout" class="inline">${csrf(session)}<button type="submit" class="secondary">Sign out</button></form>
      </div>
    </div>
  </header>`;
}

/**
 * Test mode's switch (SANDBOX.md, "Dashboard"), for every member: a form of this site (CSRF token),
 * never a link, so no other site and no URL can switch a person's view.
 */
function testModeSwitch(session: SessionView): Html {
  return html`<form method="post" action="/test-mode" class="inline">
    ${csrf(session)}<input type="hidden" name="mode" value="${session.testMode ? 'live' : 'test'}" />
    <button type="submit" class="secondary mode-switch" role="switch" aria-checked="${session.testMode ? 'true' : 'false'}">
      Test mode
    </button>
  </form>`;
}

/** On every page of a session in test mode, outside the folding menu: what is shown is test data. */
function testModeBanner(session: SessionView): Html {
  if (!session.testMode) return html``;
  return html`<div class="test-banner" id="test-mode-banner">
    <p>
      <strong>Test mode</strong> — you are viewing ${session.orgName}'s test data, apart from live data. Members and settings are shared.
    </p>
    <form method="post" action="/test-mode" class="inline">
      ${csrf(session)}<input type="hidden" name="mode" value="live" /><button type="submit" class="secondary">Leave test mode</button>
    </form>
  </div>`;
}

export function page(options: PageOptions): string {
  return html`<!doctype html>
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>${options.title} · orgdata</title>
        <link rel="stylesheet" href="/assets/dashboard.css" />
        <script src="/assets/dashboard.js" defer></script>
      </head>
      <body>
        ${options.session ? html`${header(options.session, options.section ?? 'none')}${testModeBanner(options.session)}` : ''}
        <main id="main">${options.notice ? html`<div class="notice" role="status">${options.notice}</div>` : ''} ${options.body}</main>
      </body>
    </html>`.value;
}
