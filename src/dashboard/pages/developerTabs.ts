import { html, type Html } from '../html.js';

export const DEVELOPER = '/settings/developer';
export const WEBHOOKS = `${DEVELOPER}/webhooks`;

/** Settings → Developer has two pages: API keys and webhooks. */
export function developerTabs(current: 'keys' | 'webhooks'): Html {
  const tab = (id: 'keys' | 'webhooks', href: string, label: string) =>
    html`<li><a href="${href}" ${id === current ? html` aria-current="page"` : ''}>${label}</a></li>`;
  return html`<nav aria-label="Developer settings" class="tabs">
    <ul>
      ${tab('keys', DEVELOPER, 'API keys')}${tab('webhooks', WEBHOOKS, 'Webhooks')}
    </ul>
  </nav>`;
}
