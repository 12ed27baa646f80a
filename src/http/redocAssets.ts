import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Encoding } from './encodedAsset.js';

/** The API reference's renderer: Redoc's self-contained browser bundle, and the script that starts it. */

export interface RedocBundle {
  version: string;
  /** Where the page loads it from: named by Redoc's version and a hash of what we serve (the patched bundle), so it can be cached for good. */
  url: string;
  script: Buffer;
  /** The hash of `script` in its URL (its ETag). */
  hash: string;
  /** `script` compressed at build (scripts/copy-assets.mjs), when this installation has it. */
  compressed: Partial<Record<Encoding, Buffer>>;
}

/** The file the build writes `script` compressed into, next to the bundle it copies: named by that script's URL. */
export function compressedFileName(bundle: Pick<RedocBundle, 'url'>, encoding: Encoding): string {
  return `${path.posix.basename(bundle.url)}.${encoding === 'br' ? 'br' : 'gz'}`;
}

/** dist/assets/redoc, from dist/http/redocAssets.js or (under tsx) src/http/redocAssets.ts. */
const BUILT_FOLDERS = [new URL('../assets/redoc', import.meta.url), new URL('../../dist/assets/redoc', import.meta.url)].map((url) =>
  fileURLToPath(url),
);

/**
 * Redoc is a dev dependency (with its peers it is 85 MB); the build copies its bundle, its licence
 * and its package.json into dist/assets/redoc (scripts/copy-assets.mjs). A dev install or the tests
 * find it in node_modules, a production install (`npm ci --omit=dev`) in dist/. Null: neither.
 */
export function findRedocBundle(): RedocBundle | null {
  const folders: string[] = [];
  try {
    folders.push(path.dirname(createRequire(import.meta.url).resolve('redoc/package.json')));
  } catch {
    // Not installed: a production install.
  }
  // From dist/http/redocAssets.js (or src/http/ under tsx, where nothing is copied).
  folders.push(BUILT_FOLDERS[0]!);
  for (const folder of folders) {
    const bundle = [path.join(folder, 'bundles', 'redoc.standalone.js'), path.join(folder, 'redoc.standalone.js')].find((file) =>
      existsSync(file),
    );
    if (!bundle) continue;
    try {
      const { version } = JSON.parse(readFileSync(path.join(folder, 'package.json'), 'utf8')) as { version: string };
      const script = Buffer.from(readFileSync(bundle, 'utf8').replace(REDOCLY_LOGO, LOCAL_LOGO));
      const hash = createHash('sha256').update(script).digest('hex').slice(0, 12);
      const found: RedocBundle = { version, url: `/docs/assets/redoc-${version}-${hash}.js`, script, hash, compressed: {} };
      // Named by the script's hash: a file made from another script (another version) is never taken.
      for (const encoding of ['br', 'gzip'] as const) {
        const file = [folder, ...BUILT_FOLDERS].map((f) => path.join(f, compressedFileName(found, encoding))).find((f) => existsSync(f));
        if (file) found.compressed[encoding] = readFileSync(file);
      }
      return found;
    } catch {
      // A damaged copy (no package.json, unreadable): the page says the script is missing rather than the server not starting.
    }
  }
  return null;
}

/**
 * The one thing Redoc 2.5.4 loads from another host, whatever its options: the Redocly logo beside
 * "API docs by Redocly" at the foot of the sidebar. Drawn from a data: URL instead (a grey dot),
 * so the page fetches nothing from elsewhere and its CSP reports no violation.
 */
const REDOCLY_LOGO = 'https://cdn.redoc.ly/redoc/logo-mini.svg';
const LOCAL_LOGO = `data:image/svg+xml,${encodeURIComponent("<svg xmlns='http://www.w3.org/2000/svg' width='12' height='12'><circle cx='6' cy='6' r='5' fill='#8c959f'/></svg>")}`;

/** Redoc's options: our colours and the system's fonts (so nothing is fetched from a font host), 2xx answers open. */
const OPTIONS = {
  expandResponses: '200,201,202,204',
  hideHostname: false,
  requiredPropsFirst: true,
  sortPropsAlphabetically: false,
  disableSearch: false,
  hideDownloadButton: false,
  jsonSampleExpandLevel: 3,
  theme: {
    colors: {
      // Darker than GitHub's #0969da: Redoc draws constraints ("[ 1 .. 100 ]") in it at 90 % over a 4 % tint of it, and
      // labels ("additional property") in `light`; both must keep 4.5:1 (axe-core, issue 42).
      primary: { main: '#0550ae', light: '#0550ae' },
      success: { main: '#1a7f37' },
      error: { main: '#cf222e' },
      text: { primary: '#1f2328', secondary: '#59636e' },
      border: { dark: '#d1d9e0', light: '#f6f8fa' },
    },
    typography: {
      fontSize: '15px',
      lineHeight: '1.5',
      fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif',
      headings: { fontFamily: 'system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif', fontWeight: '600' },
      code: { fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", monospace', fontSize: '13px' },
    },
    sidebar: { backgroundColor: '#f6f8fa', textColor: '#1f2328', activeTextColor: '#0969da', width: '280px' },
    rightPanel: { backgroundColor: '#1f2328', width: '40%' },
  },
};

/**
 * What Redoc leaves out for keyboard and screen-reader users, done after it renders and again
 * whenever it changes the page (a tab, an expanded answer) or the width changes:
 * - every region that scrolls (code samples, wide tables) is in the tab order (tabindex=0) with a
 *   name (role=region, aria-label: what it is and the operation it belongs to), so it can be
 *   scrolled with the arrow keys (WCAG 2.1.1);
 * - a sidebar item's name is its visible text (its HTTP method, then its summary), not the summary
 *   alone (WCAG 2.5.3, label in name).
 * <html data-reference-ready> says the first pass is done.
 */
const ACCESS_SCRIPT = `
function orgdataAccess(root) {
  var pending = 0;
  function scrolls(element) {
    var style = getComputedStyle(element);
    var x = /(auto|scroll)/.test(style.overflowX) && element.scrollWidth > element.clientWidth + 1;
    var y = /(auto|scroll)/.test(style.overflowY) && element.scrollHeight > element.clientHeight + 1;
    return x || y;
  }
  function nameOf(element) {
    var section = element.closest('[data-section-id]');
    var heading = section && section.querySelector('h1, h2');
    var what = element.tagName === 'PRE' || element.querySelector('pre, code') ? 'Code sample' : 'Scrollable content';
    return heading ? what + ': ' + heading.textContent.trim() : what;
  }
  function pass() {
    pending = 0;
    var all = root.querySelectorAll('*');
    for (var i = 0; i < all.length; i++) {
      var element = all[i];
      if (element.hasAttribute('data-orgdata-region')) continue;
      if (!scrolls(element)) continue;
      element.setAttribute('data-orgdata-region', '');
      if (!element.hasAttribute('tabindex')) element.setAttribute('tabindex', '0');
      if (!element.hasAttribute('role')) element.setAttribute('role', 'region');
      if (!element.hasAttribute('aria-label') && !element.hasAttribute('aria-labelledby')) element.setAttribute('aria-label', nameOf(element));
    }
    var items = root.querySelectorAll('li[role="menuitem"][aria-label]');
    for (var j = 0; j < items.length; j++) {
      var label = items[j].querySelector('label');
      var text = (label ? label.textContent : items[j].textContent).replace(/\\s+/g, ' ').trim();
      if (text && items[j].getAttribute('aria-label') !== text) items[j].setAttribute('aria-label', text);
    }
    document.documentElement.setAttribute('data-reference-ready', '');
  }
  function later() {
    if (!pending) pending = setTimeout(pass, 100);
  }
  new MutationObserver(later).observe(root, { childList: true, subtree: true, attributes: true, attributeFilter: ['class', 'aria-expanded', 'aria-selected'] });
  addEventListener('resize', function () {
    var marked = root.querySelectorAll('[data-orgdata-region]');
    for (var i = 0; i < marked.length; i++) marked[i].removeAttribute('data-orgdata-region');
    later();
  });
  pass();
}
`;

/** Our script that starts Redoc: a file of its own, so the page's CSP allows scripts from this origin only. */
export const INIT_SCRIPT = Buffer.from(
  `"use strict";${ACCESS_SCRIPT}
Redoc.init('/api/v1/openapi.json', ${JSON.stringify(OPTIONS)}, document.getElementById('redoc'), function (error) {
  if (error) document.getElementById('redoc').textContent = 'The reference could not be shown: ' + error + '. The document is at /api/v1/openapi.json.';
  orgdataAccess(document.getElementById('redoc'));
});
`,
);

/** The hash of INIT_SCRIPT, in its URL and its ETag. */
export const INIT_SCRIPT_HASH = createHash('sha256').update(INIT_SCRIPT).digest('hex').slice(0, 12);
/** Where the page loads INIT_SCRIPT from: named by its hash, so it can be cached for good too. */
export const INIT_SCRIPT_URL = `/docs/assets/reference-${INIT_SCRIPT_HASH}.js`;
