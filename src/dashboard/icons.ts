import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Html } from './html.js';

const require = createRequire(import.meta.url);

/** The Lucide icons the dashboard uses (lucide-static, ISC), read once from node_modules: no build step. */
export type IconName =
  | 'users'
  | 'tag'
  | 'users-round'
  | 'file'
  | 'upload'
  | 'activity'
  | 'user-cog'
  | 'code'
  | 'shield'
  | 'menu'
  | 'trash-2'
  | 'ban'
  | 'log-out'
  | 'plus'
  | 'layout-dashboard'
  | 'database';

const cache = new Map<IconName, string>();

function load(name: IconName): string {
  const svg = readFileSync(require.resolve(`lucide-static/icons/${name}.svg`), 'utf8');
  // Decorative: the text next to it names the control. Drop the licence comment and the fixed size.
  return svg
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/\s+/g, ' ')
    .replace(/> </g, '><')
    .replace(/ width="24" height="24"/, '')
    .replace(/class="[^"]*"/, 'class="icon" aria-hidden="true" focusable="false"')
    .trim();
}

/** An inline SVG icon, hidden from assistive technology (always used next to visible text). */
export function icon(name: IconName): Html {
  let svg = cache.get(name);
  if (svg === undefined) {
    svg = load(name);
    cache.set(name, svg);
  }
  return new Html(svg);
}
