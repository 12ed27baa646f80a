import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Html } from './html.js';

const require = createRequire(import.meta.url);

/**
 * The Lucide icons the dashboard uses (lucide-static, ISC), each read once. lucide-static is a dev
 * dependency (67 MB, nearly all of it fonts and bundles we do not use): the build copies these SVG
 * files into dist/assets/lucide (scripts/copy-assets.mjs), where a production install finds them;
 * a dev install or the tests read them from node_modules. No CSS or icon build step either way.
 */
export const ICON_NAMES = [
  'users',
  'tag',
  'users-round',
  'file',
  'upload',
  'activity',
  'user-cog',
  'code',
  'shield',
  'menu',
  'trash-2',
  'ban',
  'log-out',
  'plus',
  'layout-dashboard',
  'database',
] as const;
export type IconName = (typeof ICON_NAMES)[number];

const cache = new Map<IconName, string>();

function file(name: IconName): string | null {
  try {
    return require.resolve(`lucide-static/icons/${name}.svg`);
  } catch {
    // A production install: the copy the build made (dist/dashboard/icons.js → dist/assets/lucide).
    const copy = fileURLToPath(new URL(`../assets/lucide/${name}.svg`, import.meta.url));
    return existsSync(copy) ? copy : null;
  }
}

function load(name: IconName): string {
  const path = file(name);
  // No icon rather than no page: every icon sits beside text that names the control.
  if (!path) return '';
  const svg = readFileSync(path, 'utf8');
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
