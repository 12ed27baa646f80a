import type { SessionView } from '../../../domain/sessions/sessions.js';
import { html, type Html } from '../../html.js';
import { page } from '../../layout.js';

export const DEVELOPER = '/settings/developer';
export const WEBHOOKS = `${DEVELOPER}/webhooks`;
export const LOGS = `${DEVELOPER}/logs`;
export const USAGE = `${DEVELOPER}/usage`;
export const TEST_DATA = `${DEVELOPER}/test-data`;

type Tab = 'keys' | 'webhooks' | 'logs' | 'usage' | 'test-data';

/** Settings → Developer: API keys, webhooks, the request log, usage and resetting test data. */
export function developerTabs(current: Tab): Html {
  const tab = (id: Tab, href: string, label: string) =>
    html`<li><a href="${href}" ${id === current ? html` aria-current="page"` : ''}>${label}</a></li>`;
  return html`<nav aria-label="Developer settings" class="tabs">
    <ul>
      ${tab('keys', DEVELOPER, 'API keys')}${tab('webhooks', WEBHOOKS, 'Webhooks')}${tab('logs', LOGS, 'Logs')}${tab('usage', USAGE, 'Usage')}${tab('test-data', TEST_DATA, 'Test data')}
    </ul>
  </nav>`;
}

/** A page of Settings → Developer: its heading and tabs, `current` marked, above the tab's own body. */
export function developerPage(current: Tab, options: { title: string; session: SessionView; notice?: string | null; body: Html }): string {
  return page({
    ...options,
    section: 'developer',
    body: html`<h1>Developer</h1>
      ${developerTabs(current)} ${options.body}`,
  });
}
